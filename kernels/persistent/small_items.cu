// persistent / small items — many small work items: one launch each, one batched launch, or one persistent
// kernel that pulls items from a device-side queue.
//
// What it is: RMSNorm of one fp32 row, y = x * rsqrt(mean(x^2) + eps) * w, the kind of small per-item step a
//   decode step is made of. Item i's row starts at element offsets[i] of one big buffer (the same offset in x
//   and y) and holds lengths[i] elements; w is shared by every item (its first lengths[i] entries are used).
//   One block of BLOCK_THREADS threads does one item: a sum of squares reduced over the block, then the
//   scaled write. Three entry points run N items:
//   item_one         one item per launch (the item's index is a parameter): N launches, issued from Python one
//                    by one or replayed from a CUDA graph that captured them;
//   items_per_block  one launch, grid = N, block b does item b: the hardware's block scheduler is the queue;
//   items_queue      one persistent launch, grid = SMs x blocks per SM (at most N); each block takes the next
//                    item index from a counter in global memory with atomicAdd until none is left.
// Why: a launch has a fixed cost that does not shrink with the work. When an item is a few microseconds of
//   work or less, launching it costs more than doing it, and one stream runs one such kernel at a time, so a
//   single-block kernel also leaves all SMs but one idle. Paying the launch once for all N items, and letting
//   the blocks already on the GPU fetch work themselves, removes both costs. (The persistent-kernel pattern:
//   Gupta, Stuart & Owens, "A Study of Persistent Threads Style GPU Programming for GPGPU Workloads",
//   InPar 2012; decode-time schedulers in LLM inference engines use the same idea.)
// Prediction (written before measuring, H200, 132 SMs, fp32 rows of 256 .. 262144 elements):
//   - one CuPy launch per item: 5-7 us per item of host time for every item shorter than that, then the
//     item's time on one SM (50-100 us at 262144 elements: 3 MiB through one block, which keeps only
//     ~16 KiB of loads in flight, so 30-60 GB/s);
//   - a graph of those launches: about 0.7 us per kernel node plus the item's own latency on one SM
//     (~2 us at 256 elements), so 2-3 us per item for small items, the same one-SM time for large ones;
//     "alone_us" (one item in a graph of many launches of it) should match it;
//   - the queue: one atomic (a few hundred ns of L2 round trip) and the item's work, per block, with
//     ~800-1000 blocks resident at once, so well under 0.1 us per item in throughput up to 4096 elements,
//     then HBM-bound (8 B of x and y per element at ~4 TB/s: 0.5 us per item at 262144). That is >= 5x
//     faster per item than per-item launches (and graphs) for every item under ~10 us of work;
//   - items_per_block within ~30% of the queue either way: the block scheduler hands out blocks as fast as
//     the queue hands out tickets, and a skewed mix of lengths is balanced by both.
// Requires: sm_75+, any length >= 1, any offsets (float4 loads when the row's x, y and w are 16-byte
//   aligned, scalar loads otherwise); the queue counter (2 x u64) zeroed once at allocation; one counter per
//   stream that launches items_queue (see the comment above it).
// Knobs: BLOCK_THREADS (256) threads per block, a multiple of 32 up to 1024; the launcher picks blocks per SM
//   for items_queue (default: as many as fit on one SM).

#ifndef BLOCK_THREADS
#define BLOCK_THREADS 256
#endif
#define WARPS (BLOCK_THREADS / 32)

static_assert(BLOCK_THREADS % 32 == 0 && BLOCK_THREADS >= 32 && BLOCK_THREADS <= 1024,
              "BLOCK_THREADS must be a multiple of 32 between 32 and 1024");

struct BlockReduce {
    float warp_sums[WARPS];
    float total;
};

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int lane_mask = 16; lane_mask > 0; lane_mask >>= 1) v += __shfl_xor_sync(0xffffffffu, v, lane_mask);
    return v;
}

// The sum of v over the block, returned to every thread. Two barriers: the second one also guarantees that
// every thread has read `total` (and whatever it read from shared memory before calling) before any thread
// can write shared memory again for the next item.
__device__ __forceinline__ float block_sum(float v, BlockReduce& red) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    v = warp_sum(v);
    if (lane == 0) red.warp_sums[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = warp_sum(lane < WARPS ? red.warp_sums[lane] : 0.0f);
        if (lane == 0) red.total = v;
    }
    __syncthreads();
    return red.total;
}

