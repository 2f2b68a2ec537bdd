// norms / rung 04 — a long row split over a thread-block cluster, its sums exchanged through distributed shared memory.
//
// What changed: rung 03 gave a long row one block: 1024 threads at n = 32768, one row per SM, and past 32768 values
//   two reads. Now a row is split into CLUSTER contiguous slices, one per block of a cluster (blocks that the GPU
//   runs at once on one GPC, each able to write the others' shared memory), and each block holds its slice in
//   registers, at most THREADS * ELEMS values. A sum over the row is each block's sum (rung 03's block_sum), pushed
//   into every block of the cluster and added there in rank order (kernels/common/lab_cluster_reduce.cuh): the
//   same statistics, bit for bit, in every block of the row. RMSNorm exchanges once (the sum of squares).
//   LayerNorm exchanges twice (STATS = 2, the default: the mean, then the sum of squares about it, as rung 03), or
//   once (STATS = 1): each block sends its sum and its sum of squares about its own mean, and every block merges the
//   pairs in rank order, as Chan, Golub and LeVeque combine partial variances. The pushes land either behind a
//   cluster barrier (EXCHANGE = 0) or as st.async stores counted on an mbarrier in the receiving block (EXCHANGE =
//   1: no fence, no cluster-wide wait). The weights (and biases) are prefetched into L1 between the last push and
//   its wait.
//   The launcher picks CLUSTER, the fewest of 1, 2, 4, 8 blocks whose slices fit BLOCK * ELEMS values, and THREADS,
//   the fewest warps that hold a slice (n = 32768: 4 blocks of 256 threads; 65536: 8 of 256; 131072: 8 of 512).
//   Slices past 1024 * ELEMS values (n > 262144) are read again for each sum and for the output (the L2 holds them).
// Why: at n = 32768 rung 03 held one 64 KB row per SM, so while a row reduced, nothing loaded on that SM. Blocks of
//   256 threads and <= 64 registers fit 4 or more per SM, from different rows, so one block's reductions and
//   barriers overlap the others' loads, as short rows do in rung 03. At n = 65536 the split keeps one read where
//   rung 03 takes two.
// Prediction: n = 32768 (both norms, both types): 0.92-0.97x of the device copy, from rung 03's 0.87-0.89x
//   (RMSNorm) and 0.75-0.76x (LayerNorm, whose two block reductions stall a lone row longest); n = 65536:
//   0.90-0.96x, against rung 03's two reads (~0.6-0.75x); n = 16384: 0.92-0.97x. At n <= 8192 (CLUSTER = 1) it is
//   rung 03's block path: within 5% of it. Each exchange costs a cluster barrier (~1 us of latency, predicted from
//   its being a GPC-wide round trip), hidden while other blocks on the SM load. EXCHANGE = 1 against 0: 0-5%
//   faster (no MEMBAR before the arrive, no L1 invalidation after the wait, no waiting for the slowest block).
// Measured: lab.studies.cluster_rows_study (results/h100/cluster_rows_study_dc9f18b.json, an H100, whose slower
//   memory needs fewer bytes in flight than the H200's, so rung 03 stands higher there). Past rung 03's registers
//   (n >= 65536) the split wins in every case; at n = 32768 it wins for RMSNorm fp16 and is level or behind for
//   LayerNorm, whose two exchanges are two round trips a row. EXCHANGE = 1 beat 0 in every case, as predicted.
// STATS = 1 against 2 (LayerNorm), predicted: one cluster round trip a row instead of two, so LayerNorm closes on
//   RMSNorm (which already exchanges once): within 0.03 of RMSNorm's fraction of the copy at n >= 32768, from
//   0.06-0.15 behind it with STATS = 2 (H100). The block still reduces twice (its sum, then its squares about its
//   own mean): those are barriers inside one SM, not round trips across a GPC.
// Measured (results/h100/cluster_rows_study_5b68074.json, H100, both builds in the same rounds): the
//   prediction failed. STATS = 1 was slower than STATS = 2 at every n >= 16384: by 0.00-0.02 of the copy in fp16 and
//   by 0.06-0.15 in bf16 (at n = 65536, 0.73 against 0.88). ptxas gives both builds the same registers (48 fp16,
//   59-62 bf16) and no spills, so it is not register pressure. Their SASS (sm_90, clusters of 8) differs as
//   designed: STATS = 1 has half the mbarrier operations (6 SYNCS against 12) but about 280 more instructions, 22
//   MUFU against 4 (the merge's divisions, run by every thread); the same in fp16 and bf16, so that does not explain
//   bf16's larger loss either. One lead: with STATS = 1 in bf16, the cluster barrier (EXCHANGE = 0) beat the
//   st.async exchange at n >= 32768 (0.82 against 0.79 of the copy at 32768), the only cases in either record where
//   it did. The cause is not known. So the default is STATS = 2, and STATS = 1 stays as the knob that shows it.
// compute-sanitizer (results/h100/sanitize_cluster_rows/): memcheck clean on RMSNorm, racecheck and synccheck on
//   LayerNorm's STATS = 2 build (dc9f18b, the same SASS as this file's default); memcheck and racecheck clean on
//   LayerNorm's STATS = 1 build (5b68074).
// Tails and alignment: as rung 03 (VEC from n and the pointers' alignment; slices of whole packs). Any rows, any n.
// Requires: sm_90 (clusters, distributed shared memory). Launch: grid (rows * CLUSTER), block (THREADS), clusters of
//   CLUSTER blocks along x (__cluster_dims__): blocks CLUSTER r .. CLUSTER r + CLUSTER - 1 normalize row r.
// Knobs: BF16 (0), VEC (8), ELEMS (32), BLOCK (256: the block size the launcher aims for), CLUSTER (1: set per n by
//   the launcher), THREADS (256: set per n by the launcher), EXCHANGE (1: st.async on an mbarrier; 0: a cluster
//   barrier), STATS (2: LayerNorm's statistics in two exchanges, the mean then the squares; 1: in one, merged
//   pairs, slower as measured).
#ifndef BF16
#define BF16 0
#endif
#ifndef VEC
#define VEC 8
#endif
#ifndef ELEMS
#define ELEMS 32
#endif
#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef CLUSTER
#define CLUSTER 1
#endif
#ifndef THREADS
#define THREADS 256
#endif
#ifndef EXCHANGE
#define EXCHANGE 1
#endif
#ifndef STATS
#define STATS 2
#endif
static_assert(CLUSTER == 1 || CLUSTER == 2 || CLUSTER == 4 || CLUSTER == 8, "CLUSTER is 1, 2, 4 or 8 (portable sizes)");
static_assert(THREADS % 32 == 0 && THREADS <= 1024, "THREADS is a multiple of 32, at most 1024");
static_assert(STATS == 1 || STATS == 2, "STATS is 1 (one exchange of merged pairs) or 2 (two exchanges)");

