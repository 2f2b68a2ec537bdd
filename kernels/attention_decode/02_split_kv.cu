// attention_decode / rung 02 — split-KV (FlashDecoding): every key/value head's keys cut into chunks, one block a
// chunk, the chunks' partial results combined in fixed order by the block that finishes last; the cache may be
// paged (a block table), and every sequence may have its own length.
//
// What changed (vs rung 01):
//   1. The grid gains an x dimension: split s of a (batch, key/value head) reads keys s * split_keys ..
//      (s + 1) * split_keys - 1 only. With B * H_kv = 8 (one sequence, 8 key/value heads) rung 01 had 8 blocks on
//      132 SMs; with 43 splits of 192 keys there are 344, three an SM.
//   2. A block writes its unnormalized fp32 output rows with their max and sum (m, l) to a workspace, then counts
//      itself in on an arrival counter (atomicAdd after __threadfence). The block that arrives last reads every
//      split's rows back (through L2: __ldcg) in split order and writes O = sum_s 2^(m_s - M) o_s /
//      sum_s 2^(m_s - M) l_s, M = max_s m_s, then resets the counter for the next launch. The order is the splits',
//      not the arrivals', so the result is the same bits every run (FlashDecoding's combine is a second kernel:
//      Tri Dao, Daniel Haziza, Francisco Massa, Grigory Sizov, "Flash-Decoding for long-context inference", 2023;
//      one kernel saves a launch of some microseconds against a step of some tens).
//   3. PAGED = 1: the cache is (pages, page_size, H_kv, D), and key j of sequence b is row j % page_size of page
//      block_table[b * max_pages + j / page_size], as serving engines store it (vLLM's PagedAttention: Kwon et al.,
//      SOSP 2023). seq_lens (when not null) gives each sequence its own length, in both layouts.
// Why: a decode step reads all of K and V once and does 4 D FLOPs per (query row, key) with G * S_q rows a head:
//   it is bound by HBM, and HBM needs bytes in flight on every SM; rung 01 leaves most SMs idle until B * H_kv
//   reaches the SM count.
// Prediction (H200, B = 1, H = 32 on H_kv = 8, S_q = 1, L = 8192, D = 128 fp16, cold L2; written before the GPU
//   run): K and V are 33.5 MB, at the copy's ~4.2 TB/s 8 us; with a block's start (Q and the first tiles, about
//   two HBM latencies) and the combine's read-back (about 1 us), 10-12 us, ~3 TB/s: 1.6-2x SDPA's 1570 GB/s at that
//   shape, and 5x rung 01. At B = 32-64 (rung 01's grid already fills the GPU) the same as rung 01.
// Measured (results/h200/decode_attention_study_d9b549a.json, three rounds, SDPA with enable_gqa in the same run):
//   23 us at that shape, 1459 GB/s, 4.3x rung 01 but level with SDPA (0.97x; SDPA took 22 us): half the predicted
//   rate. From B = 1 to 8 rung 02 runs 0.94-1.00x SDPA, at B = 32-64 0.92-0.93x (4.0 TB/s against SDPA's 4.3), level
//   with rung 01 there. The first combine, a serial loop over the splits in 32 of the 128 threads, cost 2x
//   at 43 splits and is now parallel. A varlen batch (16 sequences of 1 .. 8192 keys) ran 4.3x SDPA on the cache
//   padded to the longest and masked. A paged cache (pages of 64 keys in random order) against the same values
//   contiguous: the study's "paged" rows (notebook 09 prints them; PAGED_STAGES in lab/families/attention_decode.py
//   says why it runs at 2 stages).
// Profiled (results/h100/decode_ncu.json, scripts/decode_ncu.py, an H100 at 96aa2fa; B = 1, L = 8192, 15 splits of
//   576 keys, one block an SM). Predicted before the run: the records' L2 eviction (writing a buffer twice the L2)
//   leaves dirty lines that this step's misses must write back, so after an eviction by reading (clean lines) it
//   would take 11-14 us, not 22-24. It failed: 22.2-22.8 us read-evicted against 27.5-27.6 write-evicted (SDPA
//   23.2-24.1 and 29.2-29.4: rung 02 1.02-1.09x SDPA by round, either way, on this GPU); the write-backs cost a fifth.
//   Under ncu (caches flushed clean) the kernel takes 21.2 us at half the DRAM peak, and its SMs are active for 62%
//   of its cycles: 4 warps an SM, and the time with no block on an SM (the launch's ramp, the 12 SMs without a
//   split, the slowest split and the combine after it) is a third of the kernel. SDPA here is cuDNN's kernel
//   (17.3 us) and its reduction kernel (4.4 us). At B = 8 (268 MB) DRAM reaches 81% of peak and the two are within 2%.
//   Each block's start, loop end and exit (TIMELINE = 1; scripts/decode_timeline.py, results/h100/decode_timeline.json,
//   an H100 at ec4fdb8, median of 5 rounds; the first run, at 730294a, is decode_timeline_730294a.json). Predicted: a
//   ramp of 1-2 us, loop ends spread over 3-5 us, a combine tail of 2-3 us. Measured at B = 1 (120 blocks, one an SM):
//   a ramp of 0.06 us; the 112 full splits' loop ends spread over 5.2 us (the first at 13.8 us; the 8 short last
//   splits, 128 keys of 576, end at 5.4 us and were what the first run's 13.6 us "spread" counted), then a 4.7 us
//   combine tail, in a 24.1 us span; at B = 8 (2 full splits of 4096 keys a head) the loop ends spread over 23.2 us of
//   a 101.4 us span. So at B = 1 the lost third is the main loop's rate (576 keys, 295 KB a block, in a median 17.5
//   us: about 1.9 TB/s over the GPU) and the combine tail, not the ramp; the spread of equal work is 5.2 us. Next: more
//   bytes in flight a block (TMA bulk copies of whole tiles, or two blocks an SM) and a combine spread over the block
//   row's last few blocks; at B = 8, more, smaller splits taken from a queue (a persistent grid, as attention's rung
//   05), so a fast SM takes more of the keys.
// Requires: sm_80+ (mma.sync, cp.async), HEAD_DIM 64 or 128, 16-byte-aligned Q, K, V, O, page_size >= 1.
//   Launch: grid (splits, H_kv * ceil(G * S_q / 16), B), block THREADS, dynamic shared memory
//   (16 + 2 * STAGES * BLOCK_N) * (HEAD_DIM + PAD) * 2 bytes; a workspace of splits * 16 * HEAD_DIM fp32 output rows
//   and 2 * splits * 16 fp32 (m, l) per block row (grid.y, grid.z), and grid.y * grid.z zeroed arrival counters.
// Knobs: BF16, CAUSAL, HEAD_DIM (set per problem), PAGED (0: contiguous (B, H_kv, S_k, D); 1: paged), BLOCK_N (64
//   keys a tile: 16 a warp), STAGES (4 tiles of K and V, three in flight; the launcher lowers it until a block fits
//   the GPU, 2 on sm_86/sm_89 at D = 128, and to 2 for a paged cache), THREADS (128), PAD (8 halves a row).
//   TIMELINE (0; 1: instrumentation, each block's start, loop end, exit and SM, for scripts/decode_timeline.py).
#include "lab_cp_async.cuh"  // cp_async_16_at, smem_u32addr
#include "lab_mma.cuh"

