"""lab.ops against PyTorch on a serving trace, eager and as CUDA graphs, for two model families.

One transformer layer per step of a serving trace (lab.studies.serving_trace.make_trace: decode steps with batches of
1..256, a few prefill steps of 128..8192 tokens), its seven operators as lab.studies.serving_trace describes them,
chained
the way a layer chains them (attention itself and silu(gate) * up are the same work on every method and stay out;
their outputs are stand-in inputs, `attn` and `act`):

    n1   = rmsnorm(h)           lab.ops.rmsnorm(out=)                  F.rms_norm(h, (hidden,), w1, eps)
    qkv  = n1 @ Wqkv.T (+ b)    lab.ops.matmul(layout="TN", bias=)     F.linear(n1, Wqkv, b)
    h1   = attn @ Wo.T + h      lab.ops.matmul(residual=h)             torch.addmm(h, attn, Wo.t())  or  F.linear + h
    n2   = rmsnorm(h1)
    gate = silu(n2 @ Wg.T)      lab.ops.matmul(activation="silu")      F.silu(F.linear(n2, Wg))
    up   = n2 @ Wu.T            lab.ops.matmul                         F.linear(n2, Wu)
    h2   = act @ Wd.T + h1      lab.ops.matmul(residual=h1)            as for h1

Models (Model; `python -m lab.studies.ops_compare --model NAME`):
    llama3_8b   hidden 4096, intermediate 14336, 32 query and 8 key/value heads of 128 (QKV 6144 wide), no biases
    qwen25_7b   hidden 3584, intermediate 18944, 28 query and 4 key/value heads of 128 (QKV 4608 wide), a bias on
                the fused QKV projection (lab.ops takes it as float32, PyTorch in the weights' type: same values)
Types: float16 and bfloat16 (bf16 arrays are uint16 bit patterns on the CuPy side, the same memory viewed as
torch.bfloat16 on the PyTorch side: both libraries read the same weights and inputs, shared through DLPack).

The residual: PyTorch users write it two ways, torch.addmm(h, x, W.t()) (cuBLAS adds h as beta * C) or
F.linear(x, W) + h (the product, then an elementwise add). Both are timed op by op; the layer uses the faster over
the trace, and the record says which.

In order, each step checked before the next:
 1. Correctness, before anything is timed: at the trace's smallest and largest M and one odd M, every output of
    the layer (lab.ops, and PyTorch in both residual forms) against a float64 reference of the layer computed with
    CuPy from the same stored inputs (relative RMS and max errors within TOLERANCE of the type; lab.ops's outputs
    poisoned with NaN first and scanned whole). A failure stops the study with one sentence.
 2. Where the time goes: each op kind (rmsnorm, qkv, o_proj, gate, up, down) alone at every distinct M of the
    trace, as back-to-back repeats in one CUDA graph (lab.ops.capture, torch.cuda.graph), the repeats rotating over
    copies of the weights so that a weight comes from DRAM, as in a layer, and not from the L2 the previous repeat
    filled; per-kind totals over the trace (weighted by how often each M occurs) for both libraries and their ratio.
 3. CUDA graphs of the layer, one per distinct M: lab.ops.capture (lab.ops.graphs) and torch.cuda.graph (warmed up
    on a side stream as PyTorch's documentation prescribes); both checked against the reference of step 1.
 4. The trace, `rounds` times, the four methods in a rotated order each round: every step timed on the GPU (CUDA
    events around one layer, lab.studies.serving_trace.SPIN_NS of spin kernel in front so the whole step is queued
    before
    its start event, the L2 flushed before each step and not between its ops, as lab.studies.serving_trace's study
    does):
        lab_eager     lab.ops calls, outputs preallocated per M (out=)
        torch_eager   PyTorch calls as a PyTorch user writes them (outputs from PyTorch's caching allocator)
        lab_graph     one lab.ops.capture per M, replayed
        torch_graph   one torch.cuda.CUDAGraph per M, replayed
    Each method's total per round; per method the median and range over rounds; torch/lab per round, eager and
    graph (above 1: lab.ops is faster).
 5. Host cost: a few single ops called 1000 times back to back (time.perf_counter around the loop, the GPU
    synchronized before and after), per call, beside the GPU time of the same op: which of the two was the
    bottleneck.

Everything runs on one stream per method: the legacy default stream for the eager methods and PyTorch's graphs
(PyTorch's current stream and CuPy's must be that same stream, which is checked), one non-blocking stream for
lab.ops's graphs. The record, ops_vs_torch_<model>_<dtype>.json, carries provenance (lab.measure.records) with PyTorch's
version.

    python -m lab.studies.ops_compare OUT_DIR --model qwen25_7b --dtype bfloat16 --steps 240 --rounds 3
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from lab.core.errors import LabError
from lab.measure.records import write_json
from lab.studies import serving_trace as st

DTYPES = ("float16", "bfloat16")
METHODS = ("lab_eager", "torch_eager", "lab_graph", "torch_graph")
PAIRS = {"eager": ("lab_eager", "torch_eager"), "graph": ("lab_graph", "torch_graph")}  # (lab, torch)
KINDS = ("rmsnorm", "qkv", "o_proj", "gate", "up", "down")
CALLS_PER_LAYER = {"rmsnorm": 2, "qkv": 1, "o_proj": 1, "gate": 1, "up": 1, "down": 1}
RESIDUAL_FORMS = ("addmm", "linear_add")
_FORMS = {"addmm": "torch.addmm(h, x, W.t())", "linear_add": "F.linear(x, W) + h"}
INPUTS = ("h", "attn", "act")  # the layer's inputs: the hidden state, and stand-ins for attention's and the MLP's
PREFILL_SHARE, SKEW = 0.05, 1.2  # the trace's shape, as lab.studies.ops_study's trace has it
EPS = 1e-5
# Allowed error of every layer output against the float64 reference: relative RMS error (over the checked rows)
# and the largest error relative to the largest reference value. The layer rounds each op's output to the type
# and the next op reads it back: several roundings of a unit roundoff (fp16 2^-11, bf16 2^-8) each, with margin.
TOLERANCE = {"float16": {"rel_rms": 4e-3, "rel_max": 1e-2}, "bfloat16": {"rel_rms": 2.5e-2, "rel_max": 6e-2}}
CHECK_ROWS_MAX = st.FULL_CHECK_MAX_M  # past it, a sample of rows is checked (the whole output is scanned for NaN)
# Ops alone (step 2): one CUDA graph of back-to-back repeats lasting about PER_OP_GRAPH_MS, replayed PER_OP_REPLAYS
# times; the weights rotate over enough copies that the bytes read between two uses of one copy exceed twice the L2.
PER_OP_GRAPH_MS = 1.0
PER_OP_MIN_REPEATS, PER_OP_MAX_REPEATS = 4, 256
PER_OP_REPLAYS = 5
MAX_WEIGHT_SETS = 8
# Host cost (step 5): (op kind, M) of the single ops, calls per trial, trials.
HOST_OPS = (("qkv", 1), ("qkv", 128), ("gate", 1), ("rmsnorm", 1))
HOST_CALLS, HOST_TRIALS, HOST_WARMUP = 1000, 3, 50
GPU_BOUND_MARGIN = 1.15  # wall time per call within this factor of the GPU time per call: the GPU was the bottleneck


# --- the models ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Model:
    """A decoder layer's widths: the hidden size, the MLP's intermediate size, and grouped-query attention's heads
    (q_heads query heads sharing kv_heads key/value heads, each head_dim wide)."""

    name: str
    hidden: int
    intermediate: int
    head_dim: int
    q_heads: int
    kv_heads: int
    qkv_bias: bool

    def __post_init__(self):
        dims = (self.hidden, self.intermediate, self.head_dim, self.q_heads, self.kv_heads)
        if not all(isinstance(d, int) and d > 0 for d in dims):
            raise LabError(f"A model's widths and head counts are positive integers; got {dims}.")
        if self.q_heads % self.kv_heads:
            raise LabError(f"q_heads ({self.q_heads}) must be a multiple of kv_heads ({self.kv_heads}): each key/value "
                           "head serves a group of query heads.")

    @property
    def qkv(self) -> int:
        """The fused QKV projection's width: the query heads, then one key and one value per key/value head."""
        return self.head_dim * (self.q_heads + 2 * self.kv_heads)

    @property
    def attn(self) -> int:
        """The attention output's width (o_proj's K)."""
        return self.head_dim * self.q_heads

    def gemms(self) -> tuple:
        """The layer's GEMMs as (name, N, K, epilogue), as lab.studies.serving_trace lists them."""
        return st.gemms(self.hidden, self.intermediate, self.qkv, self.attn, self.qkv_bias)

    def weight_bytes(self, itemsize: int = 2) -> int:
        return itemsize * sum(n * k for _, n, k, _ in self.gemms())


