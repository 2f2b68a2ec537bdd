// gemm_tc / rung 08 — split-K: when M x N has too few tiles to fill the GPU, K is cut into S splits, each
// (tile, split) pair is a unit of work for rung 06's persistent blocks, and the S partial tiles are summed.
//
// What changed (vs rung 06):
//   1. The work is tiles * S units; unit u is tile u % tiles, split u / tiles (its k-tiles [k0, k1): S nearly
//      equal contiguous ranges, lab_split_k.cuh). S is a kernel argument (1 <= S <= k-tiles), so one build
//      serves every split factor; the launcher picks it (lab/families/gemm_split_k.py: about one wave of units).
//   2. A unit ends with fp32 partial sums instead of C, and SPLIT_MODE says how they are combined:
//      0 "workspace": each unit stores its partial tile into slice s of an fp32 workspace (S x M x N), and a
//        second kernel (gemm_tc_split_k_reduce, below) sums the slices in the order s = 0 .. S-1, applies alpha
//        and beta, rounds once and stores C. Deterministic; costs a second launch and S x M x N x 4 bytes each way.
//      1 "in-kernel": the same slices, then a barrier across the grid (a cooperative launch, so every block is
//        resident and the wait cannot deadlock), then every consumer thread of every block reduces part of C in
//        the same fixed order. Deterministic, bit-identical to mode 0; no second launch.
//      2 "atomic": each unit adds its partial tile into one fp32 accumulator (M x N) with red.global.add.v2.f32 in
//        L2, then counts itself in the tile's arrival counter; the unit that arrives last reads the sums, stores C
//        and zeroes its accumulator and counter for the next launch. The order of the additions depends on which
//        unit gets there first, so the low bits of C differ from run to run (lab.families.gemm_split_k
//        run_to_run_bits shows by how much); needs only M x N x 4 bytes of workspace.
//      3 "cluster": the splits of a tile run as the blocks of thread-block clusters of SPLIT_CLUSTER (a tile's
//        splits g * SPLIT_CLUSTER .. g * SPLIT_CLUSTER + SPLIT_CLUSTER - 1 in cluster g of that tile). Each block
//        puts its fp32 partial tile into its own shared memory (the stages, done with), and block r of the cluster
//        sums band r of the tile (BM / SPLIT_CLUSTER rows) over the cluster's blocks in rank order, reading their
//        shared memory through DSMEM (ld.shared::cluster; lab_split_k_cluster.cuh). A tile with one cluster stores C
//        from there; with G clusters each stores its band sums into slice g of a workspace (G slices, not S) and
//        counts itself in the band's arrival counter, and the last to arrive sums the G slices in the order g = 0 ..
//        G - 1 and stores C. Deterministic (the same bits every run; not the same bits as modes 0 and 1, whose sums are grouped
//        otherwise); one launch, and S / SPLIT_CLUSTER slices instead of S.
//      Not built: CUTLASS's "serial" split-K, where split s waits for s - 1 and adds its tile to the running sum:
//      deterministic and one slice of workspace, but its S steps run one after another (S x ~2 us at S = 64).
// Why: 256 x 256 x 65536 has 2 tiles of 128 x 256: rung 06 runs 2 of 132 SMs for 1024 k-tiles each. With S = 66
//   every SM runs one unit of 15-16 k-tiles. cuBLAS picks split-K for such shapes too (its rate at 256 x 256 x 65536
//   on the H200: results/h200/gemm_split_k.json), so the bar is its own split-K, not a data-parallel kernel.
// Prediction (H200, fp16 TN, written before any GPU run): a unit's mainloop runs at rung 06's per-SM rate (about
//   670 / 132 = 5.1 TFLOP/s), so 256 x 256 x 65536 (8.6 GFLOP over 132 units) takes ~13 us of mainloop, plus a
//   partial tile's store (~1 us), plus the reduction of 66 slices x 256 KB = 17 MB (mostly L2-resident: ~3 us),
//   plus for mode 0 a second launch (~2 us): ~19 us (workspace), ~17 us (in-kernel), ~16 us (atomic, if the L2
//   atomics keep up with 132 x 128 KB of reductions) against cuBLAS's ~30 us: 1.5-1.8x. 128 x 128 x 131072 (one
//   tile of 128 x 128 with BN = 128, S = 132): ~11 us of mainloop at half the per-SM rate of the 256-wide tile, plus
//   8.4 MB of slices: ~15-17 us against cuBLAS's ~29 us: 1.7-1.9x. Large squares (S = 1): rung 06 plus the slice
//   round trip, so slower than rung 06; the launcher runs rung 06 there.
// Measured: results/h200/gemm_split_k.json (the family's headline shapes, fp16 and bf16, every mode, cuBLAS and
//   rung 06 in the same run, cold L2) and results/h200/split_k_factors.json (every split factor of each mode, the
//   variants below, and each mode's output bits over 20 runs); notebook 05 replays both against this prediction.
//   Where the time goes: results/h200/split_k_ncu.json (Nsight Compute, the first 128 x 256 build: the split
//   kernel's DRAM bytes and rate, and the reduction kernel's share, its slices read from DRAM under ncu's cache
//   flush; L2-resident in the timed runs). Tried, and within the spread of one study row (split_k_factors.json):
//   interleaved splits (every S-th k-tile), rows padded off the 128 KB power-of-two pitch, 6 stages instead of 4.
//   Kept because they paid: 128 x 128 tiles where the output has few tiles (the launcher's choice since; the study
//   run that showed it was not kept as a record), the reduction shared by up to 8 lanes per quad with loads in flight
//   (it was one thread per quad, S loads in a row), and launch plans decided once (the host's planning per launch
//   had cost more than the spin kernel covers). Atomic mode: the S-way contention on each address costs more than
//   the slices' traffic, and its low bits change from run to run (split_k_factors.json's determinism rows); modes 0
//   and 1 are the same bits every run.
//   Next: the mainloop's DRAM rate (its first k-tiles wait on a cold start that a 15-k-tile unit cannot amortize; a
//   cluster of 2 with TMA multicast of the shared operand, or fewer, longer units with the reduction overlapped),
//   and the reduction kernel's launch (programmatic dependent launch, which CuPy does not expose).
// Prediction for SPLIT_MODE = 3 (before any GPU run; fp16 TN, against mode 0 in the same rounds): mode 0 at
//   256 x 256 x 65536 takes ~37 us, of which the split kernel ~26-28 (Nsight Compute, split_k_ncu.json) and the
//   reduction kernel with its launch gap ~8-10 (8.4 MB of slices at 33 splits); mode 3 writes 1 MB of band sums at
//   32 splits (4 clusters of 8 a tile) and reads 64 KB a block over DSMEM behind two cluster barriers (~1-2 us), with
//   one split fewer a tile (+3% a unit): ~30-32 us, 1.15-1.25x mode 0 and 0.95-1.0x cuBLAS (~30 us). 128 x 128 x
//   131072 (S = 128: 16 clusters of 8 on its one tile, 16 band slices): likewise 1.1-1.2x mode 0, about cuBLAS.
//   Where the tiles alone nearly fill the GPU (S <= 4) it saves less: level with mode 0 to 1.1x.
// Measured for SPLIT_MODE = 3 with its first launcher, which ran S rounded down to a multiple of 8 whatever fit (an
//   H100 at 0195461, results/h100/split_k_rounds_0195461.json, lab.studies.split_k_rounds, 3 interleaved rounds, cold
//   L2): correct on every check case, the same bits on every run, memcheck, racecheck and synccheck clean; but 0.61-
//   0.88x mode 0's speed, not 1.1-1.25x (0.78x at 256 x 256 x 65536 fp16, 0.83x at 128 x 128 x 131072, 0.61x at
//   1024 x 1024 x 16384 with clusters of 4). The prediction failed, and what it left out is where a cluster may run:
//   its blocks share one GPC, GPCs hold 16-18 SMs or fewer, so fewer clusters of 8 (or of 4) fit at once than the
//   launcher ran, and the rest waited for the first wave to end (the driver's count, cuOccupancyMaxActiveClusters,
//   had answered nothing: lab.core.cluster asked it with a grid of 2, not a multiple of 8). The launcher since asks
//   it for every size and keeps every cluster in the first wave (lab.families.gemm_split_k, _cluster_plan), which has
//   not yet run on a GPU. Predicted for it (before any run): where 16 clusters of 8 fit, the figures above become
//   about mode 0's first-wave time with no second kernel, so the prediction above; where they do not, clusters of 4
//   (or fewer splits) and 1.0-1.15x mode 0. Whether a cluster's barriers and DSMEM reads cost more than the
//   reduction kernel they replace is what that run must show.
// Measured with that launcher (results/h100/split_k_rounds_262d23d.json, an H100, 3 rounds): 1.00-1.01x mode 0 at
//   128 x 128 x 131072 (120 splits: the 15 clusters of 8 the driver counts), but 0.85-0.92x elsewhere (0.85-0.88x at
//   256 x 256 x 65536), against 1.0-1.25x predicted; 0.75-0.89x the library. Nsight Compute on both shapes
//   (results/h100/split_k_ncu.json, scripts/split_k_ncu.py, 96aa2fa; caches flushed clean) says where: at 256 x 256 x
//   65536 mode 0's split kernel takes 30.5-30.8 us with its SMs active 90% of its cycles, then 7.2 us of reduction
//   kernel (37.7-38.0 us); mode 3 takes 44.7-44.8 us with its SMs active 67% of its cycles and 5.0-5.2 warps stalled
//   on a barrier per instruction issued (0.4 in mode 0): blocks wait at the cluster barrier for the slowest of their
//   cluster, and SMs stand empty meanwhile. At 128 x 128 x 131072: 36.1 us against 30.1 + 8.0-8.3 (active 76%,
//   barrier stalls 8.7-8.8). No second wave explains it: the driver counts 15 clusters of 8, 30 of 4, 66 of 2 at once
//   on that H100, and the launcher ran 64 clusters of 2 (S = 32) at 256 x 256 x 65536, 15 of 8 (S = 120) at 128 x 128
//   x 131072 (results/h100/split_k_cluster_fit.json, scripts/split_k_cluster_fit.py, 823c643). What is left, not yet
//   measured apart: clusters of 2 leave 16 slices a tile, which the last cluster of each band sums alone while the
//   other SMs idle, and every block waits at its cluster barrier for its partner. The plan counts busy SMs only.
//   Predicted before timing each plan (lab.studies.split_k_plans): 8 x 3 and 4 x 7 about 4 us faster than 2 x 16 at
//   256 x 256 x 65536, still behind mode 0; 8 x 15 stays best at 128 x 128 x 131072.
// Measured plan by plan (results/h100/split_k_plans.json, an H100 at 730294a, 3 rounds, cold L2): at 256 x 256 x
//   65536, 8 x 3 ran 1.01x mode 0 (0.88x the library) and 4 x 7 0.98x, where 2 x 16 ran 0.87x: the direction
//   predicted, and more (8 x 3 caught mode 0). At 128 x 128 x 131072, 8 x 12 and 8 x 8 ran 1.04x mode 0 (0.90x the
//   library), 8 x 15 1.02x: that half of the prediction failed by 2%. So the launcher now takes the widest cluster
//   that gives every tile one in the first wave, at most 12 a tile (gemm_split_k.PLAN_GROUPS): 8 x 3 and 8 x 12 here.
// Measured with that rule (results/h100/split_k_rounds.json, an H100 at ec4fdb8, 3 rounds): 1.00x / 0.99x mode 0 at
//   256 x 256 x 65536 fp16 / bf16 (0.86x the library; 0.85-0.88x mode 0 before), 1.02x / 1.03x at 128 x 128 x 131072
//   (0.89x the library); but 0.80x at 512 x 512 x 32768, where 4 x 1 left half the blocks idle (2 x 4 had run
//   0.92x), and 0.91x at 1024 x 1024 x 16384 (2 x 2, as before). So the widest size now wins only while it keeps
//   three quarters of the blocks the busiest size keeps (gemm_split_k.PLAN_BUSY_SHARE): 2 x 4 again at 512 x 512.
//   Predicted for it (before the run): 0.90-0.93x mode 0 there, as 2 x 4 ran at 262d23d; the other shapes unchanged.
//   Next: the sums without a whole-cluster wait (each block pushes its band to its owner and arrives on that block's
//   mbarrier, as the norms' st.async exchange does), for the barrier stalls ncu counts.
// Mainloop: tensor maps, tails and the k-loop as rung 06; the consumers' k-loop is a do-while (every unit has at least one
//   k-tile), which keeps ptxas from serializing the wgmmas (rung 07's lesson).
// Requires: sm_90a; A and B as rung 04 (the launcher repacks otherwise). Launch: THREADS threads, a 1-D grid of
//   min(tiles * S, SM count) blocks (mode 1: a cooperative launch; mode 3: tiles * S blocks, one unit each, S a
//   multiple of SPLIT_CLUSTER, the cluster size compiled in), SMEM_BYTES dynamic shared memory, then (mode 0)
//   gemm_tc_split_k_reduce. Workspace (the launcher's, per device and stream): modes 0 and 1: S * M * LDW floats
//   (LDW = N rounded up to 4); mode 2: M * LDW floats and one int per tile, all zero between launches; mode 1: two
//   ints for the grid barrier, zero before the first launch; mode 3: S / SPLIT_CLUSTER slices of M * LDW floats and
//   SPLIT_CLUSTER ints per tile (the bands' counters), zero between launches.
// Knobs: BF16 (0; 1 for bf16), TN (1; 0: B is K x N), BM (128), BN (256; the launcher picks 128 where N <= 128 or
//   the output has few tiles), BK (64), STAGES (4), RASTER (2), GROUP_M (8), SPLIT_MODE (0 workspace; 1 in-kernel,
//   2 atomic, 3 cluster), SPLIT_INTERLEAVE (0; 1: split s takes every S-th k-tile), SPLIT_CLUSTER (8: blocks a
//   cluster in mode 3: 1, 2, 4 or 8, the launcher's pick from S), THREADS (384 = 128 * (1 + BM / 64));
//   the shared defaults, the register split and the stage bytes are those of lab_hopper_knobs.cuh (rungs 05-07).
// Ideas: CUTLASS's split-K GEMMs ("parallel" = a workspace and a reduction kernel, "serial" = semaphores); the
//   stream-K paper's discussion of split-K's fix-up (Osama et al., PPoPP 2023); mode 3's partial tiles summed in a
//   cluster through distributed shared memory: the CUDA C++ Programming Guide ("Distributed Shared Memory") and
//   NVIDIA's PTX ISA ("mapa", "barrier.cluster"). Code is this lab's own.
#include "lab_cp_async.cuh"
#include "lab_hopper_gemm.cuh"
#include "lab_tile_order.cuh"
#include "lab_sync.cuh"
#include "lab_split_k.cuh"
#include "lab_split_k_cluster.cuh"

