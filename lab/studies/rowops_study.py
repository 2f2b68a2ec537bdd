"""Why a row operation's bandwidth can move between rounds of one process: lab.ops.rmsnorm, layernorm and softmax
timed several ways, in interleaved rounds, beside PyTorch's kernels on the same buffers and the device copy.

Each case (an operation, a type, rows x n) is checked once against a float64 reference (and PyTorch's output), then
timed in `rounds` rounds; in each round every method runs once, in an order rotated from round to round, and the
device copy of the same bytes is timed in the same round as the ceiling. A method's figure is GB/s of the fewest
bytes the operation moves (x read once, the output written once; the weights are negligible) and its fraction of
the copy in that round. The methods, each a different suspect:

    copy                 the device copy of x into out (cudaMemcpyAsync), after a write flush: the ceiling
    lab_ops_cold_write   lab.ops.<op>(x, ..., out=out), lab.measure.timing.measure(l2="cold"): a write flush before
    each call
    lab_ops_cold_read    the same after a read flush (the L2 left full of clean lines, not dirty ones)
    lab_ops_b2b          50 calls back to back between one event pair, no flush, per call
    lab_ops_graph        lab.measure.timing.measure_graph of the call (many calls in one CUDA graph, no flush)
    lab_ops_fresh        as lab_ops_cold_write, on an x and out allocated (and filled) anew in each round
    lab_ops_out_none     as lab_ops_cold_write, with out=None: lab.ops allocates the output on every call
    lab_ops_after_idle   a write flush, the GPU left idle a few ms, then one call (clocks after idle)
    family_raw           the family's own launcher on the same buffers (its host work on every call), as cold_write
    torch_cold_write     PyTorch's op on the same x (DLPack, zero-copy), timed as lab_ops_cold_write
    torch_cold_read      ... as lab_ops_cold_read
    torch_b2b            ... as lab_ops_b2b
    torch_graph          ... captured in a torch.cuda.CUDAGraph, replayed and timed like lab_ops_graph

The back-to-back and graph methods flush nothing: on the case that fits the L2 they read x from the L2, and their
fraction of the (flushed) copy can pass 1. PyTorch writes its own output (its caching allocator hands back the same
block on every call); x, the weights and the stream are shared: CuPy's events and PyTorch's kernels are on one
stream. Each lab.ops case also records the recorded launch (grid, block, shared memory, registers, waves over the
SMs), the buffers' addresses modulo 2 MiB and their distance, the host time per call, and the SM and memory clocks
before and after each round where NVML answers.

The record file (lab.measure.records' schema, so lab.measure.records.load reads it) holds one record per case, method
and round
(kind "probe", `extra` = {"experiment": "rowops", ...}) and a "study" section: the cases' checks and launches, the
per-round fractions, their spread (max / min - 1), and the methods that vary by more than VARIES between rounds.

    python -m lab.studies.rowops_study OUT_DIR [--rounds 3] [--quick]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

FILENAME = "rowops_study.json"
EXPERIMENT = "rowops"
MIB = 1 << 20
TRAFFIC_BYTES = 256 * MIB  # x read + out written: several times the H200's L2
SMALL_TRAFFIC_BYTES = 8 * MIB  # one case that fits the L2
MIN_TIME_MS = 8.0  # lab.measure.timing.measure's minimum measured time per method and round
GRAPH_MIN_MS = 2.0
B2B_CALLS = 50
B2B_REPEATS = 5
B2B_SPIN_NS = 4_000_000  # the GPU waits this long before a back-to-back run, so the host queues its calls first
IDLE_S = 0.003  # the GPU's idle time before each after-idle call
IDLE_REPS = 10
HOST_CALLS = 20  # calls timed on the host, per case, for the host time per call
VARIES = 0.05  # a method "varies" when its fraction of the copy spreads by more than this between rounds
EPS = 1e-5
ADDRESS_MODULUS = 2 * MIB

# Each dtype's allowed error against the float64 reference, relative to |ref| plus a share of the row's mean |ref|
# (so outputs near zero get an allowance on their row's scale), and an absolute floor (fp16's subnormal spacing).
RTOL = {"float16": 2.0**-9, "bfloat16": 2.0**-6, "float32": 2.0**-12}
ATOL = {"float16": 2.0**-24, "bfloat16": 1e-38, "float32": 1e-38}
ROW_SCALE_SHARE = 0.25
TORCH_FACTOR = 3.0  # lab.ops against PyTorch: both err, and PyTorch's RMSNorm rounds twice in 16 bits

METHODS = ("copy", "lab_ops_cold_write", "lab_ops_cold_read", "lab_ops_b2b", "lab_ops_graph", "lab_ops_fresh",
           "lab_ops_out_none", "lab_ops_after_idle", "family_raw", "torch_cold_write", "torch_cold_read", "torch_b2b",
           "torch_graph")
TORCH_METHODS = tuple(m for m in METHODS if m.startswith("torch_"))
WARM_METHODS = ("lab_ops_b2b", "lab_ops_graph", "torch_b2b", "torch_graph")  # no flush between calls
DESCRIPTIONS = {
    "copy": "device copy of x into out, write flush before each (the ceiling)",
    "lab_ops_cold_write": "lab.ops call, out given, write flush before each (lab.measure.timing.measure, l2='cold')",
    "lab_ops_cold_read": "lab.ops call, out given, read flush before each (L2Flusher(by='read'))",
    "lab_ops_b2b": f"{B2B_CALLS} lab.ops calls back to back between one event pair, no flush, per call",
    "lab_ops_graph": "lab.ops calls captured in one CUDA graph (lab.measure.timing.measure_graph), per call",
    "lab_ops_fresh": "lab.ops call on x and out allocated and filled anew each round, write flush",
    "lab_ops_out_none": "lab.ops call with out=None (an allocation per call), write flush",
    "lab_ops_after_idle": f"write flush, {1e3 * IDLE_S:.0f} ms of idle GPU, then one lab.ops call",
    "family_raw": "the family's own launcher (family.launch) on the same buffers, write flush",
    "torch_cold_write": "PyTorch's op on the same x, write flush",
    "torch_cold_read": "PyTorch's op on the same x, read flush",
    "torch_b2b": f"{B2B_CALLS} PyTorch calls back to back between one event pair, per call",
    "torch_graph": "PyTorch calls captured in one torch.cuda.CUDAGraph, per call",
}


# --- cases -----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Case:
    op: str  # "rmsnorm", "layernorm" or "softmax"
    dtype: str  # "float16", "bfloat16" (uint16 bit patterns) or "float32"
    n: int
    rows: int
    quick: bool = False  # kept by --quick

    @property
    def itemsize(self) -> int:
        return 4 if self.dtype == "float32" else 2

    @property
    def bytes_moved(self) -> int:
        """x read once and the output written once."""
        return 2 * self.rows * self.n * self.itemsize

    @property
    def name(self) -> str:
        return f"{self.op} {self.dtype} {self.rows}x{self.n}"


def rows_for(n: int, dtype: str, traffic: int = TRAFFIC_BYTES) -> int:
    """Rows of n values whose x and output together hold about `traffic` bytes."""
    itemsize = 4 if dtype == "float32" else 2
    return max(1, traffic // (2 * n * itemsize))


def case_list(quick: bool = False) -> list[Case]:
    """The study's cases: RMSNorm fp16 across n, one RMSNorm small enough for the L2, RMSNorm bf16, LayerNorm fp16
    and softmax fp16 / fp32; `quick` keeps half of them."""
    def case(op: str, dtype: str, n: int, traffic: int = TRAFFIC_BYTES, keep: bool = False) -> Case:
        return Case(op, dtype, n, rows_for(n, dtype, traffic), keep)

    cases = [case("rmsnorm", "float16", 1024, keep=True), case("rmsnorm", "float16", 4096),
             case("rmsnorm", "float16", 8192, keep=True), case("rmsnorm", "float16", 16384),
             case("rmsnorm", "float16", 32768), case("rmsnorm", "float16", 4096, SMALL_TRAFFIC_BYTES, keep=True),
             case("rmsnorm", "bfloat16", 4096), case("layernorm", "float16", 4096, keep=True),
             case("layernorm", "float16", 8192), case("softmax", "float16", 8192, keep=True),
             case("softmax", "float32", 8192, keep=True)]
    return [c for c in cases if c.quick] if quick else cases


def method_list(torch_ok: bool) -> list[str]:
    return [m for m in METHODS if torch_ok or m not in TORCH_METHODS]


def rotation(methods: list[str], round_index: int, rounds: int) -> list[str]:
    """The methods in round `round_index`'s order: rotated by an even share of the list each round, so every method
    runs early in one round and late in another."""
    if not methods:
        return []
    shift = (round_index * len(methods) // max(rounds, 1)) % len(methods)
    return list(methods[shift:]) + list(methods[:shift])


# --- arithmetic and summaries (no GPU) --------------------------------------------------------------------

def gbps(bytes_moved: int, ms: float) -> float:
    return bytes_moved / (ms * 1e-3) / 1e9 if ms > 0 else float("nan")


def spread(values: Iterable[float]) -> float | None:
    """max / min - 1 over the finite positive values; None with fewer than two."""
    good = [v for v in values if v is not None and math.isfinite(v) and v > 0]
    if len(good) < 2:
        return None
    return max(good) / min(good) - 1


def summarize(rows: list[dict], threshold: float = VARIES) -> dict:
    """Per case (in order of appearance): per method its fraction of the copy and its GB/s in each round, their
    spreads, the methods whose fraction spreads by more than `threshold`, and what that pattern points to.
    `rows`: {"case", "method", "round", "gbps", "fraction"} per measurement."""
    cases: dict = {}
    for row in sorted(rows, key=lambda r: r["round"]):
        methods = cases.setdefault(row["case"], {"methods": {}})["methods"]
        entry = methods.setdefault(row["method"], {"fractions": [], "gbps": []})
        entry["fractions"].append(row["fraction"])
        entry["gbps"].append(row["gbps"])
    for summary in cases.values():
        for entry in summary["methods"].values():
            entry["spread"] = spread(entry["fractions"])
            entry["gbps_spread"] = spread(entry["gbps"])
        summary["varying"] = [m for m, e in summary["methods"].items() if e["spread"] is not None
                              and e["spread"] > threshold]
        compared = {m for m, e in summary["methods"].items() if e["spread"] is not None}
        copy = summary["methods"].get("copy", {})
        copy_varies = copy.get("gbps_spread") is not None and copy["gbps_spread"] > threshold
        summary["hints"] = (hints(set(summary["varying"]), compared, copy_varies) if compared
                            else ["fewer than two rounds: no spread to read"])
    return cases


def hints(varying: set[str], measured: set[str], copy_varies: bool = False) -> list[str]:
    """What a pattern of varying methods points to, one sentence each (none of them proof: read the numbers)."""
    def v(m: str) -> bool:
        return m in varying

    def steady(m: str) -> bool:
        return m in measured and m not in varying

    out = []
    if copy_varies:
        out.append("the copy itself varies between rounds, so every fraction moves with it: compare the GB/s spreads")
    if not measured:
        return out
    if not varying:
        out.append(f"steady: no method varies by more than {VARIES:.0%} between rounds")
        return out
    if v("lab_ops_cold_write") and steady("lab_ops_cold_read") and not steady("family_raw"):
        both = " (PyTorch's too)" if v("torch_cold_write") else ""
        out.append("after a write flush lab.ops varies and after a read flush it does not: the flush's dirty lines, "
                   f"written back while the kernel runs{both}")
    if v("lab_ops_fresh") and steady("lab_ops_cold_write"):
        out.append("fresh buffers vary and reused ones do not: where the buffers were placed")
    if v("lab_ops_out_none") and steady("lab_ops_cold_write"):
        out.append("out=None varies and out given does not: the allocation per call (or a missed replay)")
    if v("lab_ops_cold_write") and steady("family_raw"):
        out.append("the recorded replay varies and the family's own launch (after the same write flush) does not: "
                   "compare their launches and host times per call")
    if v("lab_ops_after_idle") and steady("lab_ops_cold_write"):
        out.append("only the call after idle varies: clocks (or power state) after idle")
    cold = [m for m in ("lab_ops_cold_write", "lab_ops_cold_read", "family_raw") if m in measured]
    repeated = [m for m in ("lab_ops_b2b", "lab_ops_graph") if m in measured]
    if cold and repeated and all(v(m) for m in cold) and all(steady(m) for m in repeated):
        out.append("single timed calls vary and repeated calls do not: a per-launch effect (start-up, the grid's "
                   "last wave, timing a lone launch), not the kernel's steady bandwidth")
    lab = [m for m in ("lab_ops_cold_write", "lab_ops_cold_read", "lab_ops_b2b", "lab_ops_graph", "family_raw")
           if m in measured]
    torch = [m for m in TORCH_METHODS if m in measured]
    if lab and torch and all(v(m) for m in lab) and all(steady(m) for m in torch):
        out.append("every lab method varies and PyTorch on the same buffers does not: the kernel or its launch "
                   "shape (grid against the SMs, rows per block)")
    if torch and all(v(m) for m in torch) and any(v(m) for m in lab):
        out.append("PyTorch varies too: the GPU or the buffers, not lab.ops alone")
    return out


def format_table(summary: dict, rounds: int) -> str:
    """case, method, per-round fraction of the copy, spread of the fraction and of the GB/s; then per case the
    methods that vary, and what they point to."""
    heads = " ".join(f"{'r' + str(i + 1):>6}" for i in range(rounds))
    lines = [f"{'case':<32} {'method':<20} {heads} {'spread':>7} {'GB/s spr':>8}"]

    def pct(x):
        return "-" if x is None else f"{100 * x:.1f}%"

    for case, s in summary.items():
        for method, e in s["methods"].items():
            cells = " ".join(f"{f:>6.3f}" if f is not None and math.isfinite(f) else f"{'-':>6}"
                             for f in e["fractions"])
            cells += " " * 7 * (rounds - len(e["fractions"]))
            lines.append(f"{case:<32} {method:<20} {cells} {pct(e['spread']):>7} {pct(e['gbps_spread']):>8}")
    lines.append("")
    lines.append(f"methods varying by more than {VARIES:.0%} between rounds (fraction of the copy):")
    for case, s in summary.items():
        varying = ", ".join(f"{m} ({pct(s['methods'][m]['spread'])})" for m in s["varying"]) or "none"
        lines.append(f"  {case}: {varying}")
        lines += [f"      reading: {h}" for h in s["hints"]]
    return "\n".join(lines)


# --- checking ----------------------------------------------------------------------------------------------

def reference(op: str, x64, w64, b64, eps: float, xp=np):
    """The operation over the rows of x (float64 values), in float64."""
    if op == "softmax":
        e = xp.exp(x64 - x64.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    if op == "rmsnorm":
        return x64 / xp.sqrt(xp.mean(x64 * x64, axis=1, keepdims=True) + eps) * w64[None, :]
    d = x64 - x64.mean(axis=1, keepdims=True)
    return d / xp.sqrt(xp.mean(d * d, axis=1, keepdims=True) + eps) * w64[None, :] + b64[None, :]


def outside_bound(got, ref, dtype: str, xp=np, factor: float = 1.0) -> tuple[int, float]:
    """(outputs whose error against `ref` passes the dtype's bound, the largest error / bound). NaN is outside."""
    mag = xp.abs(ref)
    bound = factor * (RTOL[dtype] * (mag + ROW_SCALE_SHARE * mag.mean(axis=-1, keepdims=True)) + ATOL[dtype])
    err = xp.abs(got - ref)
    bad = int((~(err <= bound)).sum())
    ratio = xp.where(xp.isnan(err), xp.inf, err / bound)
    return bad, float(ratio.max())


# --- the GPU part ------------------------------------------------------------------------------------------

@dataclass
class Timed:
    ms: float
    p10: float
    p90: float
    reps: int
    extra: dict = field(default_factory=dict)


@dataclass
class _State:
    case: Case
    methods: list
    x: object
    out: object
    params: tuple
    kwargs: dict
    call: Callable
    call_out_none: Callable
    family_call: Callable
    copy: Callable
    torch_call: Callable | None = None
    fresh: tuple = ()
    failed: dict = field(default_factory=dict)  # method -> why it stopped being timed


def _torch_env(progress) -> object | None:
    """torch, ready on CuPy's stream, or None (with one sentence) when it cannot be used here."""
    try:
        import torch
    except Exception:
        progress("PyTorch is not importable here: the torch_* methods are skipped.")
        return None
    if not torch.cuda.is_available():
        progress("PyTorch sees no GPU here: the torch_* methods are skipped.")
        return None
    import cupy as cp

    torch.cuda.set_device(cp.cuda.Device().id)
    ptr = cp.cuda.get_current_stream().ptr
    if torch.cuda.current_stream().cuda_stream != ptr:
        torch.cuda.set_stream(torch.cuda.default_stream() if ptr == 0 else torch.cuda.ExternalStream(ptr))
    assert torch.cuda.current_stream().cuda_stream == cp.cuda.get_current_stream().ptr, \
        "PyTorch's current stream is not the one CuPy records events on"
    return torch


def _torch_op(torch, case: Case, x, params):
    """PyTorch's op on the same buffers (zero-copy), or None where this torch lacks it."""
    import cupy as cp
    import torch.nn.functional as F

    def view(a):
        bf16 = case.dtype == "bfloat16"  # bf16 bit patterns travel as int16, which both libraries know, then retyped
        t = torch.from_dlpack(a.view(cp.int16) if bf16 else a)
        assert t.data_ptr() == a.data.ptr, "DLPack made a copy"
        return t.view(torch.bfloat16) if bf16 else t

    tx, tp = view(x), [view(p) for p in params]
    n = case.n
    if case.op == "softmax":
        return lambda: torch.softmax(tx, dim=-1)
    if case.op == "layernorm":
        return lambda: F.layer_norm(tx, (n,), tp[0], tp[1], EPS)
    if not hasattr(F, "rms_norm"):
        return None
    return lambda: F.rms_norm(tx, (n,), tp[0], EPS)


def _as_float64(a, dtype: str):
    import cupy as cp

    from lab.families.gemm_tc import to_float32

    return to_float32(a, dtype, cp).astype(cp.float64)


def _torch_as_cupy(torch, t):
    import cupy as cp

    if t.dtype == torch.bfloat16:
        return cp.from_dlpack(t.view(torch.int16)).view(cp.uint16)
    return cp.from_dlpack(t)


def _address_info(x, out) -> dict:
    xp_, op_ = int(x.data.ptr), int(out.data.ptr)
    return {"x": xp_, "out": op_, "x_mod_2mib": xp_ % ADDRESS_MODULUS, "out_mod_2mib": op_ % ADDRESS_MODULUS,
            "out_minus_x": op_ - xp_, "distance_mod_2mib": (op_ - xp_) % ADDRESS_MODULUS}


def _launch_info(entries, rows: int, gpu) -> list[dict]:
    """The recorded launches: kernel, grid, block, shared memory, registers, and how the grid sits on the SMs."""
    from lab.core import occupancy

    out = []
    for raw, grid, block, _args, smem in entries:
        if grid is None:  # a library call, not a kernel of ours
            out.append({"kernel": str(getattr(raw, "__name__", raw))})
            continue
        blocks, threads = int(np.prod(grid)), int(np.prod(block))
        regs = int(getattr(raw, "num_regs", 0) or 0)
        static = int(getattr(raw, "shared_size_bytes", 0) or 0)
        info = {"kernel": str(getattr(raw, "name", "?")), "grid": list(grid), "block": list(block),
                "dynamic_smem_bytes": int(smem), "static_smem_bytes": static, "registers": regs, "blocks": blocks,
                "threads": threads, "sm_count": gpu.sm_count, "blocks_per_sm_of_grid": blocks / gpu.sm_count,
                "rows_per_block": rows / blocks}
        if gpu.arch in occupancy.LIMITS and regs:
            per_sm = occupancy.occupancy(gpu.arch, threads, regs, static + int(smem)).blocks_per_sm
            info |= {"resident_blocks_per_sm": per_sm, "waves": blocks / max(1, per_sm * gpu.sm_count)}
        out.append(info)
    return out


def _recorded(case: Case, x, out) -> list:
    """lab.ops's recorded launches for this case on these addresses (its runtime's replay cache)."""
    from lab.ops import api

    recordings = api.default_runtime().recordings
    for key, entry in recordings.items():  # the row operations' key: ((op, rows, n, dtype, eps), None, addresses)
        try:
            if tuple(key[0][:3]) == (case.op, case.rows, case.n) and tuple(key[2][:2]) == (x.data.ptr, out.data.ptr):
                return list(getattr(entry, "launches", entry))
        except (TypeError, IndexError, KeyError):
            continue
    wanted = {int(x.data.ptr), int(out.data.ptr)}
    for entry in reversed(recordings.values()):  # else: the latest recording whose arguments hold both addresses
        launches = list(getattr(entry, "launches", entry))
        held = {int(a) for launch in launches for a in launch[3] if isinstance(a, (int, np.integer))}
        if wanted <= held:
            return launches
    return []


def _signature(entries) -> list:
    return [(None if grid is None else tuple(grid), None if block is None else tuple(block), int(smem))
            for _, grid, block, _, smem in entries]


_NVML: dict = {}


def _clocks() -> dict | None:
    """SM and memory clocks (MHz) through NVML, where it answers; None elsewhere."""
    if _NVML.get("failed"):
        return None
    try:
        if "handle" not in _NVML:
            import cupy as cp
            import pynvml

            pynvml.nvmlInit()
            _NVML["mod"] = pynvml
            _NVML["handle"] = _nvml_handle(pynvml, cp.cuda.Device().pci_bus_id)
        nv, h = _NVML["mod"], _NVML["handle"]
        return {"sm_mhz": int(nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)),
                "mem_mhz": int(nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM))}
    except Exception:
        _NVML["failed"] = True
        return None


