// attention / rung 05 — ping-pong: the two consumer warpgroups take turns on the tensor cores, so that one's softmax
// runs while the other's products do, and each tile's two products go out as one batch.
//
// What changed (vs rung 04):
//   1. One batch of products a tile: O += P(j-1) V(j-1) is issued together with S(j) = Q K(j)^T, then one wait, then
//      tile j's softmax (rung 04 waited twice a tile: for S before the softmax, for P V before the next S). The
//      recurrence is unchanged: P(j-1) V(j-1) is added to O before tile j's softmax rescales O, as in rung 04.
//   2. Ping-pong (FlashAttention-3's inter-warpgroup overlap, Shah et al., arXiv:2407.08608, 2024; CUTLASS's sm90
//      "ping-pong" schedule): two named barriers, one per consumer warpgroup. A warpgroup waits on its own before it
//      issues its batch (bar.sync, 256 threads: its 128 and the other's 128 arrivals) and arrives on the other's
//      after: the batches alternate, warpgroup 0 first, and each softmax falls in the other warpgroup's products.
//   3. K and V stages are released apart ("empty" barriers of their own): K(j)'s stage is free for K(j + STAGES) as
//      soon as S(j) has read it, while V(j) is read one batch later.
// Why: in rung 04 a warpgroup's tensor-core work and its softmax (max, exp2, conversions, rescale: several
//   instructions per score on the FMA and SFU pipes) alternate with a wait between, and nothing orders the two
//   warpgroups, so at times both softmax and the tensor cores idle. FlashAttention-3's ablation puts this overlap at
//   about a tenth of its speed on H100.
// Prediction (H200, B=2 H=16 S=4096 D=128 fp16, not causal; written before any GPU run): 1.05-1.15x rung 04, about
//   0.9-1.0x cuDNN's kernel. What is left: the softmax of a warpgroup still waits for its own S (no overlap inside a
//   warpgroup, which needs a second S accumulator: FlashAttention-3's intra-warpgroup pipelining).
// Measured, the first build (results/h200/attention.json, `lab bench attention`, SDPA in the same run): correct,
//   but slower than rung 04 at every headline size (0.77-0.80x of its speed at D = 128, 0.80-0.85x at D = 64),
//   not faster: the prediction failed. ptxas says why when it builds this file: "(C7519) Potential Performance Loss:
//   wgmma.mma_async instructions are serialized due to program dependence on compiler-inserted WG.AR in divergent
//   path". The batch's two products sit under `if (p < n_tiles)` and `if (p > 0)`, so ptxas cannot prove that no
//   register they use is touched between issue and wait, and makes every wgmma wait for the one before: the
//   asynchrony that rung 04 has, and the overlap this rung exists for, are both gone. The fix is the knob PEELED,
//   1 by default: the loop peeled (the first batch S(0) alone, then S(j) with P V(j-1) under no condition, then
//   P V(last) alone), which ptxas builds without the warning. PEELED = 0 keeps the first build (its SASS is the
//   file's before the knob) for the comparison.
// Predicted for PEELED = 1 (before its first timing): the overlap back, so at least rung 04's speed and up to the
//   1.05-1.15x above.
// Measured for PEELED = 1 (results/h100/attention_study_5b68074.json, an H100 at 5b68074, lab.studies.attention_study:
//   SDPA's backends, rung 04 and PEELED = 0 in the same interleaved rounds): 1.02-1.06x rung 04 on every shape of
//   the study, the low end of the prediction or under it, and 1.20-1.36x PEELED = 0; 0.88x cuDNN's kernel at B=2
//   H=16 D = 128 fp16 (0.93x causal, 0.89x bf16; 0.79x at B=4 H=32, whose rounds spread 7%), 0.85-0.86x at D = 64,
//   1.3-1.7x the flash backend. Again at 40aa909 (results/h100/varlen_run_40aa909.log, the study's printed summary):
//   1.04-1.08x rung 04, 0.89x
//   cuDNN (0.93x causal, 0.89x bf16, 0.91x at B=4 H=32), 0.85x at D = 64, 1.33-1.86x the flash backend. What is
//   left is the overlap inside one warpgroup (above). lab.ops sends prefills on sm_90 here.
// LONGEST_FIRST = 1 (a knob, 0 by default): with a causal mask, block x of a head takes query block
//   gridDim.x - 1 - x, so the blocks with the most key tiles start first and the short ones fill the last wave
//   (FlashAttention-2 orders causal blocks this way). At B=2 H=16 S=4096 there are 1024 blocks for 132 SMs (one
//   each: 384 threads, 160 KB of shared memory), about 7.8 waves; in launch order a head's longest block (32 tiles)
//   starts last, so the last wave can hold a block that runs as long as a quarter of an SM's share. Prediction
//   (before any timing): causal 1.03-1.08x the default build, non-causal level (every block has the same work:
//   the control). Measured (results/h100/varlen_run_40aa909.log, the study's summary on an H100 at 40aa909, same
//   rounds):
//   causal 1.01x (D = 128: 485 against 480 TFLOP/s; D = 64: 317 against 314), non-causal level but for one shape
//   (B=4 H=32: 1.00x by median TFLOP/s, whose rounds spread 3-7%). The prediction failed: the last wave's tail is
//   smaller than the model above says, or the block scheduler does not start blocks in launch order. The default
//   stays 0.
// PERSISTENT = 1 (a knob, 0 here; the family builds 1 where it measured faster, below; FlashAttention-3's persistent
//   scheduler, CUTLASS's persistent tile schedulers):
//   one block an SM (grid min(items, SMs)) loops over the work items, the query blocks of every batch and head, in a
//   fixed order: (batch, head) pairs in equal sections whose K and V fit half of L2 (the launcher's section_heads),
//   inside a section the query blocks across its heads, most key tiles first when causal (longest-processing-time
//   first, so the shortest items end the run). A block takes blockIdx.x first, then its next item from a counter in
//   global memory as its producer finishes issuing an item's loads: greedy, as the hardware hands out the blocks of
//   an ordinary launch, but in this order. The K/V ring and its barriers run on from item to item; Q has one more
//   barrier (q_empty): the consumers arrive once their last S(j) is done, and the producer loads the next item's Q
//   (and writes its number for them) behind it, under this item's last P V and its O stores. Barrier init, the tensor
//   maps' prefetch and a block's launch happen once an SM instead of once a query block. PERSISTENT = 0 builds the
//   same instructions as before the knob (scripts/same_sass.py, 44 variants).
//   Why a counter, not a fixed share (block b takes items b, b + P, ...): lab.families.attention_schedule's model (the
//   busiest SM's key tiles under each hand-out, nothing else counted) gives, at B=2 H=16 S=4096 causal on 132 SMs:
//   the ordinary launch 149, LONGEST_FIRST 146, a fixed share over this order 142 with the launcher's sections of 11
//   heads (165 and 153 with sections of 12 and 15: worse than the launch), the counter 131; the even share 128.
//   Equal sections, because a short last section puts long items late (15, 15 and 2 heads: 151 from the counter).
//   LONGEST_FIRST measured 1.01x, about the model's 149 / 146.
//   Prediction (before any GPU run, B=2 H=16 S=4096 D=128, against the default build in the same rounds): causal
//   1.04-1.10x (the model's 149 / 131 is 1.14x of tile time, less what the sections cost in L2 reuse: 11 heads' K and
//   V in flight, where an ordinary launch has about 4); non-causal 1.00-1.03x (every item the same length, so only
//   each item's start is saved: the prologue and Q's latency, about 1-2 us of an item's ~60 us).
//   Measured (results/h100/attention_study_262d23d.json and attention_study_d*.json, an H100 at 262d23d, two runs
//   of three rounds; same-round speed over PERSISTENT = 0): causal 1.12x at D = 128 (above the prediction: the sections' L2
//   cost is smaller than allowed) and 1.17x at D = 64; non-causal 1.00-1.04x at D = 128 (B=4 H=32: 0.94-1.17x, a
//   noisy shape); but 0.98-0.99x non-causal at D = 64 and 0.95-1.00x at D = 256 (not yet profiled). So
//   lab.families.attention builds PERSISTENT = 1 at D = 128 and at causal D = 64 (persistent_default), else 0.
//   Measured again with those defaults (results/h100/attention_study_96aa2fa.json, 3 rounds; same-round speed over
//   PERSISTENT = 0): causal D = 128 1.12-1.13x, causal D = 64 1.17x, D = 128 fp16 0.99-1.02x and bf16 1.01-1.04x;
//   B=4 H=32 0.82-1.06x, 1.05x in the median of the nine rounds of three runs (0.82-1.17x: the noisiest shape, where
//   cuDNN itself moved 577-657 TFLOP/s from round to round). Timed before the q_empty change below (31 more arrivals
//   a warp an item, not timed since).
//   compute-sanitizer racecheck on PERSISTENT = 1 found a hazard the tests cannot: every consumer lane reads
//   next_work, but only lane 0 of each warp arrived on q_empty, and an arrive orders only its own thread's reads
//   before the producer's next write. Now all 256 consumer threads arrive (q_empty counts them), once an item:
//   racecheck clean on its cases (D = 64 and 256; results/h100/sanitize_attention/), and the GPU tests of this rung
//   and of lab.ops.attention passed (an H100 at 823c643, results/h100/fix_run_823c643.log).
// Requires: as rung 04 (sm_90a; Q, K, V, O 16-byte aligned), HEAD_DIM 64, 128 or 256 (256 with BLOCK_N = 64). Launch: as rung 04 (grid
//   (ceil(S_q / 128), H, B), THREADS = 384, SMEM_BYTES = (128 + 2 * STAGES * BLOCK_N) * HEAD_DIM * 2 + 1024 of
//   dynamic shared memory, three 3-D tensor maps).
// Knobs: BF16 (0: fp16, 1: bf16), CAUSAL (0: full attention, 1: causal, bottom-right aligned), HEAD_DIM (64: D, 64,
//   128 or 256; the launcher sets these three per problem), BLOCK_N (128 keys a tile; 64, which the launcher sets at
//   HEAD_DIM = 256, below), STAGES (2 K/V stages),
//   THREADS (384: one producer and two consumer warpgroups), PEELED (1: the loop peeled; 0: the loop with
//   conditional products, the first build, slower: see Measured), LONGEST_FIRST (0: query blocks in launch order;
//   1: reversed when causal, above), PERSISTENT (0: a block a query block; 1: a block an SM, above), VARLEN (0:
//   (B, heads, S, D) arrays; 1: packed sequences, below),
//   SOFTMAX_OVERLAP (1: the exponentials under the warpgroup's own P V; 0: without; 2: its first build; by default
//   1 at HEAD_DIM = 256, else 2: below).
// VARLEN = 1 (lab.families.attention_varlen): Q and O are (T_q, H, D), K and V (T_k, H_kv, D), every sequence's tokens
//   one after another, and two more arguments, cu_seqlens_q and cu_seqlens_k (B + 1 int32 offsets), say where each
//   starts. The tensor maps take tokens as rows and heads as planes; a block adds its sequence's start to the rows
//   it asks for and takes the sequence's own S_q and S_k (the grid is sized by the longest); a block past its
//   sequence's last query row returns before it touches a barrier. A tile past the sequence's end reads the next
//   sequence's tokens (TMA zero-fills only past T): its keys are masked as any key past S_k, its query rows not
//   written. VARLEN = 0 builds the same instructions as before the knob (scripts/same_sass.py, 36 variants).
//   Prediction (before any run, H200, 16 prompts log-uniform over 1..8192, H = 32 on 8, D = 128, causal): 8.4% of
//   the padded batch's work is real, so 7-11x the dense build on the padded batch (short sequences waste most of
//   their 128-row block) and about 1.5x PyTorch's varlen function (FlashAttention-2), as rung 05 against FA2 dense.
//   Measured (results/h100/varlen_attention_study.json, an H100 at 40aa909, before SOFTMAX_OVERLAP, 3 interleaved
//   rounds, cold L2): that
//   batch at 517 useful TFLOP/s (the dense build at B=2 H=16 S=4096 causal: 480), 10.2x the dense build on it
//   padded, 9.4x cuDNN's SDPA on it padded, 1.60x PyTorch's varlen_attn; 8 and 32 prompts 6.3-11.0x the dense build
//   and SDPA (cuDNN, or its own choice) on them padded, 1.51-1.71x varlen_attn; a batch with little padding (8
//   prompts of 4096-8192, 74% of the padded work real) 1.23-1.29x those (lowest round 1.18x, SDPA's own choice). The
//   flash backend, padded, was slower still. Inside the prediction for the dense build, at its top for varlen_attn.
// HEAD_DIM = 256 (a build, not a knob of its own): Q's 128 rows are 64 KB, a 128-key K or V tile 64 KB, so two
//   stages of both do not fit 227 KB; with 64-key tiles (BLOCK_N = 64) they take 128 KB. S is then one m64n64k16 a
//   k-step (32 accumulators), O += P V one m64n256k16 (128 accumulators a thread: O's 64 x 256 per warpgroup), with
//   the same turns, stages and softmax. Prediction (before any run; B=2 H=16 S=4096 fp16, SDPA in the same rounds):
//   0.75-0.90x cuDNN's kernel: twice the turns and softmax passes a key of the D = 128 build, whose products per turn
//   are as long; the flash backend (FlashAttention-2) at D = 256 about half cuDNN, so >= 1.5x it. Measured
//   (results/h100/attention_study_d256.json, an H100 at 85fdfc4, SOFTMAX_OVERLAP = 0): correct on
//   every check case (tests/test_gpu_attention.py), 578 TFLOP/s, 0.83x cuDNN's kernel and 1.83x the flash backend
//   (causal: 483, 0.84x and 1.76x); with SOFTMAX_OVERLAP = 2, 0.88x and 1.94x (causal 0.87x and 1.83x). Inside the
//   prediction. With SOFTMAX_OVERLAP = 1, its default since: 0.92x and 2.07x (below). lab.ops.attention sends
//   D = 256 here on sm_90.
// SOFTMAX_OVERLAP (a knob; 0 builds the loop without it, whose SASS is the file's before the knob, scripts/same_sass.py;
//   PEELED = 0 has no such overlap): what was left above, the overlap inside a warpgroup (FlashAttention-3's
//   intra-warpgroup pipelining). The batch's two products go out as two groups, S(p) first: the warpgroup waits for
//   S(p) alone (wgmma.wait_group 1), releases K's stage, runs tile p's masks, maxes and exponentials in place in the
//   scores while P V(p - 1) still runs, then waits for it, rounds P into pa and rescales O. The rounding writes
//   registers that the next P V reads, so it stays after the second wait: written before it, ptxas serializes every
//   wgmma (C7513, "non wgmma instructions defining input registers of a wgmma between start and end of the
//   pipeline stage"). SOFTMAX_OVERLAP = 2 is the first build of this: its SASS has the second wait hoisted above the
//   exponentials (ptxas moves a wait up within its basic block), so only the masks and K's earlier release ran
//   under P V. SOFTMAX_OVERLAP = 1 ends the block before the wait (wait_products_here) and keeps every exponential
//   between the two waits (66 MUFU.EX2 a thread at BLOCK_N = 128; tests/test_attention_family.py). The default is 1
//   at HEAD_DIM = 256 and 2 at 64 and 128, from the measurements below.
//   Prediction (written before any GPU run, for the overlap as written; it turned out to be what SOFTMAX_OVERLAP = 2
//   built), by a model of one warpgroup's tile at D = 128: its two products are 2 x 64 x 128 x 128 x 2 FLOP, about
//   0.56 us at an SM's share of the tensor cores (989 TFLOP/s / 132); its softmax 8192 exponentials at 16 a clock
//   (0.28 us at 1.8 GHz) and about six FP32 operations a score at 128 a clock (0.2 us). Ping-pong hides one
//   warpgroup's softmax under the other's products only when it is shorter than them; with the exponentials under
//   its own P V too, what remains after the products is the rounding and the rescale. So 1.03-1.10x the build
//   without it at D = 128 (fp16 and bf16, causal or not) and D = 64, 1.00-1.05x at D = 256.
//   Measured for SOFTMAX_OVERLAP = 2 (results/h100/attention_study_d{128,256,64}.json, an H100 at 85fdfc4, where the
//   knob's 1 built what 2 builds now, the same SASS; beside the build without it in the same interleaved rounds,
//   median of the per-round ratios): D = 128 1.01x (fp16), 1.00x (causal), 1.01x (bf16), 1.08x at B=4 H=32 (whose
//   rounds of the build without it spread 21%); D = 256 1.06x, causal 1.04x; D = 64 1.04x, causal 0.99x. The
//   exponentials were not under P V in that build, so these gains are the masks and K's stage released a batch's
//   P V earlier (which matters most with two stages of 64-key tiles, D = 256).
//   Prediction for SOFTMAX_OVERLAP = 1 (before its first timing): the exponentials (about half a warpgroup's
//   softmax) under its own P V (about half its products) as well: 1.00-1.05x SOFTMAX_OVERLAP = 2 at D = 128 and 256,
//   1.02-1.06x at D = 64, where a tile's products are shortest against its softmax.
//   Measured (results/h100/attention_study_07cca46.json, an H100 at 07cca46, where 1 was the default at every head dim: its
//   rows are 05_pingpong; 0 and 2 beside it in the same rounds; time of 1 over time of 2, median of the per-round
//   ratios): D = 256 0.94x, causal 0.96x (1 faster: 626 TFLOP/s, 0.92x cuDNN's kernel and 2.07x the flash backend;
//   causal 512, 0.90x and 1.83x); D = 128 1.00x (fp16), 0.99x (bf16), causal 1.02x, 0.91x at B=4 H=32 (whose rounds
//   spread 8-14%); D = 64 1.10x, causal 1.05x (1 slower: 366 against 403 TFLOP/s). The prediction held at D = 256
//   only and failed at D = 64, the opposite way. 2 against 0 in those rounds (time of 0 over time of 2): 1.00-1.03x at
//   D <= 128 but for B=4 H=32 (0.97x), 1.04x and 1.01x at D = 256. Why the overlap costs at D = 64 is not yet
//   measured (Nsight Compute's stall reasons for 1 and 2 would say); what differs there is that a tile's products are
//   half as long as at D = 128 against the same softmax. So the default is 1 at D = 256 and 2 at D = 64 and 128; the
//   packed build (lab.families.attention_varlen) is pinned to 1, the build its GPU tests and study ran.
// Ideas: FlashAttention-3 and CUTLASS's ping-pong kernels, as rung 04; named barriers: NVIDIA's PTX ISA (bar.sync,
//   bar.arrive). Code is this lab's own.
#include "lab_cp_async.cuh"  // smem_u32addr, dynamic_smem_size
#include "lab_hopper.cuh"
#include "lab_mma.cuh"

