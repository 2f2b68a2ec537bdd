"""The optimization checklist, measured on one operation: Y = GELU_tanh(A @ W.T + bias).

A (M x K) fp16, W (N x K) fp16 (a linear layer's weight), bias (N,) float32, Y (M x N) fp16. Four levels, in the
order one should reach for them:

    library       cupy.matmul, then + bias and the GELU as separate CuPy expressions (what a user writes first)
    graph_fusion  the best library GEMM into Y, then one ElementwiseKernel doing bias + GELU in place (fp32 inside)
    triton        one Triton kernel: the GEMM with the epilogue applied to its fp32 accumulator
    (lab/tools/triton_gemm.py)
    lab_fused     the lab's own CUDA epilogue: lab.families.gemm_epilogue.fused_matmul (kernels/common/lab_epilogue.cuh)

The plain GEMM (the best library call here into Y: cuBLASLt where nvmath-python is installed, lab.tools.library_gemm)
is timed in the same run, and every level is reported as a multiple of it.

Per level and size: a correctness check first (a float64 reference, element by element: on CHECK_SHAPE over the whole
output, then at the timed size on a sample of rows), and only a level that passed is timed (cold-L2 median and
p10/p90, lab.measure.timing). Then the kernels one call launches (counted from a CUDA graph captured around one call;
CuPy refuses to capture its own cuBLAS calls, so the library level's count comes from Nsight Compute), the DRAM bytes
one call moves (Nsight Compute, summed over that call's kernels, in a child process that marks the call with an NVTX
range), the minimum DRAM bytes of the operation, and the lines of code of the level's implementation, counted from its
source. A level whose tools are missing here is recorded as "not available here: <why>", never faked.
`verdicts(record)` turns a record into sentences about when each step paid off; no number in them is typed.

`run` (`lab study checklist --out DIR`) measures it and writes DIR/checklist.json; `python -m lab.studies.checklist
ncu-target JSON` is the program Nsight Compute profiles.
"""

from __future__ import annotations

import ast
import functools
import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from lab.core.build import REPO_ROOT
from lab.core.errors import LabError
from lab.measure.records import format_bytes, write_json
from lab.studies import profile
from lab.tools import ncu as nsight_compute
from lab.tools.triton_gemm import GELU_CUBIC, GELU_SCALE

SCHEMA = 1
OPERATION = "Y = GELU_tanh(A @ W.T + bias); A (M x K) fp16, W (N x K) fp16, bias (N,) float32, Y (M x N) fp16"
DEFAULT_SIZES = (4096, 8192)  # M = N = K
CHECK_SHAPE = {"M": 256, "N": 384, "K": 512}  # checked over its whole output before any timing
CHECK_ROWS = 32  # rows of Y checked against float64 at each timed size
NVTX_RANGE = "lab_checklist_call"  # the one call ncu profiles
_DRAM_METRICS = {"dram_read_bytes": "dram__bytes_read.sum", "dram_write_bytes": "dram__bytes_write.sum"}
NCU_METRICS = tuple(_DRAM_METRICS.values())
NCU_WARMUP = 3  # calls before the profiled one: compilation, autotuning and the memory pool stay outside it
STUDY_FILE = "checklist.json"


# --- the levels ----------------------------------------------------------------------------------------------

def _array_module(x):
    if isinstance(x, np.ndarray):
        return np
    import cupy

    return cupy


def product(A, W, Y) -> None:
    """Y = A @ W.T through the best library call here (lab.tools.library_gemm: cuBLASLt where nvmath-python is
    installed). Not cupy.matmul: CuPy refuses to call cuBLAS inside a CUDA-graph capture, and the levels' kernels
    are counted from one."""
    if isinstance(A, np.ndarray):
        np.matmul(A, W.T, out=Y)
        return
    _library_call(A.shape[0], W.shape[0], A.shape[1], A.data.ptr, W.data.ptr, Y.data.ptr)()


@functools.lru_cache(maxsize=64)
def _library_call(M: int, N: int, K: int, a_ptr: int, w_ptr: int, y_ptr: int):
    from lab.tools import library_gemm

    call, _ = library_gemm.library_call(M, N, K, "float16", "TN", a_ptr, K, w_ptr, K, y_ptr, N)
    return call


def gemm(A, W, Y) -> None:
    """The reference: the GEMM alone, into Y."""
    product(A, W, Y)


def library(A, W, bias, Y) -> None:
    """As a user first composes it from library calls: each expression is its own kernel and intermediate (the
    product in fp16, then float32 arrays of M x N from the bias on)."""
    xp = _array_module(A)
    z = xp.matmul(A, W.T) + bias
    Y[...] = 0.5 * z * (1.0 + xp.tanh(GELU_SCALE * (z + GELU_CUBIC * z ** 3)))


def graph_fusion(A, W, bias, Y) -> None:
    """The library writes the product into Y; one elementwise kernel then applies bias + GELU in place."""
    product(A, W, Y)
    _bias_gelu_kernel()(bias, Y)


