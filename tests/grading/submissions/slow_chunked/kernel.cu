// fault: slow (slow_chunked). Correct for every length and alignment, but each thread copies its own
// contiguous chunk of about n / (grid threads) elements, one float at a time: the 32 threads of a warp
// touch 32 different cache lines on every access (uncoalesced), so the copy runs far below the
// bandwidth of the device copy. Expected: all correctness checks pass, the performance check does not.
extern "C" __global__ void copy_vectorized(const float* __restrict__ x, float* __restrict__ y, long long n,
                                           long long head) {
    (void)head;
    const long long threads = (long long)gridDim.x * blockDim.x;
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long chunk = (n + threads - 1) / threads;
    const long long begin = tid * chunk;
    const long long end = begin + chunk < n ? begin + chunk : n;
    for (long long i = begin; i < end; ++i) y[i] = x[i];
}
