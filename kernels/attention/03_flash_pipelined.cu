// attention / rung 03 — rung 02 with the K and V tiles copied by cp.async, each one's copy in flight while the
// other's product runs.
//
// What changed (vs rung 02):
//   1. The tiles are copied with cp.async (16 bytes a thread a copy, zero-filled past S_k through the source size):
//      a warp issues its copies and goes on; nothing passes through registers, and the copy_rows loads that stood
//      between every tile and its product are gone.
//   2. The loop is ordered so that each copy overlaps the other matrix's product, as FlashAttention-2's kernel does
//      (Tri Dao, arXiv:2307.08691, 2023, and its reference code's forward loop): with K(j) in shared memory, V(j)'s
//      copy is issued and S = Q K(j)^T and the softmax run; with V(j) in, K(j+1)'s copy is issued and O += P V(j)
//      runs. Two barriers a tile, as in rung 02, but neither waits out a global-memory latency by itself any more.
// Why: rung 02's block stops at every tile: loads issued, then a wait of the whole L2 or HBM latency, then two
//   barriers, and only the other resident blocks have work meanwhile.
// Prediction (H200, B=2 H=16 S=4096 D=128 fp16, not causal; written before the GPU run, for 128 query rows a block
//   on 8 warps, which also halves the L2 bytes per FLOP): the copies hidden, the mma.sync pipe and the softmax's
//   instructions bound it: 1.2-1.5x rung 02, about the flash backend's FlashAttention-2.
// Measured (results/h200/attention_study_1580f4f.json, three rounds, SDPA's backends in the same run; the later
//   results/h200/attention_study.json repeats the two block shapes): below the prediction.
//   At 128 rows a block (8 warps, one block an SM at ~220 registers a thread) the gain over rung 02 was about 1.1x
//   at D = 128 and a loss at D = 64; at 64 rows on 4 warps (two blocks an SM, as rung 02) about 1.16x at D = 128
//   and none at D = 64, still about three quarters of the flash backend. So the copies were not rung 02's main
//   cost: with the loads hidden, what is left is one warp's 16 rows against every K and V fragment it reads
//   (ldmatrix per mma.sync) and the softmax between the two products, which FlashAttention-2 halves with 32 rows a
//   warp, and Hopper's wgmma (rung 04) removes. BLOCK_M = 64 is the default; key tiles of 32 were slower still.
// Requires: as rung 02 (sm_80+, HEAD_DIM 64 or 128, 16-byte-aligned Q, K, V, O). Launch: grid
//   (ceil(S_q / BLOCK_M), H, B), block (THREADS = 32 * BLOCK_M / 16), static shared memory
//   max(BLOCK_M, 2 * BLOCK_N) * (HEAD_DIM + PAD) * 2 bytes (34,816 at D = 128: Q's tile first, then K's and V's).
// Knobs: BF16 (0: fp16, 1: bf16), CAUSAL (0: full attention, 1: causal, bottom-right aligned), HEAD_DIM (64: D,
//   64 or 128; the launcher sets these three per problem), BLOCK_M (64 query rows a block; 128 with THREADS 256),
//   BLOCK_N (64 keys a tile), THREADS (128), PAD (8 halves a shared-memory row).
#include "lab_cp_async.cuh"  // cp_async_16_at, smem_u32addr
#include "lab_mma.cuh"

#ifndef BF16
#define BF16 0
#endif
#ifndef CAUSAL
#define CAUSAL 0
#endif
#ifndef HEAD_DIM
#define HEAD_DIM 64
#endif
#ifndef BLOCK_M
#define BLOCK_M 64
#endif
#ifndef BLOCK_N
#define BLOCK_N 64
#endif
#ifndef THREADS
#define THREADS 128
#endif
#ifndef PAD
#define PAD 8
#endif