#ifndef BF16
#define BF16 0
#endif
#ifndef CAUSAL
#define CAUSAL 0
#endif
#ifndef HEAD_DIM
#define HEAD_DIM 128
#endif
#ifndef PAGED
#define PAGED 0
#endif
#ifndef BLOCK_N
#define BLOCK_N 64
#endif
#ifndef STAGES
#define STAGES 4
#endif
#ifndef THREADS
#define THREADS 128
#endif
#ifndef PAD
#define PAD 8
#endif
#ifndef TIMELINE
#define TIMELINE 0
#endif

#define ROWS 16                        // query rows a block: the G * S_q rows of a key/value head, 16 at a time
#define WARPS (THREADS / 32)
#define STRIDE (HEAD_DIM + PAD)        // halves per shared-memory row
#define DK (HEAD_DIM / 16)             // k-steps of S = Q K^T
#define DN (HEAD_DIM / 8)              // 8-column tiles of O
#define TILE_HALVES (BLOCK_N * STRIDE)
#define MAX_SPLITS 256                 // the combine keeps [16 rows][splits] weights over the stages

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ < 800
#error "decode attention needs sm_80 or newer (mma.sync m16n8k16 for fp16 and bf16, cp.async)"
#endif
static_assert(BF16 == 0 || BF16 == 1, "BF16 is 0 (fp16) or 1 (bf16)");
static_assert(CAUSAL == 0 || CAUSAL == 1, "CAUSAL is 0 or 1");
static_assert(PAGED == 0 || PAGED == 1, "PAGED is 0 or 1");
static_assert(HEAD_DIM == 64 || HEAD_DIM == 128, "HEAD_DIM is 64 or 128");
static_assert(BLOCK_N == 16 * WARPS, "each warp takes 16 keys of a tile");
static_assert(STAGES >= 2, "a tile in use and one in flight at least");
static_assert(PAD % 8 == 0, "rows stay 16-byte aligned for ldmatrix and cp.async");
static_assert((BLOCK_N * HEAD_DIM / 8) % THREADS == 0, "whole 16-byte chunks per thread");
static_assert(MAX_SPLITS * ROWS * 4 <= (ROWS + 2 * STAGES * BLOCK_N) * STRIDE * 2, "the combine's weights fit");
static_assert(THREADS % ROWS == 0 && HEAD_DIM % (4 * (THREADS / ROWS)) == 0, "the combine's float4 columns");
static_assert(TIMELINE == 0 || TIMELINE == 1, "TIMELINE is 0 or 1");

