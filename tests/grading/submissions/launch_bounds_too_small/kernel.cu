// fault: launch_error (launch_bounds_too_small). A correct copy declared with __launch_bounds__(64), but
// the launcher uses 256-thread blocks. The file compiles and loads; every launch is refused by the
// driver (more threads per block than the kernel was built for), so no case runs.
extern "C" __global__ void __launch_bounds__(64)
    copy_vectorized(const float* __restrict__ x, float* __restrict__ y, long long n, long long head) {
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = tid; i < head; i += stride) y[i] = x[i];
    const long long n_vec = (n - head) / 4;
    const float4* xv = reinterpret_cast<const float4*>(x + head);
    float4* yv = reinterpret_cast<float4*>(y + head);
    for (long long v = tid; v < n_vec; v += stride) yv[v] = xv[v];
    for (long long i = head + 4 * n_vec + tid; i < n; i += stride) y[i] = x[i];
}
