// attention / rung 04 — Hopper: K and V tiles by TMA into a ring of stages, both products on wgmma, a producer
// warpgroup that only loads and two consumer warpgroups of 64 query rows each.
//
// What changed (vs rung 03):
//   1. The products are warpgroup MMAs (wgmma, sm_90a): a consumer warpgroup (4 warps, 128 threads) issues
//      S = Q K^T as HEAD_DIM / 16 steps of m64nBLOCK_Nk16 with Q and K read from shared memory through matrix
//      descriptors, then O += P V as BLOCK_N / 16 steps of m64nHEAD_DIMk16 with P as it stands in registers
//      (the register-A form of wgmma: the S accumulator's layout is the A fragments' layout, as on mma.sync in
//      rung 02) and V from shared memory, read MN-major (rows of V are the k of this product).
//   2. Loads are the tensor memory accelerator's (TMA): one thread of the producer warpgroup hands the copy
//      engine a 3-D tensor map of Q, K or V (D, sequence, batch x head) and a box of 64 columns; the engine writes
//      it 128-byte swizzled (what wgmma's descriptors read without bank conflicts), zero-fills rows past the
//      sequence's end of that head, and counts the bytes on the stage's "full" mbarrier. K and V have a barrier
//      each, so S = Q K^T starts while V is still in flight. The ring has STAGES stages; a consumer warp frees a
//      stage on its "empty" barrier when its O += P V has read V.
//   3. Warp specialization as gemm_tc rung 05: the producer gives registers back (setmaxnreg.dec to 40), the
//      consumers take them (inc to 232): each holds the O accumulator (HEAD_DIM / 2 fp32), S (BLOCK_N / 2 fp32)
//      and P (BLOCK_N / 4 registers) at once.
//   4. The online softmax is rung 02's on the wgmma accumulator (the same row and column per lane), with each pair
//      of probabilities rounded by one paired conversion (round_pair: bf16's single conversion shares the SFU
//      with ex2; results are bit for bit those of single conversions).
// Why: mma.sync issues one 16 x 8 x 16 product per warp instruction and reads B from shared memory through
//   ldmatrix into registers; a warpgroup's m64n128k16 is one instruction for 64 times the work, reads both operands
//   from shared memory itself, and runs while the warp goes on. Rung 03 reached about half of cuDNN's time: the
//   rest is the Hopper tensor-core path, which only wgmma reaches.
// Prediction (H200, B=2 H=16 S=4096 D=128 fp16, not causal; written before any GPU run): 1.5-2x rung 03 (~380-500
//   TFLOP/s), above the flash backend (FlashAttention-2) but below cuDNN: each consumer still waits for its own
//   S = Q K^T before its softmax, and for its P V before the next S (no overlap between the two products and the
//   softmax inside a warpgroup, no ping-pong between the two warpgroups: FlashAttention-3's remaining steps,
//   Shah et al., arXiv:2407.08608, 2024, its ablation table puts them at about 1.15x together). Causal: the same
//   per visible tile. D = 64: lower (the softmax's instructions per FLOP double).
// Measured (results/h200/attention.json, `lab bench attention`, SDPA's default (cuDNN) in the same run): about 2.1x
//   rung 03 at D = 128 fp16, above the predicted range, and 0.84-0.92x of cuDNN over the headline sizes (both types,
//   causal and not, D = 64 and 128); results/h200/attention_study.json (three rounds, before pairs were rounded
//   together) puts it at about 1.6x the flash backend at D = 128 fp16 and 1.25-1.3x at D = 64. Rounding probabilities in pairs (4.) took bf16 from about 0.64x to
//   0.86x of cuDNN at D = 128: bf16 had paid an F2F on the SFU for every score.
// Requires: sm_90a (wgmma, setmaxnreg, TMA); HEAD_DIM 64 or 128; Q, K, V 16-byte aligned (TMA), O 4-byte aligned
//   (the family refuses otherwise). Launch: grid (ceil(S_q / 128), H, B), THREADS = 384, dynamic shared memory
//   SMEM_BYTES = (128 + 2 * STAGES * BLOCK_N) * HEAD_DIM * 2 + 1024 (164,864 bytes at D = 128); three tensor maps
//   (lab/core/tma.py, TensorMap3D) of Q (box 64 x 64 x 1), K and V (box 64 x BLOCK_N x 1).
// Knobs: BF16 (0: fp16, 1: bf16), CAUSAL (0: full attention, 1: causal, bottom-right aligned), HEAD_DIM (64: D, 64
//   or 128; the launcher sets these three per problem), BLOCK_N (128 keys a tile), STAGES (2 K/V stages),
//   THREADS (384: one producer and two consumer warpgroups).
// Ideas: FlashAttention-3 (Shah, Bikshandi, Zhang, Thakkar, Ramani, Dao, 2024) and CUTLASS's sm90 warp-specialized
//   kernels; NVIDIA's PTX ISA for wgmma's register-A form and 3-D tensor copies. Code is this lab's own.
#include "lab_cp_async.cuh"  // smem_u32addr, dynamic_smem_size
#include "lab_hopper.cuh"
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
#ifndef BLOCK_N
#define BLOCK_N 128
#endif
#ifndef STAGES
#define STAGES 2
#endif
#ifndef THREADS
#define THREADS 384
#endif