// The knobs' defaults as lab_hopper_knobs.cuh has them (gemm_tc rungs 06 and 07 and grouped rung 01 take them
// from there), spelled out because exercise 07 starts from this file and a starter shows its knobs
// (tests/test_exercises.py); tests/test_headers.py holds the two equal.
#ifndef BF16
#define BF16 0
#endif
#ifndef TN
#define TN 1
#endif
#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 256
#endif
#ifndef BK
#define BK 64
#endif
#ifndef STAGES
#define STAGES 4
#endif
#ifndef RASTER
#define RASTER 2  // the tile order: 0 row, 1 column, 2 grouped, 3 snake (lab_tile_order.cuh)
#endif
#ifndef GROUP_M
#define GROUP_M 8
#endif
#ifndef SPLIT_MODE
#define SPLIT_MODE 0  // 0 workspace + reduction kernel, 1 in-kernel (grid barrier), 2 atomic, 3 cluster (DSMEM)
#endif
#ifndef SPLIT_CLUSTER
#define SPLIT_CLUSTER 8  // mode 3: blocks a cluster, each one split of the same tile
#endif
#ifndef SPLIT_INTERLEAVE
#define SPLIT_INTERLEAVE 0  // 0: split s takes a contiguous range of k-tiles; 1: every S-th k-tile from s
#endif
#ifndef THREADS
#define THREADS (128 * (1 + BM / 64))  // a producer warpgroup, then the consumers
#endif

