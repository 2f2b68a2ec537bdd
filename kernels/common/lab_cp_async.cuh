// cp.async wrappers for the GEMM ladders (sm_80+), as inline PTX: NVRTC has no host headers, and
// the PTX is short enough to read. Reference: PTX ISA, "Data Movement and Conversion Instructions:
// cp.async" (docs.nvidia.com/cuda/parallel-thread-execution, section cp.async).
//
// What cp.async does: one thread asks the memory system to copy 4, 8 or 16 bytes from global to
// shared memory and goes on at once; the data never passes through its registers (SASS: LDGSTS).
// Copies are grouped with commit_group; wait_group N blocks until at most the N most recently
// committed groups are still in flight. The wait covers only the calling thread's own copies, so
// a __syncthreads() must follow before other threads read what it copied.
// Zero fill: with src_bytes < the copy size, only src_bytes are read and the rest of the
// destination is written with zeros; src_bytes = 0 reads nothing (the rungs still pass a valid
// global address, the matrix's base pointer, rather than rely on that). That is how tails load as
// zeros.
// On archs before sm_80 the cp.async wrappers do not exist: rungs test __CUDA_ARCH__ themselves.
#pragma once

// Bytes of dynamic shared memory this launch was given (any arch). A multistage kernel whose
// launcher computes that size from the knobs can compare it with what the kernel needs and trap
// at once on a mismatch, instead of silently writing past the end of its buffer.
__device__ __forceinline__ unsigned dynamic_smem_size() {
    unsigned bytes;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(bytes));
    return bytes;
}

// The 32-bit shared-window address that the PTX shared state space expects (any arch).
__device__ __forceinline__ unsigned smem_u32addr(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// 16 bytes of shared memory at a shared-window address (any arch; addr 16-byte aligned). A kernel
// that keeps one such address per thread and adds constant offsets lets ptxas fold the offsets
// into the instruction ([R + imm]) instead of recomputing a generic pointer for every load.
__device__ __forceinline__ float4 lds128(unsigned addr) {
    float4 v;
    asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                 : "r"(addr)
                 : "memory");  // not moved across barriers or the cp.async that refill the buffer
    return v;
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800

// 16 bytes, cached in L2 only (.cg: the tile is reused from shared memory, not from L1).
// dst and src must both be 16-byte aligned. src_bytes in 0..16; the rest is zero-filled.
// The _at forms take the destination as a shared-window address (see lds128 for why).
__device__ __forceinline__ void cp_async_16_at(unsigned smem_dst, const void* gmem_src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_dst), "l"(gmem_src), "r"(src_bytes)
                 : "memory");
}
__device__ __forceinline__ void cp_async_16(void* smem_dst, const void* gmem_src, int src_bytes) {
    cp_async_16_at(smem_u32addr(smem_dst), gmem_src, src_bytes);
}

// 4 bytes (.ca is the only cache hint allowed below 16 bytes). src_bytes 0 or 4; 0 writes a zero.
__device__ __forceinline__ void cp_async_4_at(unsigned smem_dst, const void* gmem_src, int src_bytes) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_dst), "l"(gmem_src), "r"(src_bytes)
                 : "memory");
}
__device__ __forceinline__ void cp_async_4(void* smem_dst, const void* gmem_src, int src_bytes) {
    cp_async_4_at(smem_u32addr(smem_dst), gmem_src, src_bytes);
}

// Close the group of copies issued since the last commit (an empty group is legal and completes at once).
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

// Wait until at most N of this thread's committed groups are still pending. N must be a constant.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

#endif  // __CUDA_ARCH__ >= 800
