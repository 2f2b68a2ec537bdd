// fault: timeout (deadlock). A correct copy, then a hand-made handshake: thread 0 of each block spins on
// a volatile shared flag that thread 1 sets only after a __syncthreads() inside the `else` branch, which
// thread 0 never reaches. The barrier waits for thread 0, thread 0 waits for the flag: the kernel never
// finishes and only the grader's per-check time limit ends it.
extern "C" __global__ void copy_vectorized(const float* __restrict__ x, float* __restrict__ y, long long n,
                                           long long head) {
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = tid; i < head; i += stride) y[i] = x[i];
    const long long n_vec = (n - head) / 4;
    const float4* xv = reinterpret_cast<const float4*>(x + head);
    float4* yv = reinterpret_cast<float4*>(y + head);
    for (long long v = tid; v < n_vec; v += stride) yv[v] = xv[v];
    for (long long i = head + 4 * n_vec + tid; i < n; i += stride) y[i] = x[i];

    __shared__ volatile int done;
    if (threadIdx.x == 0) {
        done = 0;
        while (done == 0) {
        }  // waits for thread 1, which waits at the barrier for thread 0
    } else {
        __syncthreads();
        if (threadIdx.x == 1) done = 1;
    }
}