#include "lab_hopper_knobs.cuh"  // what follows from the knobs: ACC, STAGE_BYTES, CONSUMERS, the register split

#define SMEM_BYTES (STAGES * STAGE_BYTES + 1024)
#define CONSUMER_THREADS (128 * CONSUMERS)
#define CONSUMER_BARRIER 1                    // named barrier of the consumer threads (0 is __syncthreads)
#define REDUCE_THREADS 256                    // the separate reduction kernel's block

#if !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "gemm_tc rung 08 needs sm_90a (wgmma, setmaxnreg): build it with -arch=sm_90a"
#endif
static_assert(SPLIT_MODE >= 0 && SPLIT_MODE <= 3, "SPLIT_MODE is 0 (workspace), 1 (in-kernel), 2 (atomic) or 3 "
                                                 "(cluster)");
static_assert(SPLIT_CLUSTER == 1 || SPLIT_CLUSTER == 2 || SPLIT_CLUSTER == 4 || SPLIT_CLUSTER == 8,
              "SPLIT_CLUSTER is 1, 2, 4 or 8 (8 is the portable cluster limit)");

#if SPLIT_MODE == 3
#define KERNEL_CLUSTER __cluster_dims__(SPLIT_CLUSTER, 1, 1)
static_assert(BM * lab_partial_pitch(BN) * 4 <= STAGES * STAGE_BYTES, "the partial tile fits in the stages' memory");
#else
#define KERNEL_CLUSTER
#endif

