// fault: missing_kernel (wrong_name). A correct float4 copy, but the kernel is called copy_vec, not
// copy_vectorized: the file compiles, yet it has no entry point the launcher can find.
extern "C" __global__ void copy_vec(const float* __restrict__ x, float* __restrict__ y, long long n,
                                    long long head) {
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = tid; i < head; i += stride) y[i] = x[i];
    const long long n_vec = (n - head) / 4;
    const float4* xv = reinterpret_cast<const float4*>(x + head);
    float4* yv = reinterpret_cast<float4*>(y + head);
    for (long long v = tid; v < n_vec; v += stride) yv[v] = xv[v];
    for (long long i = head + 4 * n_vec + tid; i < n; i += stride) y[i] = x[i];
}
