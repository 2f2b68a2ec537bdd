"""CPU: every rung's launches, exactly as its family makes them, against a golden table (tests/data/
launch_geometry.json) captured from the launchers before the rungs stated their launch scheme (Rung.launch): the
kernel variant each launch builds, its grid, block, dynamic shared memory (and the opt-in above 48 KB), every kernel
argument, and what `launch_notes` says (the path), for every rung of every family on the family's check cases and
headline problems (a family's candidate rungs too, not yet in its ladder); with each rung's shared memory, block
resources, companion kernels and reproducibility, which rungs each problem times, and the key lists the other layers
read (VEC_RUNGS, SPLIT_MODES, ...).

Nothing reaches a GPU. `lab.core.build.get_kernel` gives kernels that record their launches instead of running them
(their registers and static shared memory fixed stand-ins), `lab.core.device.current` a 132-SM sm_90 GPU, `cupy`
a module whose allocations are addresses only, the TMA encoders the map's numbers; a problem's arrays are stand-ins
with a shape, a dtype and an address (each allocation 2^36-aligned, shifted by the problem's offsets), made by
`problem()` with the params each family's make_problem gives.

The table holds the cases it was captured on and the tests replay those, so a check case added to a family later
changes nothing here. A launch changed on purpose fails here too; recapture the table then, and read its diff:
    .venv/bin/python tests/test_family_launch_geometry.py --write
"""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import numpy as np
import pytest

GOLDEN = Path(__file__).resolve().parent / "data" / "launch_geometry.json"
SM_COUNT, ARCH = 132, 90
FAKE_REGISTERS, FAKE_STATIC_SMEM = 64, 0
# Attributes of the family classes that other layers read (lessons, grading, scripts), where a family has them.
CONSTANTS = ("VEC_RUNGS", "PERSISTENT_RUNGS", "STREAM_K_RUNGS", "PLUGIN_RUNG", "WARP_ROW_RUNGS", "SPECIALIZED_ENTRIES")
MODULE_CONSTANTS = {"gemm_split_k": ("SPLIT_MODES", "MODE_NAMES", "REDUCE_ENTRY"), "decode": ("SPLIT_K_RUNG",)}
FAMILIES = ("copy", "transpose", "gemm_fp32", "gemm_tc", "gemm_fp32_epilogue", "gemm_tc_epilogue", "softmax",
            "rmsnorm", "layernorm", "gemm_split_k", "decode", "grouped_gemm", "attention",
            "attention_decode", "attention_varlen")
CEILING_LAUNCHES_A_RUNG = ("gemm_fp32_epilogue", "gemm_tc_epilogue")  # their ceiling is the rung without the chain


# --- stand-ins ----------------------------------------------------------------------------------------------------

class FakeArray:
    """A device array as the launchers see it: a shape, a dtype, an address (`.data.ptr`), row slices."""

    def __init__(self, name: str, shape, dtype, ptr: int, host: np.ndarray | None = None):
        self.name, self.shape, self.dtype = name, tuple(int(s) for s in np.atleast_1d(shape)), np.dtype(dtype)
        self.data = types.SimpleNamespace(ptr=int(ptr))
        self.host = host  # the bytes of an upload (cupy.asarray), for the record

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __getitem__(self, key):
        if not isinstance(key, slice) or key.step not in (None, 1):
            raise TypeError(f"a FakeArray takes row slices only; got {key!r}")
        start, stop, _ = key.indices(self.shape[0])
        row = int(np.prod(self.shape[1:])) * self.dtype.itemsize
        return FakeArray(f"{self.name}[{start}:{stop}]", (max(0, stop - start),) + self.shape[1:], self.dtype,
                         self.data.ptr + start * row)

    def __setitem__(self, key, value) -> None:
        pass

    def __repr__(self) -> str:
        return self.name + (f"<sha:{_digest(self.host)}>" if self.host is not None else "")


def _digest(host: np.ndarray) -> str:
    import hashlib

    return hashlib.sha256(np.ascontiguousarray(host).tobytes()).hexdigest()[:16]