#ifndef BF16
#define BF16 0
#endif
#ifndef CAUSAL
#define CAUSAL 0
#endif
#ifndef HEAD_DIM
#define HEAD_DIM 64
#endif
#ifndef BLOCK_N
#define BLOCK_N 128
#endif
#ifndef STAGES
#define STAGES 2
#endif
#ifndef THREADS
#define THREADS 384
#endif
#ifndef PEELED
#define PEELED 1
#endif
#ifndef LONGEST_FIRST
#define LONGEST_FIRST 0
#endif
#ifndef VARLEN
#define VARLEN 0
#endif
#ifndef PERSISTENT
#define PERSISTENT 0
#endif
#ifndef SOFTMAX_OVERLAP  // by head dim, as measured (the header's SOFTMAX_OVERLAP paragraph)
#define SOFTMAX_OVERLAP (HEAD_DIM == 256 ? 1 : 2)
#endif

#define BLOCK_M 128                               // two consumer warpgroups of 64 rows
#define ROW_BYTES 128                             // one swizzled row: 64 two-byte elements
#define BOXES (HEAD_DIM / 64)                     // 64-column boxes across a row of Q, K or V
#define Q_BYTES (BLOCK_M * HEAD_DIM * 2)
#define KV_BYTES (BLOCK_N * HEAD_DIM * 2)         // one K (or V) tile
#define SMEM_BYTES (Q_BYTES + 2 * STAGES * KV_BYTES + 1024)
#define PRODUCER_REGS 40
#define CONSUMER_REGS 232