def _nvml_handle(pynvml, bus_id: str):
    """NVML's handle of the GPU at this PCI bus id (as text or bytes, whichever this NVML binding takes), or of the
    only GPU NVML sees."""
    for key in (bus_id, bus_id.encode()):
        try:
            return pynvml.nvmlDeviceGetHandleByPciBusId(key)
        except Exception:
            continue
    if pynvml.nvmlDeviceGetCount() == 1:
        return pynvml.nvmlDeviceGetHandleByIndex(0)
    raise LookupError(f"NVML has no GPU at {bus_id}")


def _host_us(fn: Callable[[], object]) -> float:
    """Host microseconds per call, the GPU held busy in front so its queue never waits on them."""
    import cupy as cp

    from lab.measure import timing

    stream = cp.cuda.get_current_stream()
    stream.synchronize()
    timing.spinner(B2B_SPIN_NS)()
    t0 = time.perf_counter()
    for _ in range(HOST_CALLS):
        fn()
    t1 = time.perf_counter()
    stream.synchronize()
    return round(1e6 * (t1 - t0) / HOST_CALLS, 2)


def _prepare(case: Case, torch, gpu, progress) -> tuple[_State | None, dict]:
    """Buffers, the calls, the check against float64 and PyTorch, the recorded launch; (None, info) on a failure."""
    import cupy as cp

    from lab.core.build import recording
    from lab.ops import api
    from lab.ops.paths import family

    info: dict = {"case": case.name, "op": case.op, "dtype": case.dtype, "rows": case.rows, "n": case.n,
                  "bytes_moved": case.bytes_moved}
    fam = family(case.op)
    rung_key = api.row_rung(case.op, case.n, gpu.arch)
    info["rung"] = rung_key
    problem = fam.make_problem(seed=case.n + case.rows, rows=case.rows, n=case.n, dtype=case.dtype)
    x = problem.inputs["x"][0]
    params = tuple(problem.inputs[k] for k in ("w", "b") if problem.inputs.get(k) is not None)
    out = cp.empty_like(x)
    out.view(cp.uint16 if case.itemsize == 2 else cp.uint32).fill(0x7E00 if case.itemsize == 2 else 0x7FC00000)
    kwargs = {"input_type": "bfloat16"} if case.dtype == "bfloat16" else {}
    if case.op != "softmax":
        kwargs["eps"] = EPS
    op = getattr(api, case.op)

    def call():
        return op(x, *params, out=out, **kwargs)

    def call_out_none():
        return op(x, *params, **kwargs)

    rung = fam.rung(rung_key)

    def family_call():
        fam.launch(rung, problem, out)

    def copy():
        out.data.copy_from_device_async(x.data, x.nbytes)

    # The check: lab.ops against float64, then PyTorch against both.
    call()
    cp.cuda.get_current_stream().synchronize()
    x64 = _as_float64(x, case.dtype)
    w64 = _as_float64(params[0], case.dtype) if params else None
    b64 = _as_float64(params[1], case.dtype) if len(params) > 1 else None
    ref = reference(case.op, x64, w64, b64, float(np.float32(EPS)), cp)
    del x64
    got = _as_float64(out, case.dtype)
    bad, worst = outside_bound(got, ref, case.dtype, cp)
    check = {"outside_bound": bad, "worst_error_over_bound": round(worst, 4), "rtol": RTOL[case.dtype]}
    torch_call = None
    if torch is not None:
        torch_call = _torch_op(torch, case, x, params)
        if torch_call is None:
            check["torch"] = "this PyTorch has no F.rms_norm: its methods are skipped for this case"
        else:
            t_got = _as_float64(_torch_as_cupy(torch, torch_call()), case.dtype)
            torch.cuda.synchronize()
            t_bad, t_worst = outside_bound(t_got, ref, case.dtype, cp, TORCH_FACTOR)
            l_bad, l_worst = outside_bound(got, t_got, case.dtype, cp, TORCH_FACTOR)
            check |= {"torch_outside_bound": t_bad, "torch_worst_error_over_bound": round(t_worst, 4),
                      "lab_vs_torch_outside_bound": l_bad, "lab_vs_torch_worst": round(l_worst, 4)}
            del t_got
            if t_bad and not bad:  # PyTorch's own output is off: its methods go, lab.ops's stay
                check["torch"] = (f"{case.name}: {t_bad} of {x.size} PyTorch outputs are off the float64 reference "
                                  f"by more than {TORCH_FACTOR:g}x the {case.dtype} bound; the torch_* methods are "
                                  "skipped for this case.")
                progress(check["torch"])
                torch_call = None
    del got, ref
    why = None
    if bad:
        why = (f"{case.name}: {bad} of {x.size} lab.ops outputs are off the float64 reference by more than the "
               f"{case.dtype} bound (worst {worst:.3g}x it); this case is not timed.")
    elif torch_call is not None and check.get("lab_vs_torch_outside_bound"):
        why = (f"{case.name}: {check['lab_vs_torch_outside_bound']} of {x.size} lab.ops outputs differ from "
               f"PyTorch's by more than {TORCH_FACTOR:g}x the {case.dtype} bound; this case is not timed.")
    check["passed"] = why is None
    info["check"] = check
    if why:
        info["check"]["why"] = why
        progress(why)
        return None, info

    entries = _recorded(case, x, out)
    info["launch"] = _launch_info(entries, case.rows, gpu)
    with recording() as own:
        family_call()
    info["family_launch_same_as_recorded"] = _signature(own) == _signature(entries)
    info["addresses"] = _address_info(x, out)
    info["weight_addresses_mod_2mib"] = [int(p.data.ptr) % ADDRESS_MODULUS for p in params]
    methods = method_list(torch_call is not None)
    host = {"lab_ops": _host_us(call), "lab_ops_out_none": _host_us(call_out_none),
            "family_raw": _host_us(family_call)}
    if torch_call is not None:
        host["torch"] = _host_us(torch_call)
        result = torch_call()
        info["torch_out_addresses"] = {"out": int(result.data_ptr()),
                                       "out_mod_2mib": int(result.data_ptr()) % ADDRESS_MODULUS}
        del result
    info["host_us_per_call"] = host
    cp.cuda.get_current_stream().synchronize()
    return _State(case, methods, x, out, params, kwargs, call, call_out_none, family_call, copy, torch_call), info


