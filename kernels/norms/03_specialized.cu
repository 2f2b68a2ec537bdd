// norms / rung 03 — specialized by row length: a warp per short row, a block sized to a long one.
//
// What changed: rung 02 gave every row a block of THREADS = 256 threads whatever its length. Now the
//   launcher picks the kernel's shape from n (and says which in the record's launch notes):
//   - WARP_ROW = 1, rows of at most 32 * ELEMS = 1024 values: one warp per row, WARPS rows per block. The
//     row's sums are warp shuffles alone: no shared memory, no __syncthreads. The grid holds as many
//     blocks as fit on the GPU at once and each warp strides over the rows (a 2 KB row is too little work
//     to launch a block for).
//   - WARP_ROW = 0, longer rows: one block per row, of just enough warps that each thread holds at most
//     ELEMS values: 32 * ceil(n / (32 * ELEMS)) threads (128 at n = 4096, 1024 at n = 32768), so rows up
//     to 1024 * ELEMS = 32768 values stay in registers; longer ones fall back to two reads, as in rung 02.
//     VEC = 1 (x and y apart by an odd number of values, nothing else) always takes a block, of ELEMS = 8:
//     a 2-byte pack takes a whole register, and 16 or 32 of them spilled (rows up to 8192 in registers).
//   - LayerNorm's block path merges (count, mean, sum of squared deviations) of each thread (its own
//     two-pass over its registers) across the block in one barrier round (Chan, Golub and LeVeque's pairwise
//     update; the lower lane's group always first, so every thread gets the same result); the warp path
//     keeps the mean, then the centered squares.
//   - Tails and alignment: every row is a scalar head (2-byte accesses up to x's next 16-byte boundary),
//     a body of 16-byte packs and a scalar tail (< 8 values), so odd n and misaligned rows keep 16-byte
//     accesses for all but <= 14 values a row. w and b are indexed by column: a body pack of w starts
//     s = (w's offset + head) % 8 values into an aligned pack of w (s varies row to row when n is odd); for
//     s != 0 the thread reads the two aligned packs that hold it (cache hits: every row reads w) and shifts
//     them in registers (selects and byte_perm), so no w or b access is narrower than 16 bytes either.
// Why: at n = 1024 rung 02 leaves half of its 256 threads idle and pays two block barriers per sum on a
//   2 KB row; a warp's row needs five shuffles per sum. At n = 32768 rung 02 reads the row twice (past its
//   8192 values); here it is read once, but a 1024-thread block holds its SM alone, so nothing loads while
//   it reduces: LayerNorm's two rounds of barriers kept it further from the copy than RMSNorm's one, and one
//   round closes most of that gap. With VEC tied to n, odd n moved the whole row in 2-byte accesses. (The
//   split by row length is the one OneFlow's CUDA layer_norm.cuh makes between a warp per row, a block per
//   row cached on chip and an uncached block; the idea, not its code.)
// Prediction: 0.9-0.97x of the device copy for 1024 <= n <= 8192, both norms and types (the target);
//   0.85-0.9x at n = 32768 for RMSNorm (unchanged: still one row per SM) and 0.82-0.9x for LayerNorm (its
//   single merge round; the gap to RMSNorm halves, the one-row-per-SM idle time stays);
//   0.8-0.95x at n = 512. Tail sweep (n stepping by 1 around 1024, 2048, 4096): 0.8-0.95x of the device
//   copy at every n, odd ones within ~5% of their multiple-of-8 neighbours (the head and tail are <= 14
//   2-byte accesses a row; the shifted w, b reads add ~15 register operations a pack and twice the L1 hits).
//   Against rung 02: +5-30% over rung 02 at n = 1024, 1.3-1.8x rung 02 at n = 32768, within 5% of it at
//   n = 4096-8192. (Measurements: see results/h200/rmsnorm.json and layernorm.json.)
// Requires: sm_80+; any n >= 1, any rows; x, y, w, b 2-byte aligned; x and y agreeing mod 2 * VEC bytes (the
//   launcher picks VEC = 8, 4, 2 or 1 from x - y alone; n and w, b do not narrow it). Launch: WARP_ROW = 1:
//   blocks of 32 * WARPS threads, grid up to the GPU's resident blocks; WARP_ROW = 0: grid (rows), blocks of
//   32 * ceil(n / (32 * ELEMS)) threads, at most 1024 (the kernel takes any multiple of 32 and falls back to
//   two reads past ELEMS values a thread).
// Left for later: at n = 32768 a row held as 512 threads x 64 values (two rows per SM, __launch_bounds__
//   (512, 2)) would overlap one row's reduction with the other's loads, but 32 data registers of 64 spill
//   (bf16 keeps unpacked fp32 copies); a row staged in shared memory or split over a cluster would too.
// Knobs: BF16 (0), VEC (8), ELEMS (32: the launcher sets 8 when VEC = 1), WARP_ROW (0: the launcher sets 1
//   when n <= 32 * ELEMS and VEC > 1), WARPS (4).
#ifndef BF16
#define BF16 0
#endif
#ifndef VEC
#define VEC 8
#endif
#ifndef ELEMS
#define ELEMS 32
#endif
#ifndef WARP_ROW
#define WARP_ROW 0
#endif
#ifndef WARPS
#define WARPS 4
#endif
static_assert(VEC == 1 || VEC == 2 || VEC == 4 || VEC == 8, "VEC is 1, 2, 4 or 8 16-bit values");
static_assert(ELEMS == 8 || ELEMS == 32, "ELEMS is 32 (8: the launcher's choice at VEC = 1)");

