// fault: crash (misaligned_float4). The tail is handled, but `head` is ignored: the float4 body starts at
// x and y themselves. Every aligned length passes (friendly and tails checks); as soon as x or y starts
// off a 16-byte boundary the float4 loads/stores are misaligned and the kernel dies with a
// misaligned-address error (the misaligned check), which also kills the CUDA context.
extern "C" __global__ void copy_vectorized(const float* __restrict__ x, float* __restrict__ y, long long n,
                                           long long head) {
    (void)head;
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long n_vec = n / 4;
    const float4* xv = reinterpret_cast<const float4*>(x);
    float4* yv = reinterpret_cast<float4*>(y);
    for (long long v = tid; v < n_vec; v += stride) yv[v] = xv[v];
    for (long long i = 4 * n_vec + tid; i < n; i += stride) y[i] = x[i];
}