LLAMA3_8B = Model("llama3_8b", st.HIDDEN, st.INTERMEDIATE, st.HEAD_DIM, st.Q_HEADS, st.KV_HEADS, False)
QWEN25_7B = Model("qwen25_7b", 3584, 18944, 128, 28, 4, True)
MODELS = {m.name: m for m in (LLAMA3_8B, QWEN25_7B)}


@dataclass(frozen=True)
class Op:
    """One operator of the layer: it reads `src` (and `residual`), writes `dst`, with weight `weight` (N x K for a
    GEMM; for an rmsnorm, its (N,) scale and N = K = the row width)."""

    name: str
    kind: str
    src: str
    dst: str
    weight: str
    N: int
    K: int
    epilogue: str  # "none", "bias", "silu" or "residual"
    residual: str | None = None


def layer_ops(model: Model) -> tuple[Op, ...]:
    """The seven operators of one layer, in order, chained through their buffers."""
    g = {name: (n, k, epi) for name, n, k, epi in model.gemms()}
    hidden = model.hidden
    return (Op("norm1", "rmsnorm", "h", "n1", "w_norm1", hidden, hidden, "none"),
            Op("qkv", "qkv", "n1", "qkv", "w_qkv", *g["qkv"]),
            Op("o_proj", "o_proj", "attn", "h1", "w_o", *g["o_proj"], residual="h"),
            Op("norm2", "rmsnorm", "h1", "n2", "w_norm2", hidden, hidden, "none"),
            Op("gate", "gate", "n2", "gate", "w_gate", *g["gate"]),
            Op("up", "up", "n2", "up", "w_up", *g["up"]),
            Op("down", "down", "act", "h2", "w_down", *g["down"], residual="h1"))


def kind_op(model: Model, kind: str) -> Op:
    """The operator that stands for `kind` when ops are timed alone (the first rmsnorm for both)."""
    return next(op for op in layer_ops(model) if op.kind == kind)


def buffer_widths(model: Model) -> dict[str, int]:
    """The row width of every buffer the layer reads or writes."""
    widths = {"h": model.hidden, "attn": model.attn, "act": model.intermediate}
    return widths | {op.dst: op.N for op in layer_ops(model)}


