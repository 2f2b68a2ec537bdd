// Hopper (sm_90) wrappers for gemm_tc rungs 04 on, as inline PTX: the tensor memory accelerator (TMA,
// cp.async.bulk.tensor), mbarriers, warpgroup MMA (wgmma, sm_90a) and setmaxnreg (sm_90a).
// Reference: NVIDIA's PTX ISA (docs.nvidia.com/cuda/parallel-thread-execution), sections "Tensor Copy
// Instructions: cp.async.bulk.tensor", "Parallel Synchronization and Communication Instructions:
// mbarrier", "Asynchronous Warpgroup Level Matrix Multiply-Accumulate Instructions" (wgmma, its shared
// memory matrix layouts and the matrix descriptor) and "setmaxnreg". Code is this lab's own.
//
// The pieces, in the order a k-tile meets them:
//   TMA: one thread hands the copy engine a tensor map (a 128-byte descriptor of a 2-D global array,
//     built on the host by cuTensorMapEncodeTiled) and box coordinates; the engine copies the box into
//     shared memory, zero-filling what lies outside the array (so M, N, K tails cost nothing), writes
//     it 128-byte swizzled (the same XOR pattern as lab_swizzle.cuh, applied by hardware), and
//     reports the bytes to an mbarrier ("complete_tx").
//   mbarrier: a 64-bit shared-memory object that completes a phase when its expected arrivals and
//     expected transaction bytes have both arrived; threads wait on a phase's parity (0, 1, 0, ...).
//   wgmma: the 4 warps of a warpgroup (128 threads, warps 4i .. 4i+3) issue one asynchronous
//     64 x N x 16 product whose A and B are read straight from shared memory through 64-bit matrix
//     descriptors; the accumulators stay in registers. wgmma.fence before the first one that touches
//     registers written otherwise, commit_group to close a batch, wait_group N to wait until at most N
//     batches are still running.
//   setmaxnreg: a warpgroup gives registers back to (dec) or takes them from (inc) the SM's pool, so a
//     producer that needs few can fund consumers that need many.
#pragma once

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900

// The host's CUtensorMap: 128 opaque bytes, 64-byte aligned. Passed by value as a __grid_constant__
// kernel parameter (the rungs' headers say why).
struct __align__(64) TensorMap {
    unsigned long long words[16];
};

// --- mbarrier -------------------------------------------------------------------------------------
// Addresses are shared-window addresses (smem_u32addr in lab_cp_async.cuh).

__device__ __forceinline__ void mbar_init(unsigned bar, unsigned arrivals) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(arrivals) : "memory");
}

// Make initialized barriers visible to the copy engine (the async proxy) before any TMA uses them.
__device__ __forceinline__ void fence_barrier_init() {
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// One arrival that also announces `bytes` of TMA traffic the phase must wait for.
__device__ __forceinline__ void mbar_arrive_expect_tx(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbar_arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

// Block until the phase with this parity has completed (try_wait suspends for a while in hardware
// before it returns false, so the loop does not spin hot).
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
    asm volatile(
        "{\n"
        ".reg .pred done;\n"
        "WAIT:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra WAIT;\n"
        "}\n" ::"r"(bar),
        "r"(parity)
        : "memory");
}

// --- TMA --------------------------------------------------------------------------------------------

// Keep the tensor map in the constant cache before its first use (it lives in kernel parameter space).
__device__ __forceinline__ void prefetch_tensor_map(const TensorMap* map) {
    asm volatile("prefetch.tensormap [%0];\n" ::"l"(map) : "memory");
}

// The box at element coordinates (x: the contiguous dimension, y: the row) of `map` into shared memory
// at `dst` (1024-byte aligned for the 128-byte swizzle), completing on `bar`.
__device__ __forceinline__ void tma_load_2d(unsigned dst, const TensorMap* map, int x, int y, unsigned bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
            dst),
        "l"(map), "r"(x), "r"(y), "r"(bar)
        : "memory");
}

// The other direction: the box at (x, y) of `map` written from shared memory at `src` (laid out as a load would
// have written it, swizzle included); elements outside the array are not written. Asynchronous: the issuing thread
// groups its stores (tma_store_commit) and later waits until their shared-memory reads are done
// (tma_store_wait_read) before the buffer is written again, or until they are complete (tma_store_wait_all).
__device__ __forceinline__ void tma_store_2d(const TensorMap* map, int x, int y, unsigned src) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"(map), "r"(x),
                 "r"(y), "r"(src)
                 : "memory");
}
__device__ __forceinline__ void tma_store_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
template <int PENDING>
__device__ __forceinline__ void tma_store_wait_read() {
    asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(PENDING) : "memory");
}
__device__ __forceinline__ void tma_store_wait_all() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }

// Ordinary stores to shared memory made visible to the copy engine (the async proxy) before a TMA store reads them.
__device__ __forceinline__ void fence_async_shared() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// A barrier for `threads` threads (a multiple of 32) on hardware barrier `id` (1-15; 0 is __syncthreads'): one
// warpgroup can wait for its own warps without stopping the others.
__device__ __forceinline__ void named_barrier_sync(unsigned id, unsigned threads) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
// Arrive on barrier `id` without waiting: with named_barrier_sync by the other side (both counting all `threads`),
// one warpgroup tells another "your turn" and goes on (gemm_tc rung 11's ping-pong order).
__device__ __forceinline__ void named_barrier_arrive(unsigned id, unsigned threads) {
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

#endif  // __CUDA_ARCH__ >= 900

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)  // sm_90a: the arch-specific features wgmma and setmaxnreg

