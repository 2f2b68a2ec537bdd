// fault: race. A correct copy, plus a leftover debug "checksum" that only runs on large grids (64 blocks
// or more, i.e. n > 16128 with the launcher's 256-thread blocks): every thread atomically adds its
// elements x[i], i >= 1, into y[0]. Float addition is not associative and the atomics (and thread 0's
// plain store of y[0]) land in a different order on every run, so y[0] is wrong and differs between two
// runs on the same input: the checker's repeated runs must report a race (the wrong value is reported too).
// Small lengths (a grid of fewer than 64 blocks) are exact.
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

    if (gridDim.x >= 64) {
        for (long long i = tid; i < n; i += stride)
            if (i > 0) atomicAdd(&y[0], x[i]);
    }
}
