// fault: oob (oob_write). A correct copy, plus thread 0 "zero-pads" one element on either side of the
// output: y[-1] and y[n]. Both stores land in the checker's guard zones (before and after the output),
// which must be reported as out-of-bounds writes.
extern "C" __global__ void copy_vectorized(const float* __restrict__ x, float* __restrict__ y, long long n,
                                           long long head) {
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = tid; i < head; i += stride) y[i] = x[i];
    const long long n_vec = (n - head) / 4;
    const float4* xv = reinterpret_cast<const float4*>(x + head);
    float4* yv = reinterpret_cast<float4*>(y + head);
    for (long long v = tid; v < n_vec; v += stride) yv[v] = xv[v];
    for (long long i = head + 4 * n_vec + tid; i < n; i += stride) y[i] = x[i];
    if (tid == 0) {
        y[-1] = 0.0f;  // one before the output
        y[n] = 0.0f;   // one past the end
    }
}
