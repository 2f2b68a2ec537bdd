// fault: wrong (off_by_one). Head and tail are right, but the body is shifted by one element:
// y[i] = x[i + 1] for every i in the float4 body (clamped at the last element, so nothing is read out of
// bounds). Every element is written, in bounds and deterministically, with the wrong value; lengths
// below 4 (no body) still pass.
extern "C" __global__ void copy_vectorized(const float* __restrict__ x, float* __restrict__ y, long long n,
                                           long long head) {
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = tid; i < head; i += stride) y[i] = x[i];
    const long long n_vec = (n - head) / 4;
    float4* yv = reinterpret_cast<float4*>(y + head);
    for (long long v = tid; v < n_vec; v += stride) {
        const long long i = head + 4 * v;
        const long long last = i + 4 < n ? i + 4 : n - 1;
        yv[v] = make_float4(x[i + 1], x[i + 2], x[i + 3], x[last]);
    }
    for (long long i = head + 4 * n_vec + tid; i < n; i += stride) y[i] = x[i];
}