#define CHUNKS (ELEMS / VEC)  // packs a thread holds
#if WARP_ROW
#define LAUNCH_BOUNDS __launch_bounds__(32 * WARPS)
#else
#define LAUNCH_BOUNDS __launch_bounds__(1024, 1)  // <= 64 registers a thread: 32 values are 16 of them
#endif

#include "lab_mma.cuh"     // half_bits_to_float, float_to_half_bits, pack_half2: fp16 / bf16 bits <-> fp32
#include "lab_reduce.cuh"  // warp_sum, block_sum

typedef unsigned short u16;
typedef unsigned long long u64;

// VEC 16-bit values moved by one load or store (16 bytes at VEC = 8).
struct alignas(2 * VEC) Pack {
    u16 h[VEC];
};

__device__ __forceinline__ float value(u16 h) { return half_bits_to_float<BF16>(h); }
__device__ __forceinline__ float value(const Pack& p, int k) { return value(p.h[k]); }

// --- a row's head, body and tail -------------------------------------------------------------------
// head: the scalar elements before x's row reaches a 2 * VEC-byte boundary (at most n); body: nvec whole
// packs; tail: the < VEC scalar elements from tail_start on. y's row shares the split: the launcher picks VEC
// so that x and y agree mod 2 * VEC (the kernel traps otherwise).
struct Split {
    int head, nvec, tail_start;
};
__device__ __forceinline__ Split split_row(const u16* xr, int n) {
    const int past = static_cast<int>((reinterpret_cast<u64>(xr) / 2) % VEC);  // elements past a boundary
    Split s;
    s.head = min(n, (VEC - past) % VEC);
    s.nvec = (n - s.head) / VEC;
    s.tail_start = s.head + s.nvec * VEC;
    return s;
}

// --- w and b, whatever their alignment against the row ---------------------------------------------
// Body pack i covers columns c = head + i * VEC. w + c is a pack boundary only when w's own offset from one
// (off) and head add up to a multiple of VEC; otherwise the pack straddles two aligned packs of w, both read
// (from the cache: every row reads w) and shifted by s = (off + head) % VEC values in registers. s is the same
// for every pack of a row, so the test is uniform across the warp and the aligned case pays one load.
struct Weights {
    const Pack* base;  // w rounded down to a pack boundary
    int first, shift;  // body pack 0 starts `shift` values into aligned pack `first`
};
__device__ __forceinline__ Weights weights_for(const u16* w, int head) {
    const u64 addr = reinterpret_cast<u64>(w);
    const int off = static_cast<int>((addr / 2) % VEC);
    Weights g;
    g.base = reinterpret_cast<const Pack*>(addr - 2 * off);  // same 2 * VEC-byte block as w[0]: mapped
    g.first = (off + head) / VEC;
    g.shift = (off + head) % VEC;
    return g;
}

