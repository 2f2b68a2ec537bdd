// norms / rung 01 — a block per row, two reads: the row's statistics, then a pass that normalizes it.
//
// What it does: RMSNorm  y = x * rsqrt(mean(x^2) + eps) * w  and LayerNorm  y = (x - mean) * rsqrt(var +
//   eps) * w + b (biased variance, as torch.nn.LayerNorm) over each row of a row-major rows x n matrix of
//   fp16 or bf16 values (raw 16-bit patterns; BF16 picks the type), statistics in fp32, one rounding to
//   16 bits per output. One file serves both ladders: a template on LAYER, two extern "C" entries.
//   Block r owns row r. Pass 1: each thread walks the row at a stride of THREADS, one 2-byte value at a
//   time, keeping its own statistics; a block reduction (lab_reduce.cuh) combines them. Pass 2 reads the
//   row again, with w (and b), and writes y.
// LayerNorm's variance: never E[x^2] - E[x]^2 in fp32. When |mean| >> std the two terms agree in most of
//   their 24 bits and the difference keeps mostly their rounding errors (x = 300 + noise of std 1:
//   E[x^2] ~ 9e4 is held to ~0.005, and a sum of n = 4096 terms errs by ~64 times that: as much as var = 1
//   itself). Each thread keeps Welford's running mean and sum of squared deviations instead (B. P.
//   Welford, Technometrics 4(3), 1962); the block combines them with the exact identity
//   M2 = sum_t [M2_t + n_t (mean_t - mean)^2] (Chan, Golub and LeVeque, "Algorithms for computing the
//   sample variance: analysis and recommendations", 1983): every term >= 0, nothing cancels. Rungs 02 and
//   03, which hold the row in registers, take the plain two-pass route (the mean, then the centered sum).
//   Divisions by n and by Welford's count are __fdividef (2 ulp, no IEEE slow-path call): statistics need
//   no more, and lab/families/norms.py's error bound allows it.
// Why this rung: the plainest correct version, the baseline of the ladder. It moves x twice (the second
//   read often hits L2: a row is a few KB and was read microseconds before) and every access is 2 bytes
//   wide, so a warp's load instruction fetches 64 bytes: many instructions per byte. LayerNorm adds a
//   division per element (Welford's update).
// Prediction: 0.4-0.7x of the device copy for n >= 1024 (RMSNorm at the top, LayerNorm's per-element
//   division at the bottom). Measured: results/h200/rmsnorm.json, layernorm.json (notebook 07).
// Requires: sm_80+ (cvt.rn.bf16.f32); any n >= 1, any rows, any 2-byte alignment. Launch: grid (rows),
//   blocks of THREADS threads (a multiple of 32).
// Knobs: BF16 (0), THREADS (256).
#ifndef BF16
#define BF16 0
#endif
#ifndef THREADS
#define THREADS 256
#endif

#include "lab_mma.cuh"     // half_bits_to_float, float_to_half_bits: fp16 / bf16 bit patterns <-> fp32
#include "lab_reduce.cuh"  // block_sum

typedef unsigned short u16;

__device__ __forceinline__ float value(const u16* p, long long i) { return half_bits_to_float<BF16>(p[i]); }

template <bool LAYER>
__device__ __forceinline__ void norm_two_read(const u16* __restrict__ x, const u16* __restrict__ w,
                                              const u16* __restrict__ b, u16* __restrict__ y, int n, float eps) {
    __shared__ float scratch[32];
    const long long start = (long long)blockIdx.x * n;

    // Pass 1: this thread's statistics of its values (RMSNorm: the sum of squares; LayerNorm: Welford).
    float count = 0.0f, mean = 0.0f, m2 = 0.0f;
    for (int i = threadIdx.x; i < n; i += THREADS) {
        const float v = value(x, start + i);
        if (LAYER) {
            count += 1.0f;
            const float d = v - mean;
            mean += __fdividef(d, count);
            m2 = fmaf(d, v - mean, m2);
        } else {
            m2 = fmaf(v, v, m2);
        }
    }
    // The row's: its mean from the threads' sums, then each thread's squared deviations from that mean.
    const float row_mean = LAYER ? __fdividef(block_sum(count * mean, scratch), n) : 0.0f;
    const float spread = LAYER ? fmaf(count * (mean - row_mean), mean - row_mean, m2) : m2;
    const float rstd = rsqrtf(__fdividef(block_sum(spread, scratch), n) + eps);

    // Pass 2: read the row again, normalize, scale (and shift), round once to 16 bits.
    for (int i = threadIdx.x; i < n; i += THREADS) {
        float t = (value(x, start + i) - row_mean) * rstd * value(w, i);
        if (LAYER) t += value(b, i);
        y[start + i] = float_to_half_bits<BF16>(t);
    }
}

extern "C" __global__ void __launch_bounds__(THREADS)
rmsnorm_two_read(const u16* __restrict__ x, const u16* __restrict__ w, u16* __restrict__ y, int rows, int n,
                 float eps) {
    if (blockIdx.x < rows) norm_two_read<false>(x, w, nullptr, y, n, eps);
}

extern "C" __global__ void __launch_bounds__(THREADS)
layernorm_two_read(const u16* __restrict__ x, const u16* __restrict__ w, const u16* __restrict__ b,
                   u16* __restrict__ y, int rows, int n, float eps) {
    if (blockIdx.x < rows) norm_two_read<true>(x, w, b, y, n, eps);
}
