// fault: none (good_reference). A correct float4 copy written from scratch: the `head` leading
// elements and the short tail are copied one float at a time, the 16-byte-aligned body as float4,
// everything grid-stride. Expected: every correctness check passes and the performance target is met.
extern "C" __global__ void copy_vectorized(const float* __restrict__ x, float* __restrict__ y, long long n,
                                           long long head) {
    const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long step = (long long)gridDim.x * blockDim.x;

    // [head, body_end) is a whole number of float4s; [0, head) and [body_end, n) are scalar.
    // When head == n (x and y misaligned by different amounts) there is no body at all.
    const long long quads = (n - head) >> 2;
    const long long body_end = head + (quads << 2);

    const float4* __restrict__ src = reinterpret_cast<const float4*>(x + head);
    float4* __restrict__ dst = reinterpret_cast<float4*>(y + head);
    for (long long q = first; q < quads; q += step) dst[q] = src[q];

    // The scalar leftovers as one index space: k < head is the head, the rest is the tail.
    const long long leftovers = head + (n - body_end);
    for (long long k = first; k < leftovers; k += step) {
        const long long i = k < head ? k : body_end + (k - head);
        y[i] = x[i];
    }
}