#define STRIDE (HEAD_DIM + PAD)        // halves per shared-memory row (Q, K and V tiles alike)
#define DK (HEAD_DIM / 16)             // k-steps of S = Q K^T
#define DN (HEAD_DIM / 8)              // 8-column tiles of O
#define NT (BLOCK_N / 8)               // 8-column tiles of S
#define NK (BLOCK_N / 16)              // k-steps of O += P V
#define SMEM_ROWS (BLOCK_M > 2 * BLOCK_N ? BLOCK_M : 2 * BLOCK_N)

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ < 800
#error "attention rungs need sm_80 or newer (mma.sync m16n8k16 for fp16 and bf16)"
#endif
static_assert(BF16 == 0 || BF16 == 1, "BF16 is 0 (fp16) or 1 (bf16)");
static_assert(CAUSAL == 0 || CAUSAL == 1, "CAUSAL is 0 or 1");
static_assert(HEAD_DIM == 64 || HEAD_DIM == 128, "HEAD_DIM is 64 or 128");
static_assert(THREADS == 32 * (BLOCK_M / 16) && BLOCK_M % 16 == 0, "one warp per 16 query rows");
static_assert(BLOCK_N % 16 == 0, "key tiles of whole 16-key k-steps");
static_assert(PAD % 8 == 0, "rows stay 16-byte aligned for ldmatrix and the 16-byte stores");
static_assert((BLOCK_M * HEAD_DIM / 8) % THREADS == 0 && (BLOCK_N * HEAD_DIM / 8) % THREADS == 0,
              "whole 16-byte chunks per thread");

typedef unsigned short half_bits;  // an fp16 or a bf16 value, as its 16 bits
#define NEG_INF (-__int_as_float(0x7f800000))

// 2^x on the SFU (ex2.approx.ftz: within 2 ulps, results below 2^-126 flushed to 0); 2^-inf = 0.
__device__ __forceinline__ float fast_exp2(float x) {
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
}

// Global -> shared by cp.async: rows r0 .. r0 + ROWS_ - 1 of a rows x HEAD_DIM row-major matrix X into the shared
// rows at s_addr (STRIDE halves each), zeros for rows >= rows (source size 0; the source address stays X, a valid
// one). Chunk c (8 halves, 16 bytes) is row c / (HEAD_DIM / 8), columns 8 * (c % (HEAD_DIM / 8)): consecutive
// threads copy consecutive 16-byte pieces of a row. The caller commits and waits.
template <int ROWS_>
__device__ __forceinline__ void copy_rows_async(unsigned s_addr, const half_bits* __restrict__ X, int r0, int rows) {
    constexpr int CHUNKS = ROWS_ * HEAD_DIM / 8 / THREADS, PER_ROW = HEAD_DIM / 8;
#pragma unroll
    for (int i = 0; i < CHUNKS; ++i) {
        const int c = i * THREADS + threadIdx.x, r = r0 + c / PER_ROW;
        const bool in = r < rows;
        cp_async_16_at(s_addr + 2 * ((c / PER_ROW) * STRIDE + 8 * (c % PER_ROW)),
                       in ? X + (long long)r * HEAD_DIM + 8 * (c % PER_ROW) : X, in ? 16 : 0);
    }
}

// The max over a quad (the 4 lanes t = 0..3 that share a row g): lanes 4g .. 4g + 3.
__device__ __forceinline__ float quad_max(float v) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
    return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// (THREADS, 1): at least one block per SM is all it promises; without the 1, ptxas held D = 64 to 128 registers
