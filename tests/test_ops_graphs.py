"""lab.ops.graphs: capture's warm-up, capture and replay on a stand-in CuPy (CPU), and every refusal as one LabError
sentence; on a GPU, a captured lab.ops layer replays what the eager calls compute, and misuse inside a capture is
refused."""

import contextlib
import sys
import types

import numpy as np
import pytest

from lab.core.errors import LabError


class FakeGraph:
    def __init__(self):
        self.uploads, self.launches = [], []

    def upload(self, stream):
        self.uploads.append(stream)

    def launch(self, stream):
        self.launches.append(stream)


class FakeStream:
    """Stands for a non-blocking CUDA stream: it knows whether it captures; end_capture can fail like an invalidated
    capture does."""

    def __init__(self, non_blocking=True, end_error=None):
        self.ptr = 0x1234
        self.capturing = False
        self.end_error = end_error
        self.graphs = []
        self.waited = []

    def record(self):
        return ("event", self)

    def wait_event(self, event):
        self.waited.append(event)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def synchronize(self):
        if self.capturing:
            raise RuntimeError("cudaErrorStreamCaptureUnsupported: operation not permitted when stream is capturing")

    def begin_capture(self):
        assert not self.capturing
        self.capturing = True

    def end_capture(self):
        assert self.capturing
        self.capturing = False
        if self.end_error is not None:
            raise self.end_error
        self.graphs.append(FakeGraph())
        return self.graphs[-1]


def _fake_cupy(stream: FakeStream):
    cp = types.ModuleType("cupy")
    state = {"allocator": lambda size: ("memory", size)}

    @contextlib.contextmanager
    def using_allocator(allocator):
        previous = state["allocator"]
        state["allocator"] = allocator
        try:
            yield
        finally:
            state["allocator"] = previous

    caller = FakeStream()
    caller.ptr = 0
    cp.cuda = types.SimpleNamespace(Stream=lambda non_blocking=False: stream, get_current_stream=lambda: caller,
                                    get_allocator=lambda: state["allocator"], using_allocator=using_allocator,
                                    alloc=lambda size: state["allocator"](size))
    return cp


@pytest.fixture
def fake(monkeypatch):
    stream = FakeStream()
    cp = _fake_cupy(stream)
    monkeypatch.setitem(sys.modules, "cupy", cp)
    return stream, cp


def test_capture_warms_up_then_captures_one_call_and_replays_it(fake):
    from lab.ops.graphs import capture

    stream, _ = fake
    seen = []
    captured = capture(lambda: seen.append(stream.capturing), warmup=3)
    assert seen == [False, False, False, True]  # three eager calls, then one inside the capture
    assert stream.waited and stream.waited[0][1].ptr == 0  # the warm-up waited for the caller's stream
    graph = stream.graphs[0]
    assert graph.uploads == [stream] and captured.stream is stream
    captured.launch()
    captured.launch()
    assert graph.launches == [stream, stream] and captured.launches == 2
    other = FakeStream()
    captured.launch(other)
    assert graph.launches[-1] is other


def test_a_synchronization_inside_the_capture_is_one_sentence_and_ends_the_capture(fake):
    from lab.ops.graphs import capture

    stream, _ = fake
    with pytest.raises(LabError, match="could not be captured.*host reads") as info:
        capture(stream.synchronize)  # fine in the warm-up, refused while capturing
    assert not stream.capturing
    assert str(info.value).count(". ") == 0 and str(info.value).endswith(".")


def test_an_invalidated_capture_is_refused(monkeypatch):
    from lab.ops.graphs import capture

    stream = FakeStream(end_error=RuntimeError("cudaErrorStreamCaptureInvalidated"))
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(stream))
    with pytest.raises(LabError, match="cudaErrorStreamCaptureInvalidated"):
        capture(lambda: None)
    assert not stream.capturing


def test_an_allocation_inside_the_capture_is_refused(fake):
    from lab.ops.graphs import capture

    stream, cp = fake
    with pytest.raises(LabError, match="allocated GPU memory.*out="):
        capture(lambda: cp.cuda.alloc(256))
    assert cp.cuda.get_allocator()(8) == ("memory", 8)  # the allocator is restored


