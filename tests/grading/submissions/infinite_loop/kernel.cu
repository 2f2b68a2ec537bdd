// fault: timeout (infinite_loop). A correct copy, after which thread 0 "waits for the input to change":
// it spins on a volatile read of x[0], which nothing ever writes. The volatile load keeps the loop in the
// binary, so the kernel never finishes and only the grader's per-check time limit ends it.
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

    if (tid == 0) {
        const volatile float* watched = x;
        const float seen = watched[0];
        while (true) {
            if (watched[0] != seen) break;  // never true: x is not written by anyone
        }
    }
}