class Allocator:
    """Addresses for a problem's arrays and for the launchers' own allocations, the same on every run: allocation k
    at k * 2^36 (shifted by offset_bytes), so that an address in a record reads as the array's name and offset."""

    SHIFT = 36

    def __init__(self):
        self.names = ["null"]

    def __call__(self, name: str, shape, dtype, offset_bytes: int = 0, host=None) -> FakeArray:
        self.names.append(name)
        return FakeArray(name, shape, dtype, ((len(self.names) - 1) << self.SHIFT) + offset_bytes, host)

    def symbol(self, address: int) -> str:
        k, offset = address >> self.SHIFT, address & ((1 << self.SHIFT) - 1)
        if not 0 < k < len(self.names):
            return hex(address)
        return self.names[k] + (f"+{offset}" if offset else "")


class FakeMap:
    """What tma.encode returns here: the map's numbers (the address as the array's name, in a record)."""

    def __init__(self, spec):
        self.spec = spec

    def text(self, alloc: Allocator) -> str:
        s = self.spec
        planes = f",planes={s.depth}@{s.plane_stride_bytes}B" if hasattr(s, "depth") else ""
        return (f"map({alloc.symbol(s.address)},{s.width}x{s.height},ld={s.row_stride_bytes}B{planes},"
                f"box={s.box_width}x{s.box_height})")


def _encoded_bytes(spec) -> np.ndarray:
    """The grouped table's 128 bytes of a map: its numbers."""
    words = np.zeros(16, dtype=np.uint64)
    words[:6] = (spec.address, spec.width, spec.height, spec.row_stride_bytes, spec.box_width, spec.box_height)
    return words.view(np.uint8)


class FakeRaw:
    """The raw kernel inside lab.core.build.Kernel: records each launch with the attributes set on it."""

    def __init__(self, spec, cooperative: bool, calls: list):
        object.__setattr__(self, "_state", {"spec": spec, "cooperative": cooperative, "calls": calls, "attrs": {}})
        self.num_regs = FAKE_REGISTERS
        self.shared_size_bytes = FAKE_STATIC_SMEM

    def __setattr__(self, name, value) -> None:
        self._state["attrs"][name] = value

    def __getattr__(self, name):
        attrs = object.__getattribute__(self, "_state")["attrs"]
        if name in attrs:
            return attrs[name]
        raise AttributeError(name)

    def __call__(self, grid, block, args, shared_mem: int = 0) -> None:
        s = self._state
        s["calls"].append((s["spec"], s["cooperative"], tuple(grid), tuple(block), args, shared_mem,
                           s["attrs"].get("max_dynamic_shared_size_bytes")))


def _shape(shape) -> tuple:
    return tuple(int(s) for s in np.atleast_1d(shape))


def fake_cupy(alloc: Allocator) -> types.ModuleType:
    cp = types.ModuleType("cupy")
    cp.float16, cp.float32, cp.int32, cp.uint8, cp.int8 = np.float16, np.float32, np.int32, np.uint8, np.int8
    cp.empty = lambda shape, dtype=np.float32: alloc(f"empty{_shape(shape)}:{np.dtype(dtype)}", shape, dtype)
    cp.zeros = lambda shape, dtype=np.float32: alloc(f"zeros{_shape(shape)}:{np.dtype(dtype)}", shape, dtype)
    cp.asarray = lambda a: alloc("cupy.asarray", np.shape(a), np.asarray(a).dtype, host=np.asarray(a))
    cp.cuda = types.SimpleNamespace(Device=lambda: types.SimpleNamespace(id=0),
                                    get_current_stream=lambda: types.SimpleNamespace(ptr=0))
    return cp


@pytest.fixture
def no_gpu(monkeypatch):
    """The stand-ins installed; yields a function that records one call's launches."""
    yield _install(monkeypatch)


