// fault: compile_error. A syntax error on line 12: the float4 loop's `for (` is never closed before
// its `{`. NVRTC rejects the file; the grader must report the compile error with its line and give no
// correctness or performance points.
extern "C" __global__ void copy_vectorized(const float* __restrict__ x, float* __restrict__ y, long long n,
                                           long long head) {
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = tid; i < head; i += stride) y[i] = x[i];
    const long long n_vec = (n - head) / 4;
    const float4* xv = reinterpret_cast<const float4*>(x + head);
    float4* yv = reinterpret_cast<float4*>(y + head);
    for (long long v = tid; v < n_vec; v += stride {
        yv[v] = xv[v];
    }
    for (long long i = head + 4 * n_vec + tid; i < n; i += stride) y[i] = x[i];
}
