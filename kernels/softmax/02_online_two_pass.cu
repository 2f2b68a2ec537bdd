// softmax / rung 02 — online normalizer: the max and the sum in one read, then the output (two reads).
//
// What changed: passes 1 and 2 of rung 01 become one. Each thread keeps a running max m and a running
//   sum d of exp(x - m) over its elements; when an element raises the max, the sum so far is rescaled
//   by exp(m_old - m_new) (Milakov & Gimelshein, "Online normalizer calculation for softmax",
//   arXiv:1805.02867, 2018). The block then combines the threads' (m, d) pairs: M = block_max(m), each
//   thread rescales its d by exp(m - M), D = block_sum(d). The output pass is rung 01's pass 3.
// Why: one read of x fewer per element (two reads and one write instead of three and one); the two block
//   reductions now run back to back after one pass instead of each closing its own pass. The extra work
//   is an exp per raised max, rare after a thread's first few elements on unordered data.
// Prediction (H200, arrays ~256 MiB): the same L2 reasoning as rung 01 (the second read mostly hits the
//   L2 at n <= 4096), so the gain is one pass of L2 traffic and latency: ~0.55-0.75x of copy at
//   n = 1024-4096, ~0.45-0.6x at n = 32768. Still scalar accesses; rung 03 reads the row once.
// Definitions: as rung 01's header (masks, all -inf rows -> zeros, NaN / +inf -> NaN rows). The online
//   update keeps them: a raised max never meets -inf - -inf (the shift is 0 while the max is -inf), and a
//   NaN or +inf still reaches every output through the sum.
// Requires: sm_75+; any rows >= 1, any n >= 1; x, y element-aligned.
//   Launch: grid (rows), block (THREADS), no dynamic shared memory.
// Knobs: HALF (0: fp32 in and out; 1: fp16 in and out, fp32 statistics), THREADS (256).
#include "lab_reduce.cuh"

#ifndef HALF
#define HALF 0
#endif
#ifndef THREADS
#define THREADS 256
#endif
static_assert(HALF == 0 || HALF == 1, "HALF is 0 (fp32) or 1 (fp16)");
static_assert(THREADS % 32 == 0 && THREADS <= 1024, "THREADS is a multiple of 32, at most 1024");

#include "lab_softmax.cuh"  // elem_t, vec_t, conversions, and the definitions every rung shares

// Adds element v to a thread's running (max m, sum d of exp(. - m)). A NaN v leaves m alone (fmaxf) and
// makes d NaN; a +inf v becomes the max, and the block combine below turns it into NaN (exp(inf - inf)).
__device__ __forceinline__ void online_add(float& m, float& d, float v) {
    if (v > m) {
        d = d * exp_shifted(m, v) + 1.0f;  // v > m >= -inf: v is the new shift; exp(-inf - v) = 0
        m = v;
    } else {
        d += exp_shifted(v, safe_shift(m));
    }
}

extern "C" __global__ void __launch_bounds__(THREADS)
softmax_online_two_pass(const elem_t* __restrict__ x, elem_t* __restrict__ y, const int* __restrict__ lengths,
                   int rows, int n) {
    __shared__ float scratch[32];
    const int row = blockIdx.x;
    const elem_t* xr = x + (long long)row * n;
    elem_t* yr = y + (long long)row * n;
    const int len = valid_length(lengths, row, n);

    float m = NEG_INF, d = 0.0f;
    for (int j = threadIdx.x; j < len; j += THREADS) online_add(m, d, to_float(xr[j]));
    const float shift = safe_shift(block_max(m, scratch));
    // Every thread's sum rescaled to the row's shift (m == shift leaves it exact: exp(0) = 1).
    const float inv = inv_sum(block_sum(d * exp_shifted(m, shift), scratch));

    for (int j = threadIdx.x; j < n; j += THREADS)
        store(yr + j, j < len ? exp_shifted(to_float(xr[j]), shift) * inv : 0.0f);
}