def _install(monkeypatch):
    from lab.core import build, device, tma
    from lab.families import decode, gemm_split_k, gemm_tc, grouped_gemm, norms

    state = {"calls": [], "alloc": Allocator()}
    monkeypatch.setattr(device, "current", lambda: types.SimpleNamespace(
        sm_count=SM_COUNT, arch=ARCH, name="a stand-in sm_90 GPU (132 SMs)"))
    monkeypatch.setattr(build, "get_kernel", lambda spec, cooperative=False: build.Kernel(
        FakeRaw(spec, cooperative, state["calls"])))
    monkeypatch.setattr(tma, "encode", FakeMap)
    monkeypatch.setattr(grouped_gemm, "_encode_uncached", _encoded_bytes)
    monkeypatch.setitem(sys.modules, "cupy", types.ModuleType("cupy"))  # replaced per call below
    norms._resident_blocks_on.cache_clear()

    def calls_of(run, family=None):
        """(launches, result or exception text) of run(); caches of launch plans and workspaces emptied first, so
        each call allocates (and records) what a first launch does."""
        state["calls"].clear()
        state["alloc"] = Allocator()
        sys.modules["cupy"] = fake_cupy(state["alloc"])
        gemm_tc._WORKSPACES.clear()
        gemm_split_k._WORKSPACES.clear()
        decode.SPLIT_K_FAMILY._plans.clear()
        if family is not None and hasattr(family, "_plans"):
            family._plans.clear()
        if family is not None and hasattr(family, "_workspaces"):
            family._workspaces.clear()
        norms._resident_blocks_on.cache_clear()
        try:
            result = run()
        except Exception as exc:  # noqa: BLE001 - a launcher's refusal is part of its behaviour
            result = f"raised {type(exc).__name__}: {exc}"
        return list(state["calls"]), result

    calls_of.alloc = lambda: state["alloc"]
    return calls_of


# --- problems with stand-in arrays (the params each family's make_problem gives) --------------------------------

def problem(family, case: dict, alloc: Allocator):
    """(problem, output) for `case`: make_problem's params and arrays, with stand-ins for the arrays."""
    from lab.core.ladder import Problem

    name = family.name
    if name == "copy":
        n, xo, yo = case["n"], case.get("x_offset", 0), case.get("y_offset", 0)
        x = alloc("x", (n,), np.float32, 4 * xo)
        out = alloc("out", (n,), np.float32, 4 * yo)
        return Problem("", {"x": [x]}, (n,), 8 * n, yo, {"n": n, "x_offset": xo, "y_offset": yo}), out
    if name == "transpose":
        rows, cols, o = case["rows"], case["cols"], case.get("out_offset", 0)
        x = alloc("x", (rows, cols), np.float32)
        out = alloc("out", (cols, rows), np.float32, 4 * o)
        params = {"rows": rows, "cols": cols} | ({"out_offset": o} if o else {})
        return Problem("", {"x": [x]}, (cols, rows), 8 * rows * cols, o, params), out
    if name in ("gemm_fp32", "gemm_fp32_epilogue"):
        return _gemm_problem(family, case, alloc, tensor_cores=False)
    if name in ("gemm_tc", "gemm_tc_epilogue", "gemm_split_k"):
        return _gemm_problem(family, case, alloc, tensor_cores=True)
    if name == "decode":
        return _decode_problem(family, case, alloc)
    if name in ("rmsnorm", "layernorm"):
        return _norm_problem(family, case, alloc)
    if name == "softmax":
        rows, n, dtype = case["rows"], case["n"], case.get("dtype", "float32")
        mask, special, xo = case.get("mask", "none"), case.get("special", 0), case.get("x_offset", 0)
        x = alloc("x", (rows, n), dtype, np.dtype(dtype).itemsize * xo)
        lengths = alloc("lengths", (rows,), np.int32) if mask == "lengths" else None
        params = {"rows": rows, "n": n, "dtype": dtype}
        params |= ({"mask": mask} if mask != "none" else {}) | ({"special": special} if special else {})
        params |= {"x_offset": xo} if xo else {}
        out = alloc("out", (rows, n), dtype)
        return Problem("", {"x": [x], "lengths": lengths}, (rows, n), family.min_dram_bytes(params), params=params,
                       dtype=np.dtype(dtype)), out
    if name == "grouped_gemm":
        from lab.families.grouped_gemm import STORAGE, groups_of, layout

        args = {k: v for k, v in case.items() if k not in ("case", "groups", "dtype")}
        params = family._params(case.get("case"), case.get("groups"), case.get("dtype", "float16"), args)
        shapes = groups_of(params)
        lay = layout(shapes)
        dtype = STORAGE[params["dtype"]]
        inputs = {"A": [alloc("A", (lay.a_elements,), dtype)], "B": [alloc("B", (lay.b_elements,), dtype)]}
        prob = family._problem(params, shapes, inputs)
        return prob, alloc("out", prob.out_shape, dtype)
    if name == "attention":
        B, H, S_q, D = case["B"], case["H"], case["S_q"], case["D"]
        H_kv, S_k = case.get("H_kv", H), case.get("S_k", S_q)
        from lab.families.gemm_tc import STORAGE

        storage = STORAGE[case["dtype"]]
        params = {"B": B, "H": H, "H_kv": H_kv, "S_q": S_q, "S_k": S_k, "D": D, "dtype": case["dtype"],
                  "causal": int(case.get("causal", 0))} | ({"large_logits": 1} if case.get("large_logits") else {})
        inputs = {"Q": [alloc("Q", (B, H, S_q, D), storage)], "K": [alloc("K", (B, H_kv, S_k, D), storage)],
                  "V": [alloc("V", (B, H_kv, S_k, D), storage)]}
        return Problem("", inputs, (B, H, S_q, D), family.min_dram_bytes(params), params=params, dtype=storage), \
            alloc("O", (B, H, S_q, D), storage)
    if name == "attention_decode":
        return _decode_attention_problem(family, case, alloc)
    if name == "attention_varlen":
        return _varlen_attention_problem(family, case, alloc)
    raise KeyError(name)