def _cold(launch: Callable[[], object], flusher, min_time_ms: float) -> Timed:
    from lab.measure import timing

    t = timing.measure(lambda i: launch(), l2="cold", flusher=flusher, min_time_ms=min_time_ms)
    return Timed(t.median_ms, t.p10_ms, t.p90_ms, t.reps)


def _b2b(launch: Callable[[], object]) -> Timed:
    """B2B_CALLS calls between one event pair (the GPU spins first, so they are all queued): per call."""
    import cupy as cp

    from lab.measure import timing

    stream = cp.cuda.get_current_stream()
    spin = timing.spinner(B2B_SPIN_NS)
    for _ in range(3):
        launch()
    stream.synchronize()
    per, host = [], []
    for _ in range(B2B_REPEATS):
        start, end = cp.cuda.Event(), cp.cuda.Event()
        spin()
        start.record(stream)
        t0 = time.perf_counter()
        for _ in range(B2B_CALLS):
            launch()
        t1 = time.perf_counter()
        end.record(stream)
        end.synchronize()
        per.append(cp.cuda.get_elapsed_time(start, end) / B2B_CALLS)
        host.append(1e6 * (t1 - t0) / B2B_CALLS)
    gpu_us, host_us = 1e3 * statistics.median(per), statistics.median(host)
    # The GPU never waited for the host when the spin plus the calls it ran outlast the host's issuing of them.
    waited = B2B_SPIN_NS / 1e3 + B2B_CALLS * gpu_us < B2B_CALLS * host_us
    return Timed(statistics.median(per), float(np.percentile(per, 10)), float(np.percentile(per, 90)), B2B_REPEATS,
                 {"calls": B2B_CALLS, "host_us_per_call": round(host_us, 2), "gpu_may_have_waited_for_host": waited})