#if TIMELINE
// Instrumentation: thread 0 of block i (linear id, x fastest) writes (start, loop end, exit, SM) to row i, blocks
// past TIMELINE_BLOCKS write nothing. %globaltimer is in ns and shared by the SMs, so blocks compare directly.
#define TIMELINE_BLOCKS (1 << 16)
__device__ unsigned long long lab_decode_timeline[TIMELINE_BLOCKS][4];

// "memory": each reading stays between the loads and stores written around it.
__device__ __forceinline__ unsigned long long timeline_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)::"memory");
    return t;
}
__device__ __forceinline__ void timeline_record(unsigned long long start, unsigned long long loop_end) {
    const unsigned long long end = timeline_ns();
    const unsigned long long id = blockIdx.x + (unsigned long long)gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    if (threadIdx.x != 0 || id >= TIMELINE_BLOCKS) return;
    unsigned sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    unsigned long long* row = lab_decode_timeline[id];
    row[0] = start, row[1] = loop_end, row[2] = end, row[3] = sm;
}
#endif

typedef unsigned short half_bits;  // an fp16 or a bf16 value, as its 16 bits
#define NEG_INF (-__int_as_float(0x7f800000))

// 2^x on the SFU (ex2.approx.ftz: within 2 ulps, results below 2^-126 flushed to 0); 2^-inf = 0.
__device__ __forceinline__ float fast_exp2(float x) {
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
}
__device__ __forceinline__ float quad_max(float v) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
    return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// Where key j's row of one key/value head starts (K and V alike): contiguous (B, H_kv, S_k, D), or paged
// (pages, page_size, H_kv, D) through the block table.
struct KeyRows {
    long long head;  // contiguous: (b * H_kv + kvh) * S_k * D; paged: kvh * D
    const int* table;  // paged: this sequence's page numbers
    int page_size, row_stride;  // paged: keys a page, and H_kv * D halves between a page's rows
    __device__ __forceinline__ long long offset(int j) const {
#if PAGED
        const int page = __ldg(table + j / page_size);
        return ((long long)page * page_size + j % page_size) * row_stride + head;
#else
        return head + (long long)j * HEAD_DIM;
#endif
    }
};