#if !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "attention rung 05 needs sm_90a (wgmma, setmaxnreg, TMA): build it with -arch=sm_90a"
#endif
static_assert(BF16 == 0 || BF16 == 1, "BF16 is 0 (fp16) or 1 (bf16)");
static_assert(CAUSAL == 0 || CAUSAL == 1, "CAUSAL is 0 or 1");
static_assert(HEAD_DIM == 64 || HEAD_DIM == 128 || HEAD_DIM == 256, "HEAD_DIM is 64, 128 or 256");
static_assert(LONGEST_FIRST == 0 || LONGEST_FIRST == 1, "LONGEST_FIRST is 0 or 1");
static_assert(VARLEN == 0 || VARLEN == 1, "VARLEN is 0 or 1");
static_assert(PERSISTENT == 0 || (PERSISTENT == 1 && PEELED && !VARLEN),
              "PERSISTENT is 0 or 1, and 1 runs the peeled loop on (B, heads, S, D) arrays");
static_assert(SOFTMAX_OVERLAP >= 0 && SOFTMAX_OVERLAP <= 2, "SOFTMAX_OVERLAP is 0, 1 or 2 (the peeled loop's; "
                                                             "PEELED = 0 builds the first loop, which has no overlap)");
static_assert(BLOCK_N == 128 || BLOCK_N == 64, "S = Q K^T is one m64n128k16 (or m64n64k16) per k-step");
static_assert(SMEM_BYTES <= 227 * 1024, "Q and the K/V stages must fit sm_90's 227 KB a block: at HEAD_DIM = 256, "
                                        "BLOCK_N = 64 with 2 stages");
