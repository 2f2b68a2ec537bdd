"""A serving workload's shapes, and lab.ops measured on them (the trace benchmark of notebook 08).

The model is Llama-like (the shapes of a Llama-3-8B layer: hidden 4096, intermediate 14336, head dim 128 with 32
query and 8 key/value heads, so the fused QKV projection is 6144 wide). One layer's operators, for M tokens:

    rmsnorm(h)                                       M x 4096
    qkv  = x @ Wqkv.T                                M x 6144 x 4096
    h    = attn @ Wo.T + h         (residual fused)  M x 4096 x 4096
    rmsnorm(h)
    gate = silu(x @ Wg.T)          (silu fused)      M x 14336 x 4096
    up   = x @ Wu.T                                  M x 14336 x 4096
    h    = act @ Wd.T + h          (residual fused)  M x 4096 x 14336

(attention itself and silu(gate) * up are the same work on every path and stay out of the trace.)

A trace is a list of steps: decode steps, whose M (the batch) is drawn from a skewed distribution over 1..256,
and prefill steps, whose M is a sequence bucket 128..8192. Every layer of a step has the same shapes, so one
layer per step is timed and the totals are per layer.

Methods compared on the same steps, each timed as GPU time (CUDA events, a spin kernel long enough to queue the
whole step ahead of its start event, L2 flushed before each repetition; lab.measure.timing):
    lab_ops       lab.ops (its table, and its tune cache when one is given)
    cublas        cuBLAS for every GEMM, the epilogue as one CuPy elementwise kernel, CuPy's rmsnorm
    generic       one generic kernel for every GEMM: gemm_tc rung 03, epilogue after (lab.ops's generic path)
    persistent    one tuned kernel for every GEMM: gemm_tc rung 06 with the epilogue fused, where it serves
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass

import numpy as np

HIDDEN, INTERMEDIATE, HEAD_DIM, Q_HEADS, KV_HEADS = 4096, 14336, 128, 32, 8
QKV = HEAD_DIM * (Q_HEADS + 2 * KV_HEADS)
DECODE_MAX_BATCH = 256
PREFILL_BUCKETS = (128, 256, 512, 1024, 2048, 4096, 8192)


def gemms(hidden: int = HIDDEN, intermediate: int = INTERMEDIATE, qkv: int = QKV, attn: int | None = None,
          qkv_bias: bool = False) -> tuple:
    """A layer's GEMMs as (name, N, K, epilogue), activations M x K times the weight (N x K, layout TN), for a
    model's widths (the defaults: the layer above). `attn` is the attention output's width, o_proj's K (hidden when
    None); `qkv_bias` gives the fused QKV projection a bias (Qwen2-style layers)."""
    attn = hidden if attn is None else attn
    return (("qkv", qkv, hidden, "bias" if qkv_bias else "none"), ("o_proj", hidden, attn, "residual"),
            ("gate", intermediate, hidden, "silu"), ("up", intermediate, hidden, "none"),
            ("down", hidden, intermediate, "residual"))


GEMMS = gemms()


def head_gemm(vocab: int) -> tuple:
    """The output head: the last norm's output times the embedding matrix (vocab x hidden), the logits of each row.
    A step scores one row per sequence: every row of a decode step, the last token of a prefill."""
    return ("head", vocab, HIDDEN, "none")


def head_rows(kind: str, m: int) -> int:
    return m if kind == "decode" else 1
METHODS = ("lab_ops", "cublas", "generic", "persistent")
SPIN_NS = 2_000_000  # longer than the host needs to queue a whole step (seven calls) through any method


@dataclass(frozen=True)
class Step:
    kind: str  # "decode" or "prefill"
    M: int


def make_trace(seed: int = 0, steps: int = 1000, prefill_share: float = 0.05, skew: float = 1.2,
               hidden: int = HIDDEN) -> list[Step]:
    """A serving trace: decode steps with batch M ~ a Zipf-like law over 1..256 (P(M) ~ M^-skew: most steps run
    small batches), and a `prefill_share` of prefill steps whose M is a sequence bucket, shorter ones likelier."""
    rng = np.random.default_rng(seed)
    batch = np.arange(1, DECODE_MAX_BATCH + 1)
    p_batch = batch ** -float(skew)
    p_batch /= p_batch.sum()
    buckets = np.array(PREFILL_BUCKETS)
    p_bucket = 1.0 / np.arange(1, len(buckets) + 1)
    p_bucket /= p_bucket.sum()
    out = []
    for _ in range(steps):
        if rng.random() < prefill_share:
            out.append(Step("prefill", int(rng.choice(buckets, p=p_bucket))))
        else:
            out.append(Step("decode", int(rng.choice(batch, p=p_batch))))
    return out


def summarize(trace: list[Step]) -> dict:
    """Counts per distinct step, the share of decode steps, and the M distribution's quantiles."""
    counts = Counter(trace)
    decode = [s.M for s in trace if s.kind == "decode"]
    return {"steps": len(trace), "distinct": len(counts), "decode_share": len(decode) / max(1, len(trace)),
            "decode_M_quantiles": {q: int(np.quantile(decode, q / 100)) for q in (50, 90, 99)} if decode else {},
            "prefill_buckets": dict(sorted(Counter(s.M for s in trace if s.kind == "prefill").items()))}