typedef unsigned short half_bits;

__device__ __forceinline__ void tile_origin(int tile, int tiles_m, int tiles_n, int& row0, int& col0) {
    int tile_m, tile_n;
    lab_tile_coords<RASTER, GROUP_M>(tile, tiles_m, tiles_n, tile_m, tile_n);
    row0 = tile_m * BM;
    col0 = tile_n * BN;
}

// Unit u's tile and split. Modes 0-2: tile u % tiles, split u / tiles. Mode 3: the blocks of cluster q = u /
// SPLIT_CLUSTER (rank u % SPLIT_CLUSTER) take consecutive splits of tile q % tiles.
__device__ __forceinline__ void unit_work(int u, int tiles, int& tile, int& split) {
#if SPLIT_MODE == 3
    const int q = u / SPLIT_CLUSTER;
    tile = q % tiles;
    split = (q / tiles) * SPLIT_CLUSTER + u % SPLIT_CLUSTER;
#else
    tile = u % tiles;
    split = u / tiles;
#endif
}

// The k-tiles of split s of `splits`: kt = first, first + step, ... while kt < end.
//   SPLIT_INTERLEAVE = 0: a contiguous range; the ranges differ in length by at most one, the longer ones first.
//   SPLIT_INTERLEAVE = 1: every S-th k-tile from s (s, s + S, ...), so the S splits of a tile read neighbouring
//   k-tiles at any moment (one long run of each row instead of S short ones; it measured no faster on the H200).
// 32-bit arithmetic only: a 64-bit division is a called subroutine, and a call after the mainloop makes ptxas
// serialize the wgmmas (warning C7520).
__device__ __forceinline__ void split_k_tiles(int k_tiles, int splits, int s, int& first, int& step, int& end) {
    first = 0, step = 1, end = k_tiles;  // the starter's placeholder: every split takes every k-tile (S times K)
    // TODO: the k-tiles of split s: first, step and end, every k-tile in exactly one split
}

