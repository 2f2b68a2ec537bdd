// fault: crash (illegal_address). A correct copy, plus one store from thread 0 to y[i + 2^40], 4 TiB
// past the output: an unmapped address, so the kernel dies with an illegal memory access on every case
// and the CUDA context is lost (the grader must carry on in a fresh process).
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
    if (tid == 0) y[tid + (1LL << 40)] = x[0];  // the bad store
}