// Tile n0's keys (BLOCK_N rows of K and of V) into shared memory by cp.async, zeros for keys >= n_end (source size
// 0 at a valid address). Consecutive threads copy consecutive 16-byte pieces of a row.
__device__ __forceinline__ void copy_tile(unsigned k_addr, unsigned v_addr, const half_bits* __restrict__ K,
                                          const half_bits* __restrict__ V, const KeyRows& rows, int n0, int n_end) {
    constexpr int CHUNKS = BLOCK_N * HEAD_DIM / 8 / THREADS, PER_ROW = HEAD_DIM / 8;
#pragma unroll
    for (int i = 0; i < CHUNKS; ++i) {
        const int c = i * THREADS + threadIdx.x, r = c / PER_ROW, col = 8 * (c % PER_ROW), j = n0 + r;
        const bool in = j < n_end;
        const long long at = in ? rows.offset(j) + col : 0;
        const unsigned dst = 2 * (r * STRIDE + col);
        cp_async_16_at(k_addr + dst, K + at, in ? 16 : 0);
        cp_async_16_at(v_addr + dst, V + at, in ? 16 : 0);
    }
}

// Four outputs of a row: acc / total rounded once to the input type, +0 for a row that saw no key (total 0).
__device__ __forceinline__ void store_o4(half_bits* out, float4 acc, float total) {
    const bool seen = total > 0.0f;
    const float inv = seen ? 1.0f / total : 0.0f;
    const float x0 = seen ? acc.x * inv : 0.0f, x1 = seen ? acc.y * inv : 0.0f;
    const float x2 = seen ? acc.z * inv : 0.0f, x3 = seen ? acc.w * inv : 0.0f;
    *reinterpret_cast<uint2*>(out) = make_uint2(pack_half2(float_to_half_bits<BF16>(x0), float_to_half_bits<BF16>(x1)),
                                                pack_half2(float_to_half_bits<BF16>(x2), float_to_half_bits<BF16>(x3)));
}

