"""lab.ops's dispatch table, measured: every path lab.ops has, the library (cuBLASLt where nvmath-python is
installed) and PyTorch (torch.mm / F.linear, where installed) on sample shapes of each shape class, in one
process, in interleaved rounds; the table that picks, per class, the path with the best times, written from those
times; then lab.ops under that table against PyTorch on the same samples; and host time per call.

    lab tune --table [--out results/h200] [--rounds 3] [--write]   the sweep; --write installs the table it chose
    lab study ops-sweep --out DIR [--rounds 3] [--classes ...] [--write-table FILE]
    lab study ops-host-cost --out DIR                                  host time per call

Classes are the table's rules, in order (a sample belongs to the first class whose conditions it meets, as a shape
meets the table's first matching rule). Per class, the winner is the path with the best geometric mean of
(library time / path time) over the class's samples; the library itself scores 1.0, so a lab kernel wins a class
only where it beats the library on the class as a whole, and the record keeps every sample where the chosen path
still loses (a crossover inside the class: a finer rule would serve it).

Timing, per round and method (the method order rotated from round to round):
  cold   lab.measure.timing.measure with the L2 flushed before each call and the spin kernel in front: GPU time
  b2b    BACK_TO_BACK calls issued by the host between one event pair, no flush: what a serving loop sees when the
         host's cost per call is larger than the GPU's
Single cold timings of short kernels move between processes on this kind of GPU; the ratios that count are the
per-round ratios within one process, reported with their spread.
"""

from __future__ import annotations

import json
import math
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from lab.core.errors import LabError

BACK_TO_BACK = 20
MIN_TIME_MS = 5.0
HOST_CALLS, HOST_TRIALS = 1000, 5
TABLE_FILE = Path(__file__).parents[1] / "ops" / "default_table.json"
RECORD = "ops_sweep.json"
# A lab kernel takes a class from the library only when it is faster on the class as a whole by this margin.
WIN_MARGIN = 1.02


@dataclass(frozen=True)
class Sample:
    M: int
    N: int
    K: int
    dtype: str = "float16"
    layout: str = "TN"
    epilogue: str = "none"

    @property
    def label(self) -> str:
        extra = "" if self.epilogue == "none" else f" {self.epilogue}"
        return f"{self.M}x{self.N}x{self.K} {self.dtype} {self.layout}{extra}"

    @property
    def aligned(self) -> bool:
        """Fresh contiguous operands: TMA reads them in place when their rows are a multiple of 16 bytes."""
        ldb = self.K if self.layout == "TN" else self.N
        return (2 * self.K) % 16 == 0 and (2 * ldb) % 16 == 0


def _s(m, n, k, dtype="float16", layout="TN", epilogue="none") -> Sample:
    return Sample(m, n, k, dtype, layout, epilogue)