// Every quad of C (four columns from a multiple of 4) from the sum of the S slices, for the threads numbered
// `first`, first + stride, ... (`first` % 32 is the lane; stride a multiple of 32). Lane p of a quad's group of
// lab_split_lanes(S) threads sums slices p, p + lanes, ... in that order, with LAB_SPLIT_BATCH loads in flight; the
// group adds its partial sums in a fixed butterfly (a + b and b + a are the same bits, so every lane ends with the
// same value), and its first lane applies alpha and beta, rounds once and stores (rung 06's store_pair). The order
// never depends on timing: the same bits on every run, in both modes that call this. The caller orders these plain
// loads after the slices' stores (a kernel boundary, or the grid barrier). M * LDW < 2^31 (the launcher's limit), so
// the indices are 32-bit (see split_k_tiles).
__device__ __forceinline__ void reduce_slices(const float* slices, int splits, half_bits* C, int ldc, int M, int N,
                                              float alpha, float beta, int first, int stride) {
    // TODO: sum each quad's S slices in a fixed order, then alpha, beta and one rounding into C
}

__device__ __forceinline__ void consumers_sync() { named_barrier_sync<CONSUMER_BARRIER, CONSUMER_THREADS>(); }

// Every block's consumers arrive once; the last to arrive resets the count and bumps the generation the others
// wait on (so the next launch finds the count at 0, whatever its grid). Only a cooperative launch guarantees that
// every block is resident; a wait of 10 s traps instead of hanging.
__device__ __forceinline__ void grid_barrier(int* bar) {
    __threadfence();  // this block's slices before its arrival
    consumers_sync();
    if (threadIdx.x == 128) {
        const int generation = load_acquire(bar + 1);
        if (atomicAdd(bar, 1) == static_cast<int>(gridDim.x) - 1) {
            bar[0] = 0;
            store_release(bar + 1, generation + 1);
        } else {
            const unsigned long long start = global_ns();
            while (load_acquire(bar + 1) == generation)
                if (global_ns() - start > LAB_WAIT_LIMIT_NS) __trap();
        }
    }
    consumers_sync();
    __threadfence();  // every thread's later plain loads of the slices see the other blocks' stores
}