// (THREADS, 1): without the 1, ptxas held one variant (sm_90, D = 64, paged, causal) to 96 registers and spilled.
extern "C" __global__ void __launch_bounds__(THREADS, 1)
attention_decode_split_kv(const half_bits* __restrict__ Q, const half_bits* __restrict__ K,
                          const half_bits* __restrict__ V, half_bits* __restrict__ O, float* __restrict__ part_o,
                          float* __restrict__ part_ml, unsigned* __restrict__ arrivals,
                          const int* __restrict__ block_table, const int* __restrict__ seq_lens, int H, int H_kv,
                          int S_q, int S_k, int page_size, int max_pages, int split_keys, float scale_log2) {
    // Q's 16 rows, then STAGES stages of a K tile and a V tile; after the loop, the warps' partial rows over them.
    extern __shared__ __align__(16) half_bits smem[];
    __shared__ float warp_m[WARPS][ROWS], warp_l[WARPS][ROWS];
    __shared__ float row_total[ROWS];
    __shared__ int is_last;
#if TIMELINE
    const unsigned long long timeline_start = timeline_ns();
#endif

    const int group = H / H_kv, packed = group * S_q;  // query rows of one key/value head
    const int row_groups = (packed + ROWS - 1) / ROWS;
    const int b = blockIdx.z, kvh = blockIdx.y / row_groups, r0 = (blockIdx.y % row_groups) * ROWS;
    const int split = blockIdx.x, splits = gridDim.x;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int L = seq_lens ? seq_lens[b] : S_k;  // this sequence's keys
    const int k_begin = split * split_keys, n_end = min(L, k_begin + split_keys);

    KeyRows rows;
#if PAGED
    rows.head = (long long)kvh * HEAD_DIM;
    rows.table = block_table + (long long)b * max_pages;
    rows.page_size = page_size;
    rows.row_stride = H_kv * HEAD_DIM;
#else
    rows.head = (long long)(b * H_kv + kvh) * S_k * HEAD_DIM;
#endif

    const unsigned q_base = smem_u32addr(smem), stage_base = q_base + 2 * ROWS * STRIDE;
    auto k_stage = [&](int i) { return stage_base + 2 * (2 * (i % STAGES)) * TILE_HALVES; };
    auto v_stage = [&](int i) { return stage_base + 2 * (2 * (i % STAGES) + 1) * TILE_HALVES; };

    // Packed row p = g' * S_q + s is query token s of query head kvh * group + g'; its Q and O row start.
    auto q_row = [&](int p) { return ((long long)(b * H + kvh * group + p / S_q) * S_q + p % S_q) * HEAD_DIM; };

    // --- Q (16 packed rows, zeros past the group's) and the first STAGES - 1 tiles, all in flight at once ---------
    for (int c = threadIdx.x; c < ROWS * HEAD_DIM / 8; c += THREADS) {
        const int r = c / (HEAD_DIM / 8), col = 8 * (c % (HEAD_DIM / 8)), p = r0 + r;
        cp_async_16_at(q_base + 2 * (r * STRIDE + col), p < packed ? Q + q_row(p) + col : Q, p < packed ? 16 : 0);
    }
    cp_async_commit();
    const int tiles = n_end > k_begin ? (n_end - k_begin + BLOCK_N - 1) / BLOCK_N : 0;
#pragma unroll
    for (int i = 0; i < STAGES - 1; ++i) {
        if (i < tiles) copy_tile(k_stage(i), v_stage(i), K, V, rows, k_begin + i * BLOCK_N, n_end);
        cp_async_commit();
    }
    cp_async_wait<STAGES - 1>();  // Q's group (the oldest) is in
    __syncthreads();
    unsigned qf[DK][4];
#pragma unroll
    for (int kk = 0; kk < DK; ++kk)
        ldmatrix_x4(qf[kk], q_base + 2 * ((lane % 16) * STRIDE + 16 * kk + 8 * (lane / 16)));

    // This lane's two packed rows (g and g + 8): the keys each sees, L - S_q + s + 1 (causal), else L.
    int visible[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) visible[r] = CAUSAL ? L - S_q + (r0 + g + 8 * r) % S_q + 1 : L;

    float o[DN][4] = {};
    float m[2] = {NEG_INF, NEG_INF}, l[2] = {0.0f, 0.0f};
    const int kw = 16 * warp;  // this warp's 16 keys of every tile

    for (int i = 0; i < tiles; ++i) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();  // tile i is in, and every warp is done with tile i - 1, whose stage the next copy reuses
        if (i + STAGES - 1 < tiles)
            copy_tile(k_stage(i + STAGES - 1), v_stage(i + STAGES - 1), K, V, rows,
                      k_begin + (i + STAGES - 1) * BLOCK_N, n_end);
        cp_async_commit();
        const int n0 = k_begin + i * BLOCK_N;
        const unsigned k_base = k_stage(i), v_base = v_stage(i);

        // --- S = Q K^T for this warp's 16 keys: two 8-key tiles --------------------------------------------------
        float s[2][4] = {};
#pragma unroll
        for (int kk = 0; kk < DK; ++kk) {
            unsigned frag[4];
            const int n = kw + lane % 8 + 8 * (lane / 16), k = 16 * kk + 8 * ((lane / 8) % 2);
            ldmatrix_x4(frag, k_base + 2 * (n * STRIDE + k));
            const unsigned b0[2] = {frag[0], frag[1]}, b1[2] = {frag[2], frag[3]};
            mma_m16n8k16<BF16>(s[0], qf[kk], b0);
            mma_m16n8k16<BF16>(s[1], qf[kk], b1);
        }
        // --- masks: the split's end and, causal, each row's last visible key (only on tiles that cross them) ------
        if (n0 + BLOCK_N > n_end || (CAUSAL && n0 + BLOCK_N > L - S_q + 1)) {
#pragma unroll
            for (int nt = 0; nt < 2; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int j = n0 + kw + 8 * nt + 2 * t + (e % 2);
                    if (j >= n_end || j >= visible[e / 2]) s[nt][e] = NEG_INF;
                }
        }
        // --- online softmax over this warp's keys, per row r (accumulator elements 2r, 2r + 1) -------------------
        unsigned pa[4];  // P rounded to the input type: the A fragment of O += P V (one 16-key k-step)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const float tile_max = fmaxf(fmaxf(s[0][2 * r], s[0][2 * r + 1]), fmaxf(s[1][2 * r], s[1][2 * r + 1]));
            const float m_new = fmaxf(m[r], quad_max(tile_max) * scale_log2);
            const float shift = m_new == NEG_INF ? 0.0f : m_new;  // -inf rows shift by 0
            const float alpha = m_new == m[r] ? 1.0f : fast_exp2(m[r] - shift);
            m[r] = m_new;
            float sum = 0.0f;
#pragma unroll
            for (int nt = 0; nt < 2; ++nt) {
                const half_bits p0 = float_to_half_bits<BF16>(fast_exp2(fmaf(s[nt][2 * r], scale_log2, -shift)));
                const half_bits p1 = float_to_half_bits<BF16>(fast_exp2(fmaf(s[nt][2 * r + 1], scale_log2, -shift)));
                sum += half_bits_to_float<BF16>(p0) + half_bits_to_float<BF16>(p1);
                pa[2 * nt + r] = pack_half2(p0, p1);  // A layout: keys 2t.. in registers 0/1, 2t+8.. in 2/3
            }
            l[r] = fmaf(l[r], alpha, sum);
#pragma unroll
            for (int dn = 0; dn < DN; ++dn) o[dn][2 * r] *= alpha, o[dn][2 * r + 1] *= alpha;
        }
        // --- O += P V over the same 16 keys: V's fragments by ldmatrix.trans --------------------------------------
