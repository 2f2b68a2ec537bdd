// softmax / rung 03 — the row held in registers: x read once, y written once, 16-byte accesses.
//
// What changed: each thread loads its share of the row once, as 16-byte vectors (float4, or 8 fp16 in a
//   uint4), into registers, up to VECS vectors per thread; the max, the sum and the output all work on
//   those registers. No second read, so no online rescaling either: with the whole row at hand the plain
//   max-then-sum (rung 01's order) costs no extra traffic. In fp32 the exponentials of the sum pass
//   overwrite the inputs in place (same registers), so the output pass only multiplies; in fp16 the
//   registers hold the packed inputs and the output pass recomputes exp (fewer registers).
// Why: one read and one write per element, the copy's traffic, with a quarter (fp32) or an eighth (fp16)
//   of the memory instructions of rungs 01-02, and VECS independent 16-byte loads in flight per thread.
// Prediction (H200, arrays ~256 MiB): ~0.8-0.9x of copy at n = 4096 (256 threads x 4 vectors fp32, x 2
//   fp16); lower at n = 128-1024, where a row is one or a few vectors per thread and most of a 256-thread
//   block idles (n = 128 fp32: 32 threads of 256 have work); rows longer than the registers hold take
//   rung 02's kernel (below), so n = 32768 measures as rung 02. Rung 04 specializes both ends.
// Alignment: vectors must be 16-byte aligned, and row i starts at x + i * n, so a row's first `head`
//   elements (fewer than a vector) up to the next 16-byte boundary, and the last `tail` ones, are scalar;
//   thread t < head holds head element t, thread t < tail holds tail element t, one register each. This
//   needs x and y to share their address mod 16 (then every row's head is the same for both).
// Long rows and misaligned pairs: the launcher (lab/families/softmax.py) runs this kernel only when
//   n <= THREADS * VECS * (4 fp32, 8 fp16) elements (8192 fp32, 16384 fp16 at the defaults) and x and y
//   agree mod 16; otherwise it launches rung 02's kernel (two reads, any n, any alignment), and the
//   record's launch notes say so.
// Definitions: as rung 01's header (masks, all -inf rows -> zeros, NaN / +inf -> NaN rows). Masked
//   vectors (starting at or past the row's length) are not loaded at all.
// Requires: sm_75+; any rows >= 1; n as above; x, y aligned to their element and to each other mod 16.
//   Launch: grid (rows), block (THREADS), no dynamic shared memory.
// Knobs: HALF (0: fp32 in and out; 1: fp16 in and out, fp32 statistics), THREADS (256), VECS (8: 16-byte
//   vectors per thread at most).
#include "lab_reduce.cuh"

#ifndef HALF
#define HALF 0
#endif
#ifndef THREADS
#define THREADS 256
#endif
#ifndef VECS
#define VECS 8
#endif
static_assert(HALF == 0 || HALF == 1, "HALF is 0 (fp32) or 1 (fp16)");
static_assert(THREADS % 32 == 0 && THREADS <= 1024, "THREADS is a multiple of 32, at most 1024");
static_assert(VECS >= 1, "VECS is at least 1");

#include "lab_softmax.cuh"  // elem_t, vec_t, conversions, and the definitions every rung shares

// At most 64 registers (1024 threads' worth per SM): without the minimum, ptxas trades a few spills for a
// fifth block per SM at 256 threads.
extern "C" __global__ void __launch_bounds__(THREADS, 1024 / THREADS)
softmax_single_pass(const elem_t* __restrict__ x, elem_t* __restrict__ y, const int* __restrict__ lengths,
                    int rows, int n) {
    __shared__ float scratch[32];
    const int row = blockIdx.x, t = threadIdx.x;
    const elem_t* xr = x + (long long)row * n;
    elem_t* yr = y + (long long)row * n;
    const int len = valid_length(lengths, row, n);
    const int head = head_length(xr, n);
    const int nvec = (n - head) / VEC_ELEMS;
    const int tail_start = head + nvec * VEC_ELEMS;  // n - tail_start < VEC_ELEMS
    const vec_t* xv = reinterpret_cast<const vec_t*>(xr + head);
    vec_t* yv = reinterpret_cast<vec_t*>(yr + head);

    // Load: thread t holds vectors t, t + THREADS, ... and at most one head and one tail element. Masked
    // elements hold -inf from here on (a vector wholly past the length is not read), so the max and the
    // sum need no test: exp(-inf - shift) = 0.
    vec_t v[VECS];
#pragma unroll
    for (int k = 0; k < VECS; ++k) {
        const int i = t + k * THREADS, first = head + i * VEC_ELEMS;
        if (i < nvec) {
            v[k] = first < len ? xv[i] : all_neg_inf();
            if (first + VEC_ELEMS > len) v[k] = masked(v[k], len - first);
        }
    }
    const int hj = t, tj = tail_start + t;
    float hv = hj < head && hj < len ? to_float(xr[hj]) : NEG_INF;
    float tv = tj < n && tj < len ? to_float(xr[tj]) : NEG_INF;

    // The max.
    float m = fmaxf(hv, tv);
#pragma unroll
    for (int k = 0; k < VECS; ++k) {
        const int i = t + k * THREADS;
        if (i < nvec) {
            float f[VEC_ELEMS];
            unpack(v[k], f);
#pragma unroll
            for (int e = 0; e < VEC_ELEMS; ++e) m = fmaxf(m, f[e]);
        }
    }
    const float shift = safe_shift(block_max(m, scratch));

    // The sum of exponentials (fp32: kept in place of the inputs).
    hv = exp_shifted(hv, shift);  // -inf (absent or masked) -> 0
    tv = exp_shifted(tv, shift);
    float s = hv + tv;
#pragma unroll
    for (int k = 0; k < VECS; ++k) {
        const int i = t + k * THREADS;
        if (i < nvec) {
            float f[VEC_ELEMS];
            unpack(v[k], f);
#pragma unroll
            for (int e = 0; e < VEC_ELEMS; ++e) {
                f[e] = exp_shifted(f[e], shift);
                s += f[e];
            }
#if !HALF
            v[k] = pack(f);
#endif
        }
    }
    const float inv = inv_sum(block_sum(s, scratch));

    // The output: masked elements are exactly 0 (even in a NaN row, where inv is NaN).
    if (hj < head) store(yr + hj, hj < len ? hv * inv : 0.0f);
    if (tj < n) store(yr + tj, tj < len ? tv * inv : 0.0f);
#pragma unroll
    for (int k = 0; k < VECS; ++k) {
        const int i = t + k * THREADS;
        if (i < nvec) {
            float f[VEC_ELEMS];
            unpack(v[k], f);
#pragma unroll
            for (int e = 0; e < VEC_ELEMS; ++e) {
                const bool valid = head + i * VEC_ELEMS + e < len;
#if HALF
                f[e] = valid ? exp_shifted(f[e], shift) * inv : 0.0f;
#else
                f[e] = valid ? f[e] * inv : 0.0f;
#endif
            }
            yv[i] = pack(f);
        }
    }
}
