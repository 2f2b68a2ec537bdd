// Synchronization between blocks of one grid, for the rungs whose blocks hand partial results to each other
// (gemm_tc 07 stream-K's fix-up, gemm_tc 08 split-K's reductions): acquire loads and release stores at GPU
// scope, the global nanosecond timer for waits that must trap instead of hanging, and a named barrier for the
// consumer warpgroups alone (the producer warpgroup has left by then, so __syncthreads would hang).
// Reference: PTX ISA, "Memory Consistency Model" (release/acquire patterns) and "bar.sync". Code is this lab's own.
#pragma once

#define LAB_WAIT_LIMIT_NS 10000000000ull  // 10 s: a wait this long means a block that can never come

__device__ __forceinline__ int load_acquire(const int* p) {
    int v;
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ unsigned long long load_acquire_u64(const unsigned long long* p) {
    unsigned long long v;
    asm volatile("ld.acquire.gpu.global.b64 %0, [%1];\n" : "=l"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void store_release(int* p, int v) {
    asm volatile("st.release.gpu.global.b32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ unsigned long long global_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(t));
    return t;
}

// Barrier `ID` (1..15; 0 is __syncthreads) over `COUNT` threads, a multiple of 32.
template <int ID, int COUNT>
__device__ __forceinline__ void named_barrier_sync() {
    asm volatile("bar.sync %0, %1;\n" ::"n"(ID), "n"(COUNT) : "memory");
}