# --- the model's arrays -------------------------------------------------------------------------------------

class Layer:
    """One layer's weights (fp16, random, never zero) and activation buffers sized for the largest step."""

    def __init__(self, max_m: int, seed: int = 7, vocab: int | None = None):
        """`vocab`: the model's output head too (head_gemm), run once per step after the layer."""
        import cupy as cp

        from lab.measure.check import random_array

        def draw(shape, s, scale=1.0):
            return (random_array(shape, np.float32, seed + s, "normal", xp=cp) * np.float32(scale)).astype(cp.float16)

        self.gemms = GEMMS + ((head_gemm(vocab),) if vocab else ())
        self.w = {name: draw((n, k), i, k ** -0.5) for i, (name, n, k, _) in enumerate(self.gemms)}
        self.norm_w = draw((HIDDEN,), 11)
        self.x = draw((max_m, HIDDEN), 12)
        self.act = draw((max_m, INTERMEDIATE), 13)
        self.h = draw((max_m, HIDDEN), 14)
        self.out = {name: cp.empty((max_m, n), cp.float16) for name, n, _, _ in self.gemms}
        self.normed = cp.empty((max_m, HIDDEN), cp.float16)

    def operands(self, name: str, m: int):
        """(a, w, out, residual) of one GEMM at M = m: views of the buffers (the same addresses every step)."""
        a = self.act[:m] if name == "down" else self.x[:m]
        residual = self.h[:m] if dict((g[0], g[3]) for g in self.gemms)[name] == "residual" else None
        return a, self.w[name], self.out[name][:m], residual


def _cupy_rmsnorm(x, w, out, eps=1e-5):
    import cupy as cp

    y = x.astype(cp.float32)
    out[...] = (y * cp.reciprocal(cp.sqrt((y * y).mean(axis=1, keepdims=True) + eps)) * w).astype(out.dtype)


def runner(method: str, layer: Layer, runtime=None, norms: bool = True):
    """A function step(M) that issues one layer's operators at M tokens through `method` (nothing synchronizes);
    `norms=False` leaves the two RMSNorms out (the GEMMs and their epilogues alone)."""
    from lab.ops import api
    from lab.ops.dispatch import Runtime
    from lab.ops.rules import parse

    if method == "lab_ops":
        rt = runtime or api.default_runtime()
    elif method == "cublas":
        rt = Runtime(parse({"rules": [{"when": {}, "path": "cublas"}]}, "cuBLAS everywhere"))
    elif method == "generic":
        rt = Runtime(parse({"rules": [{"when": {}, "path": "generic"}]}, "rung 03 everywhere"))
    elif method == "persistent":
        rt = Runtime(parse({"rules": [{"when": {}, "path": "persistent", "config": {"BN": 256, "GROUP_M": 8}}]},
                           "rung 06 everywhere"))
    else:
        raise ValueError(f"unknown method {method!r}; the methods are {', '.join(METHODS)}")
    activation = {g[0]: ("silu" if g[3] == "silu" else None) for g in layer.gemms}

    def step(m: int, kind: str = "decode") -> None:
        for i, (name, _, _, _) in enumerate(layer.gemms):
            if norms and i in (0, 2):  # the norm before the attention block and before the MLP
                if method == "cublas":
                    _cupy_rmsnorm(layer.h[:m], layer.norm_w, layer.normed[:m])
                else:
                    api.rmsnorm(layer.h[:m], layer.norm_w, out=layer.normed[:m])
            rows = head_rows(kind, m) if name == "head" else m
            a, w, out, residual = layer.operands(name, rows)
            api.matmul(a, w, layout="TN", activation=activation[name], residual=residual, out=out, runtime=rt)

    step.runtime = rt
    return step


def time_steps(steps: list[Step], methods=METHODS, layer: Layer | None = None, runtime=None,
               min_time_ms: float = 10.0, norms: bool = True) -> dict:
    """Median GPU time (us) of one layer per distinct step and method: {method: {(kind, M): us}}."""
    from lab.measure.timing import measure

    distinct = sorted(set(steps), key=lambda s: (s.kind, s.M))
    layer = layer or Layer(max(s.M for s in distinct))
    out = {}
    for method in methods:
        run = runner(method, layer, runtime, norms)
        times = {}
        for s in distinct:
            run(s.M, s.kind)  # compile, decide and record outside the timing
            t = measure(lambda _i, m=s.M, kind=s.kind, go=run: go(m, kind), l2="cold", min_time_ms=min_time_ms,
                        spin_ns=SPIN_NS)
            times[(s.kind, s.M)] = 1e3 * t.median_ms
        out[method] = times
    return out