def _graph(launch: Callable[[], object]) -> Timed:
    from lab.measure import timing

    g = timing.measure_graph(lambda i: launch(), min_graph_ms=GRAPH_MIN_MS)
    return Timed(g.per_launch_ms, g.p10_ms, g.p90_ms, g.replays, {"launches": g.launches})


def _torch_graph(torch, launch: Callable[[], object], replays: int = 11) -> Timed:
    """PyTorch's calls captured in a torch.cuda.CUDAGraph (its own memory pool for the outputs), replayed on the
    shared stream between CuPy events: per call."""
    import cupy as cp

    from lab.measure import timing

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            launch()
    torch.cuda.current_stream().wait_stream(side)
    spin = timing.spinner()
    probe = timing.time_once(lambda i: launch(), 0, None, spin)
    launches = int(np.clip(np.ceil(GRAPH_MIN_MS / max(probe, 1e-4)), 8, timing.MAX_GRAPH_LAUNCHES))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(launches):
            launch()
    graph.replay()  # the first replay pays for the set-up
    stream = cp.cuda.get_current_stream()
    pairs = [(cp.cuda.Event(), cp.cuda.Event()) for _ in range(replays)]
    for start, end in pairs:
        spin()
        start.record(stream)
        graph.replay()
        end.record(stream)
    end.synchronize()
    per = np.array([cp.cuda.get_elapsed_time(s, e) for s, e in pairs]) / launches
    del graph
    return Timed(float(np.median(per)), float(np.percentile(per, 10)), float(np.percentile(per, 90)), replays,
                 {"launches": launches})