// and spilled.
extern "C" __global__ void __launch_bounds__(THREADS, 1)
attention_flash_pipelined(const half_bits* __restrict__ Q, const half_bits* __restrict__ K,
                    const half_bits* __restrict__ V, half_bits* __restrict__ O, int H, int H_kv, int S_q, int S_k,
                    float scale_log2) {
    // Q's tile first (rows 0 .. BLOCK_M - 1), then, once its fragments are in registers, K's tile (rows
    // 0 .. BLOCK_N - 1) and V's (rows BLOCK_N .. 2 BLOCK_N - 1) over it.
    __shared__ __align__(16) half_bits smem[SMEM_ROWS * STRIDE];

    const int b = blockIdx.z, h = blockIdx.y, kvh = h / (H / H_kv);
    const int m0 = blockIdx.x * BLOCK_M;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const half_bits* Qh = Q + (long long)(b * H + h) * S_q * HEAD_DIM;
    const half_bits* Kh = K + (long long)(b * H_kv + kvh) * S_k * HEAD_DIM;
    const half_bits* Vh = V + (long long)(b * H_kv + kvh) * S_k * HEAD_DIM;
    half_bits* Oh = O + (long long)(b * H + h) * S_q * HEAD_DIM;
    const unsigned base = smem_u32addr(smem), k_base = base, v_base = base + 2 * BLOCK_N * STRIDE;

    // This lane's two query rows (accumulator rows g and g + 8 of the warp's 16), as global row indices.
    const int row[2] = {m0 + 16 * warp + g, m0 + 16 * warp + g + 8};
    // The keys the block needs: 0 .. n_end - 1 (the last row's visible keys; causal: bottom-right aligned).
    const int n_end = CAUSAL ? min(S_k, m0 + BLOCK_M + S_k - S_q) : S_k;

    // --- Q: shared memory, then A fragments in registers -------------------------------------------------------
    unsigned qf[DK][4];
    copy_rows_async<BLOCK_M>(base, Qh, m0, S_q);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < DK; ++kk)  // lane l: row (l % 16), k 8 (l / 16) of the 16x16 tile (lab_mma.cuh)
        ldmatrix_x4(qf[kk], base + 2 * ((16 * warp + lane % 16) * STRIDE + 16 * kk + 8 * (lane / 16)));

    float o[DN][4] = {};                       // O accumulator: o[dn][2r + e] = row[r], column 8 dn + 2t + e
    // The running max in log2 units (fp32 (max s) * c; -inf until a visible key) and this lane's partial sum.
    float m[2] = {NEG_INF, NEG_INF}, l[2] = {0.0f, 0.0f};

    __syncthreads();  // every warp holds its Q fragments: K's tile may overwrite Q's
    if (n_end > 0) copy_rows_async<BLOCK_N>(k_base, Kh, 0, S_k);
    cp_async_commit();

    for (int n0 = 0; n0 < n_end; n0 += BLOCK_N) {
        cp_async_wait<0>();
        __syncthreads();  // K(n0) is in (every thread's copies), and every warp is done with the previous V tile
        copy_rows_async<BLOCK_N>(v_base, Vh, n0, S_k);  // in flight during S = Q K^T and the softmax
        cp_async_commit();

        // --- S = Q K^T: 16 x BLOCK_N per warp, fp32 ---------------------------------------------------------------
        float s[NT][4] = {};
#pragma unroll
        for (int kk = 0; kk < DK; ++kk) {
#pragma unroll
            for (int p = 0; p < NT / 2; ++p) {  // key tiles 2p, 2p + 1: one ldmatrix.x4 (gemm_tc rung 02's TN B)
                unsigned frag[4];
                const int n = 16 * p + lane % 8 + 8 * (lane / 16), k = 16 * kk + 8 * ((lane / 8) % 2);
                ldmatrix_x4(frag, k_base + 2 * (n * STRIDE + k));
                const unsigned b0[2] = {frag[0], frag[1]}, b1[2] = {frag[2], frag[3]};
                mma_m16n8k16<BF16>(s[2 * p], qf[kk], b0);
                mma_m16n8k16<BF16>(s[2 * p + 1], qf[kk], b1);
            }
        }

        // --- masks: the sequence's end and, causal, the diagonal (only tiles that cross one) ---------------------
        if (n0 + BLOCK_N > S_k || (CAUSAL && n0 + BLOCK_N - 1 > m0 + S_k - S_q)) {
#pragma unroll
            for (int nt = 0; nt < NT; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int j = n0 + 8 * nt + 2 * t + (e % 2), i = row[e / 2];
                    if (j >= S_k || (CAUSAL && j > i + S_k - S_q)) s[nt][e] = NEG_INF;
                }
        }

        // --- online softmax, per row r (accumulator elements 2r, 2r + 1) ------------------------------------------
        unsigned pa[NK][4];  // P rounded to the input type: the A fragments of O += P V
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            float tile_max = NEG_INF;
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) tile_max = fmaxf(tile_max, fmaxf(s[nt][2 * r], s[nt][2 * r + 1]));
            // Rounding is monotone (c > 0): the product of the max is the max of the products.
            const float m_new = fmaxf(m[r], quad_max(tile_max) * scale_log2);
            const float shift = m_new == NEG_INF ? 0.0f : m_new;  // -inf rows shift by 0
            // 1 when the max stays (-inf rows too); 2^-inf = 0 on a row's first visible tile.
            const float alpha = m_new == m[r] ? 1.0f : fast_exp2(m[r] - shift);
            m[r] = m_new;
            float sum = 0.0f;
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
                const half_bits p0 = float_to_half_bits<BF16>(fast_exp2(fmaf(s[nt][2 * r], scale_log2, -shift)));
                const half_bits p1 = float_to_half_bits<BF16>(fast_exp2(fmaf(s[nt][2 * r + 1], scale_log2, -shift)));
                sum += half_bits_to_float<BF16>(p0) + half_bits_to_float<BF16>(p1);
                // Key tile nt is k-step nt / 2, keys 2t, 2t+1 (nt even: registers 0, 1) or 2t+8, 2t+9 (nt odd:
                // registers 2, 3); row g is register 0 or 2, row g + 8 register 1 or 3 (lab_mma.cuh's A layout).
                pa[nt / 2][2 * (nt % 2) + r] = pack_half2(p0, p1);
            }
            l[r] = fmaf(l[r], alpha, sum);
