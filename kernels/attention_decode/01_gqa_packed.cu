// attention_decode / rung 01 — one block per key/value head: the G * S_q query rows of a head's group (G = H / H_kv
// query heads, S_q new tokens each) packed as the 16 rows of one mma.sync tile, the head's keys split among the
// block's warps, their partial results combined in shared memory.
//
// What changed (vs the prefill ladder, attention rung 03, on a decode step):
//   1. Rows: attention's rungs give every query head a block of 64 rows, and with S_q = 1 one row of each is used.
//      Here the query heads that read one key/value head (grouped-query attention) are rows of one tile: K and V are
//      read once for the whole group, not once a query head (4x fewer bytes at 32 query heads on 8).
//   2. Keys: the 4 warps take 16 keys each of every 64-key tile (not 16 rows each of all keys), each keeps its own
//      max, sum and output rows, and the block combines the four at the end (the online softmax's combine rule,
//      in warp order).
//   3. The copies: K and V tiles by cp.async, STAGES - 1 ahead of the one in use, Q's copy beside the first.
// Why: a decode step reads all of K and V once and does 4 D FLOPs per (query row, key), with G * S_q rows a head:
//   it is bound by HBM bytes. The prefill rungs read K and V once per query head and keep 63 of 64 rows idle.
// Prediction (H200, D = 128 fp16, H = 32 on H_kv = 8, S_q = 1, cold L2; written before the GPU run): the grid is
//   B * H_kv blocks, so the rate follows how many SMs have one: at B = 1 (8 blocks) about 8 / 132 of the copy's
//   ~4.2 TB/s plus what one SM streams alone, 0.3-0.5 TB/s, well below SDPA; from B = 32 (256 blocks) near the copy,
//   ~3.5 TB/s. Rung 02 splits the keys of a head across blocks for the small batches.
// Measured (results/h200/decode_attention_study_d9b549a.json, three rounds): 0.21-0.23x SDPA at B = 1 (L = 8192,
//   8 blocks), 0.76-0.78x at B = 8; 3.7-4.0 TB/s from B = 32 (256 blocks), 0.92-0.93x SDPA, level with rung 02.
// Requires: sm_80+ (mma.sync, cp.async), HEAD_DIM 64 or 128, 16-byte-aligned Q, K, V, O. Launch: grid
//   (1, H_kv * ceil(G * S_q / 16), B), block THREADS, dynamic shared memory
//   (16 + 2 * STAGES * BLOCK_N) * (HEAD_DIM + PAD) * 2 bytes.
// Knobs: BF16, CAUSAL, HEAD_DIM (set per problem), BLOCK_N (64 keys a tile: 16 a warp), STAGES (4 tiles of K and
//   V, three in flight; the launcher lowers it until a block fits the GPU: 2 on sm_86/sm_89 at D = 128), THREADS
//   (128), PAD (8 halves a row).
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

#define ROWS 16                        // query rows a block: the G * S_q rows of a key/value head, 16 at a time
#define WARPS (THREADS / 32)
#define STRIDE (HEAD_DIM + PAD)        // halves per shared-memory row
#define DK (HEAD_DIM / 16)             // k-steps of S = Q K^T
#define DN (HEAD_DIM / 8)              // 8-column tiles of O
#define TILE_HALVES (BLOCK_N * STRIDE)

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ < 800
#error "decode attention needs sm_80 or newer (mma.sync m16n8k16 for fp16 and bf16, cp.async)"
#endif
static_assert(BF16 == 0 || BF16 == 1, "BF16 is 0 (fp16) or 1 (bf16)");
static_assert(CAUSAL == 0 || CAUSAL == 1, "CAUSAL is 0 or 1");
static_assert(HEAD_DIM == 64 || HEAD_DIM == 128, "HEAD_DIM is 64 or 128");
static_assert(BLOCK_N == 16 * WARPS, "each warp takes 16 keys of a tile");
static_assert(STAGES >= 2, "a tile in use and one in flight at least");
static_assert(PAD % 8 == 0, "rows stay 16-byte aligned for ldmatrix and cp.async");
static_assert((BLOCK_N * HEAD_DIM / 8) % THREADS == 0, "whole 16-byte chunks per thread");
static_assert(THREADS % ROWS == 0 && HEAD_DIM % (4 * (THREADS / ROWS)) == 0, "the combine's float4 columns");

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

