// fault: tails_fail (friendly_only). Only the float4 body, from the start of the arrays, n / 4 vectors:
// `head` and the tail are ignored. Lengths that are multiples of 4 on 16-byte-aligned arrays pass (the
// friendly check); other lengths leave the last n % 4 elements unwritten (the tails check), and
// misaligned starts make the float4 accesses themselves misaligned (a crash in the misaligned check).
extern "C" __global__ void copy_vectorized(const float* __restrict__ x, float* __restrict__ y, long long n,
                                           long long head) {
    (void)head;
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;
    const float4* xv = reinterpret_cast<const float4*>(x);
    float4* yv = reinterpret_cast<float4*>(y);
    for (long long v = tid; v < n / 4; v += stride) yv[v] = xv[v];
}
