// grouped_gemm / rung 01 — grouped persistent: many GEMMs of different sizes (a mixture-of-experts layer's
// experts) in ONE launch of gemm_tc rung 06's persistent kernel, read from a problem table in global memory.
//
// What it computes: for every group g of the table, C_g (M_g x N_g, row-major, ldc_g) = A_g (M_g x K_g, k
//   contiguous) @ B_g^T, B_g being N_g x K_g ("TN": a linear layer's weight), fp32 accumulation, C_g rounded once
//   to the input type. M_g may be 0 (an expert that got no tokens); N_g, K_g >= 1.
// What changed (vs gemm_tc rung 06):
//   1. A device-side problem table instead of one problem: entry g (LabGroup below, 384 bytes) holds its own TMA
//      tensor maps for A_g and B_g, its sizes, C_g's offset from the C argument and ldc_g, and the prefix sum of
//      tiles (first_tile: the global index of its first tile). The host builds it once per problem
//      (lab/families/grouped_gemm.py) and copies it to global memory before the launch; C_g is an OFFSET, so the
//      same table serves any output buffer.
//   2. Grid: min(total tiles, SMs) blocks; block b takes global tiles b, b + gridDim.x, ... as in rung 06. The
//      producer and each consumer warpgroup map a global tile to (group, tile within the group) the same way,
//      with a cursor: a block's tiles only increase, so the cursor only moves forward, one table entry at a time
//      (empty groups have first_tile == the next group's, so it steps over them), and a tile costs no search
//      from scratch. Within a group the tiles go in rung 06's RASTER order (lab_tile_order.cuh).
//   3. The pipeline's running k-tile index `it` runs across tiles AND groups (K_g differs between groups; the
//      stage and phase arithmetic only counts k-tiles), so the producer loads the next group's first k-tiles
//      while the consumers store the last tile of this one.
//   4. Tensor maps in global memory, not kernel parameters. PTX ISA, "Tensor Copy Instructions:
//      cp.async.bulk.tensor": the tensorMap operand is a generic address of a tensor map in the .param, .const or
//      .global state space; "prefetch" takes a generic address with .tensormap. CUDA C++ Programming Guide, "Using
//      TMA to transfer multi-dimensional arrays" (docs.nvidia.com/cuda/cuda-c-programming-guide/
//      #using-tma-to-transfer-multi-dimensional-arrays): a map copied to global memory (cudaMemcpy from the host) is
//      valid, but each thread that uses it first issues an acquire fence of the tensormap proxy
//      (fence.proxy.tensormap::generic.acquire, scope .sys since the host wrote it), once per map unless the map
//      changes again. Only the producer thread issues TMA, so it fences (and prefetches) each group's two maps
//      when its cursor enters the group. A CUtensorMap is 128 opaque bytes that must be 64-byte aligned (CUDA 12's
//      cuda.h; CUDA 13's says 128): each entry is 128-byte aligned and starts with the two maps.
//   5. alpha = 1, beta = 0 (an expert's projection), TN only: no knobs for them.
// Why: a Python loop of cuBLAS calls pays a launch (and a kernel's ramp-up and tail) per expert, and a small
//   expert's GEMM cannot fill 132 SMs; cuBLAS's batched call needs every group the same shape. Here every tile
//   of every expert is one queue over all SMs: one launch, one ramp-up, one wave tail, and a small expert's
//   tiles run beside a large one's. What it does not fix: an expert's last tile-row is padded to BM = 128 rows
//   (an expert with 130 tokens computes 256 rows), and a table whose groups change every step (re-routing) must
//   be rebuilt on the host (lab/families/grouped_gemm.py times that: 2 tensor maps per expert through the driver).
// Prediction (H200, fp16 and bf16 alike, written before any GPU run, from rung 06's ~672 TFLOP/s at 4096^3 in
//   results/h200/gemm_tc.json: about 693 TFLOP/s of useful work per full tile):
//   uniform (64 x M=256, N = K = 4096): 2048 tiles = 15.5 waves of 132, no padding: 640-680 TFLOP/s, 0.9-1.0x of
//     cuBLAS's strided-batched call and 1.4-2x of the cupy_loop (each call's 256 x 4096 output is 32 tiles of
//     128 x 256: a quarter of the SMs, unless cuBLAS splits K).
//   moe (64 experts, 16384 tokens, route_tokens' skewed routing: 5 experts empty, the largest 2685 tokens; N = K =
//     4096): 166 tile-rows of 128 for 128 tile-rows' worth of tokens (0.77 useful), 2656 tiles = 20.1 waves (21
//     rounds): 450-540 TFLOP/s; the cupy_loop (59 calls, most of them small-M shapes where cuBLAS is far from its
//     peak) at 250-400, so 1.3-2x of the loop.
//   small (128 groups, M in [32, 512], N = K = 1024; 35475 rows): 337 tile-rows (0.82 useful), 1348 tiles = 10.2
//     waves (11 rounds), and K = 1024 is 16 k-tiles per tile, so the unhidden epilogue weighs ~10%: 400-520
//     TFLOP/s; the loop is launch-bound (128 Python-issued calls of ~0.6 GFLOP each): 5-10x of the loop.
//   Host: building the moe table (118 tensor maps through cuda-bindings) 1-5 ms, longer than the kernel (~1.1 ms).
// Measured: results/h200/grouped_gemm.json (the three cases in both types, cold L2, the loop of cuBLAS calls and
//   cuBLAS's strided-batched call in the same run) and results/h200/grouped_table_cost.json (building the moe
//   table on the host, on the 2-GPU H200 machine); notebook 05 replays both against this prediction. A table
//   re-routed every step wants its tensor maps built on the device (CUTLASS patches them there).
// Tails as gemm_tc rung 04/06: TMA zero-fills the boxes past M_g, N_g and K_g (the map's extents are the group's, so
//   a box never reads the next group's rows), and the epilogue stores only inside M_g x N_g.
// Requires: sm_90a (wgmma, setmaxnreg, fence.proxy.tensormap: PTX ISA 8.3). Each A_g and B_g 16-byte aligned with
//   a leading dimension that is a multiple of 8 elements (TMA's rule; the family allocates them so). The table:
//   group_count entries of LabGroup, 128-byte aligned, first_tile the prefix sum of tiles = ceil(M_g / BM) *
//   ceil(N_g / BN), total_tiles their sum. Launch: THREADS = 128 * (1 + BM / 64) threads, a 1-D grid of
//   min(total_tiles, SMs) blocks, dynamic shared memory SMEM_BYTES = STAGES * (BM + BN) * BK * 2 + 1024 (197632
//   bytes at the defaults).
// Knobs: BF16 (0/1), BM (128), BN (256), BK (64), STAGES (4), RASTER (2: grouped; 0 row, 1 column, 3 snake),
//   GROUP_M (8), THREADS (384 = 128 * (1 + BM / 64)); all but RASTER from lab_hopper_knobs.cuh, as gemm_tc rung 06.
// Ideas: CUTLASS's sm90 grouped GEMM (a per-group problem table walked by a persistent tile scheduler; CUTLASS
//   patches tensor maps on the device instead, which this rung leaves to a later one), Triton's grouped GEMM
//   tutorial (a persistent loop over the tiles of all groups), MegaBlocks (Gale et al., "MegaBlocks: Efficient
//   Sparse Training with Mixture-of-Experts", MLSys 2023) for why MoE wants one kernel over uneven experts. Code is
//   this lab's own.
#include "lab_cp_async.cuh"
#include "lab_hopper_gemm.cuh"
#include "lab_tile_order.cuh"