#pragma unroll
        for (int p = 0; p < DN / 2; ++p) {
            unsigned frag[4];
            const int k = kw + lane % 8 + 8 * ((lane / 8) % 2), n = 16 * p + 8 * (lane / 16);
            ldmatrix_x4_trans(frag, v_base + 2 * (k * STRIDE + n));
            const unsigned b0[2] = {frag[0], frag[1]}, b1[2] = {frag[2], frag[3]};
            mma_m16n8k16<BF16>(o[2 * p], pa, b0);
            mma_m16n8k16<BF16>(o[2 * p + 1], pa, b1);
        }
    }

    // --- the block's rows: the warps' partials combined in warp order, over the (now idle) stages ---------------
    cp_async_wait<0>();
    __syncthreads();
#if TIMELINE
    const unsigned long long timeline_loop = timeline_ns();  // every warp is past its last tile
#endif
    float* warp_o = reinterpret_cast<float*>(smem + ROWS * STRIDE);  // [WARPS][ROWS][HEAD_DIM]
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int row = g + 8 * r;
        const float total = quad_sum(l[r]);
        if (t == 0) warp_m[warp][row] = m[r], warp_l[warp][row] = total;
#pragma unroll
        for (int dn = 0; dn < DN; ++dn)
            *reinterpret_cast<float2*>(warp_o + (warp * ROWS + row) * HEAD_DIM + 8 * dn + 2 * t) =
                make_float2(o[dn][2 * r], o[dn][2 * r + 1]);
    }
    __syncthreads();

    // Thread -> (row, columns): THREADS / ROWS threads a row, float4 columns col0 + 4 * (k * per_row) for k < C4.
    constexpr int PER_ROW = THREADS / ROWS, C4 = HEAD_DIM / 4 / PER_ROW;
    const int row = threadIdx.x / PER_ROW, col0 = 4 * (threadIdx.x % PER_ROW), p = r0 + row;
    float M = NEG_INF;
#pragma unroll
    for (int w = 0; w < WARPS; ++w) M = fmaxf(M, warp_m[w][row]);
    const float shift = M == NEG_INF ? 0.0f : M;
    float acc[C4][4] = {}, total = 0.0f;