BF, NN = "bfloat16", "NN"
# (class, the rule's conditions, the paths tried besides the library, sample shapes)
CLASSES = (
    ("decode", {"max_m": 8, "min_n": 1024, "min_k": 1024}, ("decode",),
     (_s(1, 4096, 4096), _s(1, 4096, 4096, BF), _s(4, 8192, 8192), _s(8, 14336, 4096), _s(2, 6144, 4096),
      _s(8, 4096, 4096, epilogue="residual"))),
    ("k_heavy", {"max_tiles": 64, "min_k": 4096, "min_k_over_mn": 4.0}, ("split_k", "persistent"),
     (_s(1024, 1024, 16384), _s(256, 256, 65536), _s(128, 128, 131072), _s(512, 512, 32768),
      _s(1024, 1024, 16384, BF), _s(256, 256, 65536, layout=NN))),
    ("skinny", {"max_m": 256}, ("decode", "persistent"),
     (_s(16, 4096, 4096), _s(64, 6144, 4096), _s(128, 4096, 4096), _s(128, 4096, 4096, BF),
      _s(256, 14336, 4096, epilogue="silu"), _s(32, 4096, 14336, epilogue="residual"), _s(128, 4096, 4096, layout=NN))),
    ("unaligned_large", {"aligned": False, "min_tiles": 512}, ("persistent", "hopper", "stream_k"),
     (_s(4095, 4095, 4095), _s(4097, 4097, 4097), _s(4095, 4095, 4095, BF), _s(4097, 4097, 4097, layout=NN),
      _s(3000, 3001, 999))),
    ("unaligned", {"aligned": False}, ("persistent", "stream_k", "generic"),
     (_s(2047, 2049, 1023), _s(1000, 1000, 1001), _s(1500, 1500, 1501, BF), _s(700, 2050, 4095))),
    ("small", {"max_tiles": 8}, ("generic", "persistent"),
     (_s(512, 256, 1024), _s(1024, 128, 2048), _s(300, 200, 1000))),
    ("epilogue", {"epilogue": True}, ("persistent", "hopper"),
     (_s(4096, 4096, 4096, epilogue="bias+gelu_tanh"), _s(2048, 14336, 4096, epilogue="silu"),
      _s(4096, 4096, 14336, epilogue="residual"), _s(1024, 6144, 4096, epilogue="bias"),
      _s(4096, 4096, 4096, BF, epilogue="bias+gelu_tanh"))),
    ("ragged_wave", {"max_last_wave": 0.5, "min_tiles": 132}, ("hopper", "stream_k", "persistent"),
     (_s(2176, 2176, 4096), _s(3200, 4096, 4096), _s(4352, 4096, 4096), _s(3072, 3072, 3072),
      _s(2176, 2176, 4096, BF))),
    ("default", {}, ("hopper", "persistent", "stream_k"),
     (_s(4096, 4096, 4096), _s(4096, 4096, 4096, BF), _s(4096, 4096, 4096, layout=NN), _s(8192, 8192, 8192),
      _s(6144, 6144, 6144), _s(2048, 2048, 2048), _s(4097, 4096, 4096), _s(1537, 4096, 4096))),
)
# Per path, the configurations tried (lab.ops.tune.CANDIDATES has more; these are the ones that differ here).
CONFIGS = {"persistent": ({"BN": 256, "GROUP_M": 8}, {"BN": 128, "GROUP_M": 8}), "split_k": ({"splits": 0},)}


def gemm_shape(sample: Sample, sms: int = 132):
    from lab.ops.shapes import GemmShape

    return GemmShape(sample.M, sample.N, sample.K, sample.dtype, sample.layout, sample.aligned, sample.epilogue, sms)


def class_of(sample: Sample, sms: int = 132) -> str:
    """The first class whose conditions the sample meets (the rule a table built from CLASSES would apply)."""
    from lab.ops.rules import parse

    shape = gemm_shape(sample, sms)
    table = parse({"rules": [{"when": when, "path": "cublas"} for _, when, _, _ in CLASSES]}, "the sweep's classes")
    for (name, *_), rule in zip(CLASSES, table.rules, strict=True):
        if rule.matches(shape):
            return name
    raise AssertionError("the last class matches every shape")


def methods_for(class_name: str) -> list[tuple[str, str, dict]]:
    """(method name, lab.ops path, config) for the paths a class tries, the library last."""
    paths = next(paths for name, _, paths, _ in CLASSES if name == class_name)
    out = []
    for path in paths:
        for cfg in CONFIGS.get(path, ({},)):
            label = path + "".join(f" {k}={v}" for k, v in cfg.items() if path == "persistent" and k == "BN")
            out.append((label, path, dict(cfg)))
    return out + [("cublas", "cublas", {})]


# --- choosing the table from times ------------------------------------------------------------------------------

def geomean(values) -> float:
    values = [v for v in values if v and v > 0]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else float("nan")


def choose(class_name: str, samples: list[dict]) -> dict:
    """The winning method of a class from its samples' median cold times (us), as {method, path, config, score,
    losses}: score is the geometric mean of library time / method time; a method missing on a sample (it refused the
    shape or failed its check) cannot win the class."""
    # Only the lab's paths and the library can win: PyTorch and lab.ops under a table are what the table is judged by.
    methods = {m for s in samples for m in s["cold_us"] if m in s.get("paths", {}) or m == "cublas"}
    scores = {}
    for method in methods:
        ratios = []
        for s in samples:
            lib, mine = _median(s["cold_us"].get("cublas")), _median(s["cold_us"].get(method))
            if lib is None or mine is None or s["check"].get(method):
                break
            ratios.append(lib / mine)
        else:
            scores[method] = geomean(ratios)
    best = max((m for m in scores if m != "cublas"), key=lambda m: scores[m], default=None)
    if best is None or not scores[best] >= WIN_MARGIN:
        best = "cublas"
    path, cfg = _path_of(samples, best)
    losses = []
    for s in samples:
        mine = _median(s["cold_us"].get(best))
        rivals = {m: _median(t) for m, t in s["cold_us"].items()
                  if m in methods and not s["check"].get(m) and _median(t)}
        fastest = min(rivals, key=rivals.get) if rivals else None
        if fastest and mine and rivals[fastest] * WIN_MARGIN < mine:
            losses.append({"sample": s["sample"], "faster": fastest, "by": round(mine / rivals[fastest], 3)})
    return {"class": class_name, "method": best, "path": path, "config": cfg,
            "score": round(scores.get(best, 1.0), 3), "scores": {m: round(v, 3) for m, v in sorted(scores.items())},
            "losses": losses}