#define CHUNKS (ELEMS / VEC)  // packs a thread holds

#include "lab_cluster_reduce.cuh"  // ClusterExchange: sums over the cluster's blocks
#include "lab_mma.cuh"             // half_bits_to_float, float_to_half_bits: fp16 / bf16 bit patterns <-> fp32
#include "lab_reduce.cuh"          // block_sum

typedef unsigned short u16;

// VEC 16-bit values moved by one load or store (16 bytes at VEC = 8).
struct alignas(2 * VEC) Pack {
    u16 h[VEC];
};

__device__ __forceinline__ float value(const Pack& p, int k) { return half_bits_to_float<BF16>(p.h[k]); }

__device__ __forceinline__ void prefetch_l1(const Pack* p) { asm volatile("prefetch.global.L1 [%0];\n" ::"l"(p)); }

// What a norm's blocks exchange. Two rounds of one value each: the sum for the mean (round 0: LayerNorm with
// STATS = 2), the sum of squares (round 1: RMSNorm's one round, LayerNorm's second). LayerNorm with STATS = 1: one
// round of two values, the block's sum and its sum of squares about its own mean.
template <bool LAYER>
struct RowExchange {
    typedef ClusterExchange<CLUSTER, 2, 1, EXCHANGE> type;
};
#if STATS == 1
template <>
struct RowExchange<true> {
    typedef ClusterExchange<CLUSTER, 1, 2, EXCHANGE> type;
};
#endif
#define MERGED(LAYER) ((LAYER) && STATS == 1)

// The row's sum of `partial` over the blocks of the cluster (the block's sum first), through exchange `round`.
template <class Ex>
__device__ __forceinline__ float row_sum(float partial, float* scratch, Ex& ex, int round) {
    const float block = block_sum(partial, scratch);
    return CLUSTER == 1 ? block : ex.total(round, block);
}

// Values in the slice of the block of rank r: slices of `per` packs, the last ones short or empty.
__device__ __forceinline__ int slice_values(int r, int packs, int per) {
    const int lo = min(packs, r * per);
    return (min(packs, lo + per) - lo) * VEC;
}