def _after_idle(launch: Callable[[], object], flusher) -> Timed:
    """A write flush, the GPU idle IDLE_S, a short spin (so the call is queued when the start event runs), then one
    timed call; IDLE_REPS times."""
    import cupy as cp

    from lab.measure import timing

    stream = cp.cuda.get_current_stream()
    spin = timing.spinner()
    for _ in range(2):
        launch()
    times = []
    for _ in range(IDLE_REPS):
        flusher.flush()
        stream.synchronize()
        time.sleep(IDLE_S)
        start, end = cp.cuda.Event(), cp.cuda.Event()
        spin()
        start.record(stream)
        launch()
        end.record(stream)
        end.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, end))
    return Timed(statistics.median(times), float(np.percentile(times, 10)), float(np.percentile(times, 90)),
                 IDLE_REPS, {"idle_ms": 1e3 * IDLE_S})


def _refresh(state: _State) -> tuple:
    """A new x (filled with the same values) and out for this round; the last round's pair is dropped only after
    the new one exists, so the addresses differ."""
    import cupy as cp

    fx = cp.empty_like(state.x)
    fx[...] = state.x
    fo = cp.empty_like(state.out)
    state.fresh = (fx, fo)
    return fx, fo


def _time_method(method: str, st: _State, flushers: dict, torch, min_time_ms: float) -> Timed:
    from lab.ops import api, counters

    before = (counters.COUNTS["recordings"], counters.COUNTS["replays"])
    if method == "copy":
        t = _cold(st.copy, flushers["write"], min_time_ms)
    elif method == "lab_ops_cold_write":
        t = _cold(st.call, flushers["write"], min_time_ms)
    elif method == "lab_ops_cold_read":
        t = _cold(st.call, flushers["read"], min_time_ms)
    elif method == "lab_ops_b2b":
        t = _b2b(st.call)
    elif method == "lab_ops_graph":
        t = _graph(st.call)
    elif method == "lab_ops_fresh":
        fx, fo = _refresh(st)
        op = getattr(api, st.case.op)
        t = _cold(lambda: op(fx, *st.params, out=fo, **st.kwargs), flushers["write"], min_time_ms)
        t.extra["addresses"] = _address_info(fx, fo)
    elif method == "lab_ops_out_none":
        t = _cold(st.call_out_none, flushers["write"], min_time_ms)
    elif method == "lab_ops_after_idle":
        t = _after_idle(st.call, flushers["write"])
    elif method == "family_raw":
        t = _cold(st.family_call, flushers["write"], min_time_ms)
    elif method == "torch_cold_write":
        t = _cold(st.torch_call, flushers["write"], min_time_ms)
    elif method == "torch_cold_read":
        t = _cold(st.torch_call, flushers["read"], min_time_ms)
    elif method == "torch_b2b":
        t = _b2b(st.torch_call)
    elif method == "torch_graph":
        t = _torch_graph(torch, st.torch_call)
    else:
        raise ValueError(f"unknown method {method!r}")
    if method.startswith("torch_"):  # where PyTorch's allocator put its output this time
        result = st.torch_call()
        t.extra["torch_out_mod_2mib"] = int(result.data_ptr()) % ADDRESS_MODULUS
        del result
    if method.startswith(("lab_ops", "family")):
        t.extra["ops_recordings"] = counters.COUNTS["recordings"] - before[0]
        t.extra["ops_replays"] = counters.COUNTS["replays"] - before[1]
    return t