#define BLOCK_M 128                               // two consumer warpgroups of 64 rows
#define ROW_BYTES 128                             // one swizzled row: 64 two-byte elements
#define BOXES (HEAD_DIM / 64)                     // 64-column boxes across a row of Q, K or V
#define Q_BYTES (BLOCK_M * HEAD_DIM * 2)
#define KV_BYTES (BLOCK_N * HEAD_DIM * 2)         // one K (or V) tile
#define SMEM_BYTES (Q_BYTES + 2 * STAGES * KV_BYTES + 1024)
#define PRODUCER_REGS 40
#define CONSUMER_REGS 232

#if !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "attention rung 04 needs sm_90a (wgmma, setmaxnreg, TMA): build it with -arch=sm_90a"
#endif
static_assert(BF16 == 0 || BF16 == 1, "BF16 is 0 (fp16) or 1 (bf16)");
static_assert(CAUSAL == 0 || CAUSAL == 1, "CAUSAL is 0 or 1");
static_assert(HEAD_DIM == 64 || HEAD_DIM == 128, "HEAD_DIM is 64 or 128");
static_assert(BLOCK_N == 128, "S = Q K^T is one m64n128k16 per k-step");
static_assert(THREADS == 384, "one producer and two consumer warpgroups");
static_assert(STAGES >= 1 && STAGES <= 4, "1 to 4 K/V stages");

typedef unsigned short half_bits;
#define NEG_INF (-__int_as_float(0x7f800000))

__device__ __forceinline__ float fast_exp2(float x) {  // ex2.approx.ftz, as rung 02
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

// Two probabilities rounded to the input type by one paired conversion (cvt.rn.{f16,bf16}x2.f32, the first source
// to the upper half: p0 lands in the lower, the lower-indexed element), their rounded values added to `sum` in the
// order of p0 then p1. Why paired: a single cvt.rn.bf16.f32 is an F2F, which shares the SFU's 16 results a clock
// with ex2, so bf16 paid twice for every score; the paired form is an F2FP on the FMA pipe, for fp16 as for bf16.
__device__ __forceinline__ unsigned round_pair(float p0, float p1, float& sum) {
    unsigned packed;
    float lo, hi;
    if (BF16) {
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(p1), "f"(p0));
        lo = __uint_as_float(packed << 16), hi = __uint_as_float(packed & 0xffff0000u);
    } else {
        asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(p1), "f"(p0));
        asm("{\n.reg .f16 l, h;\nmov.b32 {l, h}, %2;\ncvt.f32.f16 %0, l;\ncvt.f32.f16 %1, h;\n}"
            : "=f"(lo), "=f"(hi) : "r"(packed));
    }
    sum += lo + hi;
    return packed;
}

// The box at element coordinates (x: the contiguous dimension, y: the row, z: the plane) of a 3-D tensor map into
// shared memory at `dst`, completing on `bar` (lab_hopper.cuh's tma_load_2d with one more coordinate).
__device__ __forceinline__ void tma_load_3d(unsigned dst, const TensorMap* map, int x, int y, int z, unsigned bar) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n"
        ::"r"(dst), "l"(map), "r"(x), "r"(y), "r"(z), "r"(bar)
        : "memory");
}

