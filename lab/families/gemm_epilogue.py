"""GEMMs with a fused epilogue: the best tensor-core rung (gemm_tc 06) and the FP32 ladder's last rung (08) built
with the epilogue chain of kernels/common/lab_epilogue.cuh (lab/families/epilogue.py names the ops), checked against
float64
and timed against the same rung without the epilogue, so the figure is what fusing costs.

A problem names its epilogue as params: `epilogue` ("bias+gelu_tanh": ops joined by '+'), `out` ("same", "int8",
"e4m3": quantized outputs are the tensor-core family's) and `q_per_row`. The chain's operands are drawn with the
problem: bias, scales and quantization scales in fp32, the residual in the output's type, each random and never
zero. Quantization scales are sized from the inputs so that the codes use the grid's whole range and a few
saturate.

Library baselines (fp16 only, as CuPy has no bf16): "cupy_ops", cuBLAS then one CuPy operation per op, as a user
composes them; "cupy_fused", cuBLAS then one generated elementwise kernel for the whole chain (graph-level fusion).

STATUS: tests/test_gpu_epilogue.py (every check case of both families, the quantizers bit for bit, the baselines)
passed on the H200 at c89eb79, the last change to the kernels' code; compute-sanitizer memcheck clean on both
tensor-core rungs (results/h200/sanitize_fusion/). Records: results/h200/gemm_tc_epilogue.json and
gemm_fp32_epilogue.json (c89eb79); the first run's, before the loads were issued ahead of the math,
gemm_tc_epilogue_first_run.json.
Candidate (`candidate_rungs`): gemm_tc rung 10 with the chain applied before its TMA store, compiled without spills for
every chain the tests build. tests/test_gpu_epilogue.py passed on an H100 at 730294a (results/h100/
epilogue_gpu_tests_730294a.log), memcheck, racecheck and synccheck clean there (results/h100/sanitize_new_rungs/);
timed against torch's F.gelu(F.linear(...)) by lab.studies.fused_epilogue_study (results/h100/
fused_epilogue_study.json). Its GPU tests passed again at ec4fdb8, after rung 10's knob defaults moved into its
source (results/h100/epilogue_rung10_gpu_tests_ec4fdb8.log). lab.ops's hopper path runs it for calls with an
epilogue. Not yet on the H200.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from lab.core.errors import LabError
from lab.core.ladder import Problem, Rung
from lab.families.epilogue import ChainInputs, Epilogue, decode_e4m3, kernel_params, output_reference, storage_dtype
from lab.families.gemm import GemmFp32Family, padded, product
from lab.families.gemm_tc import BFLOAT16, GemmTcFamily, to_float32, to_storage

# Checks: every op alone, the chains the lessons use, each output type, on tiles' tails (N odd: no 2-byte pair
# stores; N not a multiple of 4 or 16: int8 rows that end inside a vector) and at partial tiles.
TC_EPILOGUES = (
    {"epilogue": "bias+gelu_tanh"}, {"epilogue": "bias+relu"}, {"epilogue": "gelu_erf"}, {"epilogue": "silu"},
    {"epilogue": "row_scale+col_scale"}, {"epilogue": "bias+gelu_tanh+residual"},
    {"epilogue": "col_scale+silu+clamp"},
    {"epilogue": "bias+gelu_tanh", "out": "int8"}, {"epilogue": "bias+gelu_tanh", "out": "int8", "q_per_row": True},
    {"epilogue": "none", "out": "int8"}, {"epilogue": "bias+relu", "out": "e4m3"},
    {"epilogue": "row_scale+gelu_tanh", "out": "e4m3", "q_per_row": True},
)
TAIL_SHAPES = ({"M": 1, "N": 1, "K": 17}, {"M": 3, "N": 5, "K": 64}, {"M": 129, "N": 257, "K": 65},
               {"M": 67, "N": 33, "K": 200}, {"M": 200, "N": 17, "K": 96}, {"M": 130, "N": 300, "K": 131})


def _epilogue(params: dict) -> Epilogue:
    return Epilogue.parse(params.get("epilogue", "none"), params.get("out", "same"), params.get("q_per_row", False))


class _FusedEpilogue:
    """What both fused families share: the chain's operands, its knobs and kernel argument, the expected output
    with its bounds (computed once per problem), and quantized outputs' values."""

    def _draw_chain_inputs(self, problem: Problem, epi: Epilogue, seed: int, dist: str, xp, residual) -> None:
        from lab.measure.check import random_array

        p = problem.params
        M, N, ldc = p["M"], p["N"], p["ldc"]
        arrays = {}
        if "bias" in epi.needs():
            arrays["bias"] = random_array((N,), np.float32, seed + 21, dist, xp=xp)
        if "row_scale" in epi.needs():
            arrays["row_scale"] = random_array((M,), np.float32, seed + 22, "uniform", xp=xp)
        if "col_scale" in epi.needs():
            arrays["col_scale"] = random_array((N,), np.float32, seed + 23, "uniform", xp=xp)
        if "residual" in epi.needs():
            arrays["residual"] = residual(random_array((M, ldc), np.float32, seed + 24, dist, xp=xp))
        if "q_scale" in epi.needs():
            arrays["q_scale"] = self._quantization_scale(problem, epi, seed, xp)
        problem.inputs["epilogue"] = arrays
        p["clamp"] = (-2.0, 3.0)

    def _quantization_scale(self, problem: Problem, epi: Epilogue, seed: int, xp):
        """Scales (multipliers) that spread the outputs over the grid: the accumulators' typical size is
        sqrt(K) * rms(A) * rms(B); 2.5 of those map to the largest code, so the tails saturate. Per row, each
        row's scale is that times a random factor in [0.5, 2)."""
        p = problem.params
        rms = [float(xp.sqrt(xp.mean(xp.square(self._values(problem.inputs[n][0]))))) for n in ("A", "B")]
        typical = np.sqrt(p["K"]) * rms[0] * rms[1] + 1.0  # + 1: the bias and residual are about 1
        top = 127.0 if epi.out == "int8" else 448.0
        base = np.float32(top / (2.5 * typical))
        if not epi.q_per_row:
            return xp.full((1,), base, dtype=xp.float32)
        rng = np.random.default_rng(seed + 25)
        return xp.asarray((base * rng.uniform(0.5, 2.0, p["M"])).astype(np.float32))

    def _values(self, stored):
        return stored

    def extra_knobs(self, problem: Problem) -> dict:
        return _epilogue(problem.params).knobs()

    def extra_args(self, problem: Problem, out) -> tuple:
        p, arrays = problem.params, problem.inputs["epilogue"]
        quantized = _epilogue(p).out != "same"
        return (kernel_params(bias=arrays.get("bias"), row_scale=arrays.get("row_scale"),
                              col_scale=arrays.get("col_scale"), residual=arrays.get("residual"),
                              ld_residual=p["ldc"], q_scale=arrays.get("q_scale"),
                              q_out=out if quantized else None, ld_q=p["ldc"], clamp=p["clamp"]),)

    def _host_chain_inputs(self, problem: Problem) -> ChainInputs:
        from lab.measure.check import to_numpy

        p, arrays = problem.params, problem.inputs["epilogue"]

        def host(name):
            return to_numpy(arrays[name]).astype(np.float64) if name in arrays else None

        residual = arrays.get("residual")
        if residual is not None:
            residual = self._values(to_numpy(residual))[:, :p["N"]].astype(np.float64)
        return ChainInputs(host("bias"), host("row_scale"), host("col_scale"), residual, host("q_scale"),
                           tuple(p["clamp"]))

    def _expected(self, problem: Problem) -> tuple[np.ndarray, np.ndarray]:
        """(reference, bound) of the stored output, padded to ldc, computed once per problem."""
        if "expected" not in problem.derived:
            problem.derived["expected"] = self.expected(problem)
        return problem.derived["expected"]

    def expected(self, problem: Problem, rounded_product: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """(reference, bound), padded to ldc. `rounded_product`: for a path that stores the product in the GEMM's
        type before its epilogue reads it back (the library baselines), one more rounding of v."""
        from lab.measure.bounds import half_subnormal_spacing, unit_roundoff

        p = problem.params
        v, b = self._accumulators(problem)
        if rounded_product:
            out = self._out_dtype(p)
            b = b + unit_roundoff(out) * (np.abs(v) + b) + half_subnormal_spacing(out)
        ref, bound = output_reference(_epilogue(p), v, b, self._host_chain_inputs(problem), self._out_dtype(p))
        return padded(ref, p["ldc"]), padded(bound, p["ldc"])

    def reference(self, problem: Problem) -> np.ndarray:
        return self._expected(problem)[0]

    def error_bound(self, problem: Problem, reference: np.ndarray) -> np.ndarray:
        return self._expected(problem)[1]

    def output_values(self, out):
        if out.dtype == np.uint8:  # e4m3 codes
            from lab.measure.check import to_numpy

            return decode_e4m3(to_numpy(out))
        if out.dtype == np.int8:
            return out
        return super().output_values(out)

    def _plain_output(self, problem: Problem, out):
        """Where the plain GEMM of the ceiling writes: `out` itself, or for a quantized output a scratch C in
        the GEMM's own type (kept with the problem, so timing allocates nothing)."""
        if problem.dtype == out.dtype and _epilogue(problem.params).out == "same":
            return out
        scratch = getattr(problem, "_plain_scratch", None)
        if scratch is None:
            import cupy as cp

            scratch = cp.empty((problem.params["M"], problem.params["ldc"]), dtype=self._plain_dtype(problem))
            problem._plain_scratch = scratch
        return scratch

    def min_dram_bytes(self, params: dict) -> int:
        """The GEMM's operands read once and the output written once at its own width, plus the chain's vectors
        and the residual."""
        M, N, K = params["M"], params["N"], params["K"]
        epi = _epilogue(params)
        item = self._item_bytes
        out = 1 if epi.out != "same" else item
        vectors = 4 * (N * (("bias" in epi.ops) + ("col_scale" in epi.ops)) + M * ("row_scale" in epi.ops)
                       + (M if epi.q_per_row else 1) * (epi.out != "same"))
        return item * (M * K + K * N) + out * M * N + item * M * N * ("residual" in epi.ops) + vectors


class GemmTcEpilogueFamily(_FusedEpilogue, GemmTcFamily):
    name = "gemm_tc_epilogue"
    title = "Tensor-core GEMM with a fused epilogue (rung 06 + lab_epilogue.cuh), fp16/bf16"
    ceiling_name = "plain_gemm"
    ceiling_title = "the same rung without the epilogue"
    profile_figure = "dram_bytes"
    _item_bytes = 2
    PLAIN = GemmTcFamily.rungs[5]
    # Exercise 08's rung: rung 06 storing through a functor in a plugin header (lab_epilogue_plugin.cuh, or a
    # student's file in its place: its spec's `plugin`) instead of its own chain. The functor is bias + GELU -> int8
    # only: on any other epilogue this rung builds rung 06's kernel with its chain (variant), and the benchmarks time
    # it only where it applies (rungs_for).
    PLUGIN_RUNG = "08_functor_plugin"
    PLUGIN_EPILOGUE = Epilogue(("bias", "gelu_tanh"), "int8")  # per tensor; per row (q_per_row) too
    # Both launch "persistent" (GemmTcFamily.grid): a 1-D grid of min(tiles, SMs) blocks, A and B through TMA maps,
    # the chain's parameters (kernel_params) after the plain GEMM's arguments.
    rungs = (Rung("gemm_tc_epilogue", "06_persistent", PLAIN.spec,
                  "rung 06, the epilogue chain fused into its stores", "persistent"),
             Rung("gemm_tc_epilogue", PLUGIN_RUNG,
                  dataclasses.replace(PLAIN.spec.with_knobs(EPI_PLUGIN=1, EPI_OUT=1),
                                      plugin="common/lab_epilogue_plugin.cuh"),
                  "rung 06 with exercise 08's functor (a plugin header)", "persistent"))
    PERSISTENT_RUNGS = (*GemmTcFamily.PERSISTENT_RUNGS, PLUGIN_RUNG)  # by key, for other layers
    # Rung 10 with the chain: applied to the accumulators in registers before its TMA-store staging (C in the GEMM's
    # type, beta = 0), else on its register stores as rung 06 does. Launch "cluster_tma_store" (GemmTcFamily.grid),
    # the chain's parameters after store_by_tma. Compiled and checked on the CPU; its GPU tests have not run yet.
    TMA_STORE = next(r for r in GemmTcFamily.rungs if r.key == "10_tma_store")
    candidate_rungs = (Rung("gemm_tc_epilogue", "10_tma_store", TMA_STORE.spec,
                            "rung 10, the chain applied before its TMA-store epilogue", "cluster_tma_store"),)

    def make_problem(self, seed: int = 0, dist: str = "normal", M: int = 64, N: int = 64, K: int = 64,
                     alpha: float = 1.0, beta: float = 0.0, pad: int = 0, layout: str = "TN", dtype: str = "float16",
                     sets: int = 1, epilogue: str = "bias+gelu_tanh", out: str = "same",
                     q_per_row: bool = False) -> Problem:
        epi = Epilogue.parse(epilogue, out, q_per_row)
        if epi.out != "same" and beta != 0:
            raise LabError("A quantized output replaces C, so beta must be 0 (C is not read).")
        problem = super().make_problem(seed, dist, M=M, N=N, K=K, alpha=alpha, beta=beta, pad=pad, layout=layout,
                                       dtype=dtype, sets=sets)
        problem.params |= {"epilogue": "+".join(epi.ops) or "none", "out": epi.out, "q_per_row": q_per_row}
        problem.label += f" {epi.name}"
        problem.dtype = storage_dtype(epi, problem.dtype)
        problem.bytes_moved = self.min_dram_bytes(problem.params)
        self._draw_chain_inputs(problem, epi, seed, dist, self._xp(), lambda x: to_storage(x, dtype, self._xp()))
        return problem

    def _values(self, stored):
        dtype = BFLOAT16 if stored.dtype == np.uint16 else "float16"
        xp = np if isinstance(stored, np.ndarray) else self._xp()
        return to_float32(stored, dtype, xp)

    def _plain_dtype(self, problem: Problem):
        return np.uint16 if problem.params["dtype"] == BFLOAT16 else np.float16

    def _out_dtype(self, params: dict):
        return BFLOAT16 if params["dtype"] == BFLOAT16 else np.float16

    def _accumulators(self, problem: Problem) -> tuple[np.ndarray, np.ndarray]:
        from lab.measure.bounds import tensor_core_accumulation_bound

        p = problem.params
        a, b, c0 = self._operands(problem)
        v = product(a, b, c0, p["alpha"], p["beta"])
        return v, self.accumulation_scale * tensor_core_accumulation_bound(a, b, v, alpha=p["alpha"], beta=p["beta"],
                                                                           c0=c0)

    def launch_ceiling(self, problem: Problem, out, set_index: int = 0) -> None:
        """Rung 06 itself, without the epilogue, on the same operands."""
        GemmTcFamily.launch(GemmTcFamily(), self.PLAIN, problem, self._plain_output(problem, out), set_index)

    @staticmethod
    def takes_plugin(rung: Rung) -> bool:
        """Whether `rung` stores through a plugin header's functor (its spec names one: the plugin rung, or a
        student's functor in its place) rather than the chain."""
        return bool(rung.spec.plugin)

    def plugin_applies(self, params: dict) -> bool:
        """Whether the plugin rung's functor computes this problem's epilogue (bias + GELU -> int8)."""
        epi = _epilogue(params)
        return (epi.ops, epi.out) == (self.PLUGIN_EPILOGUE.ops, self.PLUGIN_EPILOGUE.out)

    def variant(self, rung: Rung, problem: Problem, out=None) -> Rung:
        """The plugin rung on an epilogue its functor does not compute is rung 06 with its own chain (its launch,
        "persistent", unchanged): every check case of the family runs on every rung."""
        if self.takes_plugin(rung) and not self.plugin_applies(problem.params):
            rung = dataclasses.replace(rung, spec=self.PLAIN.spec)
        return super().variant(rung, problem, out)

    def launch_notes(self, rung: Rung, problem: Problem, out) -> dict:
        notes = super().launch_notes(rung, problem, out)
        if self.takes_plugin(rung):
            notes["epilogue"] = "plugin" if self.plugin_applies(problem.params) else "rung 06's chain"
        return notes

    def rungs_for(self, kind: str, params: dict, quick: bool = False) -> tuple[Rung, ...]:
        """The plugin rung is timed only where its functor applies."""
        rungs = super().rungs_for(kind, params, quick)
        return tuple(r for r in rungs if not self.takes_plugin(r) or self.plugin_applies(params))

    def baselines(self) -> dict:
        return {"cupy_ops": _library_path, "cupy_fused": _graph_fused_path}

    def check_cases(self) -> list[dict]:
        cases = []
        for i, epi in enumerate(TC_EPILOGUES):
            shape = TAIL_SHAPES[i % len(TAIL_SHAPES)]
            cases.append(shape | epi | {"layout": "TN", "dtype": "float16"})
            cases.append(TAIL_SHAPES[(i + 3) % len(TAIL_SHAPES)] | epi | {"layout": "NN", "dtype": BFLOAT16})
        cases += [{"M": 256, "N": 512, "K": 1024, "epilogue": "bias+gelu_tanh", "layout": "TN", "dtype": "float16"},
                  {"M": 130, "N": 140, "K": 150, "alpha": 0.5, "beta": -1.5, "epilogue": "bias+silu", "layout": "TN",
                   "dtype": "float16"},
                  {"M": 100, "N": 37, "K": 64, "pad": 3, "epilogue": "bias", "out": "int8", "layout": "TN",
                   "dtype": "float16"},
                  {"M": 64, "N": 61, "K": 4099, "epilogue": "gelu_tanh", "out": "e4m3", "layout": "TN",
                   "dtype": "float16"}]
        return cases

    def sweep_params(self, max_bytes: int = 0) -> list[dict]:
        return [{"M": n, "N": n, "K": n, "layout": "TN", "dtype": "float16", "epilogue": "bias+gelu_tanh"}
                for n in (1024, 2048, 4096, 8192)]

    def tail_params(self) -> list[dict]:
        return []

    def headline_params(self) -> list[dict]:
        return [{"M": n, "N": n, "K": n, "layout": "TN", "dtype": "float16", "epilogue": "bias+gelu_tanh", **out}
                for n in (4096, 8192) for out in ({}, {"out": "int8", "q_per_row": True})]


class GemmFp32EpilogueFamily(_FusedEpilogue, GemmFp32Family):
    name = "gemm_fp32_epilogue"
    title = "SGEMM with a fused epilogue (rung 08 + lab_epilogue.cuh), float32"
    ceiling_name = "plain_gemm"
    ceiling_title = "the same rung without the epilogue"
    profile_figure = None
    _item_bytes = 4
    PLAIN = GemmFp32Family.rungs[7]
    # Launch "tiles_vec" (GemmFp32Family): grid (ceil(N / BN), ceil(M / BM)) of THREADS threads, VEC=4 where 16-byte
    # vectors fit (else 1), STAGES-deep dynamic shared memory, the chain's parameters after the GEMM's arguments.
    rungs = (Rung("gemm_fp32_epilogue", "08_multistage", PLAIN.spec,
                  "rung 08, the epilogue chain fused into its stores", "tiles_vec"),)

    def make_problem(self, seed: int = 0, dist: str = "normal", M: int = 64, N: int = 64, K: int = 64,
                     alpha: float = 1.0, beta: float = 0.0, pad: int = 0, sets: int = 1,
                     epilogue: str = "bias+gelu_tanh") -> Problem:
        import cupy as cp

        epi = Epilogue.parse(epilogue)
        problem = super().make_problem(seed, dist, M=M, N=N, K=K, alpha=alpha, beta=beta, pad=pad, sets=sets)
        problem.params |= {"epilogue": "+".join(epi.ops) or "none", "out": "same", "q_per_row": False}
        problem.label += f" {epi.name}"
        problem.bytes_moved = self.min_dram_bytes(problem.params)
        self._draw_chain_inputs(problem, epi, seed, dist, cp, lambda x: x)
        return problem

    def _plain_dtype(self, problem: Problem):
        return np.float32

    def _out_dtype(self, params: dict):
        return np.float32

    def _accumulators(self, problem: Problem) -> tuple[np.ndarray, np.ndarray]:
        from lab.measure.bounds import matmul_bound

        p = problem.params
        a, b, c0 = self._operands(problem)
        v = product(a, b, c0, p["alpha"], p["beta"])
        return v, matmul_bound(a, b, v, alpha=p["alpha"], beta=p["beta"], c0=c0, acc_dtype=np.float32,
                               out_dtype=np.float32)

    def launch_ceiling(self, problem: Problem, out, set_index: int = 0) -> None:
        """Rung 08 itself, without the epilogue, on the same operands."""
        GemmFp32Family.launch(GemmFp32Family(), self.PLAIN, problem, out, set_index)

    def check_cases(self) -> list[dict]:
        chains = ("bias+gelu_tanh", "bias+relu", "silu", "row_scale+col_scale+gelu_erf", "bias+gelu_tanh+residual",
                  "clamp")
        cases = [shape | {"epilogue": chain} for chain, shape in zip(chains, TAIL_SHAPES, strict=True)]
        return cases + [{"M": 128, "N": 128, "K": 64, "pad": 4, "epilogue": "bias+gelu_tanh"},
                        {"M": 130, "N": 140, "K": 150, "alpha": 0.5, "beta": -1.5, "epilogue": "bias+silu"}]

    def sweep_params(self, max_bytes: int = 0) -> list[dict]:
        return [{"M": n, "N": n, "K": n, "epilogue": "bias+gelu_tanh"} for n in (1024, 2048, 4096)]

    def tail_params(self) -> list[dict]:
        return []

    def headline_params(self) -> list[dict]:
        return [{"M": n, "N": n, "K": n, "epilogue": "bias+gelu_tanh"} for n in (4096, 8192)]


# --- the library baselines (fp16, tensor-core family) ----------------------------------------------------------

def _cublas_product(problem: Problem, set_index: int):
    """cuBLAS's fp16 product A @ B (an M x N fp16 array), as cupy.matmul gives it."""
    import cupy as cp

    p = problem.params
    if p["dtype"] != "float16" or p["pad"] or (p["alpha"], p["beta"]) != (1, 0):
        raise LabError("The CuPy baselines take fp16 problems with alpha = 1, beta = 0 and no padding "
                       "(CuPy has no bf16); time the fused rung against the plain one instead.")
    a = problem.inputs["A"][set_index % len(problem.inputs["A"])]
    b = problem.inputs["B"][set_index % len(problem.inputs["B"])]
    return cp.matmul(a, b if p["layout"] == "NN" else b.T)


def _library_path(problem: Problem, out, set_index: int = 0) -> None:
    """cuBLAS, then one CuPy operation after another, each a kernel with its own intermediate array."""
    import cupy as cp

    epi, arrays, p = _epilogue(problem.params), problem.inputs["epilogue"], problem.params
    y = _cublas_product(problem, set_index).astype(cp.float32)
    for op in epi.ops:
        if op == "bias":
            y = y + arrays["bias"]
        elif op == "row_scale":
            y = y * arrays["row_scale"][:, None]
        elif op == "col_scale":
            y = y * arrays["col_scale"]
        elif op == "residual":
            y = y + arrays["residual"].astype(cp.float32)
        elif op == "relu":
            y = cp.maximum(y, 0)
        elif op == "gelu_tanh":
            y = 0.5 * y * (1 + cp.tanh(0.7978845608 * (y + 0.044715 * y ** 3)))
        elif op == "gelu_erf":
            from cupyx.scipy.special import erf

            y = 0.5 * y * (1 + erf(y * 0.7071067812))
        elif op == "silu":
            y = y / (1 + cp.exp(-y))
        elif op == "clamp":
            y = cp.clip(y, *p["clamp"])
    if epi.out == "int8":
        qs = arrays["q_scale"][:, None] if epi.q_per_row else arrays["q_scale"]
        out[...] = cp.clip(cp.rint(y * qs), -128, 127).astype(cp.int8)
    elif epi.out == "same":
        out[...] = y.astype(out.dtype)
    else:
        raise LabError("CuPy has no fp8 type: the library baselines do not cover e4m3 outputs.")


_OP_SOURCE = {
    "bias": "v += bias[c];", "row_scale": "v *= row_scale[r];", "col_scale": "v *= col_scale[c];",
    "residual": "v += (float)residual[i];", "relu": "v = v < 0.f ? 0.f : v;",
    "gelu_tanh": "v = 0.5f * v * (1.f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));",
    "gelu_erf": "v = 0.5f * v * (1.f + erff(v * 0.7071067812f));", "silu": "v = v / (1.f + expf(-v));",
    "clamp": "v = v < lo ? lo : (v > hi ? hi : v);",
}
_FUSED_KERNELS: dict = {}


def _fused_kernel(epi: Epilogue):
    """One CuPy ElementwiseKernel for the whole chain and the output conversion (cached per chain)."""
    import cupy as cp

    if epi not in _FUSED_KERNELS:
        body = "\n".join(_OP_SOURCE[op] for op in epi.ops)
        if epi.out == "int8":
            store = "float q = rintf(v * q_scale[row_q]); out = (signed char)fminf(fmaxf(q, -128.f), 127.f);"
        else:
            store = "out = (half)v;"
        source = ("const long long r = i / n, c = i % n; const long long row_q = per_row ? r : 0;"
                  f"float v = (float)y;\n{body}\n{store}")
        _FUSED_KERNELS[epi] = cp.ElementwiseKernel(
            "float16 y, raw float32 bias, raw float32 row_scale, raw float32 col_scale, raw float16 residual, "
            "raw float32 q_scale, float32 lo, float32 hi, int64 n, bool per_row", "O out", source,
            f"lab_fused_{abs(hash(epi.name))}")
    return _FUSED_KERNELS[epi]


def _graph_fused_path(problem: Problem, out, set_index: int = 0) -> None:
    """cuBLAS, then one generated elementwise kernel for the whole chain (graph-level fusion)."""
    import cupy as cp

    epi, arrays, p = _epilogue(problem.params), problem.inputs["epilogue"], problem.params
    if epi.out == "e4m3":
        raise LabError("CuPy has no fp8 type: the library baselines do not cover e4m3 outputs.")
    y = _cublas_product(problem, set_index)
    empty = cp.empty(1, dtype=cp.float32)
    residual = arrays.get("residual", cp.empty(1, dtype=cp.float16))
    _fused_kernel(epi)(y, arrays.get("bias", empty), arrays.get("row_scale", empty), arrays.get("col_scale", empty),
                       residual, arrays.get("q_scale", empty), np.float32(p["clamp"][0]), np.float32(p["clamp"][1]),
                       np.int64(p["N"]), epi.q_per_row, out)


# --- a direct call, for studies and lab.ops -----------------------------------------------------------------------

def fused_matmul(a, w, *, bias=None, activation: str | None = None, out=None):
    """out = activation(a @ w.T + bias) in one launch of rung 06 with the fused epilogue: a (M x K) and the weight
    w (N x K) fp16, C-contiguous; bias float32 (N,) or None; activation one of relu, gelu_tanh, gelu_erf, silu or
    None; out (M x N) fp16, allocated when None. Returns out."""
    import cupy as cp

    if a.dtype != cp.float16 or w.dtype != cp.float16:
        raise LabError(f"fused_matmul takes fp16 a and w; got {a.dtype} and {w.dtype}: cast them with "
                       ".astype(cupy.float16).")
    if a.ndim != 2 or w.ndim != 2 or a.shape[1] != w.shape[1]:
        raise LabError(f"fused_matmul needs a (M x K) and w (N x K) with the same K; got {a.shape} and {w.shape}.")
    if not (a.flags.c_contiguous and w.flags.c_contiguous):
        raise LabError("fused_matmul needs C-contiguous a and w: pass cupy.ascontiguousarray(x).")
    M, K = a.shape
    N = w.shape[0]
    if bias is not None and (bias.dtype != cp.float32 or bias.shape != (N,)):
        raise LabError(f"bias must be float32 of shape ({N},); got {bias.dtype} {bias.shape}.")
    ops = (("bias",) if bias is not None else ()) + ((activation,) if activation else ())
    epi = Epilogue(ops)
    if out is None:
        out = cp.empty((M, N), dtype=cp.float16)
    elif out.shape != (M, N) or out.dtype != cp.float16 or not out.flags.c_contiguous:
        raise LabError(f"out must be a C-contiguous fp16 array of shape ({M}, {N}); got {out.dtype} {out.shape}.")
    params = {"M": M, "N": N, "K": K, "layout": "TN", "dtype": "float16", "alpha": 1.0, "beta": 0.0, "pad": 0,
              "lda": K, "ldb": K, "ldc": N, "epilogue": "+".join(ops) or "none", "out": "same", "q_per_row": False,
              "clamp": (-np.inf, np.inf)}
    inputs = {"A": [a], "B": [w], "epilogue": {"bias": bias} if bias is not None else {}}
    problem = Problem(f"fused {M}x{N}x{K} {epi.name}", inputs, (M, N), 0, params=params, dtype=np.dtype(np.float16),
                      flops=2 * M * N * K)
    family = GemmTcEpilogueFamily()
    family.launch(family.rungs[0], problem, out)
    return out