def totals(trace: list[Step], times: dict) -> dict:
    """Each method's total over the trace (us, one layer per step), and per step kind."""
    counts = Counter((s.kind, s.M) for s in trace)
    result = {}
    for method, per in times.items():
        by_kind = Counter()
        for key, n in counts.items():
            by_kind[key[0]] += n * per[key]
        result[method] = {"total_us": sum(by_kind.values()), **{f"{k}_us": v for k, v in by_kind.items()}}
    return result


def gemm_shapes(steps: list[Step], vocab: int | None = None) -> list[tuple[int, tuple]]:
    """Every distinct (M, GEMM) the steps run: the layer's GEMMs at each step's M, and with `vocab` the head at
    head_rows of each step."""
    found = {(s.M, g) for s in steps for g in GEMMS}
    if vocab:
        found |= {(head_rows(s.kind, s.M), head_gemm(vocab)) for s in steps}
    order = {g[0]: i for i, g in enumerate(GEMMS + ((head_gemm(vocab),) if vocab else ()))}
    return sorted(found, key=lambda mg: (mg[0], order[mg[1][0]]))


def check_every_shape(steps: list[Step], runtime=None, layer: Layer | None = None,
                      vocab: int | None = None) -> list[dict]:
    """lab.ops's output for every distinct GEMM of the trace against float64 (on the GPU, lab.ops.tune's bound).
    Returns one row per shape: its M, N, K, epilogue, path and the number of elements outside the bound."""
    import cupy as cp

    from lab.core import device
    from lab.families.gemm_tc import to_float32
    from lab.ops import api
    from lab.ops.shapes import GemmShape
    from lab.ops.tune import make_inputs, reference_and_bound

    rt = runtime or api.default_runtime()
    sms = device.current().sm_count
    rows = []
    for m, (name, n, k, epi) in gemm_shapes(steps, vocab):
        shape = GemmShape(m, n, k, "float16", "TN", True, epi, sms)
        a, w, bias, activation, residual = make_inputs(shape, seed=m * 31 + n)
        out = cp.full((m, n), np.nan, dtype=cp.float16)
        api.matmul(a, w, layout="TN", activation=activation, residual=residual, out=out, runtime=rt)
        decision = rt.last_decision
        rows_checked = checked_rows(m)
        sub = dataclasses.replace(shape, M=len(rows_checked))
        fused = decision is not None and rt.last_exact
        ref, bound = reference_and_bound(sub, a[rows_checked], w, bias, activation,
                                         None if residual is None else residual[rows_checked],
                                         rounded_product=not fused)
        got = to_float32(out[rows_checked], "float16", cp).astype(cp.float64)
        bad = int((~(cp.abs(got - ref) <= bound)).sum()) + int(cp.isnan(out).sum())
        rows.append({"M": m, "N": n, "K": k, "gemm": name, "epilogue": epi, "bad": bad,
                     "path": decision.path if decision else "?"})
    return rows


FULL_CHECK_MAX_M = 512


def checked_rows(m: int):
    """Every row up to FULL_CHECK_MAX_M; past it the first and last 128 rows (the tiles' edges and the tail) and
    128 drawn from between them: the float64 reference of a whole 8192 x 14336 output costs more than it tells.
    The whole output is still scanned for NaN (it was poisoned before the call)."""
    import cupy as cp

    if m <= FULL_CHECK_MAX_M:
        return cp.arange(m)
    middle = np.random.default_rng(m).choice(np.arange(128, m - 128), 128, replace=False)
    return cp.asarray(np.concatenate([np.arange(128), np.sort(middle), np.arange(m - 128, m)]))


def decisions_table(runtime, steps: list[Step]) -> list[dict]:
    """The path lab.ops takes for each distinct GEMM of the trace, with where the decision came from."""
    from lab.core import device
    from lab.ops.shapes import GemmShape, bucket, family

    sms = device.current().sm_count
    rows = []
    for m in sorted({s.M for s in steps}):
        for name, n, k, epi in GEMMS:
            shape = GemmShape(m, n, k, "float16", "TN", True, epi, sms)
            d = runtime.decide(shape)
            rows.append({"M": m, "gemm": name, "family": family(shape), "bucket": bucket(shape), "path": d.path,
                         "config": d.settings, "source": d.source})
    return rows


def forced_runtime(path: str, config: dict | None = None):
    """A runtime whose one rule sends every shape to `path` (cuBLAS where the path cannot serve it): a hot shape's
    specialization forced onto every other shape."""
    from lab.ops.dispatch import Runtime
    from lab.ops.rules import parse

    rule = {"when": {}, "path": path} | ({"config": config} if config else {})
    return Runtime(parse({"rules": [rule]}, f"{path} everywhere"))


def with_m(step: Step, m: int) -> Step:
    return dataclasses.replace(step, M=m)
