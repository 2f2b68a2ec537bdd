// Thread-block clusters (sm_90): the blocks of a cluster run at once on neighbouring SMs of one GPC and can reach
// each other's shared memory (distributed shared memory), arrive on each other's mbarriers, and receive one TMA
// load together (multicast: the L2 sends the box once, every block named in the mask gets a copy at the same
// shared-memory offset, and each block's mbarrier at that offset gets the bytes).
// Reference: NVIDIA's PTX ISA, "cp.async.bulk.tensor" (.multicast::cluster), "mapa", "barrier.cluster",
// "mbarrier.arrive" (.shared::cluster); the CUDA C++ Programming Guide, "Thread Block Clusters". Code is this
// lab's own.
//
// A cluster's size is fixed where the kernel is compiled (__cluster_dims__), so an ordinary launch honours it;
// the grid must be a multiple of it.
#pragma once

#include "lab_hopper.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900

// This block's rank in its cluster (0 .. cluster size - 1).
__device__ __forceinline__ unsigned cluster_rank() {
    unsigned rank;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
    return rank;
}

// Every thread of every block of the cluster waits here for all the others: the release/acquire pair makes
// what one block wrote to shared memory (mbarrier inits included) visible to the others.
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}

// The shared::cluster address of the same shared-memory offset in block `rank` of this cluster.
__device__ __forceinline__ unsigned cluster_peer_address(unsigned addr, unsigned rank) {
    unsigned peer;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(peer) : "r"(addr), "r"(rank));
    return peer;
}

// One arrival on an mbarrier anywhere in the cluster (an address from cluster_peer_address). The default semantics
// (.release at CTA scope), as CUTLASS's cluster barriers use: a release at cluster scope would make the arriving
// warp wait for its earlier memory operations to be visible cluster-wide, and a stage's reads are by wgmma, whose
// completion the caller has already waited for.
__device__ __forceinline__ void mbar_arrive_cluster(unsigned cluster_addr) {
    asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(cluster_addr) : "memory");
}

// tma_load_2d's box, written to `dst` in every block of the cluster whose bit is set in `mask`, each copy completing
// on the mbarrier at offset `bar` of its own block.
__device__ __forceinline__ void tma_load_2d_multicast(unsigned dst, const TensorMap* map, int x, int y, unsigned bar,
                                                      unsigned short mask) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
        " [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(dst),
        "l"(map), "r"(x), "r"(y), "r"(bar), "h"(mask)
        : "memory");
}

#endif  // __CUDA_ARCH__ >= 900