// STATS = 1: the row's mean and sum of squared deviations from the blocks' (sum, squares about the block's mean)
// pairs, once they have landed. M2 = sum_r [M2_r + n_r (mean_r - mean)^2] (Chan, Golub and LeVeque, 1979), added
// in rank order: the same bits in every block.
template <class Ex>
__device__ __forceinline__ void merge_pairs(const Ex& ex, int packs, int per, int n, float& mean, float& m2) {
    mean = __fdividef(ex.sum(0, 0), n);
    m2 = 0.0f;
#pragma unroll
    for (int r = 0; r < CLUSTER; ++r) {
        const int count = slice_values(r, packs, per);
        if (count == 0) continue;  // an empty slice sent (0, 0)
        const float d = __fdividef(ex.slots[0][0][r], count) - mean;
        m2 += ex.slots[0][1][r] + count * d * d;
    }
}

// A slice's sum, through the block: the row's mean for STATS = 2 (summed over the cluster); the block's own for
// STATS = 1, whose sum `block_total` is kept for the exchange.
template <bool LAYER, class Ex>
__device__ __forceinline__ float slice_mean(float sum, int count, int n, float* scratch, Ex& ex, float& block_total) {
    if constexpr (MERGED(LAYER)) {
        block_total = block_sum(sum, scratch);
        return count > 0 ? __fdividef(block_total, count) : 0.0f;
    } else {
        return __fdividef(row_sum(sum, scratch, ex, 0), n);
    }
}

// One element's output: (x - mean) * rstd * w (+ b).
template <bool LAYER>
__device__ __forceinline__ Pack normalize(const Pack& xp, const Pack& wp, const Pack& bp, float mean, float rstd) {
    Pack out;
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
        float v = (value(xp, k) - mean) * rstd * value(wp, k);
        if (LAYER) v += value(bp, k);
        out.h[k] = float_to_half_bits<BF16>(v);
    }
    return out;
}

// A slice held in registers: packs lo + t + c * THREADS (c < CHUNKS) below hi are thread t's.
template <bool LAYER, class Ex>
__device__ __forceinline__ void norm_slice_held(const Pack* __restrict__ xr, const Pack* __restrict__ wv,
                                                const Pack* __restrict__ bv, Pack* __restrict__ yr, int lo, int hi,
                                                int packs, int per, int n, float eps, float* scratch, Ex& ex) {
    const int t = threadIdx.x;
    const int first = lo + t;
    const int mine = first < hi ? min(CHUNKS, (hi - first + THREADS - 1) / THREADS) : 0;
    Pack held[CHUNKS];
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c)
        if (c < mine) held[c] = xr[first + c * THREADS];
    if (CLUSTER > 1) ex.started();  // every block of the cluster is ready before anything is pushed to it

    float mean = 0.0f, block_total = 0.0f;
    if (LAYER) {
        float sum = 0.0f;
#pragma unroll
        for (int c = 0; c < CHUNKS; ++c)
            if (c < mine)
#pragma unroll
                for (int k = 0; k < VEC; ++k) sum += value(held[c], k);
        mean = slice_mean<LAYER>(sum, (hi - lo) * VEC, n, scratch, ex, block_total);
    }
    float sq = 0.0f;
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c)
        if (c < mine)
#pragma unroll
            for (int k = 0; k < VEC; ++k) {
                const float d = value(held[c], k) - mean;
                sq = fmaf(d, d, sq);
            }

    // The last exchange, split: push and arrive, fetch the weights (and biases) into L1 while the peers' sums
    // arrive (a prefetch holds no registers: loading them here spilled), then wait.
    const float block_sq = block_sum(sq, scratch);
    const int last = MERGED(LAYER) ? 0 : 1;  // the round that carries the squares
    if (CLUSTER > 1) {
        if constexpr (MERGED(LAYER)) ex.put(0, 0, block_total);
        ex.put(last, MERGED(LAYER) ? 1 : 0, block_sq);
        ex.arrive(last);
#pragma unroll
        for (int c = 0; c < CHUNKS; ++c)
            if (VEC == 8 && c < mine) {  // 16-byte packs; narrower ones (odd n) would prefetch each line many times
                prefetch_l1(wv + first + c * THREADS);
                if (LAYER) prefetch_l1(bv + first + c * THREADS);
            }
        ex.wait(last);
    }
    float total_sq = block_sq;
    if (CLUSTER > 1) {
        if constexpr (MERGED(LAYER))
            merge_pairs(ex, packs, per, n, mean, total_sq);
        else
            total_sq = ex.sum(1, 0);
    }
    const float rstd = rsqrtf(__fdividef(total_sq, n) + eps);

#pragma unroll
    for (int c = 0; c < CHUNKS; ++c)
        if (c < mine) {
            const Pack wp = wv[first + c * THREADS];
            Pack bp;
            if (LAYER) bp = bv[first + c * THREADS];
            yr[first + c * THREADS] = normalize<LAYER>(held[c], wp, bp, mean, rstd);
        }
}