def _path_of(samples, method):
    for s in samples:
        if method in s.get("paths", {}):
            path, cfg = s["paths"][method]
            return path, cfg
    return "cublas", {}


def _median(times):
    return statistics.median(times) if times else None


def table_from(choices: list[dict], record_name: str, where: str) -> dict:
    """The dispatch table's JSON form: one rule per class, its note citing the sweep."""
    rules = []
    conditions = {name: when for name, when, _, _ in CLASSES}
    for c in choices:
        faster = (f"{len(c['losses'])} of its samples faster on another path" if c["losses"]
                  else "fastest on every sample")
        note = (f"{c['class']}: {c['method']}, {c['score']}x the library's speed (geometric mean over the class's "
                f"samples; {faster}); {record_name}, {where}")
        rule = {"when": conditions[c["class"]], "path": c["path"]}
        if c["config"]:
            rule["config"] = c["config"]
        rules.append(rule | {"note": note})
    return {"rules": rules}


# --- measuring -----------------------------------------------------------------------------------------------

def _torch():
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


class _Operands:
    """One sample's random operands (never zeros), an output, and their PyTorch views (zero-copy, DLPack)."""

    def __init__(self, sample: Sample, seed: int):
        import cupy as cp

        from lab.ops.tune import make_inputs

        self.sample, self.shape = sample, gemm_shape(sample)
        self.a, self.b, self.bias, self.activation, self.residual = make_inputs(self.shape, seed)
        self.out = cp.empty((sample.M, sample.N), dtype=self.a.dtype)
        torch = _torch()
        if torch is not None:
            view = (lambda x: torch.from_dlpack(x).view(torch.bfloat16)) if sample.dtype == BF else torch.from_dlpack
            self.ta, self.tb, self.tout = view(self.a), view(self.b), view(self.out)
            self.tres = None if self.residual is None else view(self.residual)
            self.tbias = None if self.bias is None else torch.from_dlpack(self.bias).to(self.ta.dtype)

    def lab_call(self, runtime, into_out: bool = True):
        from lab.ops import api

        kw = {"input_type": "bfloat16"} if self.sample.dtype == BF else {}
        act = {"gelu_tanh": "gelu_tanh", "relu": "relu", "silu": "silu", "gelu_erf": "gelu"}.get(self.activation)
        a, b, bias, res, out, layout = self.a, self.b, self.bias, self.residual, self.out, self.sample.layout
        return lambda _i=0: api.matmul(a, b, bias=bias, activation=act, residual=res, out=out, layout=layout,
                                       runtime=runtime, **kw)

    def torch_call(self, into_out: bool = False):
        """What a PyTorch user writes for this call: torch.mm (into out), torch.addmm for a bias or a residual alone,
        else F.linear then the activation in place and torch.add for a residual. `into_out`: the result is copied
        into the shared output where PyTorch's ops leave it elsewhere (for the check; the timed call does not)."""
        import torch
        import torch.nn.functional as F

        a, b, out, res, bias = self.ta, self.tb, self.tout, self.tres, self.tbias
        act = {"relu": F.relu, "silu": F.silu, "gelu_tanh": lambda y: F.gelu(y, approximate="tanh"),
               "gelu_erf": F.gelu}.get(self.activation)
        bt = b.t() if self.sample.layout == "TN" else b
        if act is None and res is None and bias is None:
            return lambda _i=0: torch.mm(a, bt, out=out)
        if act is None and res is not None and bias is None:
            return lambda _i=0: torch.addmm(res, a, bt, out=out)
        if act is None and res is None:
            return lambda _i=0: torch.addmm(bias, a, bt, out=out)

        inplace = {"relu": lambda y: F.relu(y, inplace=True), "silu": lambda y: F.silu(y, inplace=True)}
        act = inplace.get(self.activation, act)

        def composed(_i=0):
            y = F.linear(a, b, bias) if self.sample.layout == "TN" else torch.addmm(bias, a, bt) if bias is not None \
                else torch.mm(a, bt)
            y = act(y) if act is not None else y
            if res is not None:
                torch.add(y, res, out=out)
            elif into_out:
                out.copy_(y)
        return composed