static_assert(THREADS == 384, "one producer and two consumer warpgroups");
static_assert(STAGES >= 1 && STAGES <= 4, "1 to 4 K/V stages");

typedef unsigned short half_bits;
#define NEG_INF (-__int_as_float(0x7f800000))

__device__ __forceinline__ float fast_exp2(float x) {  // ex2.approx.ftz, as rung 02
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
}
__device__ __forceinline__ float quad_max(float v) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
    return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// Two probabilities rounded to the input type by one paired conversion (cvt.rn.{f16,bf16}x2.f32, the first source
// to the upper half: p0 lands in the lower, the lower-indexed element), their rounded values added to `sum` in the
// order of p0 then p1. Why paired: a single cvt.rn.bf16.f32 is an F2F, which shares the SFU's 16 results a clock
// with ex2, so bf16 paid twice for every score; the paired form is an F2FP on the FMA pipe, for fp16 as for bf16.
__device__ __forceinline__ unsigned round_pair(float p0, float p1, float& sum) {
    unsigned packed;
    float lo, hi;
    if (BF16) {
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(p1), "f"(p0));
        lo = __uint_as_float(packed << 16), hi = __uint_as_float(packed & 0xffff0000u);
    } else {
        asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(p1), "f"(p0));
        asm("{\n.reg .f16 l, h;\nmov.b32 {l, h}, %2;\ncvt.f32.f16 %0, l;\ncvt.f32.f16 %1, h;\n}"
            : "=f"(lo), "=f"(hi) : "r"(packed));
    }
    sum += lo + hi;
    return packed;
}

// The box at element coordinates (x: the contiguous dimension, y: the row, z: the plane) of a 3-D tensor map into
// shared memory at `dst`, completing on `bar` (lab_hopper.cuh's tma_load_2d with one more coordinate).
__device__ __forceinline__ void tma_load_3d(unsigned dst, const TensorMap* map, int x, int y, int z, unsigned bar) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n"
        ::"r"(dst), "l"(map), "r"(x), "r"(y), "r"(z), "r"(bar)
        : "memory");
}

// d += A * B for one 64 x N x 16 step with A in registers (wgmma's register-A form: a[0..3] the mma.sync A
// fragment of this lane's rows of its warp's 16, lab_mma.cuh's layout) and B MN-major in shared memory (imm-trans-b
// 1); the accumulator is always added to (scale-d true), the operand lists written out as in lab_hopper.cuh.
#define LAB_WGMMA_REGS_32 \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define LAB_WGMMA_ACC_32 \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
    "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
    "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
    "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define LAB_WGMMA_RS(SHAPE, TY, REGS, ACC, REST)                                                            \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"                                                  \
                 "wgmma.mma_async.sync.aligned." SHAPE ".f32." TY "." TY " {" REGS "}, " REST ", p, 1, 1, 1;\n}\n" \
                 : ACC                                                                                        \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b))

__device__ __forceinline__ void wgmma_rs_step(float (&d)[32], const unsigned (&a)[4], unsigned long long desc_b) {
    if (BF16)
        LAB_WGMMA_RS("m64n64k16", "bf16", LAB_WGMMA_REGS_32, LAB_WGMMA_ACC_32, "{%32, %33, %34, %35}, %36");
    else
        LAB_WGMMA_RS("m64n64k16", "f16", LAB_WGMMA_REGS_32, LAB_WGMMA_ACC_32, "{%32, %33, %34, %35}, %36");
}

__device__ __forceinline__ void wgmma_rs_step(float (&d)[64], const unsigned (&a)[4], unsigned long long desc_b) {
    if (BF16)
        LAB_WGMMA_RS("m64n128k16", "bf16", LAB_WGMMA_REGS_64, LAB_WGMMA_ACC_64, "{%64, %65, %66, %67}, %68");
    else
        LAB_WGMMA_RS("m64n128k16", "f16", LAB_WGMMA_REGS_64, LAB_WGMMA_ACC_64, "{%64, %65, %66, %67}, %68");
}

// HEAD_DIM = 256: O += P V as one m64n256k16 a k-step (128 accumulators a thread).
__device__ __forceinline__ void wgmma_rs_step(float (&d)[128], const unsigned (&a)[4], unsigned long long desc_b) {
    if (BF16)
        LAB_WGMMA_RS("m64n256k16", "bf16", LAB_WGMMA_REGS_128, LAB_WGMMA_ACC_128, "{%128, %129, %130, %131}, %132");
    else
        LAB_WGMMA_RS("m64n256k16", "f16", LAB_WGMMA_REGS_128, LAB_WGMMA_ACC_128, "{%128, %129, %130, %131}, %132");
}