def _varlen_attention_problem(family, case: dict, alloc: Allocator):
    """Packed Q and O (T_q, H, D), K and V (T_k, H_kv, D) and the two offset arrays."""
    from lab.core.ladder import Problem
    from lab.families.gemm_tc import STORAGE

    lens_q = list(case["seq_lens"])
    lens_k = list(case.get("seq_lens_k", lens_q))
    H, D = case["H"], case["D"]
    H_kv, storage = case.get("H_kv", H), STORAGE[case["dtype"]]
    params = {"B": len(lens_q), "H": H, "H_kv": H_kv, "S_q": max(lens_q), "S_k": max(lens_k), "D": D,
              "dtype": case["dtype"], "causal": int(case.get("causal", 0)), "seq_lens": lens_q}
    params |= {"seq_lens_k": lens_k} if "seq_lens_k" in case else {}
    q_shape, kv_shape = (sum(lens_q), H, D), (sum(lens_k), H_kv, D)
    inputs = {"Q": [alloc("Q", q_shape, storage)], "K": [alloc("K", kv_shape, storage)],
              "V": [alloc("V", kv_shape, storage)], "cu_seqlens_q": [alloc("cu_seqlens_q", (len(lens_q) + 1,),
                                                                          np.int32)],
              "cu_seqlens_k": [alloc("cu_seqlens_k", (len(lens_k) + 1,), np.int32)]}
    return Problem("", inputs, q_shape, 0, params=params, dtype=storage), alloc("O", q_shape, storage)


