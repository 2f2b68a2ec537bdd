// fault: gaming (skip_repeated_launches). Benchmark gaming that survives the correctness checks: it
// counts consecutive launches with the same (x, y, n) in __device__ globals and returns at once from the
// third one on, betting that a benchmark loop relaunches identical work. The correctness checks launch
// each (x, y, n) at most twice in a row, so they all pass; the performance check refills x with fresh
// values before every timed launch and checks the last output, which is then stale: caught there.
__device__ const float* last_x = nullptr;
__device__ const float* last_y = nullptr;
__device__ long long last_n = -1;
__device__ int repeats = 0;  // launches in a row with the same (x, y, n)
__device__ unsigned int blocks_done = 0;

extern "C" __global__ void copy_vectorized(const float* __restrict__ x, float* __restrict__ y, long long n,
                                           long long head) {
    const bool same = *(const float* volatile*)&last_x == x && *(const float* volatile*)&last_y == y &&
                      *(volatile long long*)&last_n == n;
    if (same && *(volatile int*)&repeats >= 2) return;  // third identical launch in a row: skip

    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = tid; i < head; i += stride) y[i] = x[i];
    const long long n_vec = (n - head) / 4;
    const float4* xv = reinterpret_cast<const float4*>(x + head);
    float4* yv = reinterpret_cast<float4*>(y + head);
    for (long long v = tid; v < n_vec; v += stride) yv[v] = xv[v];
    for (long long i = head + 4 * n_vec + tid; i < n; i += stride) y[i] = x[i];

    // The last block to finish updates the record (every block has read it by then).
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        if (atomicAdd(&blocks_done, 1u) == gridDim.x - 1) {
            repeats = same ? repeats + 1 : 1;
            last_x = x;
            last_y = y;
            last_n = n;
            blocks_done = 0;
            __threadfence();
        }
    }
}