def _forced(path: str, config: dict):
    from lab.ops import rules
    from lab.ops.dispatch import Runtime

    rule = {"when": {}, "path": path} | ({"config": config} if config else {})
    return Runtime(rules.parse({"rules": [rule]}, f"forced {path}"))


def _check(ops: _Operands, call, expected, fused_of) -> str | None:
    """None when `call`'s output is inside the bound everywhere (poisoned with NaN first), else why not."""
    import cupy as cp

    from lab.families.gemm_tc import to_float32

    ops.out.view(cp.uint16).fill(0x7E00 if ops.sample.dtype == "float16" else 0x7FC0)
    try:
        call()
        cp.cuda.get_current_stream().synchronize()
    except LabError as exc:
        return f"did not run: {exc}"
    fused = fused_of()
    ref, bound = expected[0] if fused or ops.sample.epilogue == "none" else expected[1]
    got = to_float32(ops.out, ops.sample.dtype, cp).astype(cp.float64)
    bad = int((~(cp.abs(got - ref) <= bound)).sum())
    return None if bad == 0 else f"{bad} of {got.size} elements outside the bound"


def _time_b2b(call) -> float:
    """Microseconds per call over BACK_TO_BACK host-issued calls between one event pair (after one flush)."""
    import cupy as cp

    from lab.measure.timing import L2Flusher

    _time_b2b.flusher = getattr(_time_b2b, "flusher", None) or L2Flusher()
    _time_b2b.flusher.flush()
    start, end = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    for i in range(BACK_TO_BACK):
        call(i)
    end.record()
    end.synchronize()
    return 1e3 * cp.cuda.get_elapsed_time(start, end) / BACK_TO_BACK


def _time_cold(call) -> float:
    from lab.measure.timing import measure

    return 1e3 * measure(call, l2="cold", min_time_ms=MIN_TIME_MS, max_reps=300).median_ms


def measure_sample(sample: Sample, methods: list[tuple[str, str, dict]], rounds: int, seed: int, extra=None) -> dict:
    """One sample: every method checked against float64 once, then timed cold and back to back in `rounds` rounds.
    `extra`: more (name, call factory, fused_of) methods (lab.ops under a table, PyTorch)."""
    from lab.ops.paths import PATHS
    from lab.ops.tune import reference_and_bound

    ops = _Operands(sample, seed)
    inputs = (ops.a, ops.b, ops.bias, ops.activation, ops.residual)
    fused_ref = reference_and_bound(ops.shape, *inputs)
    expected = (fused_ref, reference_and_bound(ops.shape, *inputs, rounded_product=True)
                if sample.epilogue != "none" else fused_ref)
    calls, fused, paths, check = {}, {}, {}, {}
    from lab.core import device

    arch = device.current().arch
    for name, path, cfg in methods:
        why = PATHS[path].refusal(ops.shape, arch)
        if why:
            continue
        rt = _forced(path, cfg)
        calls[name], paths[name] = ops.lab_call(rt), (path, cfg)
        fused[name] = (lambda rt=rt: rt.last_exact)
    checked = dict(calls)
    for name, factory, fused_of in extra or ():
        calls[name], checked[name], fused[name] = factory(ops, False), factory(ops, True), fused_of
    fused_seen = {}
    for name in list(calls):
        check[name] = _check(ops, checked[name], expected, fused[name])
        fused_seen[name] = bool(fused[name]())
    timed = [n for n in calls if not check[n] or n == "torch"]  # torch is timed even where it leaves the bound
    cold = {n: [] for n in timed}
    b2b = {n: [] for n in timed}
    for r in range(rounds):
        order = timed[r % len(timed):] + timed[:r % len(timed)] if timed else []
        for n in order:
            cold[n].append(round(_time_cold(calls[n]), 3))
            b2b[n].append(round(_time_b2b(calls[n]), 3))
    return {"sample": sample.label, "params": sample.__dict__, "flops": 2 * sample.M * sample.N * sample.K,
            "check": check, "exact_epilogue": fused_seen, "cold_us": cold, "b2b_us": b2b, "paths": paths}


def _torch_method():
    if _torch() is None:
        return []
    # Checked against the looser bound (the product rounded before the epilogue), as PyTorch composes it.
    return [("torch", lambda ops, into_out: ops.torch_call(into_out), lambda: False)]


