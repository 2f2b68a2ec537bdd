// fault: compile_error (too_much_shared). The copy is staged through a static __shared__ array of 200 KiB
// (51200 floats). Static shared memory is limited to 48 KiB per block, so ptxas rejects the kernel
// ("uses too much shared data") and the file never loads.
extern "C" __global__ void copy_vectorized(const float* __restrict__ x, float* __restrict__ y, long long n,
                                           long long head) {
    __shared__ float stage[51200];  // 200 KiB
    volatile float* slot = stage;
    (void)head;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const unsigned s = (unsigned)(i % 51200);
        slot[s] = x[i];
        y[i] = slot[s];
    }
}
