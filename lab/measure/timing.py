"""Timing GPU work honestly: CUDA events, warm-up, cold or warm L2, rotating inputs, medians.

Rules (METHOD.md in spirit; see notebook 00 for the why):
- Events on the stream, never a host clock around asynchronous work.
- Warm-up launches first: module load, first-touch and clock ramp-up stay out of the numbers.
- Cold L2: before every timed launch, a write over a buffer twice the L2's size evicts the inputs,
  so a kernel that "reads" from L2 gets no credit for it. Warm L2: no flush, same inputs again.
- Each launch is timed on its own; the median is the figure, p10-p90 its spread.
- Enough repetitions for a minimum measured duration, so short kernels are not one noisy sample.
- A short spin kernel runs before each start event, so the timed kernel is already queued when the
  GPU reaches it: the events then bracket GPU time, not the host's launch latency.
`cupyx.profiler.benchmark` does not flush the L2: fine for warm numbers, wrong for cold ones.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np

L2_MODES = ("cold", "warm")
SPIN_NS = 50_000  # longer than the host needs to queue the start event and one launch through CuPy


@dataclass
class Timing:
    median_ms: float
    p10_ms: float
    p90_ms: float
    min_ms: float
    reps: int
    l2: str

    def as_dict(self) -> dict:
        return asdict(self)


class L2Flusher:
    """Evicts the L2 by writing a buffer of twice its size (sized from the device, not assumed).

    `by="read"` evicts by reading the buffer instead, which leaves the L2 full of clean lines rather than
    dirty ones (the flush's own writes): an experiment knob (lab.studies.anomalies), not what records use.
    """

    def __init__(self, l2_bytes: int | None = None, by: str = "write"):
        import cupy as cp

        from lab.core import device

        if by not in ("write", "read"):
            raise ValueError(f"by must be 'write' or 'read', not {by!r}")
        l2 = l2_bytes if l2_bytes is not None else device.current().l2_bytes
        self.buffer = cp.empty(max(2 * l2, 1 << 20) // 4, dtype=cp.int32)
        self.by = by
        self._value = 0
        if by == "read":
            self.buffer.fill(0)

    def flush(self) -> None:
        if self.by == "read":
            self.buffer.max()  # a reduction reads every element; its one-element result is all it writes
            return
        self._value ^= 1  # a different value each time, so no write can be skipped as redundant
        self.buffer.fill(self._value)


def measure(launch: Callable[[int], None], *, l2: str = "warm", warmup: int = 3, min_time_ms: float = 25.0,
            min_reps: int = 5, max_reps: int = 500, flusher: L2Flusher | None = None,
            prepare: Callable[[int], None] | None = None, spin_ns: int = SPIN_NS) -> Timing:
    """Time `launch(i)` (i = repetition index, to rotate input sets) with CUDA events.

    `prepare(i)`, when given, runs before each timed launch and outside the timed region (before the
    L2 flush), e.g. to refill the inputs with fresh values so no launch can reuse an earlier result.
    `spin_ns` is how long the GPU spins before each start event (longer only for experiments on gaps).
    """
    import cupy as cp

    if l2 not in L2_MODES:
        raise ValueError(f"l2 must be one of {L2_MODES}, not {l2!r}")
    if l2 == "cold" and flusher is None:
        flusher = L2Flusher()
    stream = cp.cuda.get_current_stream()
    spin = spinner(spin_ns)
    for i in range(warmup):
        launch(i)
    stream.synchronize()

    # One timed probe sizes the number of repetitions for the minimum measured duration.
    probe = time_once(launch, warmup, flusher if l2 == "cold" else None, spin)
    reps = int(np.clip(np.ceil(min_time_ms / max(probe, 1e-3)), min_reps, max_reps))

    pairs = [(cp.cuda.Event(), cp.cuda.Event()) for _ in range(reps)]
    for i, (start, end) in enumerate(pairs):
        if prepare is not None:
            prepare(i)
        if l2 == "cold":
            flusher.flush()
        spin()
        start.record(stream)
        launch(i)
        end.record(stream)
    end.synchronize()
    times = np.array([cp.cuda.get_elapsed_time(s, e) for s, e in pairs])
    return Timing(float(np.median(times)), float(np.percentile(times, 10)), float(np.percentile(times, 90)),
                  float(times.min()), reps, l2)


def spinner(ns: int = SPIN_NS) -> Callable[[], None]:
    from lab.core.build import KernelSpec, get_kernel

    kernel = get_kernel(KernelSpec("common/spin.cu", "lab_spin_ns"))
    return lambda: kernel((1,), (1,), (np.uint64(ns),))


def time_once(launch: Callable[[int], None], index: int, flusher: L2Flusher | None,
               spin: Callable[[], None]) -> float:
    import cupy as cp

    start, end = cp.cuda.Event(), cp.cuda.Event()
    if flusher is not None:
        flusher.flush()
    spin()
    start.record()
    launch(index)
    end.record()
    end.synchronize()
    return cp.cuda.get_elapsed_time(start, end)


# --- Many launches as one: CUDA graphs --------------------------------------------------------------
# An event pair around one launch carries a fixed cost of a few microseconds (the events themselves and
# the launch's start-up), which hides anything faster than that: a 16 MiB copy out of L2 takes about as
# long. Capturing N launches in one CUDA graph and timing the graph's replay divides the event pair's
# cost by N; what remains per launch is the kernel plus the graph's own gap between consecutive kernels,
# which `launch_overhead` measures with an empty kernel so it can be shown beside the result.

MAX_GRAPH_LAUNCHES = 2000


@dataclass
class GraphTiming:
    per_launch_ms: float  # median over replays of (graph time / launches)
    p10_ms: float
    p90_ms: float
    launches: int  # launches captured in the graph
    replays: int  # timed replays of the graph

    def as_dict(self) -> dict:
        return asdict(self)


def measure_graph(launch: Callable[[int], None], *, min_graph_ms: float = 2.0, replays: int = 11,
                  warmup: int = 3, launches: int | None = None) -> GraphTiming:
    """Time `launch(i)` as N launches captured in one CUDA graph (warm L2: nothing is flushed between them).

    N is chosen so one replay lasts at least `min_graph_ms` (at most MAX_GRAPH_LAUNCHES), unless given.
    Everything `launch` needs (compiled kernels, buffers) must exist before the capture: it is called
    `warmup` times first, outside it.
    """
    import cupy as cp

    stream = cp.cuda.Stream(non_blocking=True)  # the legacy default stream cannot be captured
    with stream:
        for i in range(warmup):
            launch(i)
        spin = spinner()
        probe = time_once(launch, warmup, None, spin)
        if launches is None:
            launches = int(np.clip(np.ceil(min_graph_ms / max(probe, 1e-4)), 8, MAX_GRAPH_LAUNCHES))
        stream.begin_capture()
        try:
            for i in range(launches):
                launch(i)
        finally:
            graph = stream.end_capture()
        graph.upload(stream)
        graph.launch(stream)  # one untimed replay: the graph's first launch pays for its set-up
        pairs = [(cp.cuda.Event(), cp.cuda.Event()) for _ in range(replays)]
        for start, end in pairs:
            spin()
            start.record(stream)
            graph.launch(stream)
            end.record(stream)
        end.synchronize()
    per = np.array([cp.cuda.get_elapsed_time(s, e) for s, e in pairs]) / launches
    return GraphTiming(float(np.median(per)), float(np.percentile(per, 10)), float(np.percentile(per, 90)),
                       launches, replays)


def empty_launch() -> Callable[[int], None]:
    """A launch of a one-thread kernel that does nothing (the spin kernel told to wait 0 ns)."""
    from lab.core.build import KernelSpec, get_kernel

    kernel = get_kernel(KernelSpec("common/spin.cu", "lab_spin_ns"))
    return lambda i: kernel((1,), (1,), (np.uint64(0),))


def launch_overhead() -> dict[str, Timing | GraphTiming]:
    """What a launch costs when it does nothing: timed alone between two events ("events": the fixed cost
    every event-pair measurement carries) and as one of many in a graph ("graph": the gap that remains
    between consecutive kernels of a graph)."""
    launch = empty_launch()
    return {"events": measure(launch, l2="warm", min_time_ms=5.0), "graph": measure_graph(launch)}


# --- host time per call --------------------------------------------------------------------------------------

def host_us_per_call(fn: Callable[[], None], *, calls: int, trials: int, warmup: int = 100) -> dict:
    """Host microseconds per call of `fn` (work the GPU finishes faster than the host issues it, so the host is
    the bottleneck): `trials` trials of `calls` back-to-back calls, timed on the host up to the last call's return
    ("median", "min", "max"), and up to the GPU's end of it ("with_gpu_median"), the GPU synchronized before each."""
    import statistics
    import time

    import cupy as cp

    for _ in range(warmup):
        fn()
    cp.cuda.get_current_stream().synchronize()
    issue, whole = [], []
    for _ in range(trials):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        t1 = time.perf_counter()
        cp.cuda.get_current_stream().synchronize()
        issue.append(1e6 * (t1 - t0) / calls)
        whole.append(1e6 * (time.perf_counter() - t0) / calls)
    return {"median": round(statistics.median(issue), 3), "min": round(min(issue), 3), "max": round(max(issue), 3),
            "with_gpu_median": round(statistics.median(whole), 3)}
