// Split-K's partial tiles summed inside a thread-block cluster (sm_90), gemm_tc rung 08's SPLIT_MODE = 3: the CLUSTER
// blocks of a cluster hold CLUSTER splits of one output tile; each puts its fp32 partial tile into its own shared
// memory, and block r sums band r of the tile (BM / CLUSTER rows) over the cluster in rank order, reading its peers'
// shared memory through distributed shared memory (mapa + ld.shared::cluster). A tile served by one cluster gets C
// from there (alpha, beta, one rounding); a tile served by `groups` clusters gets each cluster's band sums as slice g
// of a workspace (M x LDW floats a slice, lab_split_k.cuh's layout), and the band's last cluster to arrive (one int a
// band and tile, left at zero) sums the slices in the order g = 0 .. groups - 1. The order never depends on timing.
// Reference: the CUDA C++ Programming Guide ("Distributed Shared Memory"), NVIDIA's PTX ISA ("mapa",
// "barrier.cluster", "ld.shared::cluster"). Code is this lab's own.
#pragma once

#include "lab_cluster.cuh"
#include "lab_split_k.cuh"

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

// Floats a row of the partial tile in shared memory: 8 more than BN, so that a warp's fragment pair stores (8 rows
// of 32 bytes) start 32 bytes apart in the banks rather than all at one.
__host__ __device__ constexpr int lab_partial_pitch(int bn) { return bn + 8; }

// By the consumer threads (N_THREADS of them, from thread 128; named barrier BAR_ID among them) of every block of
// the cluster (SIZE blocks), once the unit's products are done; the tile is ROWS x COLS. acc: this thread's fragment
// of its warpgroup's 64 x COLS rows (warpgroup c: rows 64 c ..), as rung 06 holds it. part / part_addr: the block's shared memory for the partial
// tile (generic and shared-window addresses of the same bytes). The caller's warps outside the consumers meet the
// first cluster barrier (cluster_sync) and arrive on the second; every thread waits for the second before the block
// exits (barrier.cluster.wait), so no block leaves while a peer still reads its shared memory.
template <int ROWS, int COLS, int SIZE, int BAR_ID, int N_THREADS, int OUT_BF16>
__device__ __forceinline__ void lab_cluster_sum_tile(const float (&acc)[COLS / 2], float* part, unsigned part_addr,
                                                     int row0, int col0, int c, int tile, int group, int groups,
                                                     unsigned short* C, int ldc, int M, int N, float alpha, float beta,
                                                     float* workspace, int* sync, int& last_to_arrive) {
    constexpr int PITCH = lab_partial_pitch(COLS), BAND = ROWS / SIZE, QUADS = BAND * COLS / 4;  // float4s of a band
    static_assert(ROWS % SIZE == 0 && COLS % 4 == 0, "whole rows a band, whole float4s a row");
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int rank = static_cast<int>(cluster_rank()), ldw = lab_split_ldw(N), first = threadIdx.x - 128;
    const bool pairs = (ldc % 2 == 0) && (reinterpret_cast<unsigned long long>(C) % 4 == 0);
    named_barrier_sync(BAR_ID, N_THREADS);  // every consumer warpgroup is done reading the stages
    const int local = c * 64 + 16 * (warp % 4) + g;
#pragma unroll
    for (int j = 0; j < COLS / 8; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h)
            *reinterpret_cast<float2*>(part + (local + 8 * h) * PITCH + 8 * j + 2 * t) =
                make_float2(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
    cluster_sync();  // every block's partial tile is in its shared memory

    unsigned peer[SIZE];
#pragma unroll
    for (int r = 0; r < SIZE; ++r) peer[r] = cluster_peer_address(part_addr, r);
    float* slice = workspace + static_cast<long long>(group) * M * ldw;
    for (int i = first; i < QUADS; i += N_THREADS) {
        const int local_row = rank * BAND + i / (COLS / 4), local_col = 4 * (i % (COLS / 4));
        const unsigned offset = (local_row * PITCH + local_col) * 4;
        float4 v[SIZE];
#pragma unroll
        for (int r = 0; r < SIZE; ++r)  // every load in flight, then the adds in rank order
            asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                         : "=f"(v[r].x), "=f"(v[r].y), "=f"(v[r].z), "=f"(v[r].w) : "r"(peer[r] + offset));
        float4 sum = v[0];
#pragma unroll
        for (int r = 1; r < SIZE; ++r) lab_add4(sum, v[r]);
        const int row = row0 + local_row, col = col0 + local_col;
        if (row >= M || col >= N) continue;
        if (groups == 1) {
            store_pair<OUT_BF16>(C, ldc, pairs, row, col, M, N, alpha, beta, sum.x, sum.y);
            store_pair<OUT_BF16>(C, ldc, pairs, row, col + 2, M, N, alpha, beta, sum.z, sum.w);
        } else {
            __stcg(reinterpret_cast<float4*>(slice + static_cast<long long>(row) * ldw + col), sum);
        }
    }
    // Done with the peers' shared memory. Relaxed: every load above has returned (its value was added before this
    // arrival runs), and a release would make each thread wait for its stores to C or the workspace to reach the
    // whole GPU (MEMBAR.GPU).
    asm volatile("barrier.cluster.arrive.relaxed;\n" ::: "memory");
    if (groups == 1) return;

    __threadfence();  // this band's slice before its arrival
    named_barrier_sync(BAR_ID, N_THREADS);
    if (first == 0) {
        int* arrived = sync + tile * SIZE + rank;
        last_to_arrive = atomicAdd(arrived, 1) == groups - 1;
        if (last_to_arrive) *arrived = 0;  // every cluster of the tile is in: ready for the next launch
    }
    named_barrier_sync(BAR_ID, N_THREADS);
    if (!last_to_arrive) return;
    __threadfence();
    const long long slice_quads = static_cast<long long>(M) * ldw / 4;
    for (int i = first; i < QUADS; i += N_THREADS) {
        const int row = row0 + rank * BAND + i / (COLS / 4), col = col0 + 4 * (i % (COLS / 4));
        if (row >= M || col >= N) continue;
        const float4* at = reinterpret_cast<const float4*>(workspace + static_cast<long long>(row) * ldw + col);
        float4 sum = lab_load_in_order(at);
        for (int s = 1; s < groups; ++s) lab_add4(sum, lab_load_in_order(at + s * slice_quads));
        store_pair<OUT_BF16>(C, ldc, pairs, row, col, M, N, alpha, beta, sum.x, sum.y);
        store_pair<OUT_BF16>(C, ldc, pairs, row, col + 2, M, N, alpha, beta, sum.z, sum.w);
    }
}

#endif  // sm_90a