// One item: y[0:n] = x[0:n] * rsqrt(mean(x^2) + eps) * w[0:n], by the whole block.
__device__ __forceinline__ void rmsnorm_row(const float* __restrict__ x, const float* __restrict__ w,
                                            float* __restrict__ y, int n, float eps, BlockReduce& red) {
    const unsigned long long addresses = reinterpret_cast<unsigned long long>(x) |
                                         reinterpret_cast<unsigned long long>(y) |
                                         reinterpret_cast<unsigned long long>(w);
    const int n4 = (addresses & 15) == 0 ? n / 4 : 0;  // float4 body only when all three rows are aligned
    const float4* x4 = reinterpret_cast<const float4*>(x);
    const float4* w4 = reinterpret_cast<const float4*>(w);
    float4* y4 = reinterpret_cast<float4*>(y);

    float squares = 0.0f;
#pragma unroll 4
    for (int i = threadIdx.x; i < n4; i += BLOCK_THREADS) {
        const float4 v = x4[i];
        squares += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    }
    for (int i = 4 * n4 + threadIdx.x; i < n; i += BLOCK_THREADS) squares += x[i] * x[i];

    const float scale = rsqrtf(block_sum(squares, red) / static_cast<float>(n) + eps);

#pragma unroll 4
    for (int i = threadIdx.x; i < n4; i += BLOCK_THREADS) {
        const float4 v = x4[i], g = w4[i];
        y4[i] = make_float4(v.x * scale * g.x, v.y * scale * g.y, v.z * scale * g.z, v.w * scale * g.w);
    }
    for (int i = 4 * n4 + threadIdx.x; i < n; i += BLOCK_THREADS) y[i] = x[i] * scale * w[i];
}

// (a) One item per launch: grid = 1 block.
extern "C" __global__ void __launch_bounds__(BLOCK_THREADS)
item_one(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y,
         const long long* __restrict__ offsets, const int* __restrict__ lengths, int item, float eps) {
    __shared__ BlockReduce red;
    const long long offset = offsets[item];
    rmsnorm_row(x + offset, w, y + offset, lengths[item], eps, red);
}

// (b) The plain batched launch: grid = n_items blocks, block b does item b.
extern "C" __global__ void __launch_bounds__(BLOCK_THREADS)
items_per_block(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y,
                const long long* __restrict__ offsets, const int* __restrict__ lengths, long long n_items,
                float eps) {
    __shared__ BlockReduce red;
    const long long item = blockIdx.x;
    if (item >= n_items) return;
    const long long offset = offsets[item];
    rmsnorm_row(x + offset, w, y + offset, lengths[item], eps, red);
}

// (c) Persistent: each block takes item indices from queue[0] until they run out.
//
// queue[0] is the next ticket, queue[1] the number of blocks that have found the queue empty. Both are 0 when a
// launch starts, and the launch leaves them 0 again, so the kernel can be launched again and again (or replayed
// from a CUDA graph, whose parameters never change) with no host memset in between. Why that holds:
// - every block stops at its first ticket >= n_items and takes no ticket after it, so tickets
//   0 .. n_items-1 each go to exactly one block: every item is done exactly once, whatever the grid size and
//   whether or not all blocks are resident at once (no block waits for another, so none can deadlock);
// - a block counts itself in queue[1] only after its last atomicAdd on queue[0] (the __threadfence orders the
//   two), so the block that reads gridDim.x - 1 from queue[1] is the last to touch the queue in this launch:
//   every other block has already taken its final ticket, and it may reset both counters;
// - the next launch on the same stream starts only after this one has finished, and a finished kernel's
//   writes are visible to the kernels after it, so that launch finds both counters at 0.
// Two launches running at once (two streams) would share the tickets: each stream needs its own counter.
// A launch that dies part-way (a fault) leaves the counter dirty; the host then zeroes it once.
// `visits`, when not null, counts how often each item was taken (a test of "exactly once"; null when timed).
extern "C" __global__ void __launch_bounds__(BLOCK_THREADS)
items_queue(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y,
            const long long* __restrict__ offsets, const int* __restrict__ lengths, long long n_items, float eps,
            unsigned long long* queue, unsigned int* visits) {
    __shared__ BlockReduce red;
    __shared__ unsigned long long ticket;
    for (;;) {
        // One thread takes the ticket and the block reads it from shared memory. Thread 0 cannot overwrite
        // `ticket` for the next item before every thread has read this one: rmsnorm_row's block_sum holds
        // two barriers that every thread passes after its read.
        if (threadIdx.x == 0) ticket = atomicAdd(&queue[0], 1ull);
        __syncthreads();
        const unsigned long long item = ticket;
        if (item >= static_cast<unsigned long long>(n_items)) break;  // the same value in every thread
        if (visits != nullptr && threadIdx.x == 0) atomicAdd(&visits[item], 1u);
        const long long offset = offsets[item];
        rmsnorm_row(x + offset, w, y + offset, lengths[item], eps, red);
    }
    if (threadIdx.x == 0) {
        __threadfence();  // this block's last atomicAdd on queue[0] comes before its count in queue[1]
        const unsigned long long finished = atomicAdd(&queue[1], 1ull);
        if (finished == gridDim.x - 1ull) {
            __threadfence();
            atomicExch(&queue[0], 0ull);
            atomicExch(&queue[1], 0ull);
        }
    }
}