// --- wgmma (sm_90a) -------------------------------------------------------------------------------

// A shared-memory matrix descriptor for a 128-byte-swizzled tile (PTX ISA, "Matrix Descriptor Format"):
// bits 0-13 start address / 16, 16-29 leading byte offset / 16, 32-45 stride byte offset / 16, 62-63
// the swizzle mode (1 = 128-byte). The tiles start on 1024-byte boundaries, so the base offset is 0.
//   K-major (A; TN's B), rows of 64 elements = 128 bytes: SBO = 1024 (8 rows to the next 8), LBO unused.
//   MN-major (NN's B): boxes of BK k-rows x 64 n, 128-byte rows: SBO = 1024 (8 k-rows to the next 8),
//   LBO = the bytes from one 64-column box to the next.
__device__ __forceinline__ unsigned long long wgmma_desc(unsigned addr, unsigned lbo_bytes, unsigned sbo_bytes) {
    return static_cast<unsigned long long>((addr & 0x3FFFF) >> 4) |
           (static_cast<unsigned long long>((lbo_bytes & 0x3FFFF) >> 4) << 16) |
           (static_cast<unsigned long long>((sbo_bytes & 0x3FFFF) >> 4) << 32) | (1ull << 62);
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// Tell the compiler an accumulator may change here (the wgmma in flight writes it behind its back), so
// it neither caches it across a wait nor moves reads of it above one.
template <int R>
__device__ __forceinline__ void fence_accumulators(float (&d)[R]) {
#pragma unroll
    for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

template <int COUNT>
__device__ __forceinline__ void setmaxnreg_dec() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(COUNT));
}
template <int COUNT>
__device__ __forceinline__ void setmaxnreg_inc() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(COUNT));
}

// d (+)= A * B for one 64 x N x 16 step: fp32 accumulators, A and B fp16 or bf16 from shared memory.
// scale_d = 0 ignores d's old value (d = A * B). TRANS_B = 0: B is K-major (stored n-row by n-row, as
// TN's weight); 1: B is MN-major (k-row by k-row, as NN's B). Accumulator layout (per warp w of the
// warpgroup, lane = 4g + t): d[4j + 2h + e] is row 16w + g + 8h, column 8j + 2t + e, the mma.sync
// C layout of lab_mma.cuh repeated over N / 8 column blocks.
//
// The accumulator operand lists are written out once (inline PTX cannot loop); LAB_WGMMA pastes the
// shape and type into one instruction, with the operands after the ACC accumulators numbered ACC (desc_a),
// ACC + 1 (desc_b), ACC + 2 (scale_d) and ACC + 3 (TRANS_B).
#define LAB_WGMMA_REGS_64 \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define LAB_WGMMA_ACC_64 \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
    "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
    "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
    "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
    "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
    "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
    "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
    "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define LAB_WGMMA_REGS_128 \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, " \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, " \
    "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
    "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define LAB_WGMMA_ACC_128 \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
    "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
    "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
    "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
    "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
    "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
    "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
    "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), \
    "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
    "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), \
    "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), \
    "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), \
    "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), \
    "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), \
    "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), \
    "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
#define LAB_WGMMA_REGS_96 \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, " \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define LAB_WGMMA_ACC_96 \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
    "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
    "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
    "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
    "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
    "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
    "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
    "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), \
    "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
    "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), \
    "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), \
    "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
#define LAB_WGMMA(SHAPE, TY, REGS, ACC, SCALE, REST)                                                     \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " SCALE ", 0;\n"                                        \
                 "wgmma.mma_async.sync.aligned." SHAPE ".f32." TY "." TY " {" REGS "}, " REST ";\n}\n"       \
                 : ACC                                                                                   \
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TRANS_B))

template <int IS_BF16, int TRANS_B>
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], unsigned long long desc_a,
                                                  unsigned long long desc_b, int scale_d) {
    if (IS_BF16)
        LAB_WGMMA("m64n128k16", "bf16", LAB_WGMMA_REGS_64, LAB_WGMMA_ACC_64, "%66", "%64, %65, p, 1, 1, 0, %67");
    else
        LAB_WGMMA("m64n128k16", "f16", LAB_WGMMA_REGS_64, LAB_WGMMA_ACC_64, "%66", "%64, %65, p, 1, 1, 0, %67");
}

template <int IS_BF16, int TRANS_B>
__device__ __forceinline__ void wgmma_m64n192k16(float (&d)[96], unsigned long long desc_a,
                                                  unsigned long long desc_b, int scale_d) {
    if (IS_BF16)
        LAB_WGMMA("m64n192k16", "bf16", LAB_WGMMA_REGS_96, LAB_WGMMA_ACC_96, "%98", "%96, %97, p, 1, 1, 0, %99");
    else
        LAB_WGMMA("m64n192k16", "f16", LAB_WGMMA_REGS_96, LAB_WGMMA_ACC_96, "%98", "%96, %97, p, 1, 1, 0, %99");
}

template <int IS_BF16, int TRANS_B>
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], unsigned long long desc_a,
                                                  unsigned long long desc_b, int scale_d) {
    if (IS_BF16)
        LAB_WGMMA("m64n256k16", "bf16", LAB_WGMMA_REGS_128, LAB_WGMMA_ACC_128, "%130", "%128, %129, p, 1, 1, 0, %131");
    else
        LAB_WGMMA("m64n256k16", "f16", LAB_WGMMA_REGS_128, LAB_WGMMA_ACC_128, "%130", "%128, %129, p, 1, 1, 0, %131");
}

#endif  // sm_90a
