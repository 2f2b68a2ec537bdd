// Timing helper, not a rung: busy-waits for `ns` nanoseconds of GPU time and touches no memory.
// lab.measure.timing queues it just before each timed launch, so the GPU is still busy when the start event
// and the timed kernel arrive. Without it, a kernel shorter than the host's launch cost is timed
// together with the host's launch latency: on the H200 an 8 MB warm-L2 copy read 17 us that way,
// against 7.8 us when a long kernel happened to precede it (first device run, 2026-11-29).
extern "C" __global__ void lab_spin_ns(unsigned long long ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < ns);
}
