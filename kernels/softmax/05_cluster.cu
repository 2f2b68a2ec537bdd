// softmax / rung 05 — a long row split over a thread-block cluster, max and sum through distributed shared memory.
//
// What changed: rung 04's block path held a row in one block's registers: 1024 threads at n = 32768 fp32 (512
//   fp16), one or two rows per SM, and past 32768 fp32 / 65536 fp16 values two reads. Now a row's 16-byte vectors
//   are split into CLUSTER contiguous slices, one per block of a cluster (blocks that the GPU runs at once on one
//   GPC, each able to write the others' shared memory), and each block holds its slice in registers, at most
//   THREADS * VECS vectors, with rung 04's block-path body. The row's max is each block's max (block_max) pushed
//   into every block of the cluster, where the CLUSTER slots are folded with fmaxf in rank order; then the sum of
//   exp(x - max) the same way, added in rank order (kernels/common/lab_cluster_reduce.cuh): every block of a row
//   gets the same shift and the same sum, bit for bit. The pushes land either behind a cluster barrier
//   (EXCHANGE = 0) or as st.async stores counted on an mbarrier in the receiving block (EXCHANGE = 1: no fence, no
//   cluster-wide wait).
//   The launcher picks CLUSTER, the fewest of 1, 2, 4, 8 blocks whose slices of ceil(n / (4 fp32, 8 fp16))
//   vectors fit BLOCK * VECS, and THREADS, the fewest warps that hold a slice at VECS vectors each (fp32: n =
//   16384: 2 blocks of 256 threads, 32768: 4 of 256, 65536: 8 of 256, 131072: 8 of 512; fp16: n = 32768: 2 of 256,
//   65536: 4 of 256, 131072: 8 of 256). A short row (n <= 8192 fp32, 16384 fp16) is one block: rung 04's block
//   path. Slices past 1024 * VECS vectors (n > 262144 fp32, 524288 fp16) are read twice: rung 04's long path per
//   slice (online max and sum, then the output), through the same two exchanges.
// Why: at n = 32768 rung 04 held a 128 KB row per SM (fp32), so while that row reduced, nothing loaded on the SM.
//   Blocks of 256 threads fit 4 per SM, from different rows, so one block's reductions and exchanges overlap the
//   others' loads, as shorter rows do in rung 04. At n = 65536 fp32 the split keeps one read where rung 04 takes
//   two, and fp16 leaves rung 04's one 1024-thread block per SM.
// Prediction: n = 32768 and 65536, fp16 and fp32: 0.90-0.96x of the device copy. At n = 32768 rung 04 already
//   holds the row and its records give 0.938x (fp16) and 0.924x (fp32) of the copy: here level with that or a few
//   percent above. At n = 65536 rung 04 holds fp16 in one 1024-thread block and reads fp32 twice: here one read,
//   in 4 (fp16) or 8 (fp32) blocks of 256 threads. n = 16384: 0.92-0.97x (fp16 is one block: rung 04's block
//   path). n = 131072: 0.88-0.95x (8 blocks of 256 threads fp16, 512 fp32). n = 1024 and 4096: 0.88-0.97x, about
//   rung 04 (one block per row, rung 04's block path: a block of one warp where rung 04 runs a warp per row). n =
//   128 and 512 fall below rung 04's warp path (a block of one warp per row, with block barriers). Each
//   exchange costs a round trip within the GPC (~1 us of latency, predicted), hidden while the other blocks on the
//   SM load. EXCHANGE = 1 against 0: up to 5% faster (no memory barrier before the arrive, no L1 invalidation after
//   the wait, no waiting for the slowest block).
// Measured: lab.studies.cluster_rows_study (notebook 07 replays its record beside this prediction; so far from an
//   H100). Level with rung 04 up to n = 32768 and ahead past it, where rung 04 leaves its registers, in both types.
//   fp32 first fell below rung 04 at n <= 32768: each vector's mask waited on its load, so the loads went out one at
//   a time (results/h100/cluster_rows_study_ed5f671.json); with every load issued first it rose to rung 04's level.
//   EXCHANGE = 1 beat 0 at every n past one block.
// Tails and alignment: the row's scalar head (elements before its first 16-byte boundary) goes with block 0, its
//   scalar tail with the last block, the vectors in between in CLUSTER contiguous ranges (empty ones where a row
//   has fewer vectors than blocks). x and y that differ mod 16 (no vector serves both): scalar accesses, the row's
//   elements split into CLUSTER contiguous ranges, read twice. Definitions as rung 01's header: masks by lengths
//   (masked outputs exactly 0), rows whose valid elements are all -inf or none -> zeros, NaN / +inf -> NaN rows;
//   the same exponent and reciprocal as rung 04 (ex2.approx.ftz, rcp.approx; the max, then the sum).
// Requires: sm_90 (clusters, distributed shared memory); any rows >= 1 (rows * CLUSTER < 2^31), any n >= 1; x, y
//   element-aligned.
// Launch: grid (rows * CLUSTER), block (THREADS), clusters of CLUSTER blocks along x (__cluster_dims__): blocks
//   CLUSTER r .. CLUSTER r + CLUSTER - 1 hold row r, block b slice b % CLUSTER (its rank). No dynamic shared memory.
// Credit: splitting a long row's reduction over a cluster with distributed shared memory is what Dao-AILab/quack's
//   softmax does on Hopper; the code is this lab's own.
// Knobs: HALF (0: fp32 in and out; 1: fp16 in and out, fp32 statistics), VECS (8: vectors a thread holds), BLOCK
//   (256: the block size the launcher aims for), CLUSTER (1: set per n by the launcher), THREADS (256: set per n by
//   the launcher), EXCHANGE (1: st.async on an mbarrier; 0: a cluster barrier).
#include "lab_cluster_reduce.cuh"  // ClusterExchange: values exchanged among the cluster's blocks
#include "lab_reduce.cuh"          // block_max, block_sum