@functools.cache
def _bias_gelu_kernel():
    import cupy

    return cupy.ElementwiseKernel(
        "float32 b", "float16 y",
        f"""
        const float x = (float)y + b;
        const float u = {GELU_SCALE!r}f * (x + {GELU_CUBIC!r}f * x * x * x);
        y = (float16)(0.5f * x * (1.0f + tanhf(u)));
        """,
        "lab_checklist_bias_gelu_tanh")


def triton_fused(A, W, bias, Y) -> None:
    from lab.tools import triton_gemm

    triton_gemm.gemm_bias_gelu(A, W, bias, Y)


def lab_fused(A, W, bias, Y) -> None:
    from lab.families.gemm_epilogue import fused_matmul

    fused_matmul(A, W, bias=bias, activation="gelu_tanh", out=Y)


def _triton_unavailable() -> str | None:
    from lab.tools import triton_gemm

    return triton_gemm.unavailable()


def _triton_details() -> dict:
    from lab.tools import triton_gemm

    return {"autotune_winner": triton_gemm.best_config()}


def _lab_fused_unavailable() -> str | None:
    import importlib

    try:
        epilogue = importlib.import_module("lab.families.gemm_epilogue")
    except ImportError as exc:
        return f"lab.families.gemm_epilogue cannot be imported ({exc})"
    return None if hasattr(epilogue, "fused_matmul") else "lab.families.gemm_epilogue has no fused_matmul"


@dataclass(frozen=True)
class Source:
    """A piece of a level's implementation: a file (relative to the repository), or one named definition in it."""
    path: str
    name: str | None = None


@dataclass(frozen=True)
class Level:
    name: str
    title: str
    run: Callable  # run(A, W, bias, Y)
    sources: tuple[Source, ...]
    unavailable: Callable[[], str | None] = lambda: None  # why it cannot run here, or None
    details: Callable[[], dict] = dict  # what to record about a run (the autotuner's choice)

    def source_lines(self, root: Path = REPO_ROOT) -> dict:
        return count_source_lines(self.sources, root)


LEVELS = (
    Level("library", "cupy.matmul, then + bias and GELU as CuPy expressions", library,
          (Source("lab/studies/checklist.py", "library"),)),
    Level("graph_fusion", "the library GEMM into Y, then one ElementwiseKernel: bias + GELU in place", graph_fusion,
          (Source("lab/studies/checklist.py", "graph_fusion"),
           Source("lab/studies/checklist.py", "_bias_gelu_kernel"))),
    Level("triton", "one Triton kernel: tiled GEMM, bias + GELU on the fp32 accumulator", triton_fused,
          (Source("lab/tools/triton_gemm.py", "gemm_bias_gelu_kernel"),
           Source("lab/tools/triton_gemm.py", "autotune_configs"),
           Source("lab/tools/triton_gemm.py", "gemm_bias_gelu_autotuned"),
           Source("lab/tools/triton_gemm.py", "gemm_bias_gelu")),
          unavailable=_triton_unavailable, details=_triton_details),
    Level("lab_fused", "lab.families.gemm_epilogue.fused_matmul: the lab's fused CUDA epilogue", lab_fused,
          # The whole kernel the lab maintains for it, as the Triton level counts its whole GEMM: rung 06, the Hopper
          # helpers it includes, the epilogue chain, and the Python launcher.
          (Source("kernels/gemm_tc/06_persistent.cu"), Source("kernels/common/lab_hopper_gemm.cuh"),
           Source("kernels/common/lab_hopper.cuh"), Source("kernels/common/lab_epilogue.cuh"),
           Source("lab/families/gemm_epilogue.py", "fused_matmul")),
          unavailable=_lab_fused_unavailable),
)


def get_level(name: str) -> Level:
    for level in LEVELS:
        if level.name == name:
            return level
    raise KeyError(f"no level {name!r}; the levels are {', '.join(lv.name for lv in LEVELS)}")


# --- lines of code -------------------------------------------------------------------------------------------

def count_source_lines(sources: tuple[Source, ...], root: Path = REPO_ROOT) -> dict:
    """Non-blank, non-comment lines (docstrings count as comments) of each piece and their total. A missing file or
    definition is listed under "missing" and left out of the total, which is then marked incomplete."""
    pieces, missing = [], []
    for src in sources:
        try:
            pieces.append({"path": src.path, "name": src.name, "lines": _piece_lines(src, root)})
        except (OSError, LookupError, SyntaxError) as exc:
            missing.append({"path": src.path, "name": src.name, "why": str(exc)})
    return {"lines": sum(p["lines"] for p in pieces), "complete": not missing, "pieces": pieces, "missing": missing}


def _piece_lines(src: Source, root: Path) -> int:
    path = root / src.path
    if not path.is_file():
        raise FileNotFoundError(f"{src.path} does not exist (yet)")
    text = path.read_text()
    if path.suffix == ".py":
        return python_code_lines(text, src.name)
    if src.name is not None:
        raise LookupError(f"named pieces are read from Python files only, not {src.path}")
    return c_code_lines(text)


