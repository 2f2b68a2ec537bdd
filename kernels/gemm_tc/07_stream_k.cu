// gemm_tc / rung 07 — stream-K: the work that does not fill a whole wave is split along K across every SM,
// and the pieces of a tile are summed by one block (the fix-up).
//
// What changed (vs rung 06):
//   1. The work is k-tiles, not tiles. With P = gridDim.x blocks and T tiles: if T is a multiple of P, or a model
//      (lab_stream_k.cuh) predicts less than SK_MIN_GAIN, every tile is data-parallel (DP) as in rung 06.
//      Otherwise the first SK_TILES = (T mod P) + SK_WAVES * P tiles
//      (in the RASTER order; all T when fewer) form the stream-K region: their SK_TILES * k_tiles k-tiles are
//      cut into P contiguous ranges that differ by at most one k-tile, block b takes range b, and then the
//      remaining tiles (a multiple of P) in rung 06's round-robin. This is the stream-K paper's "DP + SK"
//      hybrid: whole waves stay data-parallel, only the last partial wave (plus SK_WAVES full ones, so each
//      block's share stays at least a tile's worth) is spread.
//   2. A range cuts tiles into pieces [k0, k1). The piece with k1 = k_tiles (the end of the tile) belongs to the
//      tile's owner; a piece that ends inside a tile is a contribution. Only the last piece of a range can end
//      inside a tile, so a block makes at most one contribution, and it makes it FIRST: it computes that piece,
//      writes its fp32 accumulators to its own workspace slot (in register order, 16-byte stores) and sets its
//      flag (a fence, then a release store). Then come the whole tiles of its range, and LAST the piece its
//      range starts inside (the tail [x, k_tiles) of a tile).
//      Why this order: a range is typically the tail [x, k_tiles) of one tile and the head [0, y) of the next
//      (or a whole tile), with k_tiles - x + y the same for every block. Pieces that start at k = 0 first keep
//      every block reading k-tile tau at time tau, then x + tau - y: all blocks walk K almost in step, as in a
//      data-parallel wave, so the A and B k-slices they share are read from DRAM once and hit in L2 for the
//      others (lab.core.tile_order.k_offsets shows it). In range order the blocks start at k offsets spread over all
//      of K, so the whole panels of the stream-K tiles must stay in L2 at once, which stops holding as K grows.
//   3. The owner of a tile that started in an earlier block (k0 > 0) waits for the flags of the lower-numbered
//      blocks whose ranges cover the start of the tile, adds their slots in block order (highest first), clears
//      the flags (so the next launch needs no host-side reset), and stores C. The order of the sum is fixed, so
//      results are the same bits from run to run (though not the same bits as rung 06, which sums in one piece).
// Why: rung 06 runs ceil(T / P) rounds of tiles; when T is a little past a multiple of P the last round keeps
//   a few SMs busy and the rest idle. Stream-K runs T / P tiles' worth per block, plus the fix-up.
// Prediction (H200, fp16 TN, N = K = 4096, 128 x 256 tiles: 16 tiles per 128 rows of M, P = 132; written
//   before any GPU run): at M = 1152 (144 tiles = one wave + 12) rung 06 takes two tile-times and this rung
//   (144 / 132 = 1.09 tile-times) plus a fix-up of about a tenth of a tile (each block writes or reads a
//   128 KB slot, ~17 MB over the GPU, against ~50 us per tile): about 1.7x. On well-quantized shapes (T a
//   multiple of P) it is rung 06, so 1.0x. At 4096^3 (512 tiles = 3 waves + 116) about 1.03x.
// Deadlock: blocks only wait for lower-numbered blocks, and every block writes its contribution before any
//   wait of its own; so some block can always progress even when not all P are resident. A wait that lasts
//   10 s anyway (another kernel hogging the SMs forever) traps instead of hanging.
// Workspace (the launcher's): P slots of BM * BN floats and P int flags, all flags 0 between launches.
//   One workspace per device and stream: two launches at once on one workspace would mix their slots.
// Tensor maps, tails and the epilogue as rung 04 (its header says why the maps are __grid_constant__).
// Requires: sm_90a; A and B as rung 04 (the launcher repacks otherwise). Launch: THREADS threads, a 1-D grid of
//   P = min(SM count, T * k_tiles) blocks, SMEM_BYTES dynamic shared memory (as rung 06), the workspace.
// Knobs: BF16 (0/1), TN (1; 0: B is K x N), BM (128), BN (256), BK (64), STAGES (4), RASTER (2), GROUP_M (8),
//   SK_WAVES (1), SK_FIXUP_COST (50), SK_MIN_GAIN (105; 0 splits whenever T is not a multiple of P, as the tests do),
//   KLOOP_DO_WHILE (1; 0 is the serialized while loop, kept as the lesson's contrast),
//   THREADS (384 = 128 * (1 + BM / 64)); lab_hopper_knobs.cuh holds the defaults it shares with rungs 05, 06 and 08.
// The model's cost was fitted to a first H200 run with no model (every partial wave split, pieces in range
//   order; results/h200/schedule_stream_k_first_run.json), where stream-K lost to rung 06 whenever the last wave
//   was more than about half full. Part of that cost was the serialization below.
// The k-loop: written as a while loop (KLOOP_DO_WHILE = 0), ptxas serializes every wgmma of this kernel (warning
//   C7515: a path on which acc is zeroed with a group possibly in flight), so its main loop is slower than rung
//   06's on every tile, and the stream-K gain is net of that. A do-while k-loop with the fix-up added at the
//   store removed C7515 but drew C7520 (a warpgroup arrive on a divergent path) and ran slower still
//   (results/h200/schedule_stream_k_serialized_9a90ba8.json). The do-while k-loop ALONE (KLOOP_DO_WHILE = 1, now
//   the default; the fix-up still added into acc) compiles with no ptxas warning and rung 06's HGMMA /
//   WARPGROUP.DEPBAR pattern.
// Results: results/h200/schedule_stream_k.json (lab/studies/scheduling.py stream_k_study: the while loop, over rung
//   06 and cuBLAS in the same run, cold L2, median of 3 rounds, on wave-quantized, well-quantized and square shapes)
//   and results/h200/schedule_stream_k_do_while.json (the same study, the do-while loop beside the while loop, which
//   is timed there as "07_stream_k"); results/h200/gemm_tc_notes.md tabulates these, the first run and the
//   serialized run against this prediction. What is left: a launcher that runs rung 06's kernel where the model
//   splits nothing (the well-quantized shapes).
// Ideas: Osama, Merrill, Cecka, Garland, Owens, "Stream-K: Work-centric Parallel Decomposition for Dense
//   Matrix-Matrix Multiplication on the GPU" (PPoPP 2023: the DP + SK hybrid, the fix-up, ~1.2x on A100 for
//   such shapes); CUTLASS's sm90 stream-K tile scheduler. Code is this lab's own.
#include "lab_cp_async.cuh"
#include "lab_hopper_gemm.cuh"
#include "lab_tile_order.cuh"
#include "lab_sync.cuh"
#include "lab_stream_k.cuh"  // the stream-K region and each block's pieces
#include "lab_hopper_knobs.cuh"  // the knobs' defaults, ACC, STAGE_BYTES, CONSUMERS, the register split

