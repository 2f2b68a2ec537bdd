// fault: none (extra_files). A correct float4 copy; the folder also holds notes.txt and helper.cuh,
// which this file does not include. The grader should grade kernel.cu, note the extra files as
// ignored, and pass it.
extern "C" __global__ void copy_vectorized(const float* __restrict__ x, float* __restrict__ y, long long n,
                                           long long head) {
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long n_vec = (n - head) / 4;
    const long long tail = head + 4 * n_vec;

    for (long long v = tid; v < n_vec; v += stride)
        reinterpret_cast<float4*>(y + head)[v] = reinterpret_cast<const float4*>(x + head)[v];
    for (long long i = tid; i < head; i += stride) y[i] = x[i];
    for (long long i = tail + tid; i < n; i += stride) y[i] = x[i];
}