def resolve(model, dtype: str, steps: int, rounds: int, seed: int = 0) -> Model:
    """The Model for `model` (a name or a Model), with every argument checked: one LabError sentence per misuse."""
    if isinstance(model, str):
        if model not in MODELS:
            raise LabError(f"model is one of {', '.join(MODELS)}; got {model!r}.")
        model = MODELS[model]
    elif not isinstance(model, Model):
        raise LabError(f"model is a name ({', '.join(MODELS)}) or a lab.studies.ops_compare.Model; got {model!r}.")
    if dtype not in DTYPES:
        raise LabError(f"dtype is one of {', '.join(DTYPES)}; got {dtype!r}.")
    for name, value in (("steps", steps), ("rounds", rounds)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise LabError(f"{name} is a whole number of at least 1; got {value!r}.")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise LabError(f"seed is a whole number of at least 0; got {seed!r}.")
    return model


# --- the trace ------------------------------------------------------------------------------------------------

def make_trace(seed: int = 0, steps: int = 240) -> list[st.Step]:
    """The serving trace the comparison runs (lab.studies.serving_trace.make_trace with lab.studies.ops_study's
    shape)."""
    return st.make_trace(seed, steps, PREFILL_SHARE, SKEW)


def m_counts(trace: list[st.Step]) -> dict[int, int]:
    """How many steps run each distinct M, in increasing M."""
    return dict(sorted(Counter(s.M for s in trace).items()))


def check_ms(ms) -> list[int]:
    """The Ms checked against float64: the smallest, the largest, and the largest odd M besides them."""
    ms = sorted(set(ms))
    if not ms:
        raise LabError("The trace has no steps to check.")
    picks = {ms[0], ms[-1]}
    odd = [m for m in ms if m % 2 and m not in picks]
    if odd:
        picks.add(max(odd))
    return sorted(picks)


def weight_sets(l2_bytes: int, model: Model, itemsize: int = 2) -> int:
    """Copies of the weights that ops timed alone rotate over, so that between two uses of one copy more than twice
    the L2 is read (the smallest weight decides), at least 2 and at most MAX_WEIGHT_SETS."""
    smallest = itemsize * min(n * k for _, n, k, _ in model.gemms())
    return int(min(MAX_WEIGHT_SETS, max(2, 1 + math.ceil(2 * l2_bytes / smallest))))


def rotated(methods, round_index: int) -> list:
    """The methods in round `round_index`'s order: the list rotated by one place per round."""
    methods = list(methods)
    k = round_index % len(methods) if methods else 0
    return methods[k:] + methods[:k]


# --- summaries (pure) ----------------------------------------------------------------------------------------

def _spread(values) -> dict:
    values = list(values)
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def summarize_rounds(rounds: list[dict]) -> dict:
    """From each round's totals ({method: total ms}): per method the median and range over rounds; per pair
    (eager, graph) torch/lab per round and their median and range (above 1: lab.ops faster); and per library
    eager/graph per round (what the graph saves)."""
    if not rounds:
        raise LabError("No rounds to summarize; run at least one.")
    names = [m for m in METHODS if any(m in r for r in rounds)]
    names += sorted({m for r in rounds for m in r} - set(names))
    methods = {}
    for m in names:
        vals = [r[m] for r in rounds if m in r]
        s = _spread(vals)
        methods[m] = {"median_ms": s["median"], "min_ms": s["min"], "max_ms": s["max"], "rounds_ms": vals}
    ratios = {}
    for pair, (lab, torch_) in PAIRS.items():
        per = [r[torch_] / r[lab] for r in rounds if lab in r and torch_ in r and r[lab] > 0]
        if per:
            ratios[pair] = {"torch_over_lab": per, **_spread(per)}
    gains = {}
    for lib in ("lab", "torch"):
        eager, graph = f"{lib}_eager", f"{lib}_graph"
        per = [r[eager] / r[graph] for r in rounds if eager in r and graph in r and r[graph] > 0]
        if per:
            gains[lib] = {"eager_over_graph": per, **_spread(per)}
    return {"methods": methods, "ratios": ratios, "graph_gain": gains}


def choose_residual_form(rows: list[dict], counts: dict[int, int]) -> str:
    """The PyTorch residual form with the smaller total over the trace for o_proj and down together (timed alone):
    rows carry torch_addmm_us and torch_linear_add_us for those kinds (compared over the rows that have both)."""
    keys = [f"torch_{form}_us" for form in RESIDUAL_FORMS]
    picked = [r for r in rows if r["kind"] in ("o_proj", "down") and all(r.get(k) is not None for k in keys)]
    totals = {form: sum(counts.get(r["M"], 0) * r[key] for r in picked)
              for form, key in zip(RESIDUAL_FORMS, keys, strict=True)} if picked else {}
    if not totals:
        raise LabError("No residual op was timed, so there is no PyTorch residual form to choose.")
    return min(totals, key=lambda f: (totals[f], RESIDUAL_FORMS.index(f)))


def per_kind_totals(rows: list[dict], counts: dict[int, int]) -> dict:
    """Per op kind, the time over the trace (ms, one layer per step: each M's time per call, times its steps, times
    the kind's calls per layer) for lab.ops and PyTorch, their ratio (torch/lab), and each kind's share of the sum.
    A row whose op could not be timed on one side (None) is left out on both, and counted as `missing_M`."""
    out = {}
    for kind in KINDS:
        rows_of = [r for r in rows if r["kind"] == kind]
        picked = [r for r in rows_of if r.get("lab_us") is not None and r.get("torch_us") is not None]
        if not rows_of:
            continue
        calls = CALLS_PER_LAYER[kind]
        lab = sum(counts.get(r["M"], 0) * calls * r["lab_us"] for r in picked) / 1e3
        torch_ = sum(counts.get(r["M"], 0) * calls * r["torch_us"] for r in picked) / 1e3
        out[kind] = {"lab_ms": lab, "torch_ms": torch_, "torch_over_lab": torch_ / lab if lab else None,
                     "calls_per_layer": calls, "missing_M": sorted(r["M"] for r in rows_of if r not in picked)}
    lab_sum = sum(v["lab_ms"] for v in out.values())
    torch_sum = sum(v["torch_ms"] for v in out.values())
    for v in out.values():
        v["lab_share"] = v["lab_ms"] / lab_sum if lab_sum else None
        v["torch_share"] = v["torch_ms"] / torch_sum if torch_sum else None
    return {"kinds": out, "lab_ms": lab_sum, "torch_ms": torch_sum,
            "torch_over_lab": torch_sum / lab_sum if lab_sum else None}


def bottleneck(wall_us: float, gpu_us: float | None, margin: float = GPU_BOUND_MARGIN) -> str | None:
    """"gpu" when the calls ran as fast as the GPU ran the op (wall time per call within `margin` of its GPU time),
    else "host": the GPU waited for the calls; None when the GPU time is unknown."""
    if gpu_us is None:
        return None
    return "gpu" if wall_us <= margin * gpu_us else "host"


def format_table(payload: dict) -> str:
    """The short table `main` prints from a record: per method its median and range, the torch/lab ratios, where the
    time goes per op kind, and the host cost per call."""
    summary = payload["summary"]
    lines = [f"{payload['model']['name']} {payload['dtype']}, {payload['trace']['steps']} steps, "
             f"{len(payload['rounds'])} round(s); GPU ms over the trace (one layer per step)",
             f"{'method':<13}{'median ms':>11}{'min-max ms':>22}"]
    for m, s in summary["methods"].items():
        spread = f"{s['min_ms']:.3f}-{s['max_ms']:.3f}"
        lines.append(f"{m:<13}{s['median_ms']:>11.3f}{spread:>22}")
    for pair, r in summary["ratios"].items():
        lines.append(f"torch/lab {pair:<6} median {r['median']:.3f} (min {r['min']:.3f}, max {r['max']:.3f});"
                     " above 1: lab.ops faster")
    kinds = payload.get("per_kind", {}).get("kinds", {})
    if kinds:
        lines.append(f"ops alone over the trace (PyTorch's residual: {payload.get('torch_residual_form')})")
        lines.append(f"{'kind':<9}{'lab ms':>10}{'torch ms':>10}{'torch/lab':>11}")
        for kind, v in kinds.items():
            ratio = f"{v['torch_over_lab']:.3f}" if v["torch_over_lab"] else "-"
            lines.append(f"{kind:<9}{v['lab_ms']:>10.3f}{v['torch_ms']:>10.3f}{ratio:>11}")
    for row in payload.get("host_cost", []):
        lines.append(f"host {row['op']:<14} lab {row['lab']['wall_us']:.2f} us/call (bottleneck: "
                     f"{row['lab']['bottleneck']}), torch {row['torch']['wall_us']:.2f} us/call (bottleneck: "
                     f"{row['torch']['bottleneck']})")
    for meth, why in payload.get("unavailable", {}).items():
        lines.append(f"{meth} left out: {why}")
    return "\n".join(lines)


# --- checking against float64 (any array module: CuPy on the GPU, NumPy in tests) --------------------------

def layer_reference(inputs: dict, weight: Callable[[str], object], bias, model: Model, xp, eps: float = EPS) -> dict:
    """Every buffer of the layer in float64 from float64 inputs ({"h", "attn", "act"}: rows x width), `weight(name)`
    giving a weight in float64 and `bias` the QKV bias (or None)."""
    values = dict(inputs)
    for op in layer_ops(model):
        x = values[op.src]
        if op.kind == "rmsnorm":
            values[op.dst] = x / xp.sqrt((x * x).mean(axis=1, keepdims=True) + eps) * weight(op.weight)
            continue
        v = x @ weight(op.weight).T
        if op.epilogue == "bias" and bias is not None:
            v = v + bias
        elif op.epilogue == "silu":
            v = v / (1 + xp.exp(-v))
        if op.residual:
            v = v + values[op.residual]
        values[op.dst] = v
    return {k: v for k, v in values.items() if k not in INPUTS}


def relative_errors(got64, ref64, xp) -> tuple[float, float]:
    """(RMS error / RMS of the reference, max error / max |reference|); NaN where got is NaN."""
    d = got64 - ref64
    rms_ref = float(xp.sqrt((ref64 * ref64).mean()))
    max_ref = float(xp.abs(ref64).max())
    rms = float(xp.sqrt((d * d).mean()))
    top = float(xp.abs(d).max())
    return (rms / rms_ref if rms_ref else rms), (top / max_ref if max_ref else top)


def compare(got: dict, ref: dict, rows, dtype: str, xp) -> dict:
    """Each output's errors against the reference: got[name] holds the stored outputs (all M rows: scanned for
    non-finite values), ref[name] the float64 reference of `rows`."""
    from lab.families.gemm_tc import to_float32

    result = {}
    for name, r in ref.items():
        g = got[name]
        nonfinite = int((~xp.isfinite(to_float32(g, dtype, xp))).sum())
        g64 = to_float32(g[rows], dtype, xp).astype(xp.float64)
        rel_rms, rel_max = relative_errors(g64, r, xp)
        result[name] = {"rel_rms": rel_rms, "rel_max": rel_max, "nonfinite": nonfinite}
    return result


def failures(errors: dict, dtype: str) -> list[str]:
    """The outputs outside TOLERANCE (NaN counts as outside), each as one phrase."""
    tol = TOLERANCE[dtype]
    bad = []
    for name, e in errors.items():
        if e["nonfinite"]:
            bad.append(f"{name}: {e['nonfinite']} non-finite values")
        elif not (e["rel_rms"] <= tol["rel_rms"] and e["rel_max"] <= tol["rel_max"]):
            bad.append(f"{name}: relative RMS error {e['rel_rms']:.2e} and max {e['rel_max']:.2e} (allowed "
                       f"{tol['rel_rms']:.1e} and {tol['rel_max']:.1e})")
    return bad


def torch_unavailable() -> str | None:
    """None when PyTorch with CUDA can run here, else one sentence saying why not."""
    try:
        import torch
    except Exception as exc:  # ImportError, or an install that fails while loading
        return (f"PyTorch cannot be imported here ({type(exc).__name__}: {exc}), so there is nothing to compare "
                "lab.ops against; install it (pip install torch) and run this again.")
    if not torch.cuda.is_available():
        return "PyTorch sees no CUDA device here, so there is nothing to compare lab.ops against on this machine."
    return None


# --- the arrays (GPU) ---------------------------------------------------------------------------------------------

class Layer:
    """One layer's arrays in CuPy: inputs and lab.ops's outputs sized for the largest M (views per M, the same
    addresses every step), weights (random, scaled so every output is of order 1, `sets` copies of each GEMM's weight
    for ops timed alone), the QKV bias in the type and as float32 (the same values)."""

    def __init__(self, model: Model, dtype: str, max_m: int, sets: int = 1, seed: int = 7):
        import cupy as cp

        from lab.families.gemm_tc import to_float32, to_storage
        from lab.measure.check import random_array

        self.model, self.dtype, self.max_m, self.sets = model, dtype, max_m, sets
        self.input_type = "bfloat16" if dtype == "bfloat16" else None
        storage = cp.uint16 if dtype == "bfloat16" else cp.float16

        def draw(shape, s, scale=1.0, offset=0.0):
            x = random_array(shape, np.float32, seed + s, "normal", xp=cp) * np.float32(scale) + np.float32(offset)
            return to_storage(x, dtype, cp)

        widths = buffer_widths(model)
        self.inputs = {name: draw((max_m, widths[name]), 20 + i, scale)
                       for i, (name, scale) in enumerate((("h", 1.0), ("attn", 1.0), ("act", 0.5)))}
        self.weights = {}
        for i, op in enumerate(layer_ops(model)):
            if op.kind == "rmsnorm":
                self.weights[op.weight] = [draw((op.N,), i, 0.25, 1.0)]
            else:
                w = draw((op.N, op.K), i, op.K ** -0.5)
                self.weights[op.weight] = [w] + [w.copy() for _ in range(sets - 1)]
        self.bias = draw((model.qkv,), 30, 0.5) if model.qkv_bias else None
        self.bias32 = None if self.bias is None else cp.ascontiguousarray(to_float32(self.bias, dtype, cp))
        self.out = {op.dst: cp.zeros((max_m, widths[op.dst]), dtype=storage) for op in layer_ops(model)}
        self._views: dict = {}

    def views(self, m: int) -> dict:
        """Every buffer's first m rows (made once per m)."""
        if m not in self._views:
            if not 1 <= m <= self.max_m:
                raise LabError(f"M={m} is outside the layer's buffers (1..{self.max_m}).")
            self._views[m] = {k: v[:m] for k, v in (self.inputs | self.out).items()}
        return self._views[m]

    def poison(self, m: int) -> None:
        """lab.ops's outputs at M = m filled with NaN, so an element left unwritten is found; synchronized, so work on
        any stream sees the poison."""
        import cupy as cp

        nan = 0x7FC0 if self.dtype == "bfloat16" else 0x7E00
        for name in self.out:
            self.views(m)[name].view(cp.uint16).fill(nan)
        cp.cuda.runtime.deviceSynchronize()

    def float64_inputs(self, m: int, rows) -> dict:
        import cupy as cp

        from lab.families.gemm_tc import to_float32

        return {k: to_float32(self.views(m)[k][rows], self.dtype, cp).astype(cp.float64) for k in INPUTS}

    def weight64(self, name: str):
        import cupy as cp

        from lab.families.gemm_tc import to_float32

        return to_float32(self.weights[name][0], self.dtype, cp).astype(cp.float64)


def _torch_of(x):
    """A CuPy array as a PyTorch tensor on the same memory (DLPack); uint16 bf16 patterns as torch.bfloat16."""
    import cupy as cp
    import torch

    if x.dtype == cp.uint16:  # through float16 (DLPack knows it), then reinterpreted: the same 2-byte patterns
        return torch.from_dlpack(x.view(cp.float16)).view(torch.bfloat16)
    return torch.from_dlpack(x)


def _cupy_of(t):
    """A PyTorch tensor as a CuPy array on the same memory; bfloat16 as uint16 patterns."""
    import cupy as cp
    import torch

    if t.dtype == torch.bfloat16:
        return cp.from_dlpack(t.view(torch.float16)).view(cp.uint16)
    return cp.from_dlpack(t)


class TorchLayer:
    """The same arrays as a Layer, seen by PyTorch (no copies)."""

    def __init__(self, layer: Layer):
        self.model = layer.model
        self.buffers = {k: _torch_of(v) for k, v in (layer.inputs | layer.out).items()}
        self.weights = {k: [_torch_of(w) for w in ws] for k, ws in layer.weights.items()}
        self.bias = None if layer.bias is None else _torch_of(layer.bias)
        self._views: dict = {}

    def views(self, m: int) -> dict:
        if m not in self._views:
            self._views[m] = {k: v[:m] for k, v in self.buffers.items()}
        return self._views[m]


# --- the two libraries' calls -----------------------------------------------------------------------------------

def lab_call(layer: Layer, op: Op, m: int, wset: int = 0, runtime=None) -> Callable[[], object]:
    """One lab.ops call of `op` at M = m on the layer's buffers (weight copy `wset`)."""
    from lab.ops import api

    v = layer.views(m)
    if op.kind == "rmsnorm":
        return functools.partial(api.rmsnorm, v[op.src], layer.weights[op.weight][0], eps=EPS, out=v[op.dst],
                                 input_type=layer.input_type)
    kw = {}
    if op.epilogue == "bias":
        kw["bias"] = layer.bias32
    elif op.epilogue == "silu":
        kw["activation"] = "silu"
    if op.residual:
        kw["residual"] = v[op.residual]
    return functools.partial(api.matmul, v[op.src], layer.weights[op.weight][wset], layout="TN", out=v[op.dst],
                             input_type=layer.input_type, runtime=runtime, **kw)


def lab_step(layer: Layer, m: int, runtime=None) -> Callable[[], None]:
    """One layer at M = m through lab.ops, outputs into the preallocated buffers."""
    calls = [lab_call(layer, op, m, 0, runtime) for op in layer_ops(layer.model)]

    def step() -> None:
        for call in calls:
            call()

    return step


def _residual_fn(form: str):
    import torch

    F = torch.nn.functional
    if form == "addmm":  # h + x @ W.T with h as cuBLAS's C (beta = 1)
        return lambda x, w, r: torch.addmm(r, x, w.t())
    if form == "linear_add":  # the product, then an elementwise add
        return lambda x, w, r: F.linear(x, w) + r
    raise LabError(f"The residual form is one of {', '.join(RESIDUAL_FORMS)}; got {form!r}.")


def torch_step(tl: TorchLayer, m: int, form: str = "addmm") -> Callable[[], dict]:
    """One layer at M = m as a PyTorch user writes it (each op's output allocated by PyTorch); returns the outputs."""
    import torch

    F = torch.nn.functional
    v = tl.views(m)
    h, attn, act = v["h"], v["attn"], v["act"]
    w1, w2, wqkv, wo, wg, wu, wd = (tl.weights[k][0] for k in ("w_norm1", "w_norm2", "w_qkv", "w_o", "w_gate", "w_up",
                                                               "w_down"))
    b = tl.bias
    shape = (tl.model.hidden,)
    residual = _residual_fn(form)

    def step() -> dict:
        n1 = F.rms_norm(h, shape, w1, EPS)
        qkv = F.linear(n1, wqkv, b)
        h1 = residual(attn, wo, h)
        n2 = F.rms_norm(h1, shape, w2, EPS)
        gate = F.silu(F.linear(n2, wg))
        up = F.linear(n2, wu)
        h2 = residual(act, wd, h1)
        return {"n1": n1, "qkv": qkv, "h1": h1, "n2": n2, "gate": gate, "up": up, "h2": h2}

    return step


def torch_call(tl: TorchLayer, op: Op, m: int, wset: int = 0, form: str = "addmm") -> Callable[[], object]:
    """One PyTorch call of `op` at M = m, reading the layer's buffers (weight copy `wset`)."""
    import torch

    F = torch.nn.functional
    v = tl.views(m)
    x = v[op.src]
    if op.kind == "rmsnorm":
        w, shape = tl.weights[op.weight][0], (op.N,)
        return lambda: F.rms_norm(x, shape, w, EPS)
    w = tl.weights[op.weight][wset]
    if op.epilogue == "bias":
        b = tl.bias
        return lambda: F.linear(x, w, b)
    if op.epilogue == "silu":
        return lambda: F.silu(F.linear(x, w))
    if op.residual:
        r, residual = v[op.residual], _residual_fn(form)
        return lambda: residual(x, w, r)
    return lambda: F.linear(x, w)


# --- timing helpers (GPU) -----------------------------------------------------------------------------------------

def _check_streams() -> None:
    import cupy as cp
    import torch

    if torch.cuda.current_device() != cp.cuda.Device().id:
        raise LabError(f"PyTorch's current device ({torch.cuda.current_device()}) is not CuPy's "
                       f"({cp.cuda.Device().id}); select one device for both (CUDA_VISIBLE_DEVICES).")
    if torch.cuda.current_stream().cuda_stream != cp.cuda.get_current_stream().ptr:
        raise LabError("PyTorch's current stream is not CuPy's; run the comparison outside any torch.cuda.stream or "
                       "cupy.cuda.Stream block, so both use the default stream.")


def _sync() -> None:
    import cupy as cp

    cp.cuda.runtime.deviceSynchronize()


def _time_steps(step: Callable[[int], object], steps: list, stream, flusher, spin) -> list[float]:
    """GPU ms of each step: the L2 flushed, the spin kernel, then a start event, the step's work, an end event."""
    import cupy as cp

    pairs = [(cp.cuda.Event(), cp.cuda.Event()) for _ in steps]
    with stream:
        for s, (start, end) in zip(steps, pairs, strict=True):
            flusher.flush()
            spin()
            start.record(stream)
            step(s.M)
            end.record(stream)
    pairs[-1][1].synchronize()
    return [cp.cuda.get_elapsed_time(a, b) for a, b in pairs]


def _time_replays(replay: Callable[[], object], stream, spin, replays: int) -> list[float]:
    """GPU ms of each of `replays` replays (after one untimed), each behind the spin kernel."""
    import cupy as cp

    pairs = [(cp.cuda.Event(), cp.cuda.Event()) for _ in range(replays)]
    with stream:
        replay()
        for start, end in pairs:
            spin()
            start.record(stream)
            replay()
            end.record(stream)
    pairs[-1][1].synchronize()
    return [cp.cuda.get_elapsed_time(a, b) for a, b in pairs]


def _probe_ms(call: Callable[[], object], stream, spin) -> float:
    """GPU ms of one warm call (events around it, the spin kernel in front), after all earlier work."""
    import cupy as cp

    _sync()
    start, end = cp.cuda.Event(), cp.cuda.Event()
    with stream:
        call()
        spin()
        start.record(stream)
        call()
        end.record(stream)
    end.synchronize()
    return cp.cuda.get_elapsed_time(start, end)


def _repeats(probe_ms: float) -> int:
    return int(np.clip(math.ceil(PER_OP_GRAPH_MS / max(probe_ms, 1e-3)), PER_OP_MIN_REPEATS, PER_OP_MAX_REPEATS))


def _repeat(calls: list, n: int) -> Callable[[], None]:
    k = len(calls)

    def fn() -> None:
        for i in range(n):
            calls[i % k]()

    return fn


def _torch_graph(fn: Callable[[], object], side, warmup: int = 2):
    """(graph, its outputs): `fn` warmed up on the side stream, then captured with torch.cuda.graph."""
    import torch

    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            outputs = fn()
    except RuntimeError as exc:
        raise LabError(f"PyTorch could not capture the layer into a CUDA graph ({' '.join(str(exc).split())[:200]}); "
                       "check that this PyTorch build supports CUDA graphs on this GPU.") from exc
    return graph, outputs


def _graph_us_lab(calls: list, n: int, stream, spin) -> float:
    """lab.ops: microseconds per call, n calls (rotating over `calls`) in one captured graph."""
    from lab.ops.graphs import capture

    captured = capture(_repeat(calls, n), warmup=1, stream=stream)
    times = _time_replays(captured.launch, stream, spin, PER_OP_REPLAYS)
    return 1e3 * statistics.median(times) / n


def _graph_us_torch(calls: list, n: int, side, spin) -> float:
    """PyTorch: microseconds per call, n calls (rotating over `calls`) in one torch.cuda.graph."""
    import cupy as cp

    graph, _ = _torch_graph(_repeat(calls, n), side, warmup=1)
    times = _time_replays(graph.replay, cp.cuda.Stream.null, spin, PER_OP_REPLAYS)
    return 1e3 * statistics.median(times) / n


def _or_none(row: dict, key: str, fn, *args):
    """fn(*args), or None with the LabError's sentence kept as row[key] (an op that cannot be captured on one side
    leaves a gap in the record instead of stopping the study)."""
    try:
        return fn(*args)
    except LabError as exc:
        row[key] = str(exc)
        return None


def _host_cost(call: Callable[[], object]) -> dict:
    """Host microseconds per call over HOST_CALLS back-to-back calls (median of HOST_TRIALS): `loop_us` until the
    last call returned, `wall_us` until the GPU finished too."""
    for _ in range(HOST_WARMUP):
        call()
    _sync()
    loop, wall = [], []
    for _ in range(HOST_TRIALS):
        t0 = time.perf_counter()
        for _ in range(HOST_CALLS):
            call()
        t1 = time.perf_counter()
        _sync()
        t2 = time.perf_counter()
        loop.append(1e6 * (t1 - t0) / HOST_CALLS)
        wall.append(1e6 * (t2 - t0) / HOST_CALLS)
    return {"loop_us": statistics.median(loop), "wall_us": statistics.median(wall), "wall_trials_us": wall}


# --- the study ------------------------------------------------------------------------------------------------

def _rows_checked(m: int):
    return slice(None) if m <= CHECK_ROWS_MAX else st.checked_rows(m)


def _check(method: str, m: int, got: dict, ref: dict, rows, dtype: str) -> dict:
    import cupy as cp

    errors = compare(got, ref, rows, dtype, cp)
    bad = failures(errors, dtype)
    if bad:
        raise LabError(f"{method} at M={m} ({dtype}) is off the float64 reference of the layer ({'; '.join(bad)}), "
                       "so nothing more is timed.")
    return {"M": m, "method": method, "errors": errors}


def run(out_dir, *, model: str | Model = "llama3_8b", dtype: str = "float16", steps: int = 240, rounds: int = 3,
        seed: int = 0, progress: Callable[[str], object] = print) -> Path:
    """Check, then time lab.ops against PyTorch on a serving trace of `steps` steps (one layer per step), eager and
    graphed, `rounds` rounds; write ops_vs_torch_<model>_<dtype>.json under out_dir and return its path."""
    model = resolve(model, dtype, steps, rounds, seed)
    why = torch_unavailable()
    if why:
        raise LabError(why)
    import cupy as cp
    import torch

    from lab.core import device
    from lab.measure.records import provenance
    from lab.measure.timing import L2Flusher, spinner
    from lab.ops import api, counters
    from lab.ops.dispatch import Runtime
    from lab.ops.graphs import capture

    clock = time.perf_counter()
    seconds: dict = {}

    def phase(name: str, since: float) -> float:
        now = time.perf_counter()
        seconds[name] = round(now - since, 2)
        progress(f"  {name.replace('_', ' ')}: {seconds[name]} s")
        return now

    _check_streams()
    trace = make_trace(seed, steps)
    counts = m_counts(trace)
    ms = list(counts)
    gpu = device.current()
    sets = weight_sets(gpu.l2_bytes, model)
    max_m = max(max(ms), *(m for _, m in HOST_OPS))
    progress(f"{model.name} {dtype}: {len(trace)} steps, {len(ms)} distinct M up to {max(ms)}; weights in {sets} "
             f"copies for ops timed alone")
    layer = Layer(model, dtype, max_m, sets)
    tl = TorchLayer(layer)
    rt = api.default_runtime()
    ops_rt = Runtime(rt.table, rt.store)  # ops timed alone: their many recordings kept apart from the layer's
    null = cp.cuda.Stream.null
    t = phase("setup", clock)

    # 1. correctness: eager, both libraries (both residual forms), against float64
    checks, refs = [], {}
    for m in check_ms(ms):
        progress(f"checking M={m} against float64: lab.ops, PyTorch (both residual forms)")
        rows = _rows_checked(m)
        refs[m] = (rows, layer_reference(layer.float64_inputs(m, rows), layer.weight64,
                                         None if layer.bias32 is None else layer.bias32.astype(cp.float64), model, cp))
        layer.poison(m)
        lab_step(layer, m, rt)()
        _sync()
        checks.append(_check("lab_eager", m, layer.views(m), refs[m][1], rows, dtype))
        for form in RESIDUAL_FORMS:
            outs = torch_step(tl, m, form)()
            _sync()
            got = {k: _cupy_of(v) for k, v in outs.items()}
            checks.append(_check(f"torch_eager ({form})", m, got, refs[m][1], rows, dtype))
    t = phase("check_eager", t)

    # 2. each op kind alone at every M, in CUDA graphs; PyTorch's residual form chosen from these
    graph_stream = cp.cuda.Stream(non_blocking=True)
    side = torch.cuda.Stream()
    spin = spinner()
    per_op = []
    for kind in KINDS:
        op = kind_op(model, kind)
        progress(f"timing {kind} alone at {len(ms)} M (lab.ops and PyTorch, one CUDA graph each)")
        n_sets = 1 if op.kind == "rmsnorm" else sets
        for m in ms:
            lab_calls = [lab_call(layer, op, m, s, ops_rt) for s in range(n_sets)]
            for call in lab_calls:
                call()
            n = _repeats(_probe_ms(lab_calls[0], graph_stream, spin))
            row = {"kind": kind, "M": m, "steps": counts[m], "repeats": n,
                   "lab_path": "kernel" if op.kind == "rmsnorm" else ops_rt.last_decision.path}
            row["lab_us"] = _or_none(row, "lab_error", _graph_us_lab, lab_calls, n, graph_stream, spin)
            forms = RESIDUAL_FORMS if op.residual else (None,)
            for form in forms:
                calls = [torch_call(tl, op, m, s, form or "addmm") for s in range(n_sets)]
                key = f"torch_{form}_us" if form else "torch_us"
                row[key] = _or_none(row, key.replace("_us", "_error"), _graph_us_torch, calls, n, side, spin)
            if any(k.endswith("_error") for k in row):
                progress(f"  {kind} at M={m} could not be timed in a graph on one side: "
                         + "; ".join(str(v) for k, v in row.items() if k.endswith("_error")))
            per_op.append(row)
    try:
        form = choose_residual_form(per_op, counts)
    except LabError:  # neither form could be timed alone: the layer uses the fused one
        form = "addmm"
    for row in per_op:
        if f"torch_{form}_us" in row:
            row["torch_us"] = row[f"torch_{form}_us"]
            if row.get(f"torch_{form}_error"):
                row["torch_error"] = row[f"torch_{form}_error"]
    progress(f"PyTorch's residual form for the layer: {form}")
    t = phase("ops_alone", t)

    # 3. the layer as CUDA graphs, one per M, checked
    progress(f"capturing the layer at {len(ms)} M: lab.ops.capture and torch.cuda.graph")
    lab_steps = {m: lab_step(layer, m, rt) for m in ms}
    torch_steps = {m: torch_step(tl, m, form) for m in ms}
    unavailable = {}  # method -> why it could not run (its graphs could not be captured): the others still run
    lab_graphs, torch_graphs = {}, {}
    try:
        lab_graphs = {m: capture(lab_steps[m], warmup=2, stream=graph_stream) for m in ms}
    except LabError as exc:
        unavailable["lab_graph"] = str(exc)
    try:
        torch_graphs = {m: _torch_graph(torch_steps[m], side) for m in ms}
    except LabError as exc:
        unavailable["torch_graph"] = str(exc)
    for meth, why in unavailable.items():
        progress(f"  {meth} left out: {why}")
    for m, (rows, ref) in refs.items():
        if lab_graphs:
            layer.poison(m)
            lab_graphs[m].launch()
            lab_graphs[m].synchronize()
            checks.append(_check("lab_graph", m, layer.views(m), ref, rows, dtype))
        if torch_graphs:
            graph, outs = torch_graphs[m]
            for v in outs.values():
                v.fill_(float("nan"))
            graph.replay()
            _sync()
            checks.append(_check("torch_graph", m, {k: _cupy_of(v) for k, v in outs.items()}, ref, rows, dtype))
    refs.clear()
    t = phase("capture_and_check_graphs", t)

    # 4. the trace, rounds x methods in rotated orders
    runners = {"lab_eager": (lambda m: lab_steps[m](), null),
               "torch_eager": (lambda m: torch_steps[m](), null),
               "lab_graph": (lambda m: lab_graphs[m].launch(), graph_stream),
               "torch_graph": (lambda m: torch_graphs[m][0].replay(), null)}
    methods = [meth for meth in METHODS if meth not in unavailable]
    for meth in methods:  # every method once at every M, untimed (PyTorch's allocator refills its cache)
        for m in ms:
            runners[meth][0](m)
        _sync()
    flusher = L2Flusher()
    step_spin = spinner(st.SPIN_NS)
    rounds_out, per_step = [], {meth: {} for meth in methods}
    for r in range(rounds):
        order = rotated(methods, r)
        totals, by_kind = {}, {}
        for meth in order:
            fn, stream = runners[meth]
            times = _time_steps(fn, trace, stream, flusher, step_spin)
            _sync()
            totals[meth] = sum(times)
            by_kind[meth] = {k: sum(x for x, s in zip(times, trace, strict=True) if s.kind == k)
                             for k in ("decode", "prefill")}
            for x, s in zip(times, trace, strict=True):
                per_step[meth].setdefault(s.M, []).append(x)
        rounds_out.append({"order": order, "totals_ms": totals, "by_step_kind_ms": by_kind})
        progress(f"round {r + 1}/{rounds}: " + ", ".join(f"{m} {totals[m]:.2f} ms" for m in methods))
    summary = summarize_rounds([r["totals_ms"] for r in rounds_out])
    per_m = [{"M": m, "steps": counts[m], **{meth: 1e3 * statistics.median(per_step[meth][m]) for meth in methods}}
             for m in ms]
    t = phase("trace_rounds", t)

    # 5. host cost of single ops, beside their GPU time
    host = []
    for kind, m in HOST_OPS:
        op = kind_op(model, kind)
        progress(f"host cost: {kind} at M={m}, {HOST_CALLS} calls back to back")
        lab_one, torch_one = lab_call(layer, op, m, 0, rt), torch_call(tl, op, m, 0, form)
        row = {"op": f"{kind} M={m}", "kind": kind, "M": m}
        for lib, call in (("lab", lab_one), ("torch", torch_one)):
            row[lib] = _host_cost(call)
        n = _repeats(_probe_ms(lab_one, graph_stream, spin))  # the same op's GPU time, in a graph as in step 2
        row["lab"]["gpu_us"] = _or_none(row["lab"], "error", _graph_us_lab, [lab_one], n, graph_stream, spin)
        row["torch"]["gpu_us"] = _or_none(row["torch"], "error", _graph_us_torch, [torch_one], n, side, spin)
        for lib in ("lab", "torch"):
            r = row[lib]
            r["wall_over_gpu"] = None if r["gpu_us"] is None else r["wall_us"] / r["gpu_us"]
            r["bottleneck"] = bottleneck(r["wall_us"], r["gpu_us"])
        host.append(row)
    phase("host_cost", t)
    seconds["total"] = round(time.perf_counter() - clock, 2)

    stats = counters.stats()
    payload = {
        "schema": 1, "study": "ops_vs_torch",
        "provenance": provenance() | {"torch": torch.__version__, "torch_cuda": torch.version.cuda},
        "model": asdict(model) | {"qkv": model.qkv, "attn": model.attn, "gemms": [list(g) for g in model.gemms()]},
        "dtype": dtype,
        "trace": {"seed": seed, "prefill_share": PREFILL_SHARE, "skew": SKEW, **st.summarize(trace)},
        "step_counts": [{"M": m, "steps": n} for m, n in counts.items()],
        "methods": {"lab_eager": "lab.ops calls (rmsnorm; matmul with bias, silu and residual as lab.ops serves "
                                 "them), outputs preallocated per M and passed with out=",
                    "torch_eager": f"F.rms_norm, F.linear (bias in the weights' type), F.silu(F.linear), residual as "
                                   f"{_FORMS[form]}; outputs from PyTorch's caching allocator",
                    "lab_graph": "one lab.ops.capture (lab.ops.graphs) per distinct M, replayed",
                    "torch_graph": "one torch.cuda.CUDAGraph per distinct M (warmed up on a side stream), replayed"},
        "timing": {"per_step": "CUDA events around one layer; spin kernel in front; L2 flushed before each step",
                   "spin_ns": st.SPIN_NS, "rounds": rounds, "order": "rotated by one method per round",
                   "ops_alone": f"one CUDA graph of back-to-back repeats (about {PER_OP_GRAPH_MS} ms), median of "
                                f"{PER_OP_REPLAYS} replays, weights rotating over {sets} copies"},
        "torch_residual_form": form, "torch_residual_forms": dict(_FORMS),
        "torch_settings": {
            "allow_fp16_reduced_precision_reduction":
                bool(torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction),
            "allow_bf16_reduced_precision_reduction":
                bool(torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction)},
        "weight_sets": sets, "eps": EPS, "methods_timed": methods, "unavailable": unavailable,
        "tolerance": TOLERANCE[dtype], "checks": checks,
        "rounds": rounds_out, "summary": summary, "per_M_us": per_m,
        "per_kind": per_kind_totals(per_op, counts), "per_op_us": per_op,
        "host_cost": host, "host_calls": HOST_CALLS, "host_trials": HOST_TRIALS,
        "lab_ops": {"table": rt.table.source,
                    "tuned_buckets": len(rt.store.entries(rt.env)) if rt.store is not None else 0,
                    "paths": stats["paths"], "fallbacks": stats["fallbacks"], "compiles": stats["compiles"]},
        "seconds": seconds,
    }
    path = Path(out_dir) / f"ops_vs_torch_{model.name}_{dtype}.json"
    write_json(path, payload)
    return path



def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.studies.ops_compare",
                                     description="lab.ops against PyTorch on a serving trace, eager and graphed.")
    parser.add_argument("out_dir", help="where the record (ops_vs_torch_<model>_<dtype>.json) is written")
    parser.add_argument("--model", choices=sorted(MODELS), default="llama3_8b")
    parser.add_argument("--dtype", choices=DTYPES, default="float16")
    parser.add_argument("--steps", type=int, default=240, help="steps of the serving trace (one layer each)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds of the four methods")
    parser.add_argument("--seed", type=int, default=0, help="the trace's seed")
    args = parser.parse_args(argv)
    try:
        resolve(args.model, args.dtype, args.steps, args.rounds, args.seed)
    except LabError as exc:
        print(exc, file=sys.stderr)
        return 2
    why = torch_unavailable()
    if why:
        print(why)
        return 3
    try:
        path = run(args.out_dir, model=args.model, dtype=args.dtype, steps=args.steps, rounds=args.rounds,
                   seed=args.seed, progress=lambda line: print(line, flush=True))
    except LabError as exc:
        print(exc, file=sys.stderr)
        return 1
    print(format_table(json.loads(path.read_text())))
    print(f"record: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
