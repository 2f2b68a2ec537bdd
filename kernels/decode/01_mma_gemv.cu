// decode / rung 01 — a tensor-core GEMV: W's rows in the mma's M slot, the tokens in its N slot, fragments
// loaded straight from global memory with 16-byte loads, K split across the warps of a block.
//
// What it is: Y (M x N) = X (M x K) @ W^T with W stored N x K row-major (a linear layer's weight, "TN") and M
//   a decode batch (1 to 128 tokens per launch). A block owns ROWS = 16 * RT rows of W and all of K; its WARPS
//   warps split K (warp w takes k-blocks w, w + WARPS, ...; a k-block is 32 * CHUNKS values of k) and each
//   keeps RT x MT mma tiles of fp32 partial sums: 16 rows of W by 8 tokens, MT >= ceil(M / 8) n-tiles (1, 2,
//   4, 8 or 16: one build per M bucket). The warps' tiles then meet in shared memory and are summed in warp
//   order 0, 1, ..., WARPS - 1 (the same order every run: deterministic), rounded once to the input type and
//   stored as Y[token][row].
//
// The fragment mapping. A dot product may visit K in any order as long as W and X use the same order, so each
//   lane loads what is cheap and the mma's k-steps are defined by it: lane (g, t) = (lane / 4, lane % 4) loads
//   the 8 consecutive k [k0 + 8t, k0 + 8t + 8) of W rows g and g + 8 and of token g, one 16-byte load each
//   (word q of a chunk holds k0 + 8t + 2q and + 2q + 1). Those 32 k (4 lanes x 8) are two mma k-steps s = 0, 1:
//     a = {W[g] word 2s, W[g + 8] word 2s, W[g] word 2s + 1, W[g + 8] word 2s + 1}, b = {X[g] word 2s, word 2s + 1}.
//   The mma (layout in kernels/common/lab_mma.cuh) reads a[0] as A[g][2t, 2t+1], a[2] as A[g][2t+8, 2t+9], b[0]
//   as B[2t, 2t+1][g] and b[1] as B[2t+8, 2t+9][g]: its logical k = 2t + e (2t + 8 + e) is physical
//   k0 + 8t + 4s + e (+ 2), the same for every row and token (it depends on t, s and e only), and over t and s
//   it covers each of the 32 k once. The accumulators keep the mma's C layout: lane (g, t) holds rows g, g + 8
//   and tokens 2t, 2t + 1 of each 16 x 8 tile. tests/test_decode_family.py runs this kernel's index math lane by
//   lane through tests/test_gemm_tc_fragments.py's model of the mma and gets X @ W^T exactly.
//
// Why it should be fast: the time is reading W once. Every W byte arrives in a 16-byte load that streams
//   (ld.global.nc.L1::no_allocate with an L2 evict_first policy: W neither thrashes L1 nor pushes X out of the
//   L2; an L2 miss fetches L2_PREFETCH bytes around it, which the warp's next chunks of the row use). The 4
//   lanes of a group read 64 contiguous bytes of a row per chunk, CHUNKS chunks per k-block (512 bytes per row
//   at CHUNKS = 8, 2 KB across 4 warps). All of a k-block's loads are issued before its first mma, so a warp
//   has CHUNKS * RT KB of W in flight (8 KB at CHUNKS = 8, RT = 1); the 2 * CHUNKS * RT * MT mma that follow
//   take a few hundred cycles against ~1 us of DRAM latency (two accumulator sets, even and odd chunks, when
//   RT = MT = 1 halve the single tile's dependent chain). Little's law: ~4.8 TB/s x ~1 us is ~5 MB in flight,
//   ~36 KB per SM; 12-16 resident warps (118-157 registers, 3-4 blocks of 4 warps) hold 64-128 KB. Tensor
//   cores keep any M <= 128 at one read of W: M < 8 wastes idle tensor-core slots, not bandwidth, where a CUDA-
//   core GEMV does M * N * K FMAs at 32 per warp-instruction. X is read once per block, M / ROWS of W's bytes
//   again, from L2 (or L1, which W does not evict): RT = 2 from 9 tokens keeps that at <= 0.5 up to M = 16.
// What limits N = K = 4096 (32 MB of W, ~7 us at 4.8 TB/s; cuBLAS's time is in results/h200/decode.json): a fixed
//   cost per launch that no kernel shrinks (the event pair around one launch, a few us; CuPy's ~5 us host-side
//   launch, which the lab's spin kernel hides), the DRAM latency ramp (the first bytes arrive ~1 us after the
//   start), too few bytes in flight per SM when there are only 128-256 blocks, and the tail of a last partial wave.
//   What the kernel does: one launch, no workspace, memset or second kernel; every block resident from the start (a
//   single wave, no tail wave, at every headline size up to M = 64); 8 warps per block (the same rows, K split 8
//   ways) whenever a single wave of 8-warp blocks fits the GPU (the launcher asks the occupancy of that build), else
//   4-warp blocks packed 3-4 to an SM: at N = K = 4096, M <= 8 that is 256 blocks of 8 warps, two per SM, 16 warps
//   and 128 KB in flight per SM, 16 MB (half of W) requested in the first round trip and all of it within ~2 (2
//   k-blocks per warp at CHUNKS = 8); blocks of equal work that finish together; and a cross-warp sum of a few
//   hundred floats in shared memory. Split-K across blocks would add parallelism the same way, at the price of a
//   workspace and a fix-up; with 8-warp blocks it has nothing left to add at these sizes.
// Where it stops: M > 32. Registers hold the bytes in flight, and at MT = 8, 16 the accumulators and X's chunks
//   leave room for only 1-2 KB of W per warp, while X is re-read from L2 at 2x (M = 64) and 8x (M = 128) W's
//   bytes. Prefill-like M wants W staged through shared memory (cp.async / TMA, gemm_tc's rungs 03-06).
//
// Prediction (H200, cold L2, the headline sizes; written before any GPU run; ratios are against the device copy
//   of the same bytes in the same run, which the copy ladder's records put at ~3.6 TB/s for the 134 MB of
//   N = K = 8192 and ~2.5 TB/s for the 33 MB of N = K = 4096, both with the same ~4 us fixed cost inside):
//   - N = K = 8192, M <= 16: 0.85-0.95x of the device copy (~3.1-3.4 TB/s), 1.15-1.3 times cuBLAS's rate.
//   - N = K = 4096, M <= 16: 0.85-1.05x of the device copy (~11-14 us, the fixed cost included), 1.2-1.5 times
//     cuBLAS's rate.
//   - M = 32: 0.7-0.85x; M = 64: 0.4-0.6x; M = 128: 0.15-0.3x of the device copy, below cuBLAS (see "Where it
//     stops"). bf16 as fp16 (the same bytes and instructions).
//
// Tails: rows past N are clamped to row N - 1 (the mma's rows are independent, so a duplicated row only feeds
//   outputs that are not stored: no zero-fill in the hot loop); tokens past M are predicated off (zeros, no
//   load; their columns are not stored); K: the k-blocks inside K run an unguarded body, the one partial k-block
//   a guarded one, where a 16-byte chunk wholly past K loads nothing and a chunk that straddles K is loaded and
//   its values past K zeroed, in W and X both (padding may hold anything, NaN included, and NaN * 0 is NaN).
// Requires: sm_80+ (mma.sync m16n8k16 for fp16 and bf16, createpolicy). VEC = 8: X and W 16-byte aligned, ldx and
//   ldw multiples of 8 (K may be anything: a straddling chunk stays inside its row's padding). VEC = 1: any
//   alignment (2-byte element loads, the same mapping); the launcher picks it when VEC = 8's conditions fail. Y:
//   any alignment (2-byte stores). 1 <= M <= 8 * MT (the launcher runs M > 128 as 128-token chunks), N, K >= 1,
//   leading dimensions >= widths; Y overlaps neither X nor W (both are read through the read-only path).
// Launch: grid ceil(N / ROWS), block THREADS = 32 * WARPS, no dynamic shared memory (static: WARPS * RT * MT * 512
//   bytes of partial tiles). The launcher (lab/families/decode.py) sets MT by M's bucket, RT and CHUNKS by the
//   bucket (MT 1: RT 1, CHUNKS 8; 2: 2, 4; 4: 2, 2; 8: 2, 1; 16: 1, 1), and WARPS 8 when every 8-warp block is
//   resident at once (ceil(N / ROWS) <= SMs x that build's blocks per SM), else 4.
// Ideas (no code taken): the swapped operands of a small-M GEMM, the weight in the wide MMA slot and the tokens
//   in the narrow one ("swap AB": vllm-project/vllm#20396 and #27284, TensorRT-LLM's swap_ab GEMM configs); K
//   split across the warps of a block and reduced in shared memory (CUTLASS's "sliced-K", media/docs/
//   efficient_gemm.md); Little's law for bytes in flight (V. Volkov, "Understanding Latency Hiding on GPUs",
//   PhD thesis, UC Berkeley, 2016).
// Measured: results/h200/decode.json (every headline M at N = K = 4096 and 8192, both types, cold L2, the device
//   copy of the same bytes and cuBLAS in the same run, and the family's rung 02, the split-K GEMM, where M is
//   large); notebook 05 replays it against this prediction. Knob study: results/h200/decode_knobs.json (rung 01
//   with forced RT, CHUNKS and WARPS at M <= 16). Next for M = 16: RT = 1 (twice the blocks, X re-read once per 16
//   rows) and CHUNKS = 16 (twice the bytes in flight per warp), not yet measured.
// Knobs (defaults: the M <= 8 build the family names; the launcher sets MT, RT, CHUNKS and WARPS per shape):
//   BF16 (0: fp16, 1: bf16), VEC (8: 16-byte loads, 1: element loads), MT (1: n-tiles of 8 tokens), RT (1: 16-row
//   tiles per warp), CHUNKS (8: 32-k chunks per k-block), WARPS (4: warps per block, splitting K), THREADS (128 =
//   32 * WARPS), L2_PREFETCH (256: bytes an L2 miss of W fetches; 0, 64, 128 or 256).
#include "lab_mma.cuh"

