// common / bias_to_half — an fp32 bias vector rounded to fp16 or bf16 (nearest even) into a scratch vector.
//
// What it is for: cuBLASLt's bias epilogue reads its bias in the output's type for 16-bit outputs, while lab.ops
//   takes an fp32 bias. lab.ops's library path runs this before each fused call (it is recorded and replayed with
//   it, so a bias changed in place is read again), which costs one launch over N values, far less than the
//   separate pass over the M x N output that an unfused bias would take. The rounding adds at most one unit
//   roundoff of |bias| to each output, which lab.ops's error bound allows for.
// Launch: grid ceil(N / 256), 256 threads. Requires: sm_80+ (the conversions). Knobs: BF16 (0).
#include "lab_mma.cuh"

#ifndef BF16
#define BF16 0
#endif

extern "C" __global__ void __launch_bounds__(256)
lab_bias_to_half(const float* __restrict__ bias, unsigned short* __restrict__ out, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = float_to_half_bits<BF16>(bias[i]);
}