// Values s .. s + VEC - 1 of the 2 * VEC values lo, hi (0 < s < VEC), without a runtime-indexed array:
// whole 32-bit words first, one bit of s / 2 at a time (selects), then half a word (byte_perm).
__device__ __forceinline__ Pack shifted(const Pack& lo, const Pack& hi, int s) {
#if VEC == 1
    return lo;  // never called: s is 0
#else
    constexpr int W = VEC / 2;
    unsigned win[2 * W];
#pragma unroll
    for (int k = 0; k < W; ++k) {
        win[k] = pack_half2(lo.h[2 * k], lo.h[2 * k + 1]);
        win[W + k] = pack_half2(hi.h[2 * k], hi.h[2 * k + 1]);
    }
    const int q = s / 2;
#pragma unroll
    for (int bit = W / 2; bit >= 1; bit /= 2)
#pragma unroll
        for (int m = 0; m + bit < 2 * W; ++m) win[m] = (q & bit) ? win[m + bit] : win[m];
    const unsigned sel = (s & 1) ? 0x5432u : 0x3210u;  // odd s: the high half of word k, the low of k + 1
    Pack out;
#pragma unroll
    for (int k = 0; k < W; ++k) {
        const unsigned r = __byte_perm(win[k], win[k + 1], sel);
        out.h[2 * k] = static_cast<u16>(r & 0xffffu);
        out.h[2 * k + 1] = static_cast<u16>(r >> 16);
    }
    return out;
#endif
}

__device__ __forceinline__ Pack weight_pack(const Weights& g, int i) {
    Pack p = g.base[g.first + i];
    if (VEC > 1 && g.shift != 0) p = shifted(p, g.base[g.first + i + 1], g.shift);
    return p;
}

// --- reductions ------------------------------------------------------------------------------------
// A row's sum over the threads that share it: its warp's, or its block's.
__device__ __forceinline__ float row_sum(float v, float* scratch) {
#if WARP_ROW
    return warp_sum(v);
#else
    return block_sum(v, scratch);
#endif
}

// Chan, Golub and LeVeque's merge of two groups' (count, mean, sum of squared deviations), a then b.
__device__ __forceinline__ void chan_merge(float& n_a, float& mean_a, float& m2_a, float n_b, float mean_b,
                                           float m2_b) {
    const float total = n_a + n_b;
    const float f = total > 0.0f ? __fdividef(n_b, total) : 0.0f;
    const float delta = mean_b - mean_a;
    mean_a = fmaf(delta, f, mean_a);
    m2_a = m2_a + m2_b + delta * delta * n_a * f;
    n_a = total;
}

// A warp's merge by butterfly. The lower lane's group is always `a`, so both lanes of a pair compute the
// same merge and every lane ends with the same statistics.
__device__ __forceinline__ void warp_merge(float& cnt, float& mean, float& m2) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        const float c = __shfl_xor_sync(LAB_FULL_MASK, cnt, off);
        const float m = __shfl_xor_sync(LAB_FULL_MASK, mean, off);
        const float q = __shfl_xor_sync(LAB_FULL_MASK, m2, off);
        if (threadIdx.x & off) {  // this lane is the upper one: the partner's group goes first
            float c0 = c, m0 = m, q0 = q;
            chan_merge(c0, m0, q0, cnt, mean, m2);
            cnt = c0, mean = m0, m2 = q0;
        } else {
            chan_merge(cnt, mean, m2, c, m, q);
        }
    }
}

// The block's (mean, m2) in one barrier round: each warp's merge to shared memory, then every warp merges
// the warps' results. No trailing barrier: the block's only reduction of its row (scratch holds 96 floats).
__device__ __forceinline__ void block_merge(float& cnt, float& mean, float& m2, float* scratch) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    warp_merge(cnt, mean, m2);
    if (lane == 0) scratch[warp] = cnt, scratch[32 + warp] = mean, scratch[64 + warp] = m2;
    __syncthreads();
    cnt = lane < warps ? scratch[lane] : 0.0f;
    mean = lane < warps ? scratch[32 + lane] : 0.0f;
    m2 = lane < warps ? scratch[64 + lane] : 0.0f;
    warp_merge(cnt, mean, m2);
}

// --- rows longer than the registers hold: rung 01's two reads, head / body / tail ---------------------
__device__ __forceinline__ void welford_add(float& count, float& mean, float& m2, float v) {
    count += 1.0f;
    const float d = v - mean;
    mean += __fdividef(d, count);
    m2 = fmaf(d, v - mean, m2);
}