#ifndef BF16
#define BF16 0
#endif
#ifndef VEC
#define VEC 8
#endif
#ifndef MT
#define MT 1
#endif
#ifndef RT
#define RT 1
#endif
#ifndef CHUNKS
#define CHUNKS 8
#endif
#ifndef WARPS
#define WARPS 4
#endif
#ifndef THREADS
#define THREADS 128
#endif
#ifndef L2_PREFETCH
#define L2_PREFETCH 256
#endif

#define ROWS (16 * RT)           // rows of W per block
#define KB (32 * CHUNKS)         // k per k-block: 4 lanes x 8 values x CHUNKS chunks
#define TILE_REGS (RT * MT * 4)  // fp32 accumulators per lane (one set)
// A single 16 x 8 tile (RT = MT = 1) would chain all 2 * CHUNKS mma of a k-block through one accumulator
// (~30 cycles each); two sets, even and odd chunks, halve that chain for 4 registers. Bigger tiles
// interleave their RT * MT independent chains already.
#define ACC_SETS (RT * MT == 1 ? 2 : 1)

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ < 800
#error "decode rungs need sm_80 or newer (mma.sync m16n8k16 for fp16 and bf16)"
#endif
static_assert(BF16 == 0 || BF16 == 1, "BF16 is 0 (fp16) or 1 (bf16)");
static_assert(VEC == 8 || VEC == 1, "VEC is 8 (16-byte loads) or 1 (element loads)");
static_assert(MT >= 1 && MT <= 16 && RT >= 1 && RT <= 4 && CHUNKS >= 1 && CHUNKS <= 16,
              "MT is 1-16, RT 1-4, CHUNKS 1-16");
