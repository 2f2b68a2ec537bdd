// attention / rung 01 — naive: one query row at a time, its scores in shared memory, a max/sum pass, then P V.
//
// What: O[b][h][i] = sum_j softmax_j(scale * Q[b][h][i] . K[b][kv][j]) V[b][kv][j] over the keys j row i sees,
//   scale = 1/sqrt(D), kv = h / (H / H_kv) (grouped-query attention: H_kv key/value heads, each shared by
//   H / H_kv query heads). CAUSAL = 1 masks bottom-right aligned, as FlashAttention 2 does when S_q != S_k:
//   query i sees keys j <= i + S_k - S_q. A row that sees no key (causal with S_q > S_k, rows
//   i < S_q - S_k) outputs exactly +0. One block of THREADS threads per (b, h, ROWS query rows), walking
//   its rows one at a time:
//     1. the query row, widened to fp32, into shared memory (D floats);
//     2. thread j (and j + THREADS, ...) computes s_j = (q . k_j) * scale * log2(e), an fp32 FMA chain over
//        d, reading key row j from global memory element by element; s_j goes to shared memory (the
//        scores live there, one fp32 per visible key: S_k * 4 bytes of dynamic shared memory);
//     3. m = block_max(s_j); p_j = 2^(s_j - m) (ex2.approx.ftz), written over s_j; l = block_sum(p_j);
//     4. thread d (and d + THREADS) computes sum_j p_j V[j][d] in fp32 and writes it times 1/l, rounded once
//        to the output type (l = 0, no visible key: 0).
//   P stays fp32 here (rung 02 rounds it to the input type for the tensor cores).
// Why: the definition as it reads, to check the family against before anything is fast. Every query row
//   reads all of K and V again (L2 traffic ~ S_q * S_k * D * 4 bytes per head), the key reads are strided
//   by D * 2 bytes across a warp (32 rows per load instruction), and half the threads idle in step 4 at
//   D = 64; three block barriers per query row.
// Prediction (H200, B=2 H=16 S=4096 D=128 fp16, 4 * B * H * S^2 * D = 2.7e11 FLOPs): each query row streams
//   K and V (2 * 4096 * 128 * 2 bytes = 2 MiB) from the L2, 4096 rows * 32 heads * 2 MiB = 275 GB of L2 traffic:
//   35 to 70 ms at 4 to 8 TB/s of L2 bandwidth, i.e. 4 to 8 TFLOP per second at best; the strided key loads and
//   three barriers per query row cost more: ~1-8 TFLOP/s, ~0.002-0.02x of the ceiling (PyTorch SDPA, a library
//   baseline near 400 TFLOP per second at this size). Causal halves the keys and the FLOPs alike.
// Requires: sm_80+ (bf16 conversions); any B, H, H_kv with H a multiple of H_kv, any S_q, S_k >= 1, any D
//   up to MAX_D = 256; inputs and output contiguous (B, H, S, D), element-aligned (2-byte accesses only).
//   Launch: grid (ceil(S_q / ROWS), H, B), block (THREADS), dynamic shared memory S_k * 4 bytes (the
//   launcher opts in above 48 KiB and refuses S_k past the GPU's opt-in limit).
// Knobs: BF16 (0: fp16, 1: bf16), CAUSAL (0: full attention, 1: causal, bottom-right aligned), ROWS (16 query
//   rows a block), THREADS (128).
#include "lab_mma.cuh"
#include "lab_reduce.cuh"

#ifndef BF16
#define BF16 0
#endif
#ifndef CAUSAL
#define CAUSAL 0
#endif
#ifndef ROWS
#define ROWS 16
#endif
#ifndef THREADS
#define THREADS 128
#endif
#define MAX_D 256

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ < 800
#error "attention rungs need sm_80 or newer (bf16 conversions, mma.sync for fp16 and bf16)"
#endif
static_assert(BF16 == 0 || BF16 == 1, "BF16 is 0 (fp16) or 1 (bf16)");
static_assert(CAUSAL == 0 || CAUSAL == 1, "CAUSAL is 0 or 1");
static_assert(THREADS % 32 == 0 && THREADS <= 1024, "THREADS is a multiple of 32, at most 1024");

typedef unsigned short half_bits;  // an fp16 or a bf16 value, as its 16 bits

// 2^x on the SFU (ex2.approx.ftz: within 2 ulps, results below 2^-126 flushed to 0); 2^-inf = 0.
__device__ __forceinline__ float fast_exp2(float x) {
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
}

// (THREADS, 1): without the 1, ptxas spilled 8 bytes on sm_90 at 40 registers.
extern "C" __global__ void __launch_bounds__(THREADS, 1)
attention_naive(const half_bits* __restrict__ Q, const half_bits* __restrict__ K, const half_bits* __restrict__ V,
                half_bits* __restrict__ O, int H, int H_kv, int S_q, int S_k, int D, float scale_log2) {
    extern __shared__ float scores[];  // S_k fp32: s_j, then p_j, of the current query row
    __shared__ float q[MAX_D];
    __shared__ float scratch[32];

    const int b = blockIdx.z, h = blockIdx.y, kvh = h / (H / H_kv);
    const half_bits* Qh = Q + (long long)(b * H + h) * S_q * D;
    const half_bits* Kh = K + (long long)(b * H_kv + kvh) * S_k * D;
    const half_bits* Vh = V + (long long)(b * H_kv + kvh) * S_k * D;
    half_bits* Oh = O + (long long)(b * H + h) * S_q * D;

    const int row_end = min(S_q, (blockIdx.x + 1) * ROWS);
    for (int i = blockIdx.x * ROWS; i < row_end; ++i) {
        // The keys row i sees: 0 .. visible - 1 (the same for every thread, so the barriers below are uniform).
        const int visible = CAUSAL ? min(S_k, i + S_k - S_q + 1) : S_k;
        half_bits* out = Oh + (long long)i * D;
        if (visible <= 0) {  // no key: the output is exactly +0
            for (int d = threadIdx.x; d < D; d += THREADS) out[d] = 0;
            continue;
        }
        __syncthreads();  // the previous row is done with q and the scores
        for (int d = threadIdx.x; d < D; d += THREADS) q[d] = half_bits_to_float<BF16>(Qh[(long long)i * D + d]);
        __syncthreads();

        float m = -__int_as_float(0x7f800000);
        for (int j = threadIdx.x; j < visible; j += THREADS) {
            const half_bits* k = Kh + (long long)j * D;
            float dot = 0.0f;
            for (int d = 0; d < D; ++d) dot = fmaf(q[d], half_bits_to_float<BF16>(k[d]), dot);
            const float s = dot * scale_log2;  // log2 units: p = 2^(s - m) = e^(scale * (q.k - max))
            scores[j] = s;
            m = fmaxf(m, s);
        }
        m = block_max(m, scratch);  // finite: at least one visible key, finite inputs

        float l = 0.0f;
        for (int j = threadIdx.x; j < visible; j += THREADS) {
            const float p = fast_exp2(scores[j] - m);
            scores[j] = p;
            l += p;
        }
        l = block_sum(l, scratch);  // >= 1 (the max's own term is 2^0); its barrier also publishes the scores
        const float inv_l = 1.0f / l;

        for (int d = threadIdx.x; d < D; d += THREADS) {
            float acc = 0.0f;
            for (int j = 0; j < visible; ++j)
                acc = fmaf(scores[j], half_bits_to_float<BF16>(Vh[(long long)j * D + d]), acc);
            out[d] = float_to_half_bits<BF16>(acc * inv_l);  // the output's one rounding
        }
    }
}
