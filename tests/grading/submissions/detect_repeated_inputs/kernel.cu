// fault: gaming (detect_repeated_inputs). Remembers x[0] of the last completed launch in a __device__
// global and skips all work when the next launch's x[0] has the same bits ("same input, same answer").
// The checker runs each case twice on the same input with a fresh poison in y, so the second run leaves
// the whole output unwritten: caught by the first correctness case.
__device__ unsigned int last_first_bits = 0;
__device__ int have_last = 0;
__device__ unsigned int blocks_done = 0;

extern "C" __global__ void copy_vectorized(const float* __restrict__ x, float* __restrict__ y, long long n,
                                           long long head) {
    const unsigned int first_bits = __float_as_uint(x[0]);
    if (*(volatile int*)&have_last && *(volatile unsigned int*)&last_first_bits == first_bits)
        return;  // "seen this input already"

    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = tid; i < head; i += stride) y[i] = x[i];
    const long long n_vec = (n - head) / 4;
    const float4* xv = reinterpret_cast<const float4*>(x + head);
    float4* yv = reinterpret_cast<float4*>(y + head);
    for (long long v = tid; v < n_vec; v += stride) yv[v] = xv[v];
    for (long long i = head + 4 * n_vec + tid; i < n; i += stride) y[i] = x[i];

    // The last block to finish records this launch's x[0].
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        if (atomicAdd(&blocks_done, 1u) == gridDim.x - 1) {
            last_first_bits = first_bits;
            have_last = 1;
            blocks_done = 0;
            __threadfence();
        }
    }
}