static_assert(L2_PREFETCH == 0 || L2_PREFETCH == 64 || L2_PREFETCH == 128 || L2_PREFETCH == 256,
              "L2_PREFETCH is 0, 64, 128 or 256 (bytes the L2 fetches per W miss)");
static_assert(THREADS == 32 * WARPS && WARPS >= 1 && WARPS <= 32, "THREADS is 32 * WARPS");
static_assert(WARPS * TILE_REGS * 32 * 4 <= 48 * 1024, "the partial tiles fit static shared memory");

typedef unsigned short half_bits;  // an fp16 or a bf16 value, as its 16 bits

// 8 consecutive 16-bit values of one row: word q holds k + 2q (low half) and k + 2q + 1 (high half).
struct Chunk {
    unsigned w[4];
};

__device__ __forceinline__ Chunk zero_chunk() { return Chunk{{0u, 0u, 0u, 0u}}; }

// The first n (1..7) values of a chunk kept, the rest zeroed: the values past K of a chunk that straddles it.
__device__ __forceinline__ Chunk keep_first(Chunk c, int n) {
#pragma unroll
    for (int q = 0; q < 4; ++q) c.w[q] = 2 * q + 1 < n ? c.w[q] : 2 * q < n ? (c.w[q] & 0xFFFFu) : 0u;
    return c;
}