def _decode_attention_problem(family, case: dict, alloc: Allocator):
    """The cache as the kernels read it (contiguous, or pages with a block table), its lengths, and Q and O."""
    from lab.core.ladder import Problem
    from lab.families.gemm_tc import STORAGE

    B, H, S_q, S_k, D = case["B"], case["H"], case["S_q"], case["S_k"], case["D"]
    H_kv, page = case.get("H_kv", H), case.get("page_size", 0)
    storage = STORAGE[case["dtype"]]
    params = {"B": B, "H": H, "H_kv": H_kv, "S_q": S_q, "S_k": S_k, "D": D, "dtype": case["dtype"],
              "causal": int(case.get("causal", 0)), "page_size": page, "varlen": case.get("varlen", 0)}
    params |= {"split_keys": case["split_keys"]} if case.get("split_keys") else {}
    pages = B * -(-S_k // page) + 2 if page else 0
    cache = (pages, page, H_kv, D) if page else (B, H_kv, S_k, D)
    inputs = {"Q": [alloc("Q", (B, H, S_q, D), storage)], "K": [alloc("K", cache, storage)],
              "V": [alloc("V", cache, storage)], "seq_lens": [alloc("seq_lens", (B,), np.int32)]}
    if page:
        inputs["block_table"] = [alloc("block_table", (B, -(-S_k // page)), np.int32)]
    return Problem("", inputs, (B, H, S_q, D), 0, params=params, dtype=storage), alloc("O", (B, H, S_q, D), storage)


def _gemm_problem(family, case: dict, alloc: Allocator, tensor_cores: bool):
    from lab.core.ladder import Problem
    from lab.families.epilogue import Epilogue, storage_dtype
    from lab.families.gemm_tc import STORAGE

    M, N, K = case.get("M", 64), case.get("N", 64), case.get("K", 64)
    alpha, beta, pad = case.get("alpha", 1.0), case.get("beta", 0.0), case.get("pad", 0)
    lda, ldc = K + pad, N + pad
    params = {"M": M, "N": N, "K": K}
    if tensor_cores:
        layout_, dtype = case.get("layout", "TN"), case.get("dtype", "float16")
        b_shape = (K, N + pad) if layout_ == "NN" else (N, K + pad)
        storage = STORAGE[dtype]
        params |= {"layout": layout_, "dtype": dtype, "alpha": alpha, "beta": beta, "pad": pad, "lda": lda,
                   "ldb": b_shape[1], "ldc": ldc}
    else:
        b_shape, storage = (K, N + pad), np.dtype(np.float32)
        params |= {"alpha": alpha, "beta": beta, "pad": pad, "lda": lda, "ldb": N + pad, "ldc": ldc}
    a, b = alloc("A", (M, lda), storage), alloc("B", b_shape, storage)
    c0 = alloc("C0", (M, ldc), storage) if beta != 0 else None
    prob = Problem("", {"A": [a], "B": [b]}, (M, ldc), 0, params=params, dtype=storage, out_init=c0,
                   flops=2 * M * N * K)
    if family.name == "gemm_split_k":
        prob.params["splits"] = case.get("splits", 0)
    if family.name in ("gemm_tc_epilogue", "gemm_fp32_epilogue"):
        epi = Epilogue.parse(case.get("epilogue", "bias+gelu_tanh"), case.get("out", "same"),
                             case.get("q_per_row", False))
        prob.params |= {"epilogue": "+".join(epi.ops) or "none", "out": epi.out, "q_per_row": epi.q_per_row}
        prob.dtype = storage_dtype(epi, storage)
        shapes = {"bias": ((N,), np.float32), "row_scale": ((M,), np.float32), "col_scale": ((N,), np.float32),
                  "residual": ((M, ldc), storage), "q_scale": (((M,) if epi.q_per_row else (1,)), np.float32)}
        prob.inputs["epilogue"] = {k: alloc(k, *shapes[k]) for k in sorted(epi.needs())}
        prob.params["clamp"] = (-2.0, 3.0)
    return prob, alloc("out", (M, ldc), prob.dtype)


def _decode_problem(family, case: dict, alloc: Allocator):
    from lab.core.ladder import Problem
    from lab.families.gemm_tc import STORAGE

    M, N, K, dtype, pad = case.get("M", 1), case.get("N", 4096), case.get("K", 4096), case.get("dtype"), \
        case.get("pad", 0)
    dtype = dtype or "float16"
    xo, wo, yo = case.get("x_offset", 0), case.get("w_offset", 0), case.get("y_offset", 0)
    ldx = ldw = K + pad
    ldy = N + pad
    params = {"M": M, "N": N, "K": K, "dtype": dtype}
    params |= {k: v for k, v in (("pad", pad), ("x_offset", xo), ("w_offset", wo), ("y_offset", yo)) if v}
    params |= {"ldx": ldx, "ldw": ldw, "ldy": ldy}
    x, w = alloc("X", (M, ldx), STORAGE[dtype], 2 * xo), alloc("W", (N, ldw), STORAGE[dtype], 2 * wo)
    prob = Problem("", {"X": [x], "W": [w]}, (M, ldy), family.min_dram_bytes(params), out_offset=yo, params=params,
                   dtype=STORAGE[dtype], flops=2 * M * N * K)
    return prob, alloc("Y", (M, ldy), STORAGE[dtype], 2 * yo)


def _norm_problem(family, case: dict, alloc: Allocator):
    from lab.core.ladder import Problem
    from lab.families.norms import DEFAULT_EPS, STORAGE

    rows, n, dtype = case["rows"], case["n"], case.get("dtype", "float16")
    eps, values = case.get("eps", DEFAULT_EPS), case.get("values", "random")
    xo, oo = case.get("x_offset", 0), case.get("out_offset", 0)
    storage = STORAGE[dtype]
    inputs = {"x": [alloc("x", (rows, n), storage, 2 * xo)], "w": alloc("w", (n,), storage)}
    if family.centered:
        inputs["b"] = alloc("b", (n,), storage)
    params = {"rows": rows, "n": n, "dtype": dtype}
    params |= {"eps": eps} if eps != DEFAULT_EPS else {}
    params |= {"values": values} if values != "random" else {}
    params |= {k: v for k, v in (("x_offset", xo), ("out_offset", oo)) if v}
    return Problem("", inputs, (rows, n), 4 * rows * n, oo, params, dtype=storage), \
        alloc("y", (rows, n), storage, 2 * oo)


# --- what is recorded ---------------------------------------------------------------------------------------------

def _arg(a, alloc: Allocator) -> str:
    if isinstance(a, np.ndarray) and a.dtype.names:  # a struct passed by value (the epilogue's parameters)
        fields = [alloc.symbol(v) if isinstance(v, int) and v >> Allocator.SHIFT else repr(v) for v in a.tolist()[0]]
        return "struct(" + ",".join(fields) + ")"
    if isinstance(a, FakeMap):
        return a.text(alloc)
    if isinstance(a, np.generic):
        return f"{a.dtype.kind}{8 * a.dtype.itemsize}:{a.item()!r}"
    return repr(a)


def _spec_text(spec, rung_spec) -> str:
    """The launched build as it differs from the rung's own spec (the variant's changes): source and entry where
    they differ, the knobs that differ, the plugin."""
    if spec.source != rung_spec.source:  # another kernel (a repack, another rung's): all of it
        return _spec_repr(spec)
    parts = []
    if spec.entry != rung_spec.entry:
        parts.append(spec.entry)
    own = dict(rung_spec.knobs)
    changed = {k: v for k, v in spec.knobs if own.get(k) != v}
    dropped = sorted(set(own) - set(dict(spec.knobs)))
    parts.append("[" + ",".join([f"{k}={v}" for k, v in sorted(changed.items())] + [f"-{k}" for k in dropped]) + "]")
    if spec.plugin != rung_spec.plugin:
        parts.append(f"plugin={spec.plugin or 'none'}")
    if (spec.min_arch, spec.arch_suffix) != (rung_spec.min_arch, rung_spec.arch_suffix):
        parts.append(f"sm_{spec.min_arch}{spec.arch_suffix}")
    return " ".join(parts)


def _call_text(call, rung_spec, alloc: Allocator) -> str:
    spec, cooperative, grid, block, args, smem, optin = call
    text = f"{_spec_text(spec, rung_spec)}{' cooperative' if cooperative else ''} grid={grid} block={block} smem={smem}"
    if optin is not None:
        text += f" optin={optin}"
    return text + " args=(" + ",".join(_arg(a, alloc) for a in args) + ")"


def _jsonable(value):
    return json.loads(json.dumps(value, default=repr))


def _spec_repr(spec) -> str:
    return (f"{spec.source}:{spec.entry} " + ",".join(f"{k}={v}" for k, v in spec.knobs)
            + f" sm_{spec.min_arch}{spec.arch_suffix}" + (f" plugin={spec.plugin}" if spec.plugin else ""))


def _rungs_for(family, case: dict) -> str:
    """The rungs a benchmark times for this problem, as the indices of family.rungs: "headline:0123 sweep:0123
    tail:123"."""
    index = {r.key: i for i, r in enumerate(family.rungs)}
    return " ".join(f"{kind}:" + "".join(str(index[r.key]) for r in family.rungs_for(kind, case))
                    for kind in ("headline", "sweep", "tail"))


def record_family(family, calls_of, cases: list[tuple[str, dict]] | None = None) -> dict:
    """The golden record of a family: its constants, each rung's own facts, and every rung's launches on each case
    (default: its check cases, then its headline problems)."""
    module = sys.modules[type(family).__module__]
    constants = {c: _jsonable(getattr(family, c)) for c in CONSTANTS if hasattr(family, c)}
    constants |= {c: _jsonable(getattr(module, c)) for c in MODULE_CONSTANTS.get(family.name, ())
                  if hasattr(module, c)}
    rungs = {}
    for r in family.rungs + family.candidate_rungs:
        rungs[r.key] = {"spec": _spec_repr(r.spec), "dynamic_smem": family.dynamic_smem_bytes(r),
                        "block_resources": _jsonable(family.block_resources(r)),
                        "companions": list(family.companion_entries(r)), "reproducible": family.reproducible(r)}
    if cases is None:
        cases = [("check", c) for c in family.check_cases()] + [("headline", c) for c in family.headline_params()]
    rows = []
    for kind, case in cases:
        row = {"kind": kind, "case": _jsonable(case), "rungs_for": _rungs_for(family, case)}
        launches = {}
        for r in family.rungs + family.candidate_rungs:
            def run(r=r, case=case):
                prob, out = problem(family, case, calls_of.alloc())
                family.launch(r, prob, out)
                return prob, out

            calls, result = calls_of(run, family)
            entry = {"calls": [_call_text(c, r.spec, calls_of.alloc()) for c in calls]}  # before the next call
            if isinstance(result, str):
                entry["raised"] = result
            else:
                prob, out = result
                _, notes = calls_of(lambda r=r, prob=prob, out=out: family.launch_notes(r, prob, out), family)
                entry["notes"] = _jsonable(notes)
            launches[r.key] = entry
        row["launches"] = launches
        if family.name in CEILING_LAUNCHES_A_RUNG:
            def ceiling(case=case):
                prob, out = problem(family, case, calls_of.alloc())
                family.launch_ceiling(prob, out)

            calls, result = calls_of(ceiling, family)
            row["ceiling"] = [_call_text(c, family.PLAIN.spec, calls_of.alloc()) for c in calls] + (
                [result] if isinstance(result, str) else [])
        rows.append(row)
    return {"constants": constants, "rungs": rungs, "cases": rows}


def _dump(golden: dict) -> str:
    """One case a line, so a diff names the case."""
    lines = ["{"]
    for i, (name, rec) in enumerate(golden.items()):
        lines.append(f' {json.dumps(name)}: {{')
        lines.append(f'  "constants": {json.dumps(rec["constants"], sort_keys=True)},')
        lines.append('  "rungs": {')
        rung_lines = [f'   {json.dumps(k)}: {json.dumps(v, sort_keys=True)}' for k, v in rec["rungs"].items()]
        lines.append(",\n".join(rung_lines))
        lines.append("  },")
        lines.append('  "cases": [')
        lines.append(",\n".join(f"   {json.dumps(row, sort_keys=True)}" for row in rec["cases"]))
        lines.append("  ]")
        lines.append(" }" + ("," if i < len(golden) - 1 else ""))
    lines.append("}")
    return "\n".join(lines) + "\n"


# --- the tests ----------------------------------------------------------------------------------------------------

def _golden() -> dict:
    return json.loads(GOLDEN.read_text())


def _check_family(name: str, calls_of) -> None:
    from lab.families import get_family

    want = _golden()[name]
    family = get_family(name)
    got = record_family(family, calls_of, [(row["kind"], row["case"]) for row in want["cases"]])
    assert got["constants"] == want["constants"]
    assert got["rungs"] == want["rungs"]
    for old, new in zip(want["cases"], got["cases"], strict=True):
        for key in old["launches"]:
            assert new["launches"].get(key) == old["launches"][key], (name, key, old["case"])
        assert new == old, (name, old["case"])


def test_copy_launches_match_the_golden_table(no_gpu):
    _check_family("copy", no_gpu)


def test_transpose_launches_match_the_golden_table(no_gpu):
    _check_family("transpose", no_gpu)


def test_gemm_fp32_launches_match_the_golden_table(no_gpu):
    _check_family("gemm_fp32", no_gpu)


def test_gemm_tc_launches_match_the_golden_table(no_gpu):
    _check_family("gemm_tc", no_gpu)


def test_gemm_fp32_epilogue_launches_match_the_golden_table(no_gpu):
    _check_family("gemm_fp32_epilogue", no_gpu)


def test_gemm_tc_epilogue_launches_match_the_golden_table(no_gpu):
    _check_family("gemm_tc_epilogue", no_gpu)


def test_softmax_launches_match_the_golden_table(no_gpu):
    _check_family("softmax", no_gpu)


def test_rmsnorm_launches_match_the_golden_table(no_gpu):
    _check_family("rmsnorm", no_gpu)


def test_layernorm_launches_match_the_golden_table(no_gpu):
    _check_family("layernorm", no_gpu)


def test_gemm_split_k_launches_match_the_golden_table(no_gpu):
    _check_family("gemm_split_k", no_gpu)


def test_decode_launches_match_the_golden_table(no_gpu):
    _check_family("decode", no_gpu)


def test_grouped_gemm_launches_match_the_golden_table(no_gpu):
    _check_family("grouped_gemm", no_gpu)


def test_attention_launches_match_the_golden_table(no_gpu):
    _check_family("attention", no_gpu)


def test_attention_decode_launches_match_the_golden_table(no_gpu):
    _check_family("attention_decode", no_gpu)


def test_attention_varlen_launches_match_the_golden_table(no_gpu):
    _check_family("attention_varlen", no_gpu)


def test_every_rung_names_one_of_its_familys_launch_schemes():
    from lab.families import families

    for family in families().values():
        assert family.launches, family.name
        assert all(r.launch in family.launches for r in family.rungs), family.name
        assert all(family.launch_scheme(r) == r.launch for r in family.rungs)


def test_a_rung_without_a_scheme_of_its_family_gets_one_sentence():
    import dataclasses

    from lab.core.errors import LabError
    from lab.families.copy import CopyFamily

    fam = CopyFamily()
    stray = dataclasses.replace(fam.rung("03"), key="05_new", launch="")
    with pytest.raises(LabError, match="copy rung 05_new names the launch scheme '', .*per_element, grid_stride"):
        fam.launch_scheme(stray)


def test_the_golden_table_covers_every_family_and_every_rung():
    from lab.families import families

    golden = _golden()
    assert set(golden) == set(FAMILIES) == set(families())
    for name, family in families().items():
        assert list(golden[name]["rungs"]) == [r.key for r in family.rungs + family.candidate_rungs]
        kinds = {row["kind"] for row in golden[name]["cases"]}
        assert kinds == {"check", "headline"}, name


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit(f"usage: {sys.argv[0]} --write   (recaptures {GOLDEN})")
    from lab.families import get_family

    with pytest.MonkeyPatch.context() as mp:
        calls_of = _install(mp)
        table = {name: record_family(get_family(name), calls_of) for name in FAMILIES}
    GOLDEN.parent.mkdir(exist_ok=True)
    GOLDEN.write_text(_dump(table))
    print(f"wrote {GOLDEN} ({GOLDEN.stat().st_size} bytes)")
