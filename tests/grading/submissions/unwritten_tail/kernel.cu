// fault: unwritten (unwritten_tail). Scalar head and float4 body are right, but there is no tail loop:
// the last (n - head) % 4 elements are never written. Lengths that are multiples of 4 on aligned arrays
// pass (the friendly check); n = 1, 2, 3, 5, ... leave elements holding the checker's poison.
extern "C" __global__ void copy_vectorized(const float* __restrict__ x, float* __restrict__ y, long long n,
                                           long long head) {
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = tid; i < head; i += stride) y[i] = x[i];
    const long long n_vec = (n - head) / 4;
    const float4* xv = reinterpret_cast<const float4*>(x + head);
    float4* yv = reinterpret_cast<float4*>(y + head);
    for (long long v = tid; v < n_vec; v += stride) yv[v] = xv[v];
    // (the tail, elements head + 4 * n_vec .. n - 1, is forgotten)
}