#ifndef RASTER
#define RASTER 2  // the tile order: 0 row, 1 column, 2 grouped, 3 snake (lab_tile_order.cuh)
#endif
#ifndef SK_WAVES
#define SK_WAVES 1  // full waves added to the stream-K region besides the last partial one
#endif
#ifndef SK_FIXUP_COST
#define SK_FIXUP_COST 50  // the fix-up's cost in hundredths of a tile-time at 64 k-tiles, scaled by 64 / k_tiles
#endif
#ifndef SK_MIN_GAIN
#define SK_MIN_GAIN 105  // percent: split along K only where the model (lab_stream_k.cuh) predicts at least this speed-up
#endif
#ifndef KLOOP_DO_WHILE
#define KLOOP_DO_WHILE 1  // the consumers' k-loop as a do-while: no wgmma serialization (the header); 0 the old loop
#endif

#define SMEM_BYTES (STAGES * STAGE_BYTES + 1024)
#define SLOT_FLOATS (CONSUMERS * 128 * ACC)   // one block's partial tile: BM * BN floats
#define FIXUP_BARRIER 1                       // named barrier of the consumer threads (0 is __syncthreads)

#if !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "gemm_tc rung 07 needs sm_90a (wgmma, setmaxnreg): build it with -arch=sm_90a"
#endif
static_assert(SK_WAVES >= 0, "SK_WAVES counts whole waves");