extern "C" __global__ void KERNEL_CLUSTER __launch_bounds__(THREADS, 1)
gemm_tc_split_k(const __grid_constant__ TensorMap map_a, const __grid_constant__ TensorMap map_b, int M, int N,
                int K, float alpha, float beta, half_bits* __restrict__ C, int ldc, int splits,
                float* __restrict__ workspace, int* __restrict__ sync) {
    extern __shared__ __align__(1024) unsigned char smem[];
    __shared__ __align__(8) unsigned long long full_bars[STAGES], empty_bars[STAGES];
#if SPLIT_MODE == 2 || SPLIT_MODE == 3
    __shared__ int last_to_arrive;
#endif
    if (dynamic_smem_size() < SMEM_BYTES) __trap();  // launched with too little: stop, do not overrun it

    const unsigned tiles_smem = (smem_u32addr(smem) + 1023) & ~1023u;  // the 128-byte swizzle repeats every 1024
    const unsigned full = smem_u32addr(full_bars), empty = smem_u32addr(empty_bars);
    const int wg = threadIdx.x / 128, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN, tiles = tiles_m * tiles_n;
    const int k_tiles = (K + BK - 1) / BK, units = tiles * splits;
    if (splits < 1 || splits > k_tiles || blockIdx.x >= units) __trap();  // the launcher's S and grid are wrong
#if SPLIT_MODE == 3
    if (splits % SPLIT_CLUSTER != 0 || static_cast<int>(gridDim.x) != units) __trap();  // one unit a block
#endif

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
            int it = 0;  // k-tiles issued so far, over all of this block's units
            for (int u = blockIdx.x; u < units; u += gridDim.x) {
                int row0, col0, first, step, end, tile, split;
                unit_work(u, tiles, tile, split);
                tile_origin(tile, tiles_m, tiles_n, row0, col0);
                split_k_tiles(k_tiles, splits, split, first, step, end);
                for (int kt = first; kt < end; kt += step, ++it) {
                    const int s = it % STAGES;
                    if (it >= STAGES) mbar_wait(empty + 8 * s, ((it - STAGES) / STAGES) & 1);
                    issue_stage<BM, BN, BK, TN>(tiles_smem, full, &map_a, &map_b, s, kt, row0, col0);
                }
            }
        }
#if SPLIT_MODE == 3
        cluster_sync();  // the consumers' two cluster barriers (cluster_sum_tile and the end), met here
        cluster_sync();
#endif
        return;
    }

    setmaxnreg_inc<CONSUMER_REGS>();
    const int c = wg - 1;  // this consumer's 64 rows of each block tile
#if SPLIT_MODE != 3  // mode 3's reduction has its own (cluster_sum_tile)
    const int g = lane / 4, t = lane % 4;
    const int ldw = lab_split_ldw(N);
#endif
#if SPLIT_MODE == 2
    const bool pairs = (ldc % 2 == 0) && (reinterpret_cast<unsigned long long>(C) % 4 == 0);
