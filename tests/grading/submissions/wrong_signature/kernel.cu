// fault: crash (wrong_signature). The body is right, but the parameters are in the wrong order and n is
// an int: (head, y, n, x) instead of (x, y, n, head). The launcher still passes (x, y, n, head), and
// nothing checks a raw kernel's argument types, so `head` receives x's address (a huge number), `n` the
// low 32 bits of n, and `x` the launcher's head: 0 for aligned arrays. The head loop then runs on every
// thread and reads x[i] through a null pointer: an illegal memory access on the first case.
extern "C" __global__ void copy_vectorized(long long head, float* __restrict__ y, int n,
                                           const float* __restrict__ x) {
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = tid; i < head; i += stride) y[i] = x[i];
    const long long n_vec = (n - head) / 4;
    const float4* xv = reinterpret_cast<const float4*>(x + head);
    float4* yv = reinterpret_cast<float4*>(y + head);
    for (long long v = tid; v < n_vec; v += stride) yv[v] = xv[v];
    for (long long i = head + 4 * n_vec + tid; i < n; i += stride) y[i] = x[i];
}