def payload(prov: dict, recs: list, study: dict) -> dict:
    """The record file: lab.measure.records' schema (provenance, records) and the study's own section."""
    from lab.measure.records import SCHEMA

    return {"schema": SCHEMA, "provenance": prov, "records": [r.as_dict() for r in recs], "study": study}


def run(out_dir, *, rounds: int = 3, progress=print, quick: bool = False, cases: list[Case] | None = None,
        min_time_ms: float = MIN_TIME_MS) -> Path:
    """Check, then time every case in `rounds` interleaved rounds; write OUT_DIR/rowops_study.json; return its path."""
    import cupy as cp

    from lab.core import device
    from lab.measure import timing
    from lab.measure.records import Record, provenance, write_json

    started = time.perf_counter()
    gpu = device.current()
    chosen = list(cases) if cases is not None else case_list(quick)
    torch = _torch_env(progress)
    flushers = {"write": timing.L2Flusher(), "read": timing.L2Flusher(by="read")}
    states, infos = [], []
    for case in chosen:
        progress(f"preparing and checking {case.name}")
        try:
            state, info = _prepare(case, torch, gpu, progress)
        except Exception as exc:  # a case that cannot be set up (or fails on the GPU) spares the others
            why = (f"{case.name}: could not be prepared ({type(exc).__name__}: {str(exc)[:300]}); this case is not "
                   "timed.")
            progress(why)
            state, info = None, {"case": case.name, "check": {"passed": False, "why": why}}
        infos.append(info)
        if state is not None:
            states.append(state)
    cp.cuda.get_current_stream().synchronize()

    recs, rows, rounds_info = [], [], []
    for r in range(rounds):
        for st in states:
            order = rotation(st.methods, r, rounds)
            clocks_before = _clocks()
            timed, errors = {}, {}
            for position, method in enumerate(order):
                if method in st.failed:
                    continue
                at = time.perf_counter() - started
                try:
                    timed[method] = (position, at, _time_method(method, st, flushers, torch, min_time_ms))
                except Exception as exc:  # one method's failure (a capture PyTorch refuses, say) spares the rest
                    if method == "copy":
                        raise
                    cp.cuda.get_current_stream().synchronize()
                    errors[method] = f"{type(exc).__name__}: {exc}"[:500]
                    st.failed[method] = errors[method]
                    progress(f"{st.case.name}: {method} failed ({errors[method][:200]}); it is skipped from here on.")
            clocks_after = _clocks()
            rounds_info.append({"round": r, "case": st.case.name, "order": order, "clocks_before": clocks_before,
                                "clocks_after": clocks_after, "errors": errors})
            copy_gbps = gbps(st.case.bytes_moved, timed["copy"][2].ms)
            for method in st.methods:
                if method not in timed:
                    rows.append({"case": st.case.name, "method": method, "round": r, "gbps": None, "fraction": None})
                    continue
                position, at, t = timed[method]
                value = gbps(st.case.bytes_moved, t.ms)
                fraction = value / copy_gbps if copy_gbps > 0 else float("nan")
                rows.append({"case": st.case.name, "method": method, "round": r, "gbps": value,
                             "fraction": fraction})
                recs.append(Record(
                    family=st.case.op, rung=method, kind="probe",
                    params={"rows": st.case.rows, "n": st.case.n, "dtype": st.case.dtype},
                    bytes_moved=st.case.bytes_moved, l2="warm" if method in WARM_METHODS else "cold",
                    median_ms=t.ms, p10_ms=t.p10, p90_ms=t.p90, reps=t.reps, value=value,
                    ceiling="cupy_device_copy", ceiling_value=copy_gbps,
                    extra={"experiment": EXPERIMENT, "case": st.case.name, "method": method, "round": r,
                           "position": position, "seconds_into_run": round(at, 3), "fraction_of_copy": fraction,
                           **t.extra}))
        progress(f"round {r + 1} of {rounds} done ({time.perf_counter() - started:.0f} s)")

    summary = summarize(rows)
    table = format_table(summary, rounds)
    table += "".join(f"\n  not timed: {i['check']['why']}" for i in infos if not i["check"]["passed"])
    progress(table)
    study = {"rounds": rounds, "quick": quick, "min_time_ms": min_time_ms, "varies_threshold": VARIES,
             "methods": {m: DESCRIPTIONS[m] for m in METHODS},
             "torch": getattr(torch, "__version__", None), "sm_count": gpu.sm_count, "l2_bytes": gpu.l2_bytes,
             "clocks_read": _clocks() is not None, "cases": infos, "rounds_info": rounds_info, "summary": summary,
             "table": table, "seconds": round(time.perf_counter() - started, 1)}
    path = Path(out_dir) / FILENAME
    write_json(path, payload(provenance(), recs, study))
    progress(f"{path} written in {study['seconds']} s")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.studies.rowops_study",
                                     description="lab.ops row operations timed several ways in interleaved rounds")
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="half the cases")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    run(args.out_dir, rounds=args.rounds, quick=args.quick, progress=lambda s: print(s, flush=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