def _lab_ops_method(name: str, runtime):
    return (name, lambda ops, into_out: ops.lab_call(runtime), lambda: runtime.last_exact)


def run_sweep(out_dir: Path, *, rounds: int = 3, seed: int = 20261201, write_table: Path | None = None,
              classes: tuple[str, ...] | None = None, progress=print) -> Path:
    """The sweep, the table chosen from it, and lab.ops under that table against PyTorch; one record."""
    from lab.core import device
    from lab.measure.records import provenance, write_json
    from lab.ops import rules
    from lab.ops.dispatch import Runtime
    from lab.tools.library_gemm import library_name

    gpu = device.current()
    if gpu.arch < 90:
        raise LabError(f"The sweep times the Hopper paths, so it needs an H100 or H200 (sm_90); this GPU is "
                       f"sm_{gpu.arch}.")
    started = time.perf_counter()
    before = Runtime(rules.DEFAULT)  # lab.ops under the table in force when the sweep started
    samples, choices = [], []
    for name, _, _, shapes in CLASSES:
        if classes and name not in classes:
            continue
        members = []
        for i, sample in enumerate(shapes):
            where = class_of(sample, gpu.sm_count)
            if where != name:
                progress(f"  {sample.label} belongs to class {where}, not {name}: measured under {where}'s paths")
            progress(f"[{time.perf_counter() - started:6.1f} s] {where}: {sample.label}")
            extra = _torch_method() + [_lab_ops_method("lab_ops_before", before)]
            row = measure_sample(sample, methods_for(where), rounds, seed + i, extra) | {"class": where}
            members.append(row)
            samples.append(row)
            progress("    " + "  ".join(f"{m} {_median(t):.1f}" for m, t in row["cold_us"].items() if t))
        if members:
            choices.append(choose(name, [s for s in samples if s["class"] == name]))
            c = choices[-1]
            progress(f"  -> {name}: {c['method']} (score {c['score']}, losses {len(c['losses'])})")
    prov = provenance()
    where = f"{gpu.name}, {prov.get('commit', '?')}, {prov.get('date', '?')[:10]}"
    table_json = table_from(choices, f"results/{_gpu_dir(gpu.name)}/{RECORD}", where)
    table = rules.parse(table_json, "the sweep's table")
    after = Runtime(table)
    final = []
    for i, row in enumerate(samples):
        sample = Sample(**row["params"])
        progress(f"[{time.perf_counter() - started:6.1f} s] lab.ops under the new table: {sample.label}")
        final.append(measure_sample(sample, [], rounds, seed + 1000 + i,
                                    _torch_method() + [_lab_ops_method("lab_ops", after)]))
        d = after.last_decision
        final[-1]["decision"] = " ".join([d.path, *(f"{k}={v}" for k, v in d.config)]) + f" ({d.source})"
    record = {"provenance": prov, "library": library_name(), "torch": _torch_version(), "rounds": rounds,
              "min_time_ms": MIN_TIME_MS, "back_to_back": BACK_TO_BACK, "win_margin": WIN_MARGIN,
              "samples": samples, "choices": choices, "table": table_json, "final": final,
              "summary": summarize(final), "seconds": round(time.perf_counter() - started, 1)}
    out = Path(out_dir) / RECORD
    write_json(out, record)
    if write_table is not None:
        Path(write_table).write_text(json.dumps(table_json, indent=1) + "\n")
    return out


def _gpu_dir(name: str) -> str:
    return "h200" if "H200" in name else name.lower().replace(" ", "_")


def _torch_version() -> str | None:
    torch = _torch()
    return None if torch is None else torch.__version__


def summarize(final: list[dict]) -> list[dict]:
    """Per sample: lab.ops against PyTorch, the per-round ratio (torch time / lab.ops time: above 1, lab.ops is
    faster), cold and back to back, and the median TFLOP/s of each."""
    rows = []
    for f in final:
        lab, ref = f["cold_us"].get("lab_ops"), f["cold_us"].get("torch")
        lab_b, ref_b = f["b2b_us"].get("lab_ops"), f["b2b_us"].get("torch")
        if not lab or not ref:
            continue
        rows.append({"sample": f["sample"], "decision": f.get("decision"),
                     "lab_tflops": round(f["flops"] / _median(lab) / 1e6, 1),
                     "torch_tflops": round(f["flops"] / _median(ref) / 1e6, 1),
                     "ratio_cold": [round(t / x, 3) for t, x in zip(ref, lab, strict=True)],
                     "ratio_b2b": [round(t / x, 3) for t, x in zip(ref_b, lab_b, strict=True)] if lab_b and ref_b
                     else [], "lab_check": f["check"].get("lab_ops"), "torch_check": f["check"].get("torch")})
    return rows