#define TN 1  // B_g is N_g x K_g (a linear layer's weight): not a knob here
#include "lab_hopper_knobs.cuh"  // the knobs' defaults, ACC, STAGE_BYTES, CONSUMERS, the register split

#ifndef RASTER
#define RASTER 2  // the tile order inside a group: 0 row, 1 column, 2 grouped, 3 snake (lab_tile_order.cuh)
#endif

#define SMEM_BYTES (STAGES * STAGE_BYTES + 1024)

#if !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "grouped_gemm rung 01 needs sm_90a (wgmma, setmaxnreg): build it with -arch=sm_90a"
#endif

typedef unsigned short half_bits;

// One group of the problem table, as lab/families/grouped_gemm.py's GROUP_DTYPE lays it out (a CPU test compares
// the offsets asserted below with that dtype). The four ints a cursor reads to find a tile's group come first, in
// one 16-byte load.
struct __align__(128) LabGroup {
    TensorMap map_a;       // A_g: width K_g, height M_g, boxes BK x BM (zeros: an empty group's, never used)
    TensorMap map_b;       // B_g: width K_g, height N_g, boxes BK x BN
    int first_tile;        // the global index of the group's first tile (prefix sum of `tiles`)
    int tiles;             // tiles_m * tiles_n (0 when M_g = 0)
    int tiles_m, tiles_n;  // ceil(M_g / BM), ceil(N_g / BN)
    int M, N, ldc, k_tiles;  // k_tiles = ceil(K_g / BK)
    long long c_offset;    // C_g = C + c_offset (elements)
    int K;
};
static_assert(sizeof(LabGroup) == 384, "a table entry is 384 bytes");
// The field offsets, where this NVRTC knows __builtin_offsetof (the H200 machine's NVRTC rejected it; the CPU test
// still reads these lines against the family's dtype, and the NVRTC the tests compile with checks them).
#if defined(__has_builtin)
#if __has_builtin(__builtin_offsetof)
#define LAB_LAYOUT_CHECKED 1
#endif
#endif
#if defined(LAB_LAYOUT_CHECKED)
static_assert(__builtin_offsetof(LabGroup, map_a) == 0, "LabGroup.map_a");
static_assert(__builtin_offsetof(LabGroup, map_b) == 128, "LabGroup.map_b");
static_assert(__builtin_offsetof(LabGroup, first_tile) == 256, "LabGroup.first_tile");
static_assert(__builtin_offsetof(LabGroup, tiles) == 260, "LabGroup.tiles");
static_assert(__builtin_offsetof(LabGroup, tiles_m) == 264, "LabGroup.tiles_m");
static_assert(__builtin_offsetof(LabGroup, tiles_n) == 268, "LabGroup.tiles_n");
static_assert(__builtin_offsetof(LabGroup, M) == 272, "LabGroup.M");
static_assert(__builtin_offsetof(LabGroup, N) == 276, "LabGroup.N");
static_assert(__builtin_offsetof(LabGroup, ldc) == 280, "LabGroup.ldc");
static_assert(__builtin_offsetof(LabGroup, k_tiles) == 284, "LabGroup.k_tiles");
static_assert(__builtin_offsetof(LabGroup, c_offset) == 288, "LabGroup.c_offset");
static_assert(__builtin_offsetof(LabGroup, K) == 296, "LabGroup.K");
#endif