def test_a_call_new_to_lab_ops_inside_the_capture_is_refused(fake):
    from lab.ops import counters
    from lab.ops.graphs import capture

    stream, _ = fake

    def fn():
        if stream.capturing:  # a shape the warm-up never called: lab.ops records it inside the capture
            counters.COUNTS["recordings"] += 1

    with pytest.raises(LabError, match="had not prepared in the warm-up"):
        capture(fn)


def test_a_lab_error_inside_the_capture_passes_through(fake):
    from lab.ops.graphs import capture

    stream, _ = fake

    def fn():
        if stream.capturing:
            raise LabError("out must be a C-contiguous float16 array of shape (2, 3).")

    with pytest.raises(LabError, match="out must be"):
        capture(fn)
    assert not stream.capturing


def test_warmup_and_stream_arguments(fake):
    from lab.ops.graphs import capture

    with pytest.raises(LabError, match="warmup >= 1"):
        capture(lambda: None, warmup=0)
    legacy = FakeStream()
    legacy.ptr = 0
    with pytest.raises(LabError, match="default stream cannot be captured"):
        capture(lambda: None, stream=legacy)


def test_capture_is_a_public_name_of_lab_ops():
    import lab.ops as ops
    from lab.ops import graphs

    assert "capture" in ops.__all__ and ops.capture is graphs.capture


# --- on a GPU ------------------------------------------------------------------------------------------------

def _layerlet(m=5, n=256, k=128):
    import cupy as cp

    from lab.measure.check import random_array

    h = random_array((m, k), np.float32, 1, xp=cp).astype(cp.float16)
    w_norm = random_array((k,), np.float32, 2, xp=cp).astype(cp.float16)
    w = (random_array((n, k), np.float32, 3, xp=cp) * np.float32(k ** -0.5)).astype(cp.float16)
    normed = cp.zeros((m, k), cp.float16)
    out = cp.zeros((m, n), cp.float16)
    return h, w_norm, w, normed, out


@pytest.mark.gpu
def test_a_captured_layer_replays_what_the_eager_calls_compute():
    import cupy as cp

    import lab.ops as ops

    h, w_norm, w, normed, out = _layerlet()

    def layer():
        ops.rmsnorm(h, w_norm, out=normed)
        ops.matmul(normed, w, layout="TN", activation="silu", out=out)

    layer()
    expected = out.copy()
    graph = ops.capture(layer)
    out.fill(0)
    cp.cuda.runtime.deviceSynchronize()  # the graph's stream does not wait for the default stream's fill
    graph.launch()
    graph.synchronize()
    assert bool(cp.all(out == expected))
    h[...] = h * 2 + 1  # new values, same addresses: the replay reads them
    layer()
    expected = out.copy()
    out.fill(0)
    graph.launch(cp.cuda.get_current_stream())  # replayed on the default stream: ordered after the fill
    cp.cuda.get_current_stream().synchronize()
    assert bool(cp.all(out == expected)) and not bool(cp.all(expected == 0))


@pytest.mark.gpu
def test_misuse_inside_a_capture_is_one_lab_error():
    import cupy as cp

    import lab.ops as ops

    h, w_norm, w, normed, out = _layerlet()
    with pytest.raises(LabError, match="allocated GPU memory|could not be captured|had not prepared"):
        ops.capture(lambda: ops.matmul(h, w, layout="TN"))  # no out=: a new array every call
    with pytest.raises(LabError, match="could not be captured"):
        ops.capture(lambda: float(ops.rmsnorm(h, w_norm, out=normed)[0, 0]))  # a host read
    sizes = iter([5, 5, 3])

    def new_shape():  # the warm-up calls M = 5, the captured call M = 3
        m = next(sizes)
        ops.matmul(h[:m], w, layout="TN", out=out[:m])

    with pytest.raises(LabError):
        ops.capture(new_shape, warmup=2)
    graph = ops.capture(lambda: ops.matmul(h, w, layout="TN", out=out))  # the stream is usable again
    graph.launch()
    graph.synchronize()
    assert bool(cp.isfinite(out).all())