// An L2 policy that marks W's lines first to go, so streaming W does not push X out of the L2.
__device__ __forceinline__ unsigned long long evict_first_policy() {
    unsigned long long policy;
    asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
    return policy;
}

#if VEC == 8
#if L2_PREFETCH == 0
#define W_PREFETCH ""
#elif L2_PREFETCH == 64
#define W_PREFETCH ".L2::64B"
#elif L2_PREFETCH == 128
#define W_PREFETCH ".L2::128B"
#else
#define W_PREFETCH ".L2::256B"
#endif
// W: read once, so kept out of L1 (no_allocate) and first out of L2. Read-only for the kernel's lifetime (.nc).
// A miss fetches L2_PREFETCH bytes (the aligned block around it): a warp's next chunks of the same row are in
// it, so DRAM sees fewer, longer requests (sm_80 caps the hint at 128 B).
__device__ __forceinline__ Chunk load_w16(const half_bits* p, unsigned long long policy) {
    Chunk c;
    asm("ld.global.nc.L1::no_allocate.L2::cache_hint" W_PREFETCH ".v4.u32 {%0, %1, %2, %3}, [%4], %5;"
                 : "=r"(c.w[0]), "=r"(c.w[1]), "=r"(c.w[2]), "=r"(c.w[3])
                 : "l"(p), "l"(policy));
    return c;
}

// X: re-read by every block, so it may stay in L1 and L2 (the default read-only path).
__device__ __forceinline__ Chunk load_x16(const half_bits* p) {
    Chunk c;
    asm("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(c.w[0]), "=r"(c.w[1]), "=r"(c.w[2]), "=r"(c.w[3])
                 : "l"(p));
    return c;
}
#endif

// The chunk [k, k + 8) of `row` (W when IS_W, else a token of X). EDGE: the k-block may cross K, so each
// chunk is checked; otherwise every chunk is inside K and the load goes unguarded.
template <bool EDGE, bool IS_W>
__device__ __forceinline__ Chunk load_chunk(const half_bits* __restrict__ row, int k, int K,
                                            unsigned long long policy) {
#if VEC == 8
    if (EDGE && k >= K) return zero_chunk();
    const Chunk c = IS_W ? load_w16(row + k, policy) : load_x16(row + k);
    return (EDGE && k + 8 > K) ? keep_first(c, K - k) : c;
#else
    Chunk c;
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        const int lo = k + 2 * q, hi = lo + 1;
        c.w[q] = pack_half2((!EDGE || lo < K) ? row[lo] : half_bits(0), (!EDGE || hi < K) ? row[hi] : half_bits(0));
    }
    return c;
#endif
}

// One k-block of one warp: CHUNKS chunks of 32 k from W's RT x 2 row groups and X's MT token groups, every load
// issued before the first mma (bytes in flight), then 2 mma k-steps per chunk and tile.
template <bool EDGE>
__device__ __forceinline__ void k_block(float (&acc)[ACC_SETS][RT][MT][4], const half_bits* const (&w_row)[RT][2],
                                        const half_bits* const (&x_row)[MT], const bool (&x_ok)[MT], int k_lane,
                                        int K, unsigned long long policy) {
    Chunk w[CHUNKS][RT][2], x[CHUNKS][MT];
#pragma unroll
    for (int u = 0; u < CHUNKS; ++u) {
        const int k = k_lane + 32 * u;
#pragma unroll
        for (int r = 0; r < RT; ++r)
#pragma unroll
            for (int h = 0; h < 2; ++h) w[u][r][h] = load_chunk<EDGE, true>(w_row[r][h], k, K, policy);
#pragma unroll
        for (int j = 0; j < MT; ++j)
            x[u][j] = x_ok[j] ? load_chunk<EDGE, false>(x_row[j], k, K, policy) : zero_chunk();
    }
#pragma unroll
    for (int u = 0; u < CHUNKS; ++u)
#pragma unroll
        for (int s = 0; s < 2; ++s)
#pragma unroll
            for (int r = 0; r < RT; ++r) {
                const unsigned a[4] = {w[u][r][0].w[2 * s], w[u][r][1].w[2 * s], w[u][r][0].w[2 * s + 1],
                                       w[u][r][1].w[2 * s + 1]};
#pragma unroll
                for (int j = 0; j < MT; ++j) {
                    const unsigned b[2] = {x[u][j].w[2 * s], x[u][j].w[2 * s + 1]};
                    mma_m16n8k16<BF16>(acc[u % ACC_SETS][r][j], a, b);
                }
            }
}

