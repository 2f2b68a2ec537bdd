// fault: wrong (wrong_values). Every element is written, in bounds and deterministically, but scaled by
// 1.0001f: the checker compares a copy bit for bit, so every case fails with a wrong result.
extern "C" __global__ void copy_vectorized(const float* __restrict__ x, float* __restrict__ y, long long n,
                                           long long head) {
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;
    const float k = 1.0001f;
    for (long long i = tid; i < head; i += stride) y[i] = x[i] * k;
    const long long n_vec = (n - head) / 4;
    const float4* xv = reinterpret_cast<const float4*>(x + head);
    float4* yv = reinterpret_cast<float4*>(y + head);
    for (long long v = tid; v < n_vec; v += stride) {
        const float4 a = xv[v];
        yv[v] = make_float4(a.x * k, a.y * k, a.z * k, a.w * k);
    }
    for (long long i = head + 4 * n_vec + tid; i < n; i += stride) y[i] = x[i] * k;
}
