// fault: none (good_starter_style). Correct, and written the way a student fills in starter.cu: it keeps
// the starter's #include "lab_memory.cuh" (the grader must compile with kernels/common on the include
// path) and uses streaming loads/stores (__ldcs/__stcs) for the float4 body. Expected: every check passes.
#include "lab_memory.cuh"

extern "C" __global__ void copy_vectorized(const float* __restrict__ x, float* __restrict__ y, long long n,
                                           long long head) {
    const long long tid = global_thread_index();
    const long long stride = grid_thread_count();

    for (long long i = tid; i < head; i += stride) y[i] = x[i];

    const long long body = (n - head) / 4;
    const float4* xv = reinterpret_cast<const float4*>(x + head);
    float4* yv = reinterpret_cast<float4*>(y + head);
    for (long long v = tid; v < body; v += stride) __stcs(yv + v, __ldcs(xv + v));

    for (long long i = head + 4 * body + tid; i < n; i += stride) y[i] = x[i];
}