extern "C" __global__ void __launch_bounds__(THREADS)
decode_mma_gemv(int M, int N, int K, const half_bits* __restrict__ X, int ldx, const half_bits* __restrict__ W,
                int ldw, half_bits* __restrict__ Y, int ldy) {
    __shared__ float partial[WARPS][TILE_REGS][32];  // [warp][accumulator][lane]: conflict-free both ways

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int g = lane / 4, t = lane % 4;  // groupID, threadID_in_group
    const int row0 = blockIdx.x * ROWS;

    // This lane's rows of W (16 r + 8 h + g, clamped into W) and tokens of X (8 j + g, predicated).
    const half_bits* w_row[RT][2];
#pragma unroll
    for (int r = 0; r < RT; ++r)
#pragma unroll
        for (int h = 0; h < 2; ++h) w_row[r][h] = W + (long long)min(row0 + 16 * r + 8 * h + g, N - 1) * ldw;
    const half_bits* x_row[MT];
    bool x_ok[MT];
#pragma unroll
    for (int j = 0; j < MT; ++j) {
        x_ok[j] = 8 * j + g < M;
        x_row[j] = X + (long long)min(8 * j + g, M - 1) * ldx;
    }
    const unsigned long long policy = evict_first_policy();

    float acc[ACC_SETS][RT][MT][4];
#pragma unroll
    for (int a = 0; a < ACC_SETS; ++a)
#pragma unroll
        for (int r = 0; r < RT; ++r)
#pragma unroll
            for (int j = 0; j < MT; ++j)
#pragma unroll
                for (int i = 0; i < 4; ++i) acc[a][r][j][i] = 0.0f;

    const int whole = K / KB;  // k-blocks entirely inside K
    for (int kb = warp; kb < whole; kb += WARPS) k_block<false>(acc, w_row, x_row, x_ok, kb * KB + 8 * t, K, policy);
    if (whole * KB < K && whole % WARPS == warp)  // the partial k-block, in its turn
        k_block<true>(acc, w_row, x_row, x_ok, whole * KB + 8 * t, K, policy);

    // The warps' partial tiles, summed in warp order (deterministic), rounded once, stored where inside M x N.
#pragma unroll
    for (int r = 0; r < RT; ++r)
#pragma unroll
        for (int j = 0; j < MT; ++j)
#pragma unroll
            for (int i = 0; i < 4; ++i)  // the two sets (when there are two) added first, in a fixed order too
                partial[warp][(r * MT + j) * 4 + i][lane] =
                    ACC_SETS == 1 ? acc[0][r][j][i] : acc[0][r][j][i] + acc[ACC_SETS - 1][r][j][i];
    __syncthreads();
    for (int e = threadIdx.x; e < TILE_REGS * 32; e += THREADS) {
        const int reg = e / 32, l = e % 32;
        float sum = partial[0][reg][l];
#pragma unroll
        for (int w = 1; w < WARPS; ++w) sum += partial[w][reg][l];
        const int r = reg / (MT * 4), j = (reg / 4) % MT, i = reg % 4;
        const int row = row0 + 16 * r + l / 4 + 8 * (i / 2), token = 8 * j + 2 * (l % 4) + (i % 2);
        if (row < N && token < M) Y[(long long)token * ldy + row] = float_to_half_bits<BF16>(sum);
    }
}
