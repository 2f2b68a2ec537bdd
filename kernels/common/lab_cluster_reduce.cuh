// Sums across a thread-block cluster through distributed shared memory (sm_90): what the row ladders (RMSNorm,
// LayerNorm, softmax) use to split one long row over several blocks and still reduce it in one kernel.
//
// An exchange, for a cluster of SIZE blocks that each hold a few partial values (every thread holds them):
//   1. put: thread r < SIZE of every block stores the block's partials into slot [own rank] of block r's shared
//      memory: each block receives all SIZE partials, pushed to it;
//   2. arrive and wait until every block's partials have landed;
//   3. every thread adds the SIZE slots of its own block in rank order: every block of the cluster gets the same
//      bits, so the blocks of one row normalize it with identical statistics.
// Pushing, rather than reading the peers' shared memory after step 2, means no block touches another's shared
// memory once its own partials are in, so a block may leave as soon as it is done (a pull would need one more
// barrier before any block exits). Each exchange (`round`) of a kernel has its own slots: a block a round ahead
// pushes into slots its peers are not reading.
// Two ways to do step 2, a knob of the kernels (EXCHANGE):
//   CLUSTER_BARRIER (0): st.shared::cluster, then barrier.cluster.arrive.release / wait.acquire. The release and
//     acquire are at cluster scope: ptxas emits a memory barrier (MEMBAR) before the arrive and invalidates the L1
//     (CCTL.IVALL) after the wait, and every thread of the cluster waits for the slowest.
//   MBARRIER (1): st.async with mbarrier::complete_tx: each store counts its bytes on an mbarrier in the receiving
//     block (as a TMA load does), which expects SIZE * VALUES * 4 bytes per round; a block waits only for its own
//     mbarrier, with no fence and no cluster-wide barrier.
// Either way every block must have started (and, for MBARRIER, initialized its mbarriers) before anything is
// pushed to it: start() arrives on the cluster barrier at the kernel's top and started() waits for that phase just
// before the first put, so the wait overlaps the block's loads.
// Reference: NVIDIA's PTX ISA ("barrier.cluster", "mapa", "st.async", "mbarrier") and the CUDA C++ Programming
// Guide ("Distributed Shared Memory"). Splitting a long row's reduction over a cluster, with st.async on an
// mbarrier, is what Dao-AILab/quack's softmax and RMSNorm do on Hopper; the code is this lab's own.
#pragma once

#include "lab_cluster.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900

#define LAB_EXCHANGE_CLUSTER_BARRIER 0
#define LAB_EXCHANGE_MBARRIER 1

// The partials of ROUNDS exchanges of VALUES floats each among SIZE blocks, and how they meet (METHOD). Lives in
// shared memory; one thread-block-wide instance per kernel.
template <int SIZE, int ROUNDS, int VALUES, int METHOD>
struct ClusterExchange {
    float slots[ROUNDS][VALUES][SIZE];
    unsigned long long bars[ROUNDS];  // MBARRIER: one per round, each used for one phase (parity 0)

    static constexpr unsigned ROUND_BYTES = SIZE * VALUES * sizeof(float);

    __device__ __forceinline__ unsigned bar(int round) const {
        return static_cast<unsigned>(__cvta_generic_to_shared(&bars[round]));
    }

    // At the kernel's top, every thread: set up, then arrive on the cluster barrier (relaxed: orders nothing but
    // the mbarriers' initialization, which fence.mbarrier_init releases).
    __device__ __forceinline__ void start() {
        if (METHOD == LAB_EXCHANGE_MBARRIER && threadIdx.x == 0) {
#pragma unroll
            for (int r = 0; r < ROUNDS; ++r) {
                mbar_init(bar(r), 1);
                mbar_arrive_expect_tx(bar(r), ROUND_BYTES);  // the one arrival; the phase waits for the bytes
            }
            fence_barrier_init();
        }
        asm volatile("barrier.cluster.arrive.relaxed;\n" ::: "memory");
    }

    // Before the first put, every thread: every block of the cluster has passed start().
    __device__ __forceinline__ void started() { asm volatile("barrier.cluster.wait;\n" ::: "memory"); }

    // Step 1 for value `v` of round `round`: into slot [rank] of every block (threads 0 .. SIZE - 1 store).
    __device__ __forceinline__ void put(int round, int v, float partial) {
        if (threadIdx.x >= SIZE) return;
        const unsigned peer = threadIdx.x;
        const unsigned slot = static_cast<unsigned>(__cvta_generic_to_shared(&slots[round][v][cluster_rank()]));
        const unsigned remote = cluster_peer_address(slot, peer);
        if (METHOD == LAB_EXCHANGE_MBARRIER) {
            asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.f32 [%0], %1, [%2];\n" ::"r"(remote),
                         "f"(partial), "r"(cluster_peer_address(bar(round), peer))
                         : "memory");
        } else {
            asm volatile("st.shared::cluster.f32 [%0], %1;\n" ::"r"(remote), "f"(partial) : "memory");
        }
    }

    // Step 2, split so that the caller can issue independent loads in between.
    __device__ __forceinline__ void arrive(int) {
        if (METHOD == LAB_EXCHANGE_CLUSTER_BARRIER) asm volatile("barrier.cluster.arrive.release;\n" ::: "memory");
    }
    __device__ __forceinline__ void wait(int round) {
        if (METHOD == LAB_EXCHANGE_MBARRIER)
            mbar_wait(bar(round), 0);
        else
            asm volatile("barrier.cluster.wait.acquire;\n" ::: "memory");
    }

    // Step 3 for value `v` of round `round`: the slots added in rank order.
    __device__ __forceinline__ float sum(int round, int v) const {
        float total = slots[round][v][0];
#pragma unroll
        for (int r = 1; r < SIZE; ++r) total += slots[round][v][r];
        return total;
    }

    // The whole exchange of one value, for a caller with nothing to overlap: the cluster's total of `partial`.
    __device__ __forceinline__ float total(int round, float partial) {
        put(round, 0, partial);
        arrive(round);
        wait(round);
        return sum(round, 0);
    }
};

#endif  // __CUDA_ARCH__ >= 900