#ifndef HALF
#define HALF 0
#endif
#ifndef VECS
#define VECS 8
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
static_assert(HALF == 0 || HALF == 1, "HALF is 0 (fp32) or 1 (fp16)");
static_assert(VECS >= 1, "VECS is at least 1");
static_assert(CLUSTER == 1 || CLUSTER == 2 || CLUSTER == 4 || CLUSTER == 8, "CLUSTER is 1, 2, 4 or 8 (portable sizes)");
static_assert(THREADS % 32 == 0 && THREADS <= 1024, "THREADS is a multiple of 32, at most 1024");
static_assert(EXCHANGE == 0 || EXCHANGE == 1, "EXCHANGE is 0 (a cluster barrier) or 1 (st.async on an mbarrier)");

#include "lab_softmax.cuh"  // elem_t, vec_t, conversions, and the definitions every rung shares

// --- the row's statistics over the cluster -------------------------------------------------------------
// Two exchanges (rounds) of one value each: the blocks' maxima (round 0), then their sums of exponentials (round 1).
typedef ClusterExchange<CLUSTER, 2, 1, EXCHANGE> Exchange;

// The row's max: the block's max (NaN ignored, as fmaxf does), pushed into every block of the cluster, where the
// slots are folded in rank order; every block gets the same value.
__device__ __forceinline__ float row_max(float m, float* scratch, Exchange& ex) {
    const float block = block_max(m, scratch);
    if (CLUSTER == 1) return block;
    ex.started();  // every block of the cluster is ready before anything is pushed to it
    ex.put(0, 0, block);
    ex.arrive(0);
    ex.wait(0);
    float total = ex.slots[0][0][0];
#pragma unroll
    for (int r = 1; r < CLUSTER; ++r) total = fmaxf(total, ex.slots[0][0][r]);
    return total;
}

// The row's sum: the block's sum, pushed into every block and added there in rank order (the same bits everywhere).
__device__ __forceinline__ float row_sum(float s, float* scratch, Exchange& ex) {
    const float block = block_sum(s, scratch);
    return CLUSTER == 1 ? block : ex.total(1, block);
}

// A block's part of a row: vectors [lo, hi) of the row's vectors (which start at element `head`), and the scalar
// elements [a0, a1) and [b0, b1) (the row's head and tail where the vectors serve; else a range of the row).
struct Slice {
    int head, lo, hi, a0, a1, b0, b1;
};

