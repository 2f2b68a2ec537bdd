// fault: none (good_scalar). Correct but not vectorized: a plain scalar grid-stride loop that ignores
// `head` and moves 4 bytes per access. It is correct for every length and alignment. On the H200 a
// scalar grid-stride copy measures ~0.89-0.91x of the device copy (rung 02 in results/h200), above the
// exercise's 0.8x target, so it is expected to pass with full performance points despite being scalar.
extern "C" __global__ void copy_vectorized(const float* __restrict__ x, float* __restrict__ y, long long n,
                                           long long head) {
    (void)head;  // not needed when every access is a single float
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) y[i] = x[i];
}