// S += Q K^T for one k-step, both operands from shared memory: m64n128k16 (lab_hopper.cuh), or m64n64k16 for the
// 64-key tiles that HEAD_DIM = 256 needs to fit its stages.
__device__ __forceinline__ void scores_step(float (&d)[64], unsigned long long desc_a, unsigned long long desc_b,
                                            int scale_d) {
    wgmma_m64n128k16<BF16, 0>(d, desc_a, desc_b, scale_d);
}
__device__ __forceinline__ void scores_step(float (&d)[32], unsigned long long desc_a, unsigned long long desc_b,
                                            int scale_d) {
    constexpr int TRANS_B = 0;  // K is K-major, as Q (LAB_WGMMA's immediate)
    if (BF16)
        LAB_WGMMA("m64n64k16", "bf16", LAB_WGMMA_REGS_32, LAB_WGMMA_ACC_32, "%34", "%32, %33, p, 1, 1, 0, %35");
    else
        LAB_WGMMA("m64n64k16", "f16", LAB_WGMMA_REGS_32, LAB_WGMMA_ACC_32, "%34", "%32, %33, p, 1, 1, 0, %35");
}

// wgmma.wait_group 0 where it is written. Within a basic block ptxas moves this wait up above independent work: in
// SOFTMAX_OVERLAP = 2's SASS it sits before the first exponential (no MUFU.EX2 between the two waits), so the
// exponentials ran after P V, not under it. A branch on a run-time value that is always true (S_k >= 0) ends the
// block before the wait, and the exponentials stay between the waits (tests/test_attention_family.py counts them).
__device__ __forceinline__ void wait_products_here(int always_nonnegative) {
    if (always_nonnegative >= 0)
        wgmma_wait<0>();
    else
        wgmma_wait<0>();
}

#define TURN_BARRIER 1  // named barriers 1 and 2: consumer warpgroup c's turn (0 is __syncthreads)

__device__ __forceinline__ void turn_wait(int c) {  // this warpgroup's 128 threads and the other's 128 arrivals
    asm volatile("bar.sync %0, 256;\n" ::"r"(TURN_BARRIER + c) : "memory");
}
__device__ __forceinline__ void turn_pass(int c) {  // let warpgroup c go (an arrival that does not wait)
    asm volatile("bar.arrive %0, 256;\n" ::"r"(TURN_BARRIER + c) : "memory");
}

// S = Q K^T for one tile: HEAD_DIM / 16 steps of m64n{BLOCK_N}k16, both operands K-major (D contiguous). Not
// committed.
__device__ __forceinline__ void issue_scores(float (&sc)[BLOCK_N / 2], unsigned q_slab, unsigned k_tile) {
#pragma unroll
    for (int kk = 0; kk < HEAD_DIM / 16; ++kk) {
        const unsigned off = 32 * (kk % 4);  // 16 elements along the swizzled 128-byte row
        const unsigned long long da = wgmma_desc(q_slab + (kk / 4) * 64 * ROW_BYTES + off, 16, 8 * ROW_BYTES);
        const unsigned long long db = wgmma_desc(k_tile + (kk / 4) * BLOCK_N * ROW_BYTES + off, 16, 8 * ROW_BYTES);
        scores_step(sc, da, db, kk > 0);
    }
}

// O += P V for one tile: BLOCK_N / 16 steps of m64nHEAD_DIMk16, P from registers, V MN-major. Not committed.
__device__ __forceinline__ void issue_pv(float (&o)[HEAD_DIM / 2], const unsigned (&pa)[BLOCK_N / 16][4],
                                         unsigned v_tile) {
#pragma unroll
    for (int kk = 0; kk < BLOCK_N / 16; ++kk)
        wgmma_rs_step(o, pa[kk], wgmma_desc(v_tile + kk * 16 * ROW_BYTES, BLOCK_N * ROW_BYTES, 8 * ROW_BYTES));
}

// Tile j's masks: keys past S_k, and past the diagonal when causal, to -inf (only on the tiles that hold such keys).
__device__ __forceinline__ void mask_scores(float (&sc)[BLOCK_N / 2], const int (&row)[2], int n0, int first_row,
                                            int S_q, int S_k, int t) {
    if (n0 + BLOCK_N > S_k || (CAUSAL && n0 + BLOCK_N - 1 > first_row + S_k - S_q)) {
#pragma unroll
        for (int jj = 0; jj < BLOCK_N / 8; ++jj)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int key = n0 + 8 * jj + 2 * t + (e % 2), i = row[e / 2];
                if (key >= S_k || (CAUSAL && key > i + S_k - S_q)) sc[4 * jj + e] = NEG_INF;
            }
    }
}

// Row half r's new running max: m[r] updated, O's factor into alpha, the shift the exponentials subtract returned.
__device__ __forceinline__ float new_max(const float (&sc)[BLOCK_N / 2], float (&m)[2], int r, float& alpha,
                                         float scale_log2) {
    float tile_max = NEG_INF;
#pragma unroll
    for (int jj = 0; jj < BLOCK_N / 8; ++jj) tile_max = fmaxf(tile_max, fmaxf(sc[4 * jj + 2 * r], sc[4 * jj + 2 * r + 1]));
    const float m_new = fmaxf(m[r], quad_max(tile_max) * scale_log2);
    const float shift = m_new == NEG_INF ? 0.0f : m_new;
    alpha = m_new == m[r] ? 1.0f : fast_exp2(m[r] - shift);
    m[r] = m_new;
    return shift;
}

// Tile j's masks and online softmax (rung 04's, unchanged): P into pa, O rescaled, m and l updated.
__device__ __forceinline__ void softmax_tile(float (&sc)[BLOCK_N / 2], unsigned (&pa)[BLOCK_N / 16][4],
                                             float (&o)[HEAD_DIM / 2], float (&m)[2], float (&l)[2], const int (&row)[2],
                                             int n0, int first_row, int S_q, int S_k, int t, float scale_log2) {
    mask_scores(sc, row, n0, first_row, S_q, S_k, t);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        float alpha;
        const float shift = new_max(sc, m, r, alpha, scale_log2);
        float sum = 0.0f;
#pragma unroll
        for (int jj = 0; jj < BLOCK_N / 8; ++jj) {
            const float p0 = fast_exp2(fmaf(sc[4 * jj + 2 * r], scale_log2, -shift));
            const float p1 = fast_exp2(fmaf(sc[4 * jj + 2 * r + 1], scale_log2, -shift));
            pa[jj / 2][2 * (jj % 2) + r] = round_pair(p0, p1, sum);
        }
        l[r] = fmaf(l[r], alpha, sum);
#pragma unroll
        for (int dn = 0; dn < HEAD_DIM / 8; ++dn) o[4 * dn + 2 * r] *= alpha, o[4 * dn + 2 * r + 1] *= alpha;
    }
}