// A slice held in registers (rung 04's block path): vectors lo + t + k * THREADS (k < VECS) below hi are thread t's,
// with elements a0 + t and b0 + t where they fall in their ranges (each shorter than a vector, so than THREADS).
__device__ __forceinline__ void softmax_slice_in_registers(const elem_t* __restrict__ xr, elem_t* __restrict__ yr,
                                                           int len, const Slice& s, float* scratch, Exchange& ex) {
    const int t = threadIdx.x;
    const vec_t* xv = reinterpret_cast<const vec_t*>(xr + s.head);
    vec_t* yv = reinterpret_cast<vec_t*>(yr + s.head);

    // Load: masked elements hold -inf from here on (a vector wholly past the length is not read), so the max and
    // the sum need no test: exp(-inf - shift) = 0. In fp32 every load is issued before any mask touches a value:
    // masking each vector as it arrived made each load wait for the one before it (~0.8x of the copy on an H100).
    // fp16 keeps the masks beside the loads (ptxas schedules them there without the wait; split, they spilled).
    vec_t v[VECS];
#pragma unroll
    for (int k = 0; k < VECS; ++k) {
        const int i = s.lo + t + k * THREADS, first = s.head + i * VEC_ELEMS;
        if (i < s.hi) {
            v[k] = first < len ? xv[i] : all_neg_inf();
            if (HALF && first + VEC_ELEMS > len) v[k] = masked(v[k], len - first);
        }
    }
#pragma unroll
    for (int k = 0; k < VECS; ++k) {
        const int i = s.lo + t + k * THREADS, first = s.head + i * VEC_ELEMS;
        if (!HALF && i < s.hi && first + VEC_ELEMS > len) v[k] = masked(v[k], len - first);
    }
    const int hj = s.a0 + t, tj = s.b0 + t;
    const bool has_head = hj < s.a1, has_tail = tj < s.b1;
    float hv = has_head && hj < len ? to_float(xr[hj]) : NEG_INF;
    float tv = has_tail && tj < len ? to_float(xr[tj]) : NEG_INF;

    // The max, over the cluster.
    float m = fmaxf(hv, tv);
#pragma unroll
    for (int k = 0; k < VECS; ++k) {
        if (s.lo + t + k * THREADS < s.hi) {
            float f[VEC_ELEMS];
            unpack(v[k], f);
#pragma unroll
            for (int e = 0; e < VEC_ELEMS; ++e) m = fmaxf(m, f[e]);
        }
    }
    const float shift = safe_shift(row_max(m, scratch, ex));

    // The sum of exponentials (fp32: kept in place of the inputs), over the cluster.
    hv = exp_shifted(hv, shift);  // -inf (absent or masked) -> 0
    tv = exp_shifted(tv, shift);
    float sum = hv + tv;
#pragma unroll
    for (int k = 0; k < VECS; ++k) {
        if (s.lo + t + k * THREADS < s.hi) {
            float f[VEC_ELEMS];
            unpack(v[k], f);
#pragma unroll
            for (int e = 0; e < VEC_ELEMS; ++e) {
                f[e] = exp_shifted(f[e], shift);
                sum += f[e];
            }
#if !HALF
            v[k] = pack(f);
#endif
        }
    }
    const float inv = inv_sum(row_sum(sum, scratch, ex));

    // The output: masked elements are exactly 0 (even in a NaN row, where inv is NaN).
    if (has_head) store(yr + hj, hj < len ? hv * inv : 0.0f);
    if (has_tail) store(yr + tj, tj < len ? tv * inv : 0.0f);
#pragma unroll
    for (int k = 0; k < VECS; ++k) {
        const int i = s.lo + t + k * THREADS;
        if (i < s.hi) {
            float f[VEC_ELEMS];
            unpack(v[k], f);
#pragma unroll
            for (int e = 0; e < VEC_ELEMS; ++e) {
                const bool valid = s.head + i * VEC_ELEMS + e < len;
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

// Adds element v to a thread's running (max m, sum d of exp(. - m)): rung 02's online update.
__device__ __forceinline__ void online_add(float& m, float& d, float v) {
    if (v > m) {
        d = d * exp_shifted(m, v) + 1.0f;
        m = v;
    } else {
        d += exp_shifted(v, safe_shift(m));
    }
}

// The elements [j0, j1) of one scalar range that are thread t's (stride THREADS): online statistics, or the output.
__device__ __forceinline__ void scalars_online(const elem_t* __restrict__ xr, int j0, int j1, int len, float& m,
                                               float& d) {
    for (int j = j0 + threadIdx.x; j < j1 && j < len; j += THREADS) online_add(m, d, to_float(xr[j]));
}
__device__ __forceinline__ void scalars_out(const elem_t* __restrict__ xr, elem_t* __restrict__ yr, int j0, int j1,
                                            int len, float shift, float inv) {
    for (int j = j0 + threadIdx.x; j < j1; j += THREADS)
        store(yr + j, j < len ? exp_shifted(to_float(xr[j]), shift) * inv : 0.0f);
}

// A slice longer than the registers hold, or a row whose x and y differ mod 16: rung 04's long path over the slice
// (online max and sum in one read, then a second read for the output), with the same two exchanges.
__device__ __forceinline__ void softmax_slice_streamed(const elem_t* __restrict__ xr, elem_t* __restrict__ yr, int len,
                                       const Slice& s, float* scratch, Exchange& ex) {
    const int t = threadIdx.x;
    const vec_t* xv = reinterpret_cast<const vec_t*>(xr + s.head);
    vec_t* yv = reinterpret_cast<vec_t*>(yr + s.head);

    // Read 1: online max and sum over the valid elements.
    float m = NEG_INF, d = 0.0f;
    scalars_online(xr, s.a0, s.a1, len, m, d);
    for (int i = s.lo + t; i < s.hi && s.head + i * VEC_ELEMS < len; i += THREADS) {
        float f[VEC_ELEMS];
        unpack(xv[i], f);
#pragma unroll
        for (int e = 0; e < VEC_ELEMS; ++e)
            if (s.head + i * VEC_ELEMS + e < len) online_add(m, d, f[e]);
    }
    scalars_online(xr, s.b0, s.b1, len, m, d);
    const float shift = safe_shift(row_max(m, scratch, ex));
    const float inv = inv_sum(row_sum(d * exp_shifted(m, shift), scratch, ex));

    // Read 2: the output (masked elements exactly 0, and not read).
    scalars_out(xr, yr, s.a0, s.a1, len, shift, inv);
    for (int i = s.lo + t; i < s.hi; i += THREADS) {
        float f[VEC_ELEMS];
        if (s.head + i * VEC_ELEMS < len) {
            unpack(xv[i], f);
        } else {
#pragma unroll
            for (int e = 0; e < VEC_ELEMS; ++e) f[e] = 0.0f;
        }
#pragma unroll
        for (int e = 0; e < VEC_ELEMS; ++e)
            f[e] = s.head + i * VEC_ELEMS + e < len ? exp_shifted(f[e], shift) * inv : 0.0f;
        yv[i] = pack(f);
    }
    scalars_out(xr, yr, s.b0, s.b1, len, shift, inv);
}

// Block b holds slice b % CLUSTER (its rank in the cluster) of row b / CLUSTER. Every block of a cluster takes the
// same path (it depends on n and the pointers only), so all run the same two exchanges.
extern "C" __global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(THREADS, 1024 / THREADS)
softmax_cluster(const elem_t* __restrict__ x, elem_t* __restrict__ y, const int* __restrict__ lengths, int rows,
                int n) {
    __shared__ float scratch[32];
    __shared__ Exchange ex;
    const int row = blockIdx.x / CLUSTER;
    if (row >= rows) return;  // a whole cluster or none: its blocks share the row
    if (CLUSTER > 1) ex.start();
    const int rank = CLUSTER > 1 ? static_cast<int>(cluster_rank()) : 0;
    const long long start = (long long)row * n;
    const elem_t* xr = x + start;
    elem_t* yr = y + start;
    const int len = valid_length(lengths, row, n);
    // x and y disagreeing mod 16: no vector serves both.
    const bool together = ((reinterpret_cast<unsigned long long>(x) ^ reinterpret_cast<unsigned long long>(y)) & 15) == 0;

    Slice s;
    if (together) {
        // The vectors in CLUSTER contiguous ranges; the head with rank 0, the tail with the last rank.
        s.head = head_length(xr, n);
        const int nvec = (n - s.head) / VEC_ELEMS, tail_start = s.head + nvec * VEC_ELEMS;
        const int per = (nvec + CLUSTER - 1) / CLUSTER;
        s.lo = min(nvec, rank * per);
        s.hi = min(nvec, s.lo + per);
        s.a0 = 0;
        s.a1 = rank == 0 ? s.head : 0;
        s.b0 = tail_start;
        s.b1 = rank == CLUSTER - 1 ? n : tail_start;
    } else {
        // Scalars only: the elements in CLUSTER contiguous ranges.
        const int per = n / CLUSTER + (n % CLUSTER != 0);
        s.head = s.lo = s.hi = 0;
        s.a0 = min(n, rank * per);
        s.a1 = min(n, s.a0 + per);
        s.b0 = s.b1 = 0;
    }
    // The launcher's rule (lab/families/softmax.py, cluster_shape): slices of ceil(n / VEC_ELEMS) vectors, at least
    // as many as any row's own slices hold.
    const int vectors = n / VEC_ELEMS + (n % VEC_ELEMS != 0);
    if (together && (vectors + CLUSTER - 1) / CLUSTER <= THREADS * VECS)
        softmax_slice_in_registers(xr, yr, len, s, scratch, ex);
    else
        softmax_slice_streamed(xr, yr, len, s, scratch, ex);
}