// Where a role stands in the table: group g, whose tiles are the global indices [first, end).
struct GroupCursor {
    int g, first, end, tiles_m, tiles_n;
};

// Move the cursor forward to the group that holds global tile `tile` (tile < total_tiles, and never below the
// cursor's group: a block's tiles only increase). The table is read-only for the kernel's lifetime, hence the
// non-coherent loads.
__device__ __forceinline__ void seek_group(const LabGroup* __restrict__ groups, int group_count, int tile,
                                           GroupCursor& cur) {
    while (tile >= cur.end && cur.g + 1 < group_count) {
        ++cur.g;
        const int4 where = __ldg(reinterpret_cast<const int4*>(&groups[cur.g].first_tile));
        cur.first = where.x;
        cur.end = where.x + where.y;
        cur.tiles_m = where.z;
        cur.tiles_n = where.w;
    }
}

// The origin in C_g of the group's tile `local` (0 .. tiles_m * tiles_n - 1), in the RASTER order.
__device__ __forceinline__ void tile_origin(int local, int tiles_m, int tiles_n, int& row0, int& col0) {
    int tile_m, tile_n;
    lab_tile_coords<RASTER, GROUP_M>(local, tiles_m, tiles_n, tile_m, tile_n);
    row0 = tile_m * BM;
    col0 = tile_n * BN;
}

// Acquire a tensor map the host wrote to global memory before this thread's first TMA through it (CUDA C++
// Programming Guide, "Using TMA to transfer multi-dimensional arrays"; PTX ISA "membar / fence": fence.proxy.tensormap).
__device__ __forceinline__ void acquire_tensor_map(const TensorMap* map) {
    asm volatile("fence.proxy.tensormap::generic.acquire.sys [%0], 128;\n" ::"l"(map) : "memory");
}