// The same step in two parts for SOFTMAX_OVERLAP, the first of which runs while P V still reads pa and adds into O:
// (1) masks, maxes and the exponentials, in place in sc; (2) once the products are done, the probabilities rounded
// into pa, their sum into l, O rescaled.
__device__ __forceinline__ void softmax_exp(float (&sc)[BLOCK_N / 2], float (&alpha)[2], float (&m)[2],
                                            const int (&row)[2], int n0, int first_row, int S_q, int S_k, int t,
                                            float scale_log2) {
    mask_scores(sc, row, n0, first_row, S_q, S_k, t);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const float shift = new_max(sc, m, r, alpha[r], scale_log2);
#pragma unroll
        for (int jj = 0; jj < BLOCK_N / 8; ++jj) {
            sc[4 * jj + 2 * r] = fast_exp2(fmaf(sc[4 * jj + 2 * r], scale_log2, -shift));
            sc[4 * jj + 2 * r + 1] = fast_exp2(fmaf(sc[4 * jj + 2 * r + 1], scale_log2, -shift));
        }
    }
}
__device__ __forceinline__ void softmax_finish(const float (&sc)[BLOCK_N / 2], unsigned (&pa)[BLOCK_N / 16][4],
                                               float (&o)[HEAD_DIM / 2], const float (&alpha)[2], float (&l)[2]) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        float sum = 0.0f;
#pragma unroll
        for (int jj = 0; jj < BLOCK_N / 8; ++jj)
            pa[jj / 2][2 * (jj % 2) + r] = round_pair(sc[4 * jj + 2 * r], sc[4 * jj + 2 * r + 1], sum);
        l[r] = fmaf(l[r], alpha[r], sum);
#pragma unroll
        for (int dn = 0; dn < HEAD_DIM / 8; ++dn) o[4 * dn + 2 * r] *= alpha[r], o[4 * dn + 2 * r + 1] *= alpha[r];
    }
}

// The key tiles a query block of rows m0 .. m0 + 127 sees: up to its last row's diagonal when causal (0 when its
// rows see no key).
__device__ __forceinline__ int key_tiles(int m0, int S_q, int S_k) {
    const int n_end = CAUSAL ? min(S_k, m0 + BLOCK_M + S_k - S_q) : S_k;
    return n_end > 0 ? (n_end + BLOCK_N - 1) / BLOCK_N : 0;
}

// PERSISTENT = 1: work item i (a query block of one batch and head). The (batch, head) pairs go in sections of
// `section_heads`, whose K and V the launcher sized to stay in L2 while the section runs; inside a section the query
// blocks go across the section's heads, and when causal the blocks with the most key tiles first, so that the
// shortest items fill the end of the run.
__device__ __forceinline__ void item_at(int i, int m_blocks, int heads_total, int section_heads, int& m_block,
                                        int& bh) {
    const int per_section = section_heads * m_blocks, section = i / per_section;
    const int heads = min(section_heads, heads_total - section * section_heads), r = i - section * per_section;
    const int m_index = r / heads;
    bh = section * section_heads + (r - m_index * heads);
    m_block = CAUSAL ? m_blocks - 1 - m_index : m_index;
}

extern "C" __global__ void __launch_bounds__(THREADS, 1)
attention_pingpong(const __grid_constant__ TensorMap map_q, const __grid_constant__ TensorMap map_k,
                   const __grid_constant__ TensorMap map_v, half_bits* __restrict__ O,
#if VARLEN
                   const int* __restrict__ cu_seqlens_q, const int* __restrict__ cu_seqlens_k,
#endif
#if PERSISTENT
                   int* __restrict__ work_counter, int B, int section_heads,
#endif
                   int H, int H_kv, int S_q, int S_k, float scale_log2) {
    extern __shared__ __align__(1024) unsigned char smem[];
    __shared__ __align__(8) unsigned long long q_bar, k_bars[STAGES], v_bars[STAGES], k_empty_bars[STAGES],
        v_empty_bars[STAGES];
#if PERSISTENT
    __shared__ __align__(8) unsigned long long q_empty_bar;  // the consumers' last S(j) of an item has read Q
    __shared__ int next_work;                                 // the item Q's tile holds (-1: none left), for the consumers
    const unsigned qeb = smem_u32addr(&q_empty_bar);
#endif
    if (dynamic_smem_size() < SMEM_BYTES) __trap();  // launched with too little: stop, do not overrun it

    // Shared memory as rung 04: Q's 128 rows, then stage s's K tile and V tile.
    const unsigned sQ = (smem_u32addr(smem) + 1023) & ~1023u;
    const unsigned sKV = sQ + Q_BYTES;
    const unsigned qb = smem_u32addr(&q_bar), kb = smem_u32addr(k_bars), vb = smem_u32addr(v_bars);
    const unsigned keb = smem_u32addr(k_empty_bars), veb = smem_u32addr(v_empty_bars);
#if PERSISTENT
    const int q_start = 0, k_start = 0, m_blocks = (S_q + BLOCK_M - 1) / BLOCK_M, n_items = m_blocks * H * B;
#define Q_PLANE (b * H + h)
#define KV_PLANE (b * H_kv + kvh)
#else
    const int b = blockIdx.z, h = blockIdx.y, kvh = h / (H / H_kv);
#if VARLEN
    // Packed sequences: sequence b's rows start at row cu_seqlens[b] of (total, heads, D) arrays, and S_q, S_k (the
    // longest, which sized the grid) become this sequence's own. A block past its sequence's last query row leaves
    // before it touches a barrier (the whole block: no thread is left waiting).
    const int q_start = cu_seqlens_q[b], k_start = cu_seqlens_k[b];
    S_q = cu_seqlens_q[b + 1] - q_start;
    S_k = cu_seqlens_k[b + 1] - k_start;
    const int m_blocks = (S_q + BLOCK_M - 1) / BLOCK_M;
    if ((int)blockIdx.x >= m_blocks) return;
#define Q_PLANE h    // the maps' planes are heads; their rows, tokens
#define KV_PLANE kvh
#else
    const int q_start = 0, k_start = 0, m_blocks = gridDim.x;
#define Q_PLANE (b * H + h)  // one plane per batch and head (written at each use, where ptxas schedules it)
#define KV_PLANE (b * H_kv + kvh)
#endif
    const int m_block = (CAUSAL && LONGEST_FIRST) ? m_blocks - 1 - (int)blockIdx.x : (int)blockIdx.x;
    const int m0 = m_block * BLOCK_M;
    const int n_tiles = key_tiles(m0, S_q, S_k);
#endif
    const int wg = threadIdx.x / 128, warp = threadIdx.x / 32, lane = threadIdx.x % 32;

    if (threadIdx.x == 0) {
        prefetch_tensor_map(&map_q);
        prefetch_tensor_map(&map_k);
        prefetch_tensor_map(&map_v);
        mbar_init(qb, 1);
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(kb + 8 * s, 1);  // the producer's arrive_expect_tx, then the bytes
            mbar_init(vb + 8 * s, 1);
            mbar_init(keb + 8 * s, 8);  // one arrival per consumer warp
            mbar_init(veb + 8 * s, 8);
        }
#if PERSISTENT
        mbar_init(qeb, THREADS - 128);  // every consumer thread (see the arrive after the last S(p))
#endif
        fence_barrier_init();
    }
    __syncthreads();

    // A persistent block's items, each a query block as a launch of PERSISTENT = 0 runs it. The producer takes them:
    // blockIdx.x first, then each next one from the launch's counter as soon as it has issued the last item's loads
    // (so a block that finishes early takes more: greedy, not a fixed share). It hands the item to the consumers in
    // next_work, written before its arrival on Q's barrier (a release; their wait, an acquire) and not again before
    // both warpgroups have passed q_empty. Every fetch is one item (the last one of each block fails), so the fetches
    // number n_items exactly: the one that returns n_items - 1 is the launch's last and resets the counter to 0 for
    // the next launch. The K/V stages run on from item to item (g0: the key tiles of the items before), as do Q's
    // barriers' phases (item: the block's count).