#pragma unroll
            for (int dn = 0; dn < DN; ++dn) o[dn][2 * r] *= alpha, o[dn][2 * r + 1] *= alpha;
        }

        cp_async_wait<0>();
        __syncthreads();  // V(n0) is in, and every warp is done with K(n0)
        if (n0 + BLOCK_N < n_end) copy_rows_async<BLOCK_N>(k_base, Kh, n0 + BLOCK_N, S_k);  // during O += P V
        cp_async_commit();

        // --- O += P V: V's fragments by ldmatrix.trans (gemm_tc rung 02's NN B) -----------------------------------
#pragma unroll
        for (int kp = 0; kp < NK; ++kp) {
#pragma unroll
            for (int p = 0; p < DN / 2; ++p) {  // output column tiles 2p, 2p + 1
                unsigned frag[4];
                const int k = 16 * kp + lane % 8 + 8 * ((lane / 8) % 2), n = 16 * p + 8 * (lane / 16);
                ldmatrix_x4_trans(frag, v_base + 2 * (k * STRIDE + n));
                const unsigned b0[2] = {frag[0], frag[1]}, b1[2] = {frag[2], frag[3]};
                mma_m16n8k16<BF16>(o[2 * p], pa[kp], b0);
                mma_m16n8k16<BF16>(o[2 * p + 1], pa[kp], b1);
            }
        }
    }

    // --- O / l, rounded once; rows past S_q are not written ---------------------------------------------------------
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const float total = quad_sum(l[r]);
        const bool seen = total > 0.0f;  // false: no visible key, output +0 (as a constant: see 6. above)
        const float inv = seen ? 1.0f / total : 0.0f;
        if (row[r] >= S_q) continue;
        half_bits* out = Oh + (long long)row[r] * HEAD_DIM + 2 * t;
#pragma unroll
        for (int dn = 0; dn < DN; ++dn) {
            const float x0 = seen ? o[dn][2 * r] * inv : 0.0f, x1 = seen ? o[dn][2 * r + 1] * inv : 0.0f;
            *reinterpret_cast<unsigned*>(out + 8 * dn) =
                pack_half2(float_to_half_bits<BF16>(x0), float_to_half_bits<BF16>(x1));
        }
    }
}