#pragma unroll
    for (int w = 0; w < WARPS; ++w) {
        const float f = fast_exp2(warp_m[w][row] - shift);  // 0 for a warp that saw no key of this row
        total = fmaf(f, warp_l[w][row], total);
#pragma unroll
        for (int c = 0; c < C4; ++c) {
            const float4 x =
                *reinterpret_cast<const float4*>(warp_o + (w * ROWS + row) * HEAD_DIM + col0 + 4 * PER_ROW * c);
            acc[c][0] = fmaf(f, x.x, acc[c][0]), acc[c][1] = fmaf(f, x.y, acc[c][1]);
            acc[c][2] = fmaf(f, x.z, acc[c][2]), acc[c][3] = fmaf(f, x.w, acc[c][3]);
        }
    }

    const long long slot = (long long)blockIdx.z * gridDim.y + blockIdx.y;  // this block row's workspace
    if (splits == 1) {
        if (p < packed) {
#pragma unroll
            for (int c = 0; c < C4; ++c)
                store_o4(O + q_row(p) + col0 + 4 * PER_ROW * c, make_float4(acc[c][0], acc[c][1], acc[c][2], acc[c][3]),
                         total);
        }
#if TIMELINE
        timeline_record(timeline_start, timeline_loop);
#endif
        return;
    }
    // --- publish this split's rows, then count in; the last to arrive combines -------------------------------------
    if (p < packed) {
        float* dst = part_o + ((slot * splits + split) * ROWS + row) * HEAD_DIM + col0;
#pragma unroll
        for (int c = 0; c < C4; ++c)
            __stcg(reinterpret_cast<float4*>(dst + 4 * PER_ROW * c),
                   make_float4(acc[c][0], acc[c][1], acc[c][2], acc[c][3]));
        if (col0 == 0)
            __stcg(reinterpret_cast<float2*>(part_ml) + (slot * splits + split) * ROWS + row, make_float2(M, total));
    }
    __threadfence();  // this block's rows are visible device-wide before its arrival is
    __syncthreads();
    if (threadIdx.x == 0) is_last = atomicAdd(arrivals + slot, 1u) == (unsigned)(splits - 1);
    __syncthreads();
    if (!is_last) {
#if TIMELINE
        timeline_record(timeline_start, timeline_loop);
#endif
        return;
    }
    __threadfence();  // the other splits' rows, read after their arrivals
    if (threadIdx.x == 0) arrivals[slot] = 0u;  // ready for the next launch

    // Each valid row's weights 2^(m_s - M) over the splits (one warp a row, lanes striding the splits) into shared
    // memory, and its total; then every (row, 4 columns) of O sums its splits in split order, 8 loads in flight. The
    // orders are fixed (lanes, shuffle tree, splits), whichever block arrived last: the same bits every run.
    const int valid = min(ROWS, packed - r0);
    float* weight = reinterpret_cast<float*>(smem);  // [valid][splits] (MAX_SPLITS * ROWS fp32 fit any stages)
    const float2* ml = reinterpret_cast<const float2*>(part_ml) + slot * splits * ROWS;
    for (int r = warp; r < valid; r += WARPS) {
        float mx = NEG_INF;
        for (int s = lane; s < splits; s += 32) mx = fmaxf(mx, __ldcg(ml + s * ROWS + r).x);
#pragma unroll
        for (int d = 16; d > 0; d /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, d));
        const float shift_all = mx == NEG_INF ? 0.0f : mx;
        float sum = 0.0f;
        for (int s = lane; s < splits; s += 32) {
            const float2 v = __ldcg(ml + s * ROWS + r);
            const float f = fast_exp2(v.x - shift_all);
            weight[r * splits + s] = f;
            sum = fmaf(f, v.y, sum);
        }
#pragma unroll
        for (int d = 16; d > 0; d /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, d);
        if (lane == 0) row_total[r] = sum;
    }
    __syncthreads();
    for (int item = threadIdx.x; item < valid * (HEAD_DIM / 4); item += THREADS) {
        const int r = item / (HEAD_DIM / 4), c = 4 * (item % (HEAD_DIM / 4));
        const float* src = part_o + (slot * splits * ROWS + r) * HEAD_DIM + c;
        float4 a = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll 8
        for (int s = 0; s < splits; ++s) {
            const float4 x = __ldcg(reinterpret_cast<const float4*>(src + (long long)s * ROWS * HEAD_DIM));
            const float f = weight[r * splits + s];
            a.x = fmaf(f, x.x, a.x), a.y = fmaf(f, x.y, a.y), a.z = fmaf(f, x.z, a.z), a.w = fmaf(f, x.w, a.w);
        }
        store_o4(O + q_row(r0 + r) + c, a, row_total[r]);
    }
#if TIMELINE
    __syncthreads();  // the exit of the block's last thread to finish
    timeline_record(timeline_start, timeline_loop);
#endif
}