def python_code_lines(text: str, name: str | None = None) -> int:
    """Code lines of a Python module, or of the definition called `name` in it (a function, a class or an
    assignment, at any depth, decorators included): blank lines, comment lines and docstrings are left out."""
    tree = ast.parse(text)
    lines = text.splitlines()
    first, last = 1, len(lines)
    if name is not None:
        node = _definition(tree, name)
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        last = node.end_lineno
    docs = _docstring_lines(tree)
    return sum(1 for n in range(first, last + 1)
               if n not in docs and lines[n - 1].strip() and not lines[n - 1].strip().startswith("#"))


def _definition(tree: ast.AST, name: str) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.name == name:
            return node
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return node
    raise LookupError(f"no definition {name!r}")


def _docstring_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value,
                                                                                                    str):
                lines.update(range(first.lineno, first.end_lineno + 1))
    return lines


def c_code_lines(text: str) -> int:
    """Code lines of C/C++/CUDA source: blank lines, // comment lines and /* */ blocks left out."""
    without_blocks = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group().count("\n"), text, flags=re.DOTALL)
    return sum(1 for line in without_blocks.splitlines() if line.strip() and not line.strip().startswith("//"))


# --- correctness ---------------------------------------------------------------------------------------------

def gelu_tanh(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(GELU_SCALE * (x + GELU_CUBIC * x ** 3)))


@functools.cache
def gelu_lipschitz() -> float:
    """The largest |d/dx GELU_tanh(x)|, found on a fine grid (the derivative peaks near x = 2.4 and tends to 1 at
    +inf, 0 at -inf), plus the grid's own error."""
    x = np.linspace(-12.0, 12.0, 240_001)
    slope = np.abs(np.diff(gelu_tanh(x)) / np.diff(x))
    return float(slope.max() * (1 + 1e-3))


EVAL_ULPS = 16  # fp32 ulps (of |x|) an epilogue may lose evaluating bias + GELU: a handful of roundings, tanhf's


