// Exercise 10's kernel: attention rung 02 (kernels/attention/02_flash_mma.cu) with its online-softmax step, the
// per-row bookkeeping of one key tile, moved into a device function that a plugin header supplies.
//
// What changed (vs rung 02): nothing but where the step lives. Rung 02 updates each row's running max m, running
//   sum l and output accumulator inline (its header's point 3); here the kernel computes the tile's row max (the
//   four lanes of a row combine theirs with two shuffles), gathers the lane's scores and output columns of the
//   row into small arrays, and calls lab_online_softmax_step (kernels/exercises/10_online_softmax_step.cuh, or a
//   student's kernel.cu in its place: the plugin header) once per row and tile; the probabilities it returns are
//   packed into the A fragments of O += P V as in rung 02. The grader builds this file with the student's step
//   and times it against rung 02 itself in the same run.
// Why: the step is the heart of FlashAttention-2 (Tri Dao, "FlashAttention-2: Faster Attention with Better
//   Parallelism and Work Partitioning", arXiv:2307.08691, 2023, section 3.1); isolating it lets an exercise
//   grade it inside the real kernel, on the real fragment layout, at the real speed.
// Prediction: with the step inlined (a __forceinline__ function over arrays the unrolled loops index with
//   constants, so they stay registers), the same instructions as rung 02: the same speed within noise, 1.0x.
// Requires: as rung 02 (sm_80+, HEAD_DIM 64 or 128, 16-byte-aligned Q, K, V and O); a plugin header that
//   defines lab_online_softmax_step (the lab's build gives it under the plugin header's name).
// Knobs: as rung 02: BF16, CAUSAL, HEAD_DIM, BLOCK_M, BLOCK_N, THREADS, PAD.
#include "lab_cp_async.cuh"  // smem_u32addr
#include "lab_mma.cuh"
#include "lab_epilogue_plugin.cuh"  // the plugin slot: lab_online_softmax_step

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

// Global -> shared: rows r0 .. r0 + ROWS_ - 1 of a rows x HEAD_DIM row-major matrix X into S (rows of STRIDE
// halves), zeros for rows >= rows. Chunk c (8 halves, 16 bytes) is row c / (HEAD_DIM / 8), columns
// 8 * (c % (HEAD_DIM / 8)): consecutive threads read consecutive 16-byte pieces of a row. Loads before stores.
template <int ROWS_>
__device__ __forceinline__ void copy_rows(half_bits* S, const half_bits* __restrict__ X, int r0, int rows) {
    constexpr int CHUNKS = ROWS_ * HEAD_DIM / 8 / THREADS, PER_ROW = HEAD_DIM / 8;
    uint4 v[CHUNKS];
#pragma unroll
    for (int i = 0; i < CHUNKS; ++i) {
        const int c = i * THREADS + threadIdx.x, r = r0 + c / PER_ROW;
        v[i] = r < rows ? *reinterpret_cast<const uint4*>(X + (long long)r * HEAD_DIM + 8 * (c % PER_ROW))
                        : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int i = 0; i < CHUNKS; ++i) {
        const int c = i * THREADS + threadIdx.x;
        *reinterpret_cast<uint4*>(&S[(c / PER_ROW) * STRIDE + 8 * (c % PER_ROW)]) = v[i];
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
attention_flash_mma(const half_bits* __restrict__ Q, const half_bits* __restrict__ K,
                    const half_bits* __restrict__ V, half_bits* __restrict__ O, int H, int H_kv, int S_q, int S_k,
                    float scale_log2) {
    // Q's tile first (rows 0 .. BLOCK_M - 1), then, once its fragments are in registers, K's tile (rows
    // 0 .. BLOCK_N - 1) and V's (rows BLOCK_N .. 2 BLOCK_N - 1) over it.
    __shared__ __align__(16) half_bits smem[SMEM_ROWS * STRIDE];
    half_bits* sK = smem;
    half_bits* sV = smem + BLOCK_N * STRIDE;

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
    copy_rows<BLOCK_M>(smem, Qh, m0, S_q);
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < DK; ++kk)  // lane l: row (l % 16), k 8 (l / 16) of the 16x16 tile (lab_mma.cuh)
        ldmatrix_x4(qf[kk], base + 2 * ((16 * warp + lane % 16) * STRIDE + 16 * kk + 8 * (lane / 16)));

    float o[DN][4] = {};                       // O accumulator: o[dn][2r + e] = row[r], column 8 dn + 2t + e
    // The running max in log2 units (fp32 (max s) * c; -inf until a visible key) and this lane's partial sum.
    float m[2] = {NEG_INF, NEG_INF}, l[2] = {0.0f, 0.0f};

    for (int n0 = 0; n0 < n_end; n0 += BLOCK_N) {
        __syncthreads();  // every warp is done with the previous tile (and, the first time, with Q's)
        copy_rows<BLOCK_N>(sK, Kh, n0, S_k);
        copy_rows<BLOCK_N>(sV, Vh, n0, S_k);
        __syncthreads();  // the tiles are complete

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

        // --- online softmax, per row r (accumulator elements 2r, 2r + 1): the plugin's step --------------------
        unsigned pa[NK][4];  // P rounded to the input type: the A fragments of O += P V
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            float tile_max = NEG_INF;
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) tile_max = fmaxf(tile_max, fmaxf(s[nt][2 * r], s[nt][2 * r + 1]));
            // The row's scores and output columns of this lane, as the step sees them: key 2 nt + e of the lane's
            // is s[nt][2r + e], output column 2 dn + e is o[dn][2r + e].
            float row_s[2 * NT], row_o[2 * DN];
            half_bits row_p[2 * NT];
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) row_s[2 * nt] = s[nt][2 * r], row_s[2 * nt + 1] = s[nt][2 * r + 1];
#pragma unroll
            for (int dn = 0; dn < DN; ++dn) row_o[2 * dn] = o[dn][2 * r], row_o[2 * dn + 1] = o[dn][2 * r + 1];
            lab_online_softmax_step<BF16>(m[r], l[r], row_o, row_s, quad_max(tile_max), scale_log2, row_p);
#pragma unroll
            for (int dn = 0; dn < DN; ++dn) o[dn][2 * r] = row_o[2 * dn], o[dn][2 * r + 1] = row_o[2 * dn + 1];
            // Key tile nt is k-step nt / 2, keys 2t, 2t+1 (nt even: registers 0, 1) or 2t+8, 2t+9 (nt odd:
            // registers 2, 3); row g is register 0 or 2, row g + 8 register 1 or 3 (lab_mma.cuh's A layout).
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) pa[nt / 2][2 * (nt % 2) + r] = pack_half2(row_p[2 * nt], row_p[2 * nt + 1]);
        }

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