template <bool LAYER>
__device__ void norm_two_read(const u16* __restrict__ xr, const u16* __restrict__ w, const u16* __restrict__ b,
                              u16* __restrict__ yr, int n, float eps, int t, int group, float* scratch) {
    const Split sp = split_row(xr, n);
    const Pack* __restrict__ xv = reinterpret_cast<const Pack*>(xr + sp.head);
    float count = 0.0f, mean = 0.0f, m2 = 0.0f;
    if (t < sp.head) {
        const float v = value(xr[t]);
        if (LAYER) welford_add(count, mean, m2, v); else m2 = fmaf(v, v, m2);
    }
    if (sp.tail_start + t < n) {
        const float v = value(xr[sp.tail_start + t]);
        if (LAYER) welford_add(count, mean, m2, v); else m2 = fmaf(v, v, m2);
    }
    for (int p = t; p < sp.nvec; p += group) {
        const Pack xp = xv[p];
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
            const float v = value(xp, k);
            if (LAYER) welford_add(count, mean, m2, v); else m2 = fmaf(v, v, m2);
        }
    }
    const float row_mean = LAYER ? __fdividef(row_sum(count * mean, scratch), n) : 0.0f;
    const float spread = LAYER ? fmaf(count * (mean - row_mean), mean - row_mean, m2) : m2;
    const float rstd = rsqrtf(__fdividef(row_sum(spread, scratch), n) + eps);

    auto scalar = [&](int j) {
        float v = (value(xr[j]) - row_mean) * rstd * value(w[j]);
        if (LAYER) v += value(b[j]);
        yr[j] = float_to_half_bits<BF16>(v);
    };
    if (t < sp.head) scalar(t);
    if (sp.tail_start + t < n) scalar(sp.tail_start + t);
    const Weights gw = weights_for(w, sp.head);
    const Weights gb = LAYER ? weights_for(b, sp.head) : gw;
    Pack* __restrict__ yv = reinterpret_cast<Pack*>(yr + sp.head);
    for (int p = t; p < sp.nvec; p += group) {
        const Pack xp = xv[p], wp = weight_pack(gw, p);
        Pack bp, out;
        if (LAYER) bp = weight_pack(gb, p);
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
            float v = (value(xp, k) - row_mean) * rstd * value(wp, k);
            if (LAYER) v += value(bp, k);
            out.h[k] = float_to_half_bits<BF16>(v);
        }
        yv[p] = out;
    }
}

// --- one row from registers ---------------------------------------------------------------------------
// xr, yr: the row's start; this thread is thread t of the `group` threads that share the row. Rows of more
// than ELEMS * group values read twice (the test is on n alone, so every row of a launch takes the same path
// and the launcher's notes can say which).
template <bool LAYER>
__device__ __forceinline__ void norm_row(const u16* __restrict__ xr, const u16* __restrict__ w,
                                         const u16* __restrict__ b, u16* __restrict__ yr, int n, float eps, int t,
                                         int group, float* scratch) {
    if (n > ELEMS * group) {
        norm_two_read<LAYER>(xr, w, b, yr, n, eps, t, group, scratch);
        return;
    }
    const Split sp = split_row(xr, n);  // nvec <= n / VEC <= CHUNKS * group
    const Pack* __restrict__ xv = reinterpret_cast<const Pack*>(xr + sp.head);

    // The one read: every load issued before any is used. This thread holds packs t + c * group for c < mine,
    // head element t (t < head) and tail element tail_start + t (when < n); absent ones count as 0.
    const int mine = t < sp.nvec ? min(CHUNKS, (sp.nvec - t + group - 1) / group) : 0;
    Pack held[CHUNKS];
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c)
        if (c < mine) held[c] = xv[t + c * group];
    const bool has_head = t < sp.head, has_tail = sp.tail_start + t < n;
    const float hv = has_head ? value(xr[t]) : 0.0f;
    const float tv = has_tail ? value(xr[sp.tail_start + t]) : 0.0f;

    float row_mean = 0.0f, sq = 0.0f;
    if (LAYER) {
        float sum = hv + tv;
#pragma unroll
        for (int c = 0; c < CHUNKS; ++c)
            if (c < mine)
#pragma unroll
                for (int k = 0; k < VEC; ++k) sum += value(held[c], k);
#if WARP_ROW
        // A warp: the mean, then the sum of squares about it (two rounds of five shuffles).
        row_mean = __fdividef(warp_sum(sum), n);
#else
        // A block: this thread's own mean and squares about it, merged across the block in one barrier
        // round (Chan et al.) instead of two (the mean's, then the squares').
        const float cnt = static_cast<float>(mine * VEC + has_head + has_tail);
        row_mean = cnt > 0.0f ? __fdividef(sum, cnt) : 0.0f;
#endif
    }
    if (has_head) sq = (hv - row_mean) * (hv - row_mean);
    if (has_tail) sq = fmaf(tv - row_mean, tv - row_mean, sq);
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c)
        if (c < mine)