#endif
    int it = 0;  // k-tiles consumed so far, over all of this block's units
    int u = blockIdx.x;
    do {  // the grid has at most `units` blocks: every block has a unit
        int tile, split, row0, col0, first, step, end;
        unit_work(u, tiles, tile, split);
        tile_origin(tile, tiles_m, tiles_n, row0, col0);
        split_k_tiles(k_tiles, splits, split, first, step, end);
        float acc[ACC];
#pragma unroll
        for (int i = 0; i < ACC; ++i) acc[i] = 0.0f;

        int kt = first;
        do {  // every split has a k-tile: no zero-trip path on which acc is zeroed with a group in flight
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
            if (kt > first && lane == 0) mbar_arrive(empty + 8 * ((it - 1) % STAGES));
            kt += step, ++it;
        } while (kt < end);
        wgmma_wait<0>();
        fence_accumulators(acc);
        if (lane == 0) mbar_arrive(empty + 8 * ((it - 1) % STAGES));  // the unit's last stage, for the next unit

#if SPLIT_MODE == 3
        (void)warp;  // the reduction finds its own
        float* part = reinterpret_cast<float*>(smem + (tiles_smem - smem_u32addr(smem)));  // the stages, done with
        lab_cluster_sum_tile<BM, BN, SPLIT_CLUSTER, CONSUMER_BARRIER, CONSUMER_THREADS, BF16>(
            acc, part, tiles_smem, row0, col0, c, tile, split / SPLIT_CLUSTER, splits / SPLIT_CLUSTER, C, ldc, M, N,
            alpha, beta, workspace, sync, last_to_arrive);
        asm volatile("barrier.cluster.wait.acquire;\n" ::: "memory");  // no block leaves while a peer reads it
#else
        // acc[4j + 2h + e] is row 16 * (warp % 4) + g + 8h, column 8j + 2t + e of this consumer's 64 x BN tile.
        const int row = row0 + c * 64 + 16 * (warp % 4) + g;
#endif
#if SPLIT_MODE == 3
#elif SPLIT_MODE == 2
#pragma unroll
        for (int j = 0; j < BN / 8; ++j)
#pragma unroll
            for (int h = 0; h < 2; ++h)
                lab_split_red_pair(workspace, ldw, row + 8 * h, col0 + 8 * j + 2 * t, M, N, acc[4 * j + 2 * h],
                                   acc[4 * j + 2 * h + 1]);
        __threadfence();  // this thread's additions before the block's arrival
        consumers_sync();
        if (threadIdx.x == 128) {
            int* arrived = sync + tile;
            last_to_arrive = atomicAdd(arrived, 1) == splits - 1;
            if (last_to_arrive) *arrived = 0;  // every split is in: ready for the next launch
        }
        consumers_sync();
        if (last_to_arrive) {
            __threadfence();
#pragma unroll 4
            for (int j = 0; j < BN / 8; ++j)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int r = row + 8 * h, col = col0 + 8 * j + 2 * t;
                    if (r >= M || col >= N) continue;
                    float* p = workspace + static_cast<long long>(r) * ldw + col;
                    const float v0 = __ldcg(p), v1 = col + 1 < N ? __ldcg(p + 1) : 0.0f;
                    store_pair<BF16>(C, ldc, pairs, r, col, M, N, alpha, beta, v0, v1);
                    __stcg(p, 0.0f);
                    if (col + 1 < N) __stcg(p + 1, 0.0f);
                }
        }
#else
        // TODO: store this unit's fp32 partial tile into slice `split` of the workspace (inside M x N only)
#endif
        u += gridDim.x;
    } while (u < units);
#if SPLIT_MODE == 1
    grid_barrier(sync);
    reduce_slices(workspace, splits, C, ldc, M, N, alpha, beta,
                  static_cast<int>(blockIdx.x) * CONSUMER_THREADS + (threadIdx.x - 128),
                  static_cast<int>(gridDim.x) * CONSUMER_THREADS);
#endif
}

// Mode 0's second kernel: C from the S slices, each thread a quad of four columns (REDUCE_THREADS per block, any
// 1-D grid).
extern "C" __global__ void __launch_bounds__(REDUCE_THREADS)
gemm_tc_split_k_reduce(int M, int N, float alpha, float beta, half_bits* __restrict__ C, int ldc,
                       const float* __restrict__ workspace, int splits) {
    reduce_slices(workspace, splits, C, ldc, M, N, alpha, beta, static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x),
                  static_cast<int>(gridDim.x * blockDim.x));
}