# --- host time per call --------------------------------------------------------------------------------------

HOST_SHAPES = ((1, 1024, 1024), (16, 1024, 1024), (128, 512, 512))


def host_cost(out_dir: Path, progress=print) -> Path:
    """Host microseconds per call, the GPU's work kept small so the host is the bottleneck: lab.ops.matmul replaying
    each path's recorded call (the library's too) against torch.mm / F.linear on the same memory, and
    lab.ops.rmsnorm against F.rms_norm; the median of HOST_TRIALS trials of HOST_CALLS calls."""
    import cupy as cp

    from lab.measure.records import provenance
    from lab.ops import api

    rows = []
    for m, n, k in HOST_SHAPES:
        ops = _Operands(_s(m, n, k), 7)
        for path in ("cublas", "decode", "persistent") if m <= 64 else ("cublas", "persistent"):
            rt = _forced(path, {})
            rows.append({"shape": [m, n, k], "method": f"lab_ops:{path}", **_host_trials(ops.lab_call(rt))})
        if _torch() is not None:
            import torch.nn.functional as F

            rows.append({"shape": [m, n, k], "method": "torch.mm", **_host_trials(ops.torch_call())})
            ta, tb = ops.ta, ops.tb
            rows.append({"shape": [m, n, k], "method": "F.linear",
                         **_host_trials(lambda ta=ta, tb=tb: F.linear(ta, tb))})
        progress(f"host cost {m}x{n}x{k}: " + ", ".join(f"{r['method']} {r['median']}" for r in rows[-5:]))
    x = cp.random.standard_normal((16, 4096), dtype=cp.float32).astype(cp.float16)
    w = cp.random.standard_normal(4096, dtype=cp.float32).astype(cp.float16)
    y = cp.empty_like(x)
    rows.append({"shape": [16, 4096], "method": "lab_ops:rmsnorm",
                 **_host_trials(lambda: api.rmsnorm(x, w, out=y))})
    if _torch() is not None:
        import torch
        import torch.nn.functional as F

        tx, tw = torch.from_dlpack(x), torch.from_dlpack(w)
        rows.append({"shape": [16, 4096], "method": "F.rms_norm",
                     **_host_trials(lambda: F.rms_norm(tx, (4096,), tw, 1e-5))})
    out = Path(out_dir) / "ops_host_cost.json"
    out.write_text(json.dumps({"provenance": provenance(), "calls": HOST_CALLS, "trials": HOST_TRIALS,
                               "rows": rows}, indent=1, default=str) + "\n")
    return out


def _host_trials(fn) -> dict:
    from lab.measure.timing import host_us_per_call

    return host_us_per_call(fn, calls=HOST_CALLS, trials=HOST_TRIALS)


STUDIES = ("sweep", "host-cost")


def run(out_dir: Path, study: str = "sweep", *, progress=print, **options) -> Path:
    """One of the module's two studies, written under out_dir: "sweep" (run_sweep: ops_sweep.json; options rounds,
    seed, classes, write_table) or "host-cost" (host_cost: ops_host_cost.json; no options). Returns the path."""
    if study == "sweep":
        if options.get("classes") is not None:
            options["classes"] = tuple(options["classes"]) or None
        return run_sweep(Path(out_dir), progress=progress, **options)
    if study == "host-cost":
        if options:
            raise LabError(f"the host-cost study takes no options (given: {', '.join(options)}).")
        return host_cost(Path(out_dir), progress=progress)
    raise LabError(f"no study {study!r} in lab.studies.ops_sweep; its studies are {', '.join(STUDIES)}.")


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m lab.studies.ops_sweep")
    parser.add_argument("out", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--classes", nargs="*")
    parser.add_argument("--write-table", type=Path)
    parser.add_argument("--host", action="store_true", help="the host-cost study only")
    args = parser.parse_args(argv)
    if args.host:
        print(run(args.out, "host-cost"))
        return 0
    path = run(args.out, "sweep", rounds=args.rounds, write_table=args.write_table, classes=args.classes)
    for row in json.loads(path.read_text())["summary"]:
        print(f"{row['sample']:42s} {row['decision'] or '':40.40s} lab {row['lab_tflops']:7.1f} torch "
              f"{row['torch_tflops']:7.1f} cold {row['ratio_cold']} b2b {row['ratio_b2b']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