#if PERSISTENT
#define ITEM_SETUP(work)                                                                                 \
        int m_block, bh;                                                                                 \
        item_at(work, m_blocks, H * B, section_heads, m_block, bh);                                      \
        const int b = bh / H, h = bh - b * H, kvh = h / (H / H_kv), m0 = m_block * BLOCK_M;            \
        const int n_tiles = key_tiles(m0, S_q, S_k);
#define PRODUCER_ITEMS                                                                                   \
    int g0 = 0, work = blockIdx.x;                                                                       \
    for (int item = 0;; ++item) {                                                                        \
        if (item > 0) mbar_wait(qeb, (item - 1) & 1); /* the consumers are done with Q and next_work */  \
        *(volatile int*)&next_work = work < n_items ? work : -1;                                         \
        if (work >= n_items) {                                                                           \
            mbar_arrive(qb); /* Q's phase completes with no tile: the consumers read -1 and stop */      \
            break;                                                                                       \
        }                                                                                                \
        ITEM_SETUP(work)
#define END_PRODUCER_ITEM                                                                                \
        const int fetched = atomicAdd(work_counter, 1);                                                  \
        if (fetched == n_items - 1) atomicExch(work_counter, 0); /* the launch's last fetch */           \
        work = gridDim.x + fetched;                                                                      \
        g0 += n_tiles;                                                                                   \
    }
#define CONSUMER_ITEMS                                                                                   \
    int g0 = 0;                                                                                          \
    for (int item = 0;; ++item) {                                                                        \
        mbar_wait(qb, item & 1);                                                                         \
        const int work = *(volatile int*)&next_work;                                                     \
        if (work < 0) break;                                                                             \
        ITEM_SETUP(work)
#define END_CONSUMER_ITEM \
        g0 += n_tiles;    \
    }
#else
#define PRODUCER_ITEMS {      \
        constexpr int g0 = 0;
#define END_PRODUCER_ITEM }
#define CONSUMER_ITEMS {      \
        constexpr int g0 = 0;
#define END_CONSUMER_ITEM }
#endif

    if (wg == 0) {  // the producer: one thread issues every load, K(j) and V(j) each as soon as its stage is free
        setmaxnreg_dec<PRODUCER_REGS>();
        if (threadIdx.x == 0) {
            PRODUCER_ITEMS
            mbar_arrive_expect_tx(qb, Q_BYTES);
            for (int c = 0; c < 2; ++c)
                for (int x = 0; x < BOXES; ++x)
                    tma_load_3d(sQ + c * 64 * HEAD_DIM * 2 + x * 64 * ROW_BYTES, &map_q, 64 * x, q_start + m0 + 64 * c,
                                Q_PLANE, qb);
            for (int j = 0; j < n_tiles; ++j) {
                const int g = g0 + j, s = g % STAGES;  // the ring's g-th tile
                const unsigned k_dst = sKV + s * 2 * KV_BYTES, v_dst = k_dst + KV_BYTES, phase = ((g / STAGES) - 1) & 1;
                if (g >= STAGES) mbar_wait(keb + 8 * s, phase);  // S(g - STAGES) has read K's stage
                mbar_arrive_expect_tx(kb + 8 * s, KV_BYTES);
                for (int x = 0; x < BOXES; ++x)
                    tma_load_3d(k_dst + x * BLOCK_N * ROW_BYTES, &map_k, 64 * x, k_start + j * BLOCK_N, KV_PLANE,
                                kb + 8 * s);
                if (g >= STAGES) mbar_wait(veb + 8 * s, phase);  // P V(g - STAGES) has read V's
                mbar_arrive_expect_tx(vb + 8 * s, KV_BYTES);
                for (int x = 0; x < BOXES; ++x)
                    tma_load_3d(v_dst + x * BLOCK_N * ROW_BYTES, &map_v, 64 * x, k_start + j * BLOCK_N, KV_PLANE,
                                vb + 8 * s);
            }
            END_PRODUCER_ITEM
        }
        return;
    }

    setmaxnreg_inc<CONSUMER_REGS>();
    const int c = wg - 1, t = lane % 4;
    const unsigned q_slab = sQ + c * 64 * HEAD_DIM * 2;
    CONSUMER_ITEMS
    const int row[2] = {m0 + 64 * c + 16 * (warp % 4) + lane / 4, m0 + 64 * c + 16 * (warp % 4) + lane / 4 + 8};
    const int first_row = m0 + 64 * c;

    float o[HEAD_DIM / 2];
#pragma unroll
    for (int i = 0; i < HEAD_DIM / 2; ++i) o[i] = 0.0f;
    float m[2] = {NEG_INF, NEG_INF}, l[2] = {0.0f, 0.0f};
    float sc[BLOCK_N / 2];
    unsigned pa[BLOCK_N / 16][4];
#if !PERSISTENT
    mbar_wait(qb, 0);  // (a persistent block waited above, for the item's number)
#endif

    // Batch p (0 .. n_tiles) is S(p) (p < n_tiles) and P V(p - 1) (p > 0). The turns: warpgroup 0 goes first (1's
    // opening pass), each batch ends by passing the turn, and warpgroup 1's last pass, which no one would wait
    // for, is left out: n_tiles + 1 waits and passes on each barrier (so a persistent block's next item starts with
    // both barriers as the first did). A block whose rows see no key (n_tiles = 0) takes no turn at all: a wait with
    // no pass to meet it would never return. Tile p's stage is (g0 + p) % STAGES.
