// Row reductions shared by the memory-bound fused ladders (softmax, RMSNorm, LayerNorm): a warp's sum or
// max through shuffles, and a block's through one 32-float shared scratch. Every lane / thread gets the
// result, so a row's statistics need no second broadcast.
#pragma once

#define LAB_FULL_MASK 0xffffffffu

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(LAB_FULL_MASK, v, offset);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(LAB_FULL_MASK, v, offset));
    return v;
}

// Block-wide reductions for blockDim.x a multiple of 32 (up to 1024). `scratch` holds 32 floats of shared
// memory; the trailing __syncthreads lets a caller reuse it for the next reduction straight away.
template <bool IS_MAX>
__device__ __forceinline__ float block_reduce(float v, float* scratch) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    v = IS_MAX ? warp_max(v) : warp_sum(v);
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    float r = lane < warps ? scratch[lane] : (IS_MAX ? -__int_as_float(0x7f800000) : 0.0f);
    r = IS_MAX ? warp_max(r) : warp_sum(r);
    __syncthreads();
    return r;
}

__device__ __forceinline__ float block_sum(float v, float* scratch) { return block_reduce<false>(v, scratch); }
__device__ __forceinline__ float block_max(float v, float* scratch) { return block_reduce<true>(v, scratch); }