// Tile n0's keys (BLOCK_N rows of K and of V) into shared memory by cp.async, zeros for keys >= n_end (source size
// 0 at a valid address). Consecutive threads copy consecutive 16-byte pieces of a row.
__device__ __forceinline__ void copy_tile(unsigned k_addr, unsigned v_addr, const half_bits* __restrict__ K,
                                          const half_bits* __restrict__ V, long long head, int n0, int n_end) {
    constexpr int CHUNKS = BLOCK_N * HEAD_DIM / 8 / THREADS, PER_ROW = HEAD_DIM / 8;
#pragma unroll
    for (int i = 0; i < CHUNKS; ++i) {
        const int c = i * THREADS + threadIdx.x, r = c / PER_ROW, col = 8 * (c % PER_ROW), j = n0 + r;
        const bool in = j < n_end;
        const long long at = in ? head + (long long)j * HEAD_DIM + col : 0;
        const unsigned dst = 2 * (r * STRIDE + col);
        cp_async_16_at(k_addr + dst, K + at, in ? 16 : 0);
        cp_async_16_at(v_addr + dst, V + at, in ? 16 : 0);
    }
}

extern "C" __global__ void __launch_bounds__(THREADS)
attention_decode_gqa(const half_bits* __restrict__ Q, const half_bits* __restrict__ K,
                     const half_bits* __restrict__ V, half_bits* __restrict__ O, int H, int H_kv, int S_q, int S_k,
                     float scale_log2) {
    // Q's 16 rows, then STAGES stages of a K tile and a V tile; after the loop, the warps' partial rows over them.
    extern __shared__ __align__(16) half_bits smem[];
    __shared__ float warp_m[WARPS][ROWS], warp_l[WARPS][ROWS];

    const int group = H / H_kv, packed = group * S_q;  // query rows of one key/value head
    const int row_groups = (packed + ROWS - 1) / ROWS;
    const int b = blockIdx.z, kvh = blockIdx.y / row_groups, r0 = (blockIdx.y % row_groups) * ROWS;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int L = S_k, k_begin = 0, n_end = S_k;  // every key of the head
    const long long head = (long long)(b * H_kv + kvh) * S_k * HEAD_DIM;

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
        if (i < tiles) copy_tile(k_stage(i), v_stage(i), K, V, head, k_begin + i * BLOCK_N, n_end);
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
            copy_tile(k_stage(i + STAGES - 1), v_stage(i + STAGES - 1), K, V, head,
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
        // --- masks: the keys' end and, causal, each row's last visible key (only on tiles that cross them) ------
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

    if (p >= packed) return;

    // --- O = acc / total, rounded once; a row that saw no key is +0 -----------------------------------------------
    const bool seen = total > 0.0f;
    const float inv = seen ? 1.0f / total : 0.0f;
    half_bits* out = O + q_row(p) + col0;
#pragma unroll
    for (int c = 0; c < C4; ++c) {
        const float x0 = seen ? acc[c][0] * inv : 0.0f, x1 = seen ? acc[c][1] * inv : 0.0f;
        const float x2 = seen ? acc[c][2] * inv : 0.0f, x3 = seen ? acc[c][3] * inv : 0.0f;
        *reinterpret_cast<uint2*>(out + 4 * PER_ROW * c) =
            make_uint2(pack_half2(float_to_half_bits<BF16>(x0), float_to_half_bits<BF16>(x1)),
                       pack_half2(float_to_half_bits<BF16>(x2), float_to_half_bits<BF16>(x3)));
    }
}