// d += A * B for one 64 x N x 16 step with A in registers (wgmma's register-A form: a[0..3] the mma.sync A
// fragment of this lane's rows of its warp's 16, lab_mma.cuh's layout) and B MN-major in shared memory (imm-trans-b
// 1); the accumulator is always added to (scale-d true), the operand lists written out as in lab_hopper.cuh.
#define LAB_WGMMA_REGS_32 \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define LAB_WGMMA_ACC_32 \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
    "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
    "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
    "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define LAB_WGMMA_RS(SHAPE, TY, REGS, ACC, REST)                                                            \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"                                                  \
                 "wgmma.mma_async.sync.aligned." SHAPE ".f32." TY "." TY " {" REGS "}, " REST ", p, 1, 1, 1;\n}\n" \
                 : ACC                                                                                        \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b))

__device__ __forceinline__ void wgmma_rs_step(float (&d)[32], const unsigned (&a)[4], unsigned long long desc_b) {
    if (BF16)
        LAB_WGMMA_RS("m64n64k16", "bf16", LAB_WGMMA_REGS_32, LAB_WGMMA_ACC_32, "{%32, %33, %34, %35}, %36");
    else
        LAB_WGMMA_RS("m64n64k16", "f16", LAB_WGMMA_REGS_32, LAB_WGMMA_ACC_32, "{%32, %33, %34, %35}, %36");
}

__device__ __forceinline__ void wgmma_rs_step(float (&d)[64], const unsigned (&a)[4], unsigned long long desc_b) {
    if (BF16)
        LAB_WGMMA_RS("m64n128k16", "bf16", LAB_WGMMA_REGS_64, LAB_WGMMA_ACC_64, "{%64, %65, %66, %67}, %68");
    else
        LAB_WGMMA_RS("m64n128k16", "f16", LAB_WGMMA_REGS_64, LAB_WGMMA_ACC_64, "{%64, %65, %66, %67}, %68");
}

