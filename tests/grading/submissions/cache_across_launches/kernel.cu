// fault: gaming (cache_across_launches). Remembers the (x, y, n) of the last completed launch in
// __device__ globals and returns at once when a launch repeats them, on the theory that y already holds
// the answer. The checker's second run on the same arrays re-poisons y first, so that run leaves the
// whole output unwritten: caught by the first correctness case.
__device__ const float* last_x = nullptr;
__device__ const float* last_y = nullptr;
__device__ long long last_n = -1;
__device__ unsigned int blocks_done = 0;

extern "C" __global__ void copy_vectorized(const float* __restrict__ x, float* __restrict__ y, long long n,
                                           long long head) {
    // Every block reads the record before any block can update it (the update waits for all blocks).
    if (*(const float* volatile*)&last_x == x && *(const float* volatile*)&last_y == y &&
        *(volatile long long*)&last_n == n)
        return;  // "already copied"

    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = tid; i < head; i += stride) y[i] = x[i];
    const long long n_vec = (n - head) / 4;
    const float4* xv = reinterpret_cast<const float4*>(x + head);
    float4* yv = reinterpret_cast<float4*>(y + head);
    for (long long v = tid; v < n_vec; v += stride) yv[v] = xv[v];
    for (long long i = head + 4 * n_vec + tid; i < n; i += stride) y[i] = x[i];

    // The last block to finish records this launch.
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        if (atomicAdd(&blocks_done, 1u) == gridDim.x - 1) {
            last_x = x;
            last_y = y;
            last_n = n;
            blocks_done = 0;
            __threadfence();
        }
    }
}
