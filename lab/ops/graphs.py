"""lab.ops as CUDA graphs: a function of lab.ops calls captured once and replayed with one launch.

    import lab.ops as ops
    def layer():                                     # every array made beforehand, every output passed with out=
        ops.rmsnorm(h, w_norm, out=normed)
        ops.matmul(normed, w_qkv, layout="TN", out=qkv)
    graph = ops.capture(layer)                       # warm-up calls, then one call captured
    graph.launch()                                   # replays every kernel of layer() on graph.stream
    graph.synchronize()

`capture(fn)` makes a non-blocking stream and calls `fn()` on it `warmup` times first, so that everything lab.ops
does once per shape and address happens outside the capture: NVRTC compiles, the dispatch decision, the recording
of the launches, split-K and stream-K workspaces, CuPy's own kernels' compiles. It then captures one more call and
uploads the graph. A replay runs the same kernels on the same addresses, without any of the host work of the call.

The rules a captured function follows (a CUDA graph holds kernels and addresses, nothing else):
- Outputs are passed with out= (arrays allocated before the capture). An allocation inside the capture would be
  memory the graph keeps writing after CuPy's pool has handed it to someone else: capture refuses it.
- No host reads of device data: no float(x), x.get(), cupy.asnumpy(x), printing an array, or branching on a value
  computed on the GPU. A synchronization inside a capture is an error, and a value read at capture time would be
  frozen into every replay.
- No new shapes or addresses inside the capture: the calls the function makes are the calls its warm-up made.
  A new shape would be decided, compiled and recorded inside the capture; capture refuses it (the counters say).
- Inputs change by value, never by address: write new data into the same arrays (x[...] = new) between replays.
- Keep the arrays the function touches alive for as long as the graph: the graph holds their addresses, not the
  arrays. Captured keeps `fn` (and so whatever it refers to) and the lab.ops recordings it replays.
- Work on one stream: the function's calls run on the capture stream; another stream's work is not in the graph.
- A replay on the graph's own stream is ordered after nothing else: after writing its inputs on another stream
  (the default one included), synchronize first, or replay on that stream: graph.launch(cupy.cuda.get_current_stream()).

A capture that breaks a rule raises LabError with what to do instead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from lab.core.errors import LabError

_WATCHED = ("decision_misses", "recordings")  # lab.ops counters that grow only when a call is new to lab.ops


@dataclass
class Captured:
    """One captured function: `launch()` replays it on `stream`, `synchronize()` waits for the replays."""

    graph: object  # cupy.cuda.Graph
    stream: object  # cupy.cuda.Stream (non-blocking) the function was captured on
    fn: Callable[[], object]  # kept so the arrays it refers to outlive the graph
    pinned: tuple = field(default=(), repr=False)  # the lab.ops recordings alive at capture (their workspaces)
    launches: int = 0  # replays so far

    def launch(self, stream=None) -> None:
        """Replay the graph: on its own stream, or on `stream` (any CuPy stream of the same device)."""
        self.graph.launch(self.stream if stream is None else stream)
        self.launches += 1

    def synchronize(self) -> None:
        self.stream.synchronize()


def capture(fn: Callable[[], object], *, warmup: int = 2, stream=None) -> Captured:
    """Capture one call of `fn()` (lab.ops calls, CuPy kernels) into a CUDA graph, after `warmup` eager calls on the
    capture stream. `stream`: a non-blocking CuPy stream to capture on (several graphs replayed in one order can
    share one); a new one when None. Returns a Captured; raises LabError when the function cannot be captured."""
    import cupy as cp

    if not isinstance(warmup, int) or warmup < 1:
        raise LabError(f"capture needs warmup >= 1 (the warm-up calls prepare every launch outside the capture); "
                       f"got {warmup!r}.")
    if stream is None:
        stream = cp.cuda.Stream(non_blocking=True)
    elif getattr(stream, "ptr", None) in (0, 1, 2):
        raise LabError("The default stream cannot be captured; pass a cupy.cuda.Stream(non_blocking=True) or none.")
    stream.wait_event(cp.cuda.get_current_stream().record())  # the warm-up runs after the caller's work so far
    with stream:
        for _ in range(warmup):
            fn()
    stream.synchronize()

    from lab.ops import counters

    before = {name: counters.COUNTS[name] for name in _WATCHED}
    allocations: list[int] = []
    previous = cp.cuda.get_allocator()

    def counting(size):
        allocations.append(size)
        return previous(size)

    graph, failure = None, None
    with stream, cp.cuda.using_allocator(counting):
        stream.begin_capture()
        try:
            fn()
        except LabError:
            _end_quietly(stream)
            raise
        except Exception as exc:  # a synchronization, a host read, or another stream's work inside the capture
            failure = exc
        try:
            graph = stream.end_capture()
        except Exception as exc:  # the capture was invalidated by what happened inside it
            failure = failure or exc
    if failure is not None:
        raise LabError(f"The function could not be captured into a CUDA graph ({_one_line(failure)}); keep host "
                       "reads, synchronizations and other streams' work out of it and pass every output with out=.") \
            from failure
    if allocations:
        raise LabError(f"The function allocated GPU memory while it was captured ({len(allocations)} allocation(s), "
                       f"{sum(allocations)} bytes); allocate every output before the capture and pass it with out=.")
    grown = [name for name in _WATCHED if counters.COUNTS[name] != before[name]]
    if grown:
        raise LabError("The captured call met a shape or address lab.ops had not prepared in the warm-up "
                       f"({', '.join(grown)} grew); make the function call the same shapes on the same arrays "
                       "every time.")
    graph.upload(stream)
    return Captured(graph, stream, fn, _pin_recordings())


def _end_quietly(stream) -> None:
    """End a capture that an exception interrupted, so the stream is usable again; its graph is dropped."""
    try:
        stream.end_capture()
    except Exception:
        pass


def _one_line(exc: Exception) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 200 else text[:197] + "..."


def _pin_recordings() -> tuple:
    """Every lab.ops recording alive now, on every runtime: a recording the runtime later drops (it keeps the most
    recent ones) then cannot free a workspace the graph still writes."""
    from lab.ops import counters

    return tuple(r for rt in counters.tracked_runtimes() for r in list(rt.recordings.values()))