extern "C" __global__ void __launch_bounds__(THREADS, 1)
attention_wgmma_ws(const __grid_constant__ TensorMap map_q, const __grid_constant__ TensorMap map_k,
                   const __grid_constant__ TensorMap map_v, half_bits* __restrict__ O, int H, int H_kv, int S_q,
                   int S_k, float scale_log2) {
    extern __shared__ __align__(1024) unsigned char smem[];
    __shared__ __align__(8) unsigned long long q_bar, k_bars[STAGES], v_bars[STAGES], empty_bars[STAGES];
    if (dynamic_smem_size() < SMEM_BYTES) __trap();  // launched with too little: stop, do not overrun it

    // Q's 128 rows (consumer c's 64 at sQ + c * 64 * HEAD_DIM * 2, BOXES boxes of 64 rows x 128 bytes), then the
    // stages: stage s's K tile at sK(s), its V tile at sV(s), each BOXES boxes of BLOCK_N rows x 128 bytes.
    const unsigned sQ = (smem_u32addr(smem) + 1023) & ~1023u;  // the 128-byte swizzle repeats every 1024 bytes
    const unsigned sKV = sQ + Q_BYTES;
    const unsigned qb = smem_u32addr(&q_bar), kb = smem_u32addr(k_bars), vb = smem_u32addr(v_bars);
    const unsigned eb = smem_u32addr(empty_bars);
    const int b = blockIdx.z, h = blockIdx.y, kvh = h / (H / H_kv);
    const int m0 = blockIdx.x * BLOCK_M;
    const int wg = threadIdx.x / 128, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    // The keys the block needs: 0 .. n_end - 1 (its last row's visible keys; causal: bottom-right aligned).
    const int n_end = CAUSAL ? min(S_k, m0 + BLOCK_M + S_k - S_q) : S_k;
    const int n_tiles = n_end > 0 ? (n_end + BLOCK_N - 1) / BLOCK_N : 0;

    if (threadIdx.x == 0) {
        prefetch_tensor_map(&map_q);
        prefetch_tensor_map(&map_k);
        prefetch_tensor_map(&map_v);
        mbar_init(qb, 1);
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(kb + 8 * s, 1);  // the producer's arrive_expect_tx, then the bytes
            mbar_init(vb + 8 * s, 1);
            mbar_init(eb + 8 * s, 8);  // one arrival per consumer warp
        }
        fence_barrier_init();
    }
    __syncthreads();

    if (wg == 0) {  // the producer: one thread issues every load
        setmaxnreg_dec<PRODUCER_REGS>();
        if (threadIdx.x == 0) {
            mbar_arrive_expect_tx(qb, Q_BYTES);
            for (int c = 0; c < 2; ++c)
                for (int x = 0; x < BOXES; ++x)
                    tma_load_3d(sQ + c * 64 * HEAD_DIM * 2 + x * 64 * ROW_BYTES, &map_q, 64 * x, m0 + 64 * c, b * H + h,
                                qb);
            for (int j = 0; j < n_tiles; ++j) {
                const int s = j % STAGES;
                if (j >= STAGES) mbar_wait(eb + 8 * s, ((j / STAGES) - 1) & 1);  // tile j - STAGES is read
                const unsigned k_dst = sKV + s * 2 * KV_BYTES, v_dst = k_dst + KV_BYTES;
                mbar_arrive_expect_tx(kb + 8 * s, KV_BYTES);
                for (int x = 0; x < BOXES; ++x)
                    tma_load_3d(k_dst + x * BLOCK_N * ROW_BYTES, &map_k, 64 * x, j * BLOCK_N, b * H_kv + kvh, kb + 8 * s);
                mbar_arrive_expect_tx(vb + 8 * s, KV_BYTES);
                for (int x = 0; x < BOXES; ++x)
                    tma_load_3d(v_dst + x * BLOCK_N * ROW_BYTES, &map_v, 64 * x, j * BLOCK_N, b * H_kv + kvh, vb + 8 * s);
            }
        }
        return;
    }

    setmaxnreg_inc<CONSUMER_REGS>();
    const int c = wg - 1, g = lane / 4, t = lane % 4;
    const unsigned q_slab = sQ + c * 64 * HEAD_DIM * 2;
    // This lane's two query rows (accumulator rows g and g + 8 of its warp's 16 in the warpgroup's 64).
    const int row[2] = {m0 + 64 * c + 16 * (warp % 4) + g, m0 + 64 * c + 16 * (warp % 4) + g + 8};
    const int first_row = m0 + 64 * c;

    float o[HEAD_DIM / 2];  // o[4j + 2r + e]: row[r], column 8j + 2t + e
#pragma unroll
    for (int i = 0; i < HEAD_DIM / 2; ++i) o[i] = 0.0f;
    float m[2] = {NEG_INF, NEG_INF}, l[2] = {0.0f, 0.0f};
    mbar_wait(qb, 0);

    for (int j = 0; j < n_tiles; ++j) {
        const int s = j % STAGES, n0 = j * BLOCK_N;
        const unsigned parity = (j / STAGES) & 1, k_tile = sKV + s * 2 * KV_BYTES, v_tile = k_tile + KV_BYTES;

        // --- S = Q K^T: HEAD_DIM / 16 steps of m64n128k16, both operands K-major (D contiguous) -----------------
        float sc[BLOCK_N / 2];  // sc[4jj + 2r + e]: row[r], key n0 + 8jj + 2t + e
        mbar_wait(kb + 8 * s, parity);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < HEAD_DIM / 16; ++kk) {
            const unsigned off = 32 * (kk % 4);  // 16 elements along the swizzled 128-byte row
            const unsigned long long da = wgmma_desc(q_slab + (kk / 4) * 64 * ROW_BYTES + off, 16, 8 * ROW_BYTES);
            const unsigned long long db = wgmma_desc(k_tile + (kk / 4) * BLOCK_N * ROW_BYTES + off, 16, 8 * ROW_BYTES);
            wgmma_m64n128k16<BF16, 0>(sc, da, db, kk > 0);
        }
        wgmma_commit();
        wgmma_wait<0>();
        fence_accumulators(sc);

        // --- masks: the sequence's end and, causal, the diagonal (only tiles that cross one) ---------------------
        if (n0 + BLOCK_N > S_k || (CAUSAL && n0 + BLOCK_N - 1 > first_row + S_k - S_q)) {
#pragma unroll
            for (int jj = 0; jj < BLOCK_N / 8; ++jj)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int key = n0 + 8 * jj + 2 * t + (e % 2), i = row[e / 2];
                    if (key >= S_k || (CAUSAL && key > i + S_k - S_q)) sc[4 * jj + e] = NEG_INF;
                }
        }

        // --- online softmax, per row r (rung 02's, on elements 4jj + 2r + e) --------------------------------------
        unsigned pa[BLOCK_N / 16][4];  // P rounded to the input type: the A fragments of O += P V
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            float tile_max = NEG_INF;
#pragma unroll
            for (int jj = 0; jj < BLOCK_N / 8; ++jj) tile_max = fmaxf(tile_max, fmaxf(sc[4 * jj + 2 * r], sc[4 * jj + 2 * r + 1]));
            const float m_new = fmaxf(m[r], quad_max(tile_max) * scale_log2);
            const float shift = m_new == NEG_INF ? 0.0f : m_new;
            const float alpha = m_new == m[r] ? 1.0f : fast_exp2(m[r] - shift);
            m[r] = m_new;
            float sum = 0.0f;