def reference(a: np.ndarray, w: np.ndarray, bias: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Y's float64 reference for the rows in `a` (fp16, rows x K), and each element's error bound.

    The GEMM's bound is lab.measure.bounds.tensor_core_matmul_bound with an fp16 output: it allows fp32 accumulation on
    tensor cores and one rounding of the product to fp16 (the library and graph-fusion levels store it; the fused
    levels do not, and get the slack). That error, plus the fp32 bias add, passes through GELU scaled by at most its
    steepest slope; evaluating GELU in fp32 adds EVAL_ULPS ulps of |x|, and the final rounding to fp16 one unit
    roundoff of the result (plus half fp16's subnormal spacing)."""
    from lab.measure.bounds import half_subnormal_spacing, tensor_core_matmul_bound, unit_roundoff

    a64, w64, b64 = a.astype(np.float64), w.astype(np.float64), bias.astype(np.float64)
    product = a64 @ w64.T
    x = product + b64
    y = gelu_tanh(x)
    u32, u16 = unit_roundoff(np.float32), unit_roundoff(np.float16)
    gemm_error = tensor_core_matmul_bound(a64, w64.T, product, out_dtype=np.float16)
    carried = gelu_lipschitz() * (gemm_error + u32 * np.abs(x)) + EVAL_ULPS * u32 * np.abs(x)
    return y, carried + u16 * (np.abs(y) + carried) + half_subnormal_spacing(np.float16)


def check_output(out: np.ndarray, ref: np.ndarray, bound: np.ndarray) -> dict:
    """Element by element: |out - ref| <= bound everywhere (a NaN, e.g. an element never written, fails)."""
    err = np.abs(out.astype(np.float64) - ref)
    ok = err <= bound
    ratio = np.where(np.isnan(err), np.inf, err / bound)
    worst = np.unravel_index(int(np.argmax(ratio)), ratio.shape)
    return {"passed": bool(ok.all()), "bad_elements": int((~ok).sum()), "checked_elements": int(ok.size),
            "worst_error_over_bound": float(ratio[worst]), "worst_at": [int(i) for i in worst],
            "worst_value": float(out[worst]), "worst_reference": float(ref[worst])}


def sample_rows(M: int, count: int = CHECK_ROWS, seed: int = 0) -> np.ndarray:
    """`count` distinct rows of M, always with the first and the last (the edges of the tile grid)."""
    if M <= count:
        return np.arange(M)
    inner = np.random.default_rng(seed).choice(np.arange(1, M - 1), size=count - 2, replace=False)
    return np.sort(np.concatenate(([0, M - 1], inner)))


def min_dram_bytes(M: int, N: int, K: int) -> int:
    """A and W read once, the bias read once, Y written once: 2MK + 2NK + 4N + 2MN."""
    return 2 * M * K + 2 * N * K + 4 * N + 2 * M * N


# --- the GPU side: inputs, timing, kernel counts, Nsight Compute (a class so CPU tests can stand in for it) ---

class CupyBackend:
    """What measure_levels needs from a GPU. Tests pass a NumPy stand-in with the same methods."""

    def __init__(self, min_time_ms: float = 50.0, ncu: bool = True, replay: str = "kernel"):
        self.min_time_ms = min_time_ms
        self.ncu = ncu
        self.replay = replay
        self._flusher = None

    @property
    def xp(self):
        import cupy

        return cupy

    def provenance(self) -> dict:
        from lab.measure.records import provenance

        return provenance()

    def inputs(self, M: int, N: int, K: int, seed: int = 0):
        return make_inputs(M, N, K, self.xp, seed)

    def empty(self, M: int, N: int):
        return self.xp.empty((M, N), dtype=np.float16)

    def poison(self, Y) -> None:
        Y.fill(np.nan)

    def to_host(self, x) -> np.ndarray:
        return self.xp.asnumpy(x)

    def time(self, launch: Callable[[], None]) -> dict:
        from lab.measure import timing

        if self._flusher is None:
            self._flusher = timing.L2Flusher()
        t = timing.measure(lambda i: launch(), l2="cold", flusher=self._flusher, min_time_ms=self.min_time_ms)
        return t.as_dict()

    def count_kernels(self, launch: Callable[[], None]) -> dict:
        return graph_kernel_count(launch)

    def dram(self, level: str, M: int, N: int, K: int, details: dict) -> dict:
        if not self.ncu:
            return {"error": "not measured: --no-ncu"}
        return ncu_dram(level, M, N, K, details.get("autotune_winner"), replay=self.replay)


def make_inputs(M: int, N: int, K: int, xp, seed: int = 0):
    """A ~ N(0, 1) and W ~ N(0, 1/K) in fp16 (a linear layer's scale, so A @ W.T ~ N(0, 1) and GELU's curved
    middle is exercised, not just its linear tails), bias ~ N(0, 1) in float32; never exact zeros."""
    from lab.measure.check import random_array

    a = random_array((M, K), np.float16, seed, xp=xp)
    w = (random_array((N, K), np.float32, seed + 1, xp=xp) * (K ** -0.5)).astype(np.float16)
    bias = random_array((N,), np.float32, seed + 2, xp=xp)
    return a, w, bias


def graph_kernel_count(launch: Callable[[], None]) -> dict:
    """Kernels one call launches: the call is captured into a CUDA graph (after one uncaptured call on the same
    stream, so the memory pool needs no new allocation inside the capture) and the graph's nodes are counted by
    type from its DOT dump. A capture that fails is reported, not raised."""
    import cupy as cp
    from cupy_backends.cuda.api import runtime

    stream = cp.cuda.Stream(non_blocking=True)
    try:
        with stream:
            launch()
            stream.synchronize()
            stream.begin_capture()
            try:
                launch()
            finally:
                graph = stream.end_capture()
        nodes = parse_graph_dot(graph.debug_dot_str(runtime.cudaGraphDebugDotFlagsVerbose))
    except Exception as exc:  # a call that cannot be captured: the ncu count still stands
        return {"kernels": None, "error": f"{type(exc).__name__}: {exc}"[:300]}
    return {"kernels": nodes.get("KERNEL", 0), "nodes": nodes}


_DOT_NODE = re.compile(r'^"[^"\n]+"\[[^\n]*?label="\{\s*([A-Z_]+)', re.MULTILINE)


def parse_graph_dot(text: str) -> dict[str, int]:
    """Node counts by type ("KERNEL", "MEMSET", "MEMCPY", ...) from cudaGraphDebugDotPrint's verbose DOT, where each
    node statement reads `"graph_1_node_0"[style=... label="{KERNEL | ...`; edge statements are not counted."""
    counts: dict[str, int] = {}
    for kind in _DOT_NODE.findall(text):
        counts[kind] = counts.get(kind, 0) + 1
    return counts


# --- Nsight Compute: DRAM bytes of one call ------------------------------------------------------------------

def ncu_command(ncu: str, job: dict, replay: str = "kernel") -> list[str]:
    """ncu around `python -m lab.studies.checklist ncu-target JOB`: only kernels inside the NVTX push/pop range
    NVTX_RANGE
    (one call of the level, after NCU_WARMUP calls) are profiled. Clocks are left alone (--clock-control none);
    caches are flushed before each profiled kernel ("kernel" replay) or before the whole call ("range" replay:
    the call's kernels replayed together, so an intermediate that stays in L2 between them is not DRAM traffic)."""
    if replay not in ("kernel", "range"):
        raise ValueError(f"replay must be 'kernel' or 'range', not {replay!r}")
    target = [sys.executable, "-m", "lab.studies.checklist", "ncu-target", json.dumps(job)]
    return nsight_compute.command(target, NCU_METRICS, binary=ncu, nvtx_include=f"{NVTX_RANGE}/", replay=replay)


def parse_ncu_results(text: str) -> list[dict]:
    """ncu --csv rows -> one dict per profiled result (a kernel, or the whole range in range replay), in order:
    {"id", "name", "dram_read_bytes", "dram_write_bytes"} in bytes."""
    return [{"id": launch.id, "name": launch.kernel, **dram} for launch in nsight_compute.parse(text)
            if (dram := launch.named(_DRAM_METRICS))]


def summarize_dram(results: list[dict], replay: str) -> dict:
    """The call's DRAM bytes: read + write summed over every profiled result."""
    read = sum(r.get("dram_read_bytes", 0.0) for r in results)
    write = sum(r.get("dram_write_bytes", 0.0) for r in results)
    out = {"read_bytes": read, "write_bytes": write, "bytes": read + write, "replay": replay, "results": results}
    if replay == "kernel":
        out["kernels"] = len(results)
    return out


def ncu_dram(level: str, M: int, N: int, K: int, config: dict | None = None, replay: str = "kernel",
             timeout_s: int = 600) -> dict:
    """DRAM bytes of one call of `level` ("gemm" for the plain GEMM) at M x N x K, read by Nsight Compute in a child
    process; {"error": why} when ncu is absent or read nothing. `config` pins the Triton tiling (the autotuner's
    winner in the timing process) so the child profiles the kernel that was timed."""
    binary = profile.find_ncu()  # lab.tools.ncu's, looked up by the name the CLI calls and tests stand in for
    if binary is None:
        return {"error": f"not measured: {nsight_compute.missing()}"}
    job = {"level": level, "M": M, "N": N, "K": K, "config": config}
    cmd = ncu_command(binary, job, replay)
    try:
        text = nsight_compute.run(cmd, timeout_s)
    except LabError as exc:
        return {"error": str(exc), "command": _shown(cmd)}
    results = parse_ncu_results(text)
    if not results:
        return {"error": f"ncu read nothing; its output ended with: {text.strip()[-600:]}", "command": _shown(cmd)}
    return summarize_dram(results, replay) | {"command": _shown(cmd)}


def _shown(cmd: list[str]) -> str:
    import shlex

    return " ".join(shlex.quote(c) for c in cmd)


def _ncu_target(job: dict) -> None:
    """What ncu profiles: NCU_WARMUP calls, an L2 flush, then one call inside the NVTX range."""
    import cupy as cp
    from cupyx.profiler import time_range

    from lab.measure import timing
    from lab.tools import triton_gemm

    M, N, K = job["M"], job["N"], job["K"]
    A, W, bias = make_inputs(M, N, K, cp)
    Y = cp.empty((M, N), dtype=np.float16)
    if job["level"] == "gemm":
        def call():
            gemm(A, W, Y)
    elif job["level"] == "triton" and job.get("config"):
        def call():
            triton_gemm.gemm_bias_gelu(A, W, bias, Y, config=job["config"])
    else:
        run = get_level(job["level"]).run

        def call():
            run(A, W, bias, Y)
    for _ in range(NCU_WARMUP):
        call()
    timing.L2Flusher().flush()
    cp.cuda.Device().synchronize()
    with time_range(NVTX_RANGE):
        call()
        cp.cuda.Device().synchronize()


# --- the study -----------------------------------------------------------------------------------------------

@dataclass
class _State:
    """A level's standing before the timed sizes: runnable, or why not."""
    status: str  # "ok" | "not available" | "failed"
    reason: str = ""
    check: dict = field(default_factory=dict)


def measure_levels(sizes=DEFAULT_SIZES, levels: tuple[Level, ...] = LEVELS, backend=None,
                   check_shape: dict | None = None, check_rows: int = CHECK_ROWS,
                   progress: Callable[[str], None] | None = None) -> dict:
    """The checklist's record: every level checked, then timed against the plain GEMM at each size (M = N = K =
    size, or a dict with M, N, K), with kernel counts, DRAM bytes and lines of code. `backend` defaults to the GPU
    (CupyBackend()); a level that fails or cannot run here is recorded as such and not timed."""
    backend = backend or CupyBackend()
    say = progress or (lambda _msg: None)
    states = {lv.name: initial_state(lv, backend, check_shape or CHECK_SHAPE) for lv in levels}
    for name, st in states.items():
        say(f"{name}: {st.status}{' - ' + st.reason if st.reason else ''}")
    record = {"schema": SCHEMA, "study": "checklist", "operation": OPERATION, "provenance": backend.provenance(),
              "l2": "cold", "check_shape": dict(check_shape or CHECK_SHAPE), "check_rows": check_rows,
              "ncu": {"metrics": list(NCU_METRICS), "nvtx_range": NVTX_RANGE, "warmup_calls": NCU_WARMUP},
              "levels": [describe_level(lv, states[lv.name]) for lv in levels], "sizes": []}
    for size in sizes:
        shape = size if isinstance(size, dict) else {"M": size, "N": size, "K": size}
        record["sizes"].append(measure_size(shape, levels, states, backend, check_rows, say))
    return record


def describe_level(level: Level, state: _State) -> dict:
    return {"name": level.name, "title": level.title, "status": state.status, "reason": state.reason,
            "check": state.check, "source": level.source_lines()}


def initial_state(level: Level, backend, shape: dict) -> _State:
    """Available here, and correct on `shape` over its whole output? Only then is the level timed."""
    why, error = _attempt(level.unavailable)
    if why or error:
        return _State("not available", f"not available here: {why or error}")
    A, W, bias = backend.inputs(shape["M"], shape["N"], shape["K"], seed=1)
    ref, bound = reference(backend.to_host(A), backend.to_host(W), backend.to_host(bias))
    check = run_check(level.run, A, W, bias, backend, None, ref, bound)
    if not check["passed"]:
        where = f"{shape['M']} x {shape['N']} x {shape['K']}"
        return _State("failed", f"failed its check on {where} ({failure_text(check)})", check)
    return _State("ok", "", check)


def run_check(run: Callable, A, W, bias, backend, rows, ref, bound) -> dict:
    """Poison Y with NaN, run once, compare Y (or its `rows`) with the reference; an exception is a failure."""
    Y = backend.empty(A.shape[0], W.shape[0])
    backend.poison(Y)
    _, error = _attempt(lambda: run(A, W, bias, Y))
    if error:
        return {"passed": False, "error": error}
    out = backend.to_host(Y)
    return check_output(out if rows is None else out[rows], ref, bound)


def measure_size(shape: dict, levels: tuple[Level, ...], states: dict[str, _State], backend, check_rows: int,
                 say: Callable[[str], None]) -> dict:
    M, N, K = shape["M"], shape["N"], shape["K"]
    A, W, bias = backend.inputs(M, N, K)
    Y = backend.empty(M, N)
    rows = sample_rows(M, check_rows)
    ref, bound = reference(backend.to_host(A)[rows], backend.to_host(W), backend.to_host(bias))
    base = {"timing": backend.time(lambda: gemm(A, W, Y)), "kernels": backend.count_kernels(lambda: gemm(A, W, Y))}
    say(f"{M}x{N}x{K} gemm: {base['timing']['median_ms']:.4f} ms")
    entries = {}
    for level in levels:
        entries[level.name] = measure_level(level, states[level.name], A, W, bias, Y, rows, ref, bound, base, backend)
        say(f"{M}x{N}x{K} {level.name}: {_progress_line(entries[level.name])}")
    base["dram"] = backend.dram("gemm", M, N, K, {})
    for level in levels:
        if entries[level.name]["status"] == "ok":
            entries[level.name]["dram"] = backend.dram(level.name, M, N, K, entries[level.name]["details"])
    return {"M": M, "N": N, "K": K, "min_dram_bytes": min_dram_bytes(M, N, K), "gemm": base, "levels": entries}


def measure_level(level: Level, state: _State, A, W, bias, Y, rows, ref, bound, base: dict, backend) -> dict:
    if state.status != "ok":
        return {"status": state.status, "reason": state.reason}
    check = run_check(level.run, A, W, bias, backend, rows, ref, bound)
    if not check["passed"]:
        return {"status": "failed", "reason": f"failed its check on sampled rows ({failure_text(check)})",
                "check": check}
    timed, error = _attempt(lambda: backend.time(lambda: level.run(A, W, bias, Y)))
    if error:
        return {"status": "failed", "reason": f"failed while timed: {error}", "check": check}
    details = _attempt(level.details)[0] or {}
    return {"status": "ok", "check": check, "timing": timed, "x_gemm": timed["median_ms"] / base["timing"]["median_ms"],
            "kernels": backend.count_kernels(lambda: level.run(A, W, bias, Y)), "details": details}


def failure_text(check: dict) -> str:
    if "error" in check:
        return check["error"]
    return (f"{check['bad_elements']} of {check['checked_elements']} elements outside their bounds, the worst "
            f"{check['worst_error_over_bound']:.3g}x its bound at {check['worst_at']}")


def _attempt(fn: Callable):
    """(fn(), None), or (None, "Type: message") when it raised."""
    try:
        return fn(), None
    except Exception as exc:  # one level's failure is recorded, and the others still run
        return None, f"{type(exc).__name__}: {exc}"[:500]


def _progress_line(entry: dict) -> str:
    if entry["status"] != "ok":
        return f"{entry['status']}: {entry.get('reason', '')}"
    return f"{entry['timing']['median_ms']:.4f} ms, {entry['x_gemm']:.2f}x gemm"


# --- reading a record: the checklist's conditions, judged on its numbers ------------------------------------

def kernels_per_call(entry: dict) -> int | None:
    """From the graph capture, else from ncu's count of profiled kernels (kernel replay)."""
    counted = (entry.get("kernels") or {}).get("kernels")
    return counted if counted is not None else (entry.get("dram") or {}).get("kernels")


def dram_bytes(entry: dict) -> float | None:
    return (entry.get("dram") or {}).get("bytes")


def level_source(record: dict, name: str) -> dict | None:
    return next((lv["source"] for lv in record["levels"] if lv["name"] == name), None)


def summary_rows(record: dict) -> list[dict]:
    """One row per size and level (the plain GEMM first), as a table shows them: strings, "-" where not measured."""
    rows = []
    for size in record["sizes"]:
        shape = f"{size['M']}x{size['N']}x{size['K']}"
        for name, entry in [("gemm", size["gemm"] | {"status": "ok", "x_gemm": 1.0}), *size["levels"].items()]:
            ok = entry["status"] == "ok"
            t, moved, kernels = entry.get("timing"), dram_bytes(entry), kernels_per_call(entry)
            source = level_source(record, name)
            rows.append({
                "size": shape, "level": name, "status": entry["status"] if ok else entry.get("reason", entry["status"]),
                "median_ms": f"{t['median_ms']:.4f}" if t else "-",
                "p10_p90_ms": f"{t['p10_ms']:.4f}-{t['p90_ms']:.4f}" if t else "-",
                "x_gemm": f"{entry['x_gemm']:.2f}" if ok else "-",
                "kernels": "-" if kernels is None else str(kernels),
                "dram": "-" if moved is None else f"{format_bytes(moved)} ({moved / size['min_dram_bytes']:.2f}x min)",
                "lines": _lines_text(source) if source else "-"})
    return rows


def verdicts(record: dict) -> list[str]:
    """One sentence per finding and size, each derived from the record's numbers:
    - a library call first: what the library path costs over the GEMM, in time, kernels and DRAM traffic;
    - fuse at the graph level when intermediates cost memory traffic: what graph fusion saved, and why;
    - go to Triton when the fused op is hot and graph fusion cannot cross the GEMM boundary: what crossing it bought;
    - write low-level code only when the remaining gap is measured: the lab's kernel against the best other path."""
    out = []
    for size in record["sizes"]:
        at = f"At {size['M']} x {size['N']} x {size['K']}"
        out += [f"{at}, {name} was not timed: {entry.get('reason') or entry['status']}."
                for name, entry in size["levels"].items() if entry["status"] != "ok"]
        out += _library_verdict(size, at) + _graph_fusion_verdict(size, at) + _triton_verdict(size, at)
        out += _lab_fused_verdict(record, size, at)
    return out


def _ok(size: dict, name: str) -> dict | None:
    entry = size["levels"].get(name)
    return entry if entry and entry["status"] == "ok" else None


def _ms(entry: dict) -> float:
    return entry["timing"]["median_ms"]


def _measurably_faster(a: dict, b: dict) -> bool:
    """a's p90 below b's p10: the spreads do not overlap, so the difference is measured, not noise."""
    return a["timing"]["p90_ms"] < b["timing"]["p10_ms"]


def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.0f}%"


def _count(n: int | None) -> str:
    return "an uncounted number of" if n is None else str(n)


def _lines_text(source: dict | None) -> str:
    if not source:
        return "? lines"
    missing = ", ".join(m["path"] for m in source["missing"])
    return f"{source['lines']} lines" + ("" if source["complete"] else f" (not counted: {missing})")


def _difference(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def _library_verdict(size: dict, at: str) -> list[str]:
    lib = _ok(size, "library")
    if lib is None:
        return []
    moved = dram_bytes(lib)
    traffic = ("its DRAM traffic was not measured" if moved is None else
               f"it moved {format_bytes(moved)} through DRAM, {moved / size['min_dram_bytes']:.2f}x the minimum of "
               f"{format_bytes(size['min_dram_bytes'])}")
    return [f"{at}, the library path launched {_count(kernels_per_call(lib))} kernels and took {_ms(lib):.3f} ms, "
            f"{lib['x_gemm']:.2f}x the plain GEMM ({_ms(size['gemm']):.3f} ms); {traffic}."]


def _graph_fusion_verdict(size: dict, at: str) -> list[str]:
    lib, gf = _ok(size, "library"), _ok(size, "graph_fusion")
    if lib is None or gf is None:
        return []
    if not _measurably_faster(gf, lib):
        return [f"{at}, graph fusion did not measurably beat the library path ({_ms(gf):.3f} against "
                f"{_ms(lib):.3f} ms, spreads overlapping or reversed): fusing the elementwise tail did not pay here."]
    removed = _difference(dram_bytes(lib), dram_bytes(gf))
    launches = _difference(kernels_per_call(lib), kernels_per_call(gf))
    fewer = "" if launches is None else f" and {launches} of {kernels_per_call(lib)} kernel launches"
    if removed is None:
        why = f"it removed intermediates{fewer} (DRAM traffic not measured)"
    elif removed > 0:
        why = f"it removed {format_bytes(removed)} of DRAM traffic{fewer}"
    else:
        why = f"it removed{fewer or ' nothing measured'}; its DRAM traffic did not fall"
    gemm_ms = _ms(size["gemm"])
    return [f"{at}, graph fusion saved {_pct(_ms(lib) - _ms(gf), _ms(lib))} of the library path's time "
            f"({_ms(lib):.3f} -> {_ms(gf):.3f} ms) because {why}; it still costs {_pct(_ms(gf) - gemm_ms, gemm_ms)} "
            "over the GEMM alone: the pass over Y that it cannot fuse into the GEMM."]


def _triton_verdict(size: dict, at: str) -> list[str]:
    gf, tr = _ok(size, "graph_fusion"), _ok(size, "triton")
    if tr is None:
        return []
    head = f"{at}, the Triton kernel (GEMM and epilogue in one) took {_ms(tr):.3f} ms, {tr['x_gemm']:.2f}x the GEMM"
    if gf is None:
        return [head + "; graph fusion was not timed to compare it with."]
    if _measurably_faster(tr, gf):
        left = _ms(gf) - _ms(size["gemm"])  # the epilogue's cost after graph fusion
        share = (f"{_pct(_ms(gf) - _ms(tr), left)} of the epilogue's cost left after graph fusion" if left > 0
                 else f"{(_ms(gf) - _ms(tr)) * 1000:.1f} us per call")
        removed = _difference(dram_bytes(gf), dram_bytes(tr))
        traffic = "" if removed is None else f" and {format_bytes(removed)} of DRAM traffic"
        return [head + f": crossing the GEMM boundary removed {share}{traffic}."]
    if _measurably_faster(gf, tr):
        return [head + f": slower than graph fusion ({_ms(gf):.3f} ms); its GEMM costs more than fusing saves."]
    return [head + f": within the spread of graph fusion ({_ms(gf):.3f} ms); crossing the GEMM boundary did not pay."]


def _lab_fused_verdict(record: dict, size: dict, at: str) -> list[str]:
    lab = _ok(size, "lab_fused")
    if lab is None:
        return []
    head = (f"{at}, the lab's fused CUDA epilogue took {_ms(lab):.3f} ms, {lab['x_gemm']:.2f}x the GEMM, with "
            f"{_lines_text(level_source(record, 'lab_fused'))} of code")
    rivals = [(name, _ok(size, name)) for name in ("library", "graph_fusion", "triton") if _ok(size, name)]
    if not rivals:
        return [head + "; no higher-level path was timed to compare it with."]
    name, best = min(rivals, key=lambda r: _ms(r[1]))
    versus = f"the best higher-level path ({name}: {_ms(best):.3f} ms, {_lines_text(level_source(record, name))})"
    gap = _ms(best) - _ms(lab)
    if _measurably_faster(lab, best):
        mine, theirs = level_source(record, "lab_fused"), level_source(record, name)
        extra = (f", bought with {mine['lines'] - theirs['lines']} more lines" if mine and theirs and mine["complete"]
                 and theirs["complete"] else "")
        return [head + f": {gap * 1000:.1f} us ({_pct(gap, _ms(best))}) per call faster than {versus}, a measured "
                f"gap{extra}; worth its upkeep only where this operation is hot."]
    if _measurably_faster(best, lab):
        return [head + f": {-gap * 1000:.1f} us per call slower than {versus}; the low-level code does not pay here."]
    return [head + f": within the spread of {versus}; no measured gap to justify the low-level code."]


SUMMARY_COLUMNS = (("size", "size"), ("level", "level"), ("status", "status"), ("median_ms", "median ms"),
                   ("p10_p90_ms", "p10-p90 ms"), ("x_gemm", "x GEMM"), ("kernels", "kernels"), ("dram", "DRAM bytes"),
                   ("lines", "lines of code"))


def summary_text(record: dict) -> str:
    """The record as plain text: a title, summary_rows as aligned columns, then the verdicts, one per line."""
    rows = summary_rows(record)
    widths = [max([len(title), *(len(row[key]) for row in rows)]) for key, title in SUMMARY_COLUMNS]

    def line(cells) -> str:
        return "  ".join(cell.ljust(w) for cell, w in zip(cells, widths, strict=True)).rstrip()

    lines = [f"{record.get('operation', '')} (cold L2) on {record['provenance'].get('device', '?')}",
             line(title for _, title in SUMMARY_COLUMNS), line("-" * w for w in widths)]
    lines += [line(row[key] for key, _ in SUMMARY_COLUMNS) for row in rows]
    return "\n".join(lines + [f"- {sentence}" for sentence in verdicts(record)])


def run(out_dir: Path, *, sizes=DEFAULT_SIZES, ncu: bool = True, replay: str = "kernel", min_time_ms: float = 50.0,
        progress: Callable[[str], None] | None = None) -> Path:
    """The checklist measured on the GPU (measure_levels with CupyBackend(min_time_ms, ncu, replay)), written to
    out_dir/STUDY_FILE; the table and the verdicts go to `progress` at the end. Returns the path."""
    from lab.core import device

    device.current()  # one sentence, not a CUDA traceback, when there is no GPU
    backend = CupyBackend(min_time_ms=min_time_ms, ncu=ncu, replay=replay)
    record = measure_levels(list(sizes), backend=backend, progress=progress)
    path = Path(out_dir) / STUDY_FILE
    write_json(path, record)
    if progress:
        progress(summary_text(record))
    return path


# --- the ncu target ------------------------------------------------------------------------------------------

def main(argv: list[str]) -> None:
    if argv[:1] == ["ncu-target"] and len(argv) == 2:
        _ncu_target(json.loads(argv[1]))
        return
    raise SystemExit("usage: python -m lab.studies.checklist ncu-target JSON (`lab study checklist --out DIR` runs "
                     "the study)")


if __name__ == "__main__":
    main(sys.argv[1:])
