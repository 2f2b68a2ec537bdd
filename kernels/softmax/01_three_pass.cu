// softmax / rung 01 — three passes over the row: its max, the sum of exp(x - max), then the output.
//
// What: y[i][j] = exp(x[i][j] - m_i) / sum_k exp(x[i][k] - m_i) for every row i of a row-major rows x n
//   matrix, m_i the row's max (subtracting it keeps exp from overflowing: the "numerically stable"
//   softmax). Statistics in fp32 whatever the storage type. One block of THREADS threads per row: pass 1
//   reads the row for its max (block_max), pass 2 reads it again for the sum of exponentials (block_sum),
//   pass 3 reads it a third time and writes exp(x - m) * (1 / sum). Scalar loads and stores.
// Why: the textbook definition, written as it reads. Three reads and one write per element: if every
//   read came from DRAM, 4 transfers where a copy has 2, so at most ~0.5x of the device copy.
// Prediction (H200, arrays ~256 MiB, past the L2): passes 2 and 3 re-read a row the same block has just
//   read, and the rows in flight (a few blocks per SM, 4-16 KiB each at n = 1024-4096) fit in the L2 many
//   times over, so DRAM sees ~1 read + 1 write; the cost is the two extra passes' L2 traffic and latency,
//   the three block barriers per row, and scalar accesses (4 or 2 bytes per thread per load): ~0.45-0.65x
//   of copy at n = 1024-4096, ~0.35-0.5x at n = 32768 (a 64-128 KiB row per block: the re-reads start to
//   miss the L2). fp16 lower than fp32 (2-byte accesses, twice the instructions per byte).
// Definitions (every rung, and the family's float64 reference, lab/families/softmax.py):
//   - lengths (optional, may be null): row i's elements j >= lengths[i] (clamped to 0..n) are masked: they
//     count as -inf and their outputs are exactly 0.
//   - a row whose unmasked elements are all -inf (or none: length 0) outputs all zeros, not NaN: the shift
//     is then 0 instead of -inf (exp(-inf - -inf) would be NaN), the sum is 0 and 1/sum is taken as 0;
//   - a NaN or a +inf among a row's unmasked elements makes every unmasked output NaN (IEEE arithmetic:
//     NaN - m, inf - inf); the masked outputs stay 0.
//   - exp(x - m) is ex2.approx.ftz of (x - m) * log2(e), what __expf compiles to: a few ulps plus ~|x - m|
//     ulps, results below 2^-126 flushed to 0; 1/sum is rcp.approx (1 ulp). The family's error bound
//     (lab/families/softmax.py, error_bound) accounts for both.
// Requires: sm_75+; any rows >= 1, any n >= 1; x, y element-aligned (no vector accesses).
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

extern "C" __global__ void __launch_bounds__(THREADS)
softmax_three_pass(const elem_t* __restrict__ x, elem_t* __restrict__ y, const int* __restrict__ lengths,
                   int rows, int n) {
    __shared__ float scratch[32];
    const int row = blockIdx.x;
    const elem_t* xr = x + (long long)row * n;
    elem_t* yr = y + (long long)row * n;
    const int len = valid_length(lengths, row, n);

    float m = NEG_INF;
    for (int j = threadIdx.x; j < len; j += THREADS) m = fmaxf(m, to_float(xr[j]));
    const float shift = safe_shift(block_max(m, scratch));

    float s = 0.0f;
    for (int j = threadIdx.x; j < len; j += THREADS) s += exp_shifted(to_float(xr[j]), shift);
    const float inv = inv_sum(block_sum(s, scratch));

    for (int j = threadIdx.x; j < n; j += THREADS)
        store(yr + j, j < len ? exp_shifted(to_float(xr[j]), shift) * inv : 0.0f);
}