typedef unsigned short half_bits;

__device__ __forceinline__ void tile_origin(int tile, int tiles_m, int tiles_n, int& row0, int& col0) {
    int tile_m, tile_n;
    lab_tile_coords<RASTER, GROUP_M>(tile, tiles_m, tiles_n, tile_m, tile_n);
    row0 = tile_m * BM;
    col0 = tile_n * BN;
}

// Who does what: the stream-K region, and each block's pieces in order (lab_stream_k.cuh).
typedef LabStreamK<1, SK_WAVES, SK_FIXUP_COST, SK_MIN_GAIN> StreamK;

__device__ __forceinline__ void consumers_sync() { named_barrier_sync<FIXUP_BARRIER, 128 * CONSUMERS>(); }

extern "C" __global__ void __launch_bounds__(THREADS, 1)
gemm_tc_stream_k(const __grid_constant__ TensorMap map_a, const __grid_constant__ TensorMap map_b, int M, int N,
                 int K, float alpha, float beta, half_bits* __restrict__ C, int ldc, float* __restrict__ workspace,
                 int* __restrict__ flags) {
    extern __shared__ __align__(1024) unsigned char smem[];
    __shared__ __align__(8) unsigned long long full_bars[STAGES], empty_bars[STAGES];
    if (dynamic_smem_size() < SMEM_BYTES) __trap();  // launched with too little: stop, do not overrun it

    const unsigned tiles_smem = (smem_u32addr(smem) + 1023) & ~1023u;  // the 128-byte swizzle repeats every 1024
    const unsigned full = smem_u32addr(full_bars), empty = smem_u32addr(empty_bars);
    const int wg = threadIdx.x / 128, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
    const StreamK work(tiles_m * tiles_n, (K + BK - 1) / BK);

    if (threadIdx.x == 0) {
        prefetch_tensor_map(&map_a);
        prefetch_tensor_map(&map_b);
#pragma unroll
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(full + 8 * s, 1);                  // the producer's arrive_expect_tx, then the bytes
            mbar_init(empty + 8 * s, 4 * CONSUMERS);     // one arrival per consumer warp
        }
        fence_barrier_init();
    }
    __syncthreads();

    if (wg == 0) {  // the producer warpgroup: one thread issues every load, the rest just give registers back
        setmaxnreg_dec<PRODUCER_REGS>();
        if (threadIdx.x == 0) {
            int it = 0;  // k-tiles issued so far, over all of this block's pieces
            work.for_each_piece(blockIdx.x, [&](int tile, int k0, int k1) {
                int row0, col0;
                tile_origin(tile, tiles_m, tiles_n, row0, col0);
                for (int kt = k0; kt < k1; ++kt, ++it) {
                    const int s = it % STAGES;
                    if (it >= STAGES) mbar_wait(empty + 8 * s, ((it - STAGES) / STAGES) & 1);
                    issue_stage<BM, BN, BK, TN>(tiles_smem, full, &map_a, &map_b, s, kt, row0, col0);
                }
            });
        }
        return;
    }

    setmaxnreg_inc<CONSUMER_REGS>();
    const int c = wg - 1;  // this consumer's 64 rows of each block tile
    const int g = lane / 4, t = lane % 4, tid = threadIdx.x % 128;
    const bool pairs = (ldc % 2 == 0) && (reinterpret_cast<unsigned long long>(C) % 4 == 0);
    // This thread's accumulators in a block's slot: float4 q of consumer c sits at [(c * ACC / 4 + q) * 128 + tid].
    auto slot = [&](int block) {
        return reinterpret_cast<float4*>(workspace + static_cast<long long>(block) * SLOT_FLOATS) + c * (ACC / 4) * 128
               + tid;
    };
    int it = 0;  // k-tiles consumed so far, over all of this block's pieces
    work.for_each_piece(blockIdx.x, [&](int tile, int k0, int k1) {
        int row0, col0;
        tile_origin(tile, tiles_m, tiles_n, row0, col0);
        float acc[ACC];
#pragma unroll
        for (int i = 0; i < ACC; ++i) acc[i] = 0.0f;

#if KLOOP_DO_WHILE
        int kt = k0;
        do {  // every piece has k1 > k0: no zero-trip path on which acc is zeroed with a group in flight
#else
        for (int kt = k0; kt < k1; ++kt, ++it) {
#endif
            const int s = it % STAGES;
            mbar_wait(full + 8 * s, (it / STAGES) & 1);  // k-tile `it` has landed
            const unsigned a = tiles_smem + s * STAGE_BYTES + c * 64 * ROW_BYTES;
            const unsigned b = tiles_smem + s * STAGE_BYTES + A_TILE_BYTES;
            wgmma_fence();
            fence_accumulators(acc);
#pragma unroll
            for (int ks = 0; ks < BK / 16; ++ks) {
                const unsigned long long da = wgmma_desc(a + 32 * ks, 16, 8 * ROW_BYTES);
#if TN
                const unsigned long long db = wgmma_desc(b + 32 * ks, 16, 8 * ROW_BYTES);
#else
                const unsigned long long db = wgmma_desc(b + 16 * ks * ROW_BYTES, BK * ROW_BYTES, 8 * ROW_BYTES);
#endif
                wgmma_k_step<BF16, TN, BN>(acc, da, db);
            }
            wgmma_commit();
            fence_accumulators(acc);
            wgmma_wait<1>();  // k-tile it-1's products are done: release its stage
            if (kt > k0 && lane == 0) mbar_arrive(empty + 8 * ((it - 1) % STAGES));
#if KLOOP_DO_WHILE
            ++kt, ++it;
        } while (kt < k1);
#else
        }
#endif
        wgmma_wait<0>();
        fence_accumulators(acc);
        if (lane == 0) mbar_arrive(empty + 8 * ((it - 1) % STAGES));  // the piece's last stage

        if (k1 < work.k_tiles) {  // a contribution: park it in this block's slot and raise the flag
            float4* mine = slot(blockIdx.x);
#pragma unroll
            for (int q = 0; q < ACC / 4; ++q)
                __stcg(mine + q * 128, make_float4(acc[4 * q], acc[4 * q + 1], acc[4 * q + 2], acc[4 * q + 3]));
            __threadfence();
            consumers_sync();
            if (threadIdx.x == 128) store_release(flags + blockIdx.x, 1);
            return;
        }
        if (k0 > 0) {  // the owner of a tile begun by earlier blocks: add their contributions, highest block first
            const long long tile_start = static_cast<long long>(tile) * work.k_tiles;
            for (int q = static_cast<int>(blockIdx.x) - 1; q >= 0 && work.begin(q + 1) > tile_start; --q) {
                if (work.begin(q + 1) == work.begin(q)) continue;  // an empty range contributes nothing
                if (threadIdx.x == 128) {
                    const unsigned long long start = global_ns();
                    while (load_acquire(flags + q) == 0)
                        if (global_ns() - start > LAB_WAIT_LIMIT_NS) __trap();  // never hang: say it failed
                    flags[q] = 0;  // consumed: the slot is not rewritten before the next launch
                }
                consumers_sync();
                const float4* theirs = slot(q);
#pragma unroll
                for (int i = 0; i < ACC / 4; ++i) {
                    const float4 v = __ldcg(theirs + i * 128);
                    acc[4 * i] += v.x;
                    acc[4 * i + 1] += v.y;
                    acc[4 * i + 2] += v.z;
                    acc[4 * i + 3] += v.w;
                }
            }
        }

        // acc[4j + 2h + e] is row 16 * (warp % 4) + g + 8h, column 8j + 2t + e of this consumer's 64 x BN tile.
        const int row = row0 + c * 64 + 16 * (warp % 4) + g;
#pragma unroll
        for (int j = 0; j < BN / 8; ++j)
#pragma unroll
            for (int h = 0; h < 2; ++h)
                store_pair<BF16>(C, ldc, pairs, row + 8 * h, col0 + 8 * j + 2 * t, M, N, alpha, beta,
                                 acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
    });
}