extern "C" __global__ void __launch_bounds__(THREADS, 1)
grouped_gemm_persistent(const LabGroup* __restrict__ groups, int group_count, int total_tiles,
                        half_bits* __restrict__ C) {
    extern __shared__ __align__(1024) unsigned char smem[];
    __shared__ __align__(8) unsigned long long full_bars[STAGES], empty_bars[STAGES];
    if (dynamic_smem_size() < SMEM_BYTES) __trap();  // launched with too little: stop, do not overrun it

    const unsigned tiles_smem = (smem_u32addr(smem) + 1023) & ~1023u;  // the 128-byte swizzle repeats every 1024
    const unsigned full = smem_u32addr(full_bars), empty = smem_u32addr(empty_bars);
    const int wg = threadIdx.x / 128, warp = threadIdx.x / 32, lane = threadIdx.x % 32;

    if (threadIdx.x == 0) {
#pragma unroll
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(full + 8 * s, 1);                  // the producer's arrive_expect_tx, then the bytes
            mbar_init(empty + 8 * s, 4 * CONSUMERS);     // one arrival per consumer warp
        }
        fence_barrier_init();
    }
    __syncthreads();

    GroupCursor cur = {-1, 0, 0, 0, 0};
    if (wg == 0) {  // the producer warpgroup: one thread issues every load, the rest just give registers back
        setmaxnreg_dec<PRODUCER_REGS>();
        if (threadIdx.x == 0) {
            int it = 0;  // k-tiles issued so far, over all of this block's tiles and groups
            int k_tiles = 0;
            const TensorMap *map_a = nullptr, *map_b = nullptr;
            for (int tile = blockIdx.x; tile < total_tiles; tile += gridDim.x) {
                if (tile >= cur.end) {  // a new group: its maps, fenced once, and its depth in k-tiles
                    seek_group(groups, group_count, tile, cur);
                    map_a = &groups[cur.g].map_a;
                    map_b = &groups[cur.g].map_b;
                    acquire_tensor_map(map_a);
                    acquire_tensor_map(map_b);
                    prefetch_tensor_map(map_a);
                    prefetch_tensor_map(map_b);
                    k_tiles = __ldg(&groups[cur.g].k_tiles);
                }
                int row0, col0;
                tile_origin(tile - cur.first, cur.tiles_m, cur.tiles_n, row0, col0);
                for (int kt = 0; kt < k_tiles; ++kt, ++it) {
                    const int s = it % STAGES;
                    // Wait until the consumers released this stage's previous k-tile (it - STAGES).
                    if (it >= STAGES) mbar_wait(empty + 8 * s, ((it - STAGES) / STAGES) & 1);
                    issue_stage<BM, BN, BK, TN>(tiles_smem, full, map_a, map_b, s, kt, row0, col0);
                }
            }
        }
        return;
    }

    setmaxnreg_inc<CONSUMER_REGS>();
    const int c = wg - 1;  // this consumer's 64 rows of each block tile
    const int g = lane / 4, t = lane % 4;
    int it = 0;  // k-tiles consumed so far, over all of this block's tiles and groups
    int M = 0, N = 0, ldc = 0, k_tiles = 0;
    half_bits* Cg = C;
    bool pairs = false;
    for (int tile = blockIdx.x; tile < total_tiles; tile += gridDim.x) {
        if (tile >= cur.end) {  // a new group: its sizes and where its C starts
            seek_group(groups, group_count, tile, cur);
            const int4 sizes = __ldg(reinterpret_cast<const int4*>(&groups[cur.g].M));
            M = sizes.x;
            N = sizes.y;
            ldc = sizes.z;
            k_tiles = sizes.w;
            Cg = C + __ldg(&groups[cur.g].c_offset);
            pairs = (ldc % 2 == 0) && (reinterpret_cast<unsigned long long>(Cg) % 4 == 0);
        }
        int row0, col0;
        tile_origin(tile - cur.first, cur.tiles_m, cur.tiles_n, row0, col0);
        float acc[ACC];
#pragma unroll
        for (int i = 0; i < ACC; ++i) acc[i] = 0.0f;

        for (int kt = 0; kt < k_tiles; ++kt, ++it) {
            const int s = it % STAGES;
            mbar_wait(full + 8 * s, (it / STAGES) & 1);  // k-tile `it` has landed
            const unsigned a = tiles_smem + s * STAGE_BYTES + c * 64 * ROW_BYTES;
            const unsigned b = tiles_smem + s * STAGE_BYTES + A_TILE_BYTES;
            wgmma_fence();
            fence_accumulators(acc);
#pragma unroll
            for (int ks = 0; ks < BK / 16; ++ks) {
                const unsigned long long da = wgmma_desc(a + 32 * ks, 16, 8 * ROW_BYTES);
                const unsigned long long db = wgmma_desc(b + 32 * ks, 16, 8 * ROW_BYTES);
                wgmma_k_step<BF16, TN, BN>(acc, da, db);
            }
            wgmma_commit();
            fence_accumulators(acc);
            wgmma_wait<1>();  // k-tile it-1's products are done: release its stage
            if (kt > 0 && lane == 0) mbar_arrive(empty + 8 * ((it - 1) % STAGES));
        }
        wgmma_wait<0>();
        fence_accumulators(acc);
        if (lane == 0) mbar_arrive(empty + 8 * ((it - 1) % STAGES));  // the tile's last stage, for the next tile

        // acc[4j + 2h + e] is row 16 * (warp % 4) + g + 8h, column 8j + 2t + e of this consumer's 64 x BN tile.
        const int row = row0 + c * 64 + 16 * (warp % 4) + g;
#pragma unroll
        for (int j = 0; j < BN / 8; ++j)
#pragma unroll
            for (int h = 0; h < 2; ++h)
                store_pair<BF16>(Cg, ldc, pairs, row + 8 * h, col0 + 8 * j + 2 * t, M, N, 1.0f, 0.0f,
                                 acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
    }
}
