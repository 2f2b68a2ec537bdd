// fault: none (good_unrolled). Correct: scalar head, then the float4 body two float4s per thread per
// iteration (both loads issued before either store, so 32 bytes are in flight per thread), then the
// scalar tail. Expected: every check passes and the performance target is met.
extern "C" __global__ void copy_vectorized(const float* __restrict__ x, float* __restrict__ y, long long n,
                                           long long head) {
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;

    for (long long i = tid; i < head; i += stride) y[i] = x[i];

    const long long n_vec = (n - head) / 4;
    const float4* __restrict__ xv = reinterpret_cast<const float4*>(x + head);
    float4* __restrict__ yv = reinterpret_cast<float4*>(y + head);
    for (long long v = tid; v < n_vec; v += 2 * stride) {
        const long long w = v + stride;
        const bool second = w < n_vec;
        const float4 a = xv[v];
        float4 b = make_float4(0.f, 0.f, 0.f, 0.f);
        if (second) b = xv[w];
        yv[v] = a;
        if (second) yv[w] = b;
    }

    for (long long i = head + 4 * n_vec + tid; i < n; i += stride) y[i] = x[i];
}