#pragma unroll
            for (int k = 0; k < VEC; ++k) {
                const float d = value(held[c], k) - row_mean;
                sq = fmaf(d, d, sq);
            }
#if !WARP_ROW
    if (LAYER) {
        float cnt = static_cast<float>(mine * VEC + has_head + has_tail);
        block_merge(cnt, row_mean, sq, scratch);  // row_mean: the row's; sq: its sum of squares about it
    } else {
        sq = row_sum(sq, scratch);
    }
#else
    sq = row_sum(sq, scratch);
#endif
    const float rstd = rsqrtf(__fdividef(sq, n) + eps);

    // Normalize from registers; w and b through the cache.
    if (has_head) {
        float v = (hv - row_mean) * rstd * value(w[t]);
        if (LAYER) v += value(b[t]);
        yr[t] = float_to_half_bits<BF16>(v);
    }
    if (has_tail) {
        const int j = sp.tail_start + t;
        float v = (tv - row_mean) * rstd * value(w[j]);
        if (LAYER) v += value(b[j]);
        yr[j] = float_to_half_bits<BF16>(v);
    }
    const Weights gw = weights_for(w, sp.head);
    const Weights gb = LAYER ? weights_for(b, sp.head) : gw;
    Pack* __restrict__ yv = reinterpret_cast<Pack*>(yr + sp.head);
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c) {
        if (c >= mine) continue;
        const int p = t + c * group;
        const Pack wp = weight_pack(gw, p);
        Pack bp, out;
        if (LAYER) bp = weight_pack(gb, p);
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
            float v = (value(held[c], k) - row_mean) * rstd * value(wp, k);
            if (LAYER) v += value(bp, k);
            out.h[k] = float_to_half_bits<BF16>(v);
        }
        yv[p] = out;
    }
}

// WARP_ROW = 1: warp s of block i starts at row i * WARPS + s and strides over the rows by the grid's
// warps. WARP_ROW = 0: block r normalizes row r (no loop: a loop over rows would invite the compiler
// to keep every w and b address of the thread in registers across rows).
template <bool LAYER>
__device__ __forceinline__ void norm_rows(const u16* __restrict__ x, const u16* __restrict__ w,
                                          const u16* __restrict__ b, u16* __restrict__ y, int rows, int n,
                                          float eps) {
    __shared__ float scratch[LAYER && !WARP_ROW ? 96 : 32];
    if ((reinterpret_cast<u64>(x) - reinterpret_cast<u64>(y)) % (2 * VEC) != 0) __trap();  // the launcher's VEC
#if WARP_ROW
    for (long long row = (long long)blockIdx.x * WARPS + threadIdx.x / 32; row < rows;
         row += (long long)gridDim.x * WARPS) {
        const long long start = row * n;
        norm_row<LAYER>(x + start, w, b, y + start, n, eps, threadIdx.x % 32, 32, scratch);
    }
#else
    if (blockIdx.x >= rows) return;
    const long long start = (long long)blockIdx.x * n;
    norm_row<LAYER>(x + start, w, b, y + start, n, eps, threadIdx.x, blockDim.x, scratch);
#endif
}

extern "C" __global__ void LAUNCH_BOUNDS
rmsnorm_specialized(const u16* __restrict__ x, const u16* __restrict__ w, u16* __restrict__ y, int rows, int n,
                    float eps) {
    norm_rows<false>(x, w, nullptr, y, rows, n, eps);
}

extern "C" __global__ void LAUNCH_BOUNDS
layernorm_specialized(const u16* __restrict__ x, const u16* __restrict__ w, const u16* __restrict__ b,
                      u16* __restrict__ y, int rows, int n, float eps) {
    norm_rows<true>(x, w, b, y, rows, n, eps);
}