#if PERSISTENT
#define STAGE_OF(p) ((g0 + (p)) % STAGES)
#define PHASE_OF(p) (((g0 + (p)) / STAGES) & 1)
#else
#define STAGE_OF(p) ((p) % STAGES)
#define PHASE_OF(p) (((p) / STAGES) & 1)
#endif
#if PEELED
    // The same batches with the loop peeled: S(0) alone, then S(p) with P V(p - 1) for p = 1 .. n_tiles - 1 under
    // no condition, then P V(n_tiles - 1) alone, so that no wgmma sits on a divergent path (ptxas C7519).
    if (n_tiles > 0) {
        if (c == 1) turn_pass(0);
        const int s0 = STAGE_OF(0);
        mbar_wait(kb + 8 * s0, PHASE_OF(0));  // K(0) has landed
        turn_wait(c);
        wgmma_fence();
        issue_scores(sc, q_slab, sKV + s0 * 2 * KV_BYTES);
        wgmma_commit();
        turn_pass(1 - c);
        wgmma_wait<0>();
        fence_accumulators(sc);
        if (lane == 0) mbar_arrive(keb + 8 * s0);
        softmax_tile(sc, pa, o, m, l, row, 0, first_row, S_q, S_k, t, scale_log2);
        for (int p = 1; p < n_tiles; ++p) {
            const int s = STAGE_OF(p), sp = STAGE_OF(p - 1);
            const unsigned k_tile = sKV + s * 2 * KV_BYTES, v_prev = sKV + sp * 2 * KV_BYTES + KV_BYTES;
            mbar_wait(kb + 8 * s, PHASE_OF(p));
            mbar_wait(vb + 8 * sp, PHASE_OF(p - 1));
            turn_wait(c);
            wgmma_fence();
            fence_accumulators(o);
            issue_scores(sc, q_slab, k_tile);
#if SOFTMAX_OVERLAP
            wgmma_commit();  // S(p) a group of its own, so that it can be waited for alone
#endif
            issue_pv(o, pa, v_prev);
            wgmma_commit();
            turn_pass(1 - c);
#if SOFTMAX_OVERLAP
            // S(p) is in while P V(p - 1) may still be reading pa and adding into O: tile p's exponentials now,
            // in place; its rounding into pa and O's rescale once the products are done.
            wgmma_wait<1>();
            fence_accumulators(sc);
            if (lane == 0) mbar_arrive(keb + 8 * s);
            float alpha[2];
            softmax_exp(sc, alpha, m, row, p * BLOCK_N, first_row, S_q, S_k, t, scale_log2);
#if SOFTMAX_OVERLAP == 1
            wait_products_here(S_k);
#else
            wgmma_wait<0>();  // SOFTMAX_OVERLAP = 2: ptxas hoists this wait above the exponentials (see the header)
#endif
            fence_accumulators(o);
            if (lane == 0) mbar_arrive(veb + 8 * sp);
            softmax_finish(sc, pa, o, alpha, l);
#else
            wgmma_wait<0>();
            fence_accumulators(sc);
            fence_accumulators(o);
            if (lane == 0) mbar_arrive(keb + 8 * s), mbar_arrive(veb + 8 * sp);
            softmax_tile(sc, pa, o, m, l, row, p * BLOCK_N, first_row, S_q, S_k, t, scale_log2);
#endif
        }
#if PERSISTENT
        // Every S(p) is done: Q's tile (and next_work) are free for the next item's while P V runs. Every lane
        // arrives: an arrive releases only its own thread's reads, so one lane's arrive would leave the others' reads
        // of next_work unordered before the producer's next write (racecheck's hazard; a __syncwarp before one arrive
        // orders them too, but ptxas drops it in this converged code, and racecheck then sees no sync).
        mbar_arrive(qeb);
#endif
        const int sp = STAGE_OF(n_tiles - 1);
        mbar_wait(vb + 8 * sp, PHASE_OF(n_tiles - 1));
        turn_wait(c);
        wgmma_fence();
        fence_accumulators(o);
        issue_pv(o, pa, sKV + sp * 2 * KV_BYTES + KV_BYTES);
        wgmma_commit();
        if (c == 0) turn_pass(1);  // warpgroup 1's last pass is left out, as in the loop below
        wgmma_wait<0>();
        fence_accumulators(o);
        if (lane == 0) mbar_arrive(veb + 8 * sp);
    }
#if PERSISTENT
    else {  // no key tile: Q was not read; every lane has read next_work, and each one's arrive releases that read
        mbar_arrive(qeb);
    }
#endif
#else
    if (n_tiles > 0 && c == 1) turn_pass(0);
    for (int p = 0; n_tiles > 0 && p <= n_tiles; ++p) {
        const int s = p % STAGES, sp = (p + STAGES - 1) % STAGES;  // the stages of tiles p and p - 1
        const unsigned k_tile = sKV + s * 2 * KV_BYTES, v_prev = sKV + sp * 2 * KV_BYTES + KV_BYTES;
        if (p < n_tiles) mbar_wait(kb + 8 * s, (p / STAGES) & 1);         // K(p) has landed
        if (p > 0) mbar_wait(vb + 8 * sp, ((p - 1) / STAGES) & 1);        // V(p - 1) has landed
        turn_wait(c);
        wgmma_fence();
        fence_accumulators(o);
        if (p < n_tiles) issue_scores(sc, q_slab, k_tile);
        if (p > 0) issue_pv(o, pa, v_prev);
        wgmma_commit();
        if (c == 0 || p < n_tiles) turn_pass(1 - c);
        wgmma_wait<0>();
        fence_accumulators(sc);
        fence_accumulators(o);
        if (lane == 0) {
            if (p < n_tiles) mbar_arrive(keb + 8 * s);  // S(p) has read K(p)
            if (p > 0) mbar_arrive(veb + 8 * sp);       // P V(p - 1) has read V(p - 1)
        }
        if (p < n_tiles)
            softmax_tile(sc, pa, o, m, l, row, p * BLOCK_N, first_row, S_q, S_k, t, scale_log2);
    }
#endif

    // --- O / l, rounded once; rows past S_q are not written (rung 02's end) -------------------------------------
#if VARLEN
    half_bits* Oh = O + ((long long)q_start * H + h) * HEAD_DIM;  // (total, H, D): a row is H * D elements
    const int o_row_stride = H * HEAD_DIM;
#else
    half_bits* Oh = O + (long long)(b * H + h) * S_q * HEAD_DIM;
    const int o_row_stride = HEAD_DIM;
#endif
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const float total = quad_sum(l[r]);
        const bool seen = total > 0.0f;
        const float inv = seen ? 1.0f / total : 0.0f;
        if (row[r] >= S_q) continue;
        half_bits* out = Oh + (long long)row[r] * o_row_stride + 2 * t;
#pragma unroll
        for (int dn = 0; dn < HEAD_DIM / 8; ++dn) {
            const float x0 = seen ? o[4 * dn + 2 * r] * inv : 0.0f, x1 = seen ? o[4 * dn + 2 * r + 1] * inv : 0.0f;
            *reinterpret_cast<unsigned*>(out + 8 * dn) =
                pack_half2(float_to_half_bits<BF16>(x0), float_to_half_bits<BF16>(x1));
        }
    }
    END_CONSUMER_ITEM
}