// A slice longer than the registers hold: read again for each sum and for the output, the same two-pass statistics.
template <bool LAYER, class Ex>
__device__ void norm_slice_streamed(const Pack* __restrict__ xr, const Pack* __restrict__ wv,
                                    const Pack* __restrict__ bv, Pack* __restrict__ yr, int lo, int hi, int packs,
                                    int per, int n, float eps, float* scratch, Ex& ex) {
    if (CLUSTER > 1) ex.started();
    float mean = 0.0f, block_total = 0.0f;
    if (LAYER) {
        float sum = 0.0f;
        for (int p = lo + threadIdx.x; p < hi; p += THREADS) {
            const Pack xp = xr[p];
#pragma unroll
            for (int k = 0; k < VEC; ++k) sum += value(xp, k);
        }
        mean = slice_mean<LAYER>(sum, (hi - lo) * VEC, n, scratch, ex, block_total);
    }
    float sq = 0.0f;
    for (int p = lo + threadIdx.x; p < hi; p += THREADS) {
        const Pack xp = xr[p];
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
            const float d = value(xp, k) - mean;
            sq = fmaf(d, d, sq);
        }
    }
    float total_sq;
    if constexpr (MERGED(LAYER)) {
        const float block_sq = block_sum(sq, scratch);
        total_sq = block_sq;
        if (CLUSTER > 1) {
            ex.put(0, 0, block_total);
            ex.put(0, 1, block_sq);
            ex.arrive(0);
            ex.wait(0);
            merge_pairs(ex, packs, per, n, mean, total_sq);
        }
    } else {
        total_sq = row_sum(sq, scratch, ex, 1);
    }
    const float rstd = rsqrtf(__fdividef(total_sq, n) + eps);
    for (int p = lo + threadIdx.x; p < hi; p += THREADS) {
        const Pack xp = xr[p], wp = wv[p];  // whole packs into registers: one 16-byte load each
        Pack bp;
        if (LAYER) bp = bv[p];
        yr[p] = normalize<LAYER>(xp, wp, bp, mean, rstd);
    }
}

// Block b normalizes slice b % CLUSTER (its rank in the cluster) of row b / CLUSTER.
template <bool LAYER>
__device__ __forceinline__ void norm_rows(const u16* __restrict__ x, const u16* __restrict__ w,
                                          const u16* __restrict__ b, u16* __restrict__ y, int rows, int n,
                                          float eps) {
    __shared__ float scratch[32];
    __shared__ typename RowExchange<LAYER>::type ex;
    const int row = blockIdx.x / CLUSTER;
    if (row >= rows) return;  // a whole cluster or none: its blocks share the row
    if (CLUSTER > 1) ex.start();
    if (n % VEC != 0) __trap();  // the launcher picks VEC to divide n
    const int rank = CLUSTER > 1 ? static_cast<int>(cluster_rank()) : 0;
    const int packs = n / VEC, per = (packs + CLUSTER - 1) / CLUSTER;
    const int lo = min(packs, rank * per), hi = min(packs, lo + per);
    const long long start = (long long)row * n;
    const Pack* xr = reinterpret_cast<const Pack*>(x + start);
    Pack* yr = reinterpret_cast<Pack*>(y + start);
    const Pack* wv = reinterpret_cast<const Pack*>(w);
    const Pack* bv = reinterpret_cast<const Pack*>(b);
    if (per <= CHUNKS * THREADS)
        norm_slice_held<LAYER>(xr, wv, bv, yr, lo, hi, packs, per, n, eps, scratch, ex);
    else
        norm_slice_streamed<LAYER>(xr, wv, bv, yr, lo, hi, packs, per, n, eps, scratch, ex);
}

// 1024 threads an SM's worth of blocks (rounded down): <= 64 registers a thread at 256 or 1024 threads (32 held
// values are 16 of them).
#define LAUNCH_BOUNDS __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(THREADS, 1024 / THREADS)

extern "C" __global__ void LAUNCH_BOUNDS
rmsnorm_cluster(const u16* __restrict__ x, const u16* __restrict__ w, u16* __restrict__ y, int rows, int n,
                float eps) {
    norm_rows<false>(x, w, nullptr, y, rows, n, eps);
}

extern "C" __global__ void LAUNCH_BOUNDS
layernorm_cluster(const u16* __restrict__ x, const u16* __restrict__ w, const u16* __restrict__ b,
                  u16* __restrict__ y, int rows, int n, float eps) {
    norm_rows<true>(x, w, b, y, rows, n, eps);
}