#pragma unroll
            for (int jj = 0; jj < BLOCK_N / 8; ++jj) {
                const float p0 = fast_exp2(fmaf(sc[4 * jj + 2 * r], scale_log2, -shift));
                const float p1 = fast_exp2(fmaf(sc[4 * jj + 2 * r + 1], scale_log2, -shift));
                // Key block jj is k-step jj / 2, keys 2t, 2t+1 (jj even: registers 0, 1) or 2t+8, 2t+9 (jj odd:
                // registers 2, 3); row g is register 0 or 2, row g + 8 register 1 or 3.
                pa[jj / 2][2 * (jj % 2) + r] = round_pair(p0, p1, sum);
            }
            l[r] = fmaf(l[r], alpha, sum);
#pragma unroll
            for (int dn = 0; dn < HEAD_DIM / 8; ++dn) o[4 * dn + 2 * r] *= alpha, o[4 * dn + 2 * r + 1] *= alpha;
        }

        // --- O += P V: BLOCK_N / 16 steps of m64nHEAD_DIMk16, P from registers, V MN-major ----------------------
        mbar_wait(vb + 8 * s, parity);
        wgmma_fence();
        fence_accumulators(o);
#pragma unroll
        for (int kk = 0; kk < BLOCK_N / 16; ++kk) {
            // 16 keys = 16 rows of every 64-column box; LBO steps from one box (64 output columns) to the next.
            const unsigned long long db = wgmma_desc(v_tile + kk * 16 * ROW_BYTES, BLOCK_N * ROW_BYTES, 8 * ROW_BYTES);
            wgmma_rs_step(o, pa[kk], db);
        }
        wgmma_commit();
        wgmma_wait<0>();
        fence_accumulators(o);
        if (lane == 0) mbar_arrive(eb + 8 * s);  // this warp is done with stage s (K and V)
    }

    // --- O / l, rounded once; rows past S_q are not written (rung 02's end) -------------------------------------
    half_bits* Oh = O + (long long)(b * H + h) * S_q * HEAD_DIM;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const float total = quad_sum(l[r]);
        const bool seen = total > 0.0f;
        const float inv = seen ? 1.0f / total : 0.0f;
        if (row[r] >= S_q) continue;
        half_bits* out = Oh + (long long)row[r] * HEAD_DIM + 2 * t;
#pragma unroll
        for (int dn = 0; dn < HEAD_DIM / 8; ++dn) {
            const float x0 = seen ? o[4 * dn + 2 * r] * inv : 0.0f, x1 = seen ? o[4 * dn + 2 * r + 1] * inv : 0.0f;
            *reinterpret_cast<unsigned*>(out + 8 * dn) =
                pack_half2(float_to_half_bits<BF16>(x0), float_to_half_bits<BF16>(x1));
        }
    }
}
