// fault: nonfinite (nan_output). Every element is copied correctly except the last one, which gets a
// quiet NaN (bits 0x7FC00000, not the checker's poison pattern): the output is fully written, in bounds,
// and deterministic, but has a NaN where the reference is finite.
__device__ __forceinline__ float value_for(const float* __restrict__ x, long long i, long long n) {
    return i == n - 1 ? __int_as_float(0x7FC00000) : x[i];
}

extern "C" __global__ void copy_vectorized(const float* __restrict__ x, float* __restrict__ y, long long n,
                                           long long head) {
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = tid; i < head; i += stride) y[i] = value_for(x, i, n);
    // The body stops short of the last element, so the scalar tail always writes element n - 1.
    const long long n_vec = head < n ? (n - 1 - head) / 4 : 0;
    const float4* xv = reinterpret_cast<const float4*>(x + head);
    float4* yv = reinterpret_cast<float4*>(y + head);
    for (long long v = tid; v < n_vec; v += stride) yv[v] = xv[v];
    for (long long i = head + 4 * n_vec + tid; i < n; i += stride) y[i] = value_for(x, i, n);
}
