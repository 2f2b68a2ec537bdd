"""The library's GEMM, called the way a user of the library would call it, and kept to the lab's error bound.

Two calls, best first:
  cuBLASLt   through nvmath-python's low-level bindings (`nvmath.bindings.cublasLt`), where it is installed: a
             32 MiB workspace per device and stream (PyTorch's size on Hopper), the heuristic's first algorithm for
             the shape, alignments and epilogue (as torch.mm and F.linear pick theirs), and the epilogue the library
             can fuse: bias, bias + ReLU, bias + GELU (tanh form), and a residual added through C with beta = 1.
  GemmEx     cublasGemmEx through CuPy's binding, where nvmath-python is not installed (no workspace, the default
             algorithm): what cupy.matmul calls.

Both accumulate in fp32 end to end. cuBLAS may split K and add the slices in the output type (fp16 or bf16),
which breaks the fp32-accumulation bound on long K; PyTorch allows it by default
(`allow_fp16_reduced_precision_reduction`). Here cuBLASLt is limited to reductions in the compute type
(REDUCTION_SCHEME_MASK) and GemmEx runs with CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION.

Layout: a row-major M x N C is a column-major N x M matrix, so the library computes C^T = B^T A^T: our B is its
first operand (transposed for TN, where B is N x K), our A its second.

A prepared call (`LtCall`, `GemmExCall`) is bound to one set of addresses and replays with one binding call, so
lab.ops records it like a kernel launch (lab.core.build.record_launch) and replays it on its fast path.
"""

from __future__ import annotations

import functools
from collections import OrderedDict

import numpy as np

from lab.core.errors import LabError

BFLOAT16 = "bfloat16"
WORKSPACE_BYTES = 32 << 20
_CUDA_R_16F, _CUDA_R_16BF, _CUDA_R_32F = 2, 14, 0  # cudaDataType (library_types.h)
_CUBLAS_COMPUTE_32F = 68
_CUBLAS_GEMM_DEFAULT = -1
_CUBLAS_OP_N, _CUBLAS_OP_T = 0, 1
_CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION = 16
# The activations cuBLASLt fuses after a bias (its GELU is the tanh form).
_LT_EPILOGUES = {(): "DEFAULT", ("bias",): "BIAS", ("bias", "relu"): "RELU_BIAS", ("bias", "gelu_tanh"): "GELU_BIAS",
                 ("relu",): "RELU", ("gelu_tanh",): "GELU"}


def _kind(dtype: str) -> int:
    return _CUDA_R_16BF if dtype == BFLOAT16 else _CUDA_R_16F


# --- cuBLASLt -----------------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def lt_unavailable() -> str | None:
    """None when cuBLASLt can be called through nvmath-python here, else why not (one phrase)."""
    try:
        from nvmath.bindings import cublasLt  # noqa: F401
    except ImportError:
        return "nvmath-python is not installed (pip install nvmath-python)"
    try:
        _lt_handle()
    except Exception as exc:  # the library itself failed to load or to create a handle
        return f"cuBLASLt could not start: {exc}"
    return None


def lt_fusable(ops: tuple[str, ...]) -> bool:
    """Whether cuBLASLt fuses this epilogue chain whole: bias/ReLU/GELU(tanh) as its epilogue, or a residual alone
    through C (beta = 1). A residual with anything else runs after the product: the library applies its activation
    after adding C, and its bias + C sums left the error bound on the H200 (tests/test_gpu_ops.py, 2048x1024x512)."""
    rest = tuple(op for op in ops if op != "residual")
    if "residual" in ops and rest:  # bias + residual together left lab.ops's bound on the H200: run them after
        return False
    return rest in _LT_EPILOGUES


_LT_STATE: dict = {}  # device id -> handle; (device id, stream ptr) -> workspace


def _lt_handle() -> int:
    import cupy as cp
    from nvmath.bindings import cublasLt as lt

    dev = cp.cuda.Device().id
    if dev not in _LT_STATE:
        _LT_STATE[dev] = lt.create()
    return _LT_STATE[dev]


def _workspace(stream_ptr: int):
    import cupy as cp

    key = (cp.cuda.Device().id, stream_ptr)
    ws = _LT_STATE.get(key)
    if ws is None:
        ws = _LT_STATE[key] = cp.empty(WORKSPACE_BYTES, dtype=cp.uint8)
    return ws


def _alignment(ptr: int) -> int:
    """The largest power of two (up to 256) dividing an address: what cuBLASLt's heuristic must assume."""
    return min(256, ptr & -ptr) if ptr else 256


def _set(setter, obj, attr, value, ctype) -> None:
    buf = np.array(value, dtype=ctype)
    setter(obj, int(attr), buf.ctypes.data, buf.nbytes)


@functools.lru_cache(maxsize=1024)
def _lt_plan(M: int, N: int, K: int, dtype: str, layout: str, lda: int, ldb: int, ldc: int, epilogue: str,
             beta_one: bool, aligns: tuple[int, int, int], device: int):
    """(layouts, preference-independent algorithm bytes, workspace bytes) for one shape, or raise LabError. The matmul
    descriptor is made per call (it carries the bias address); the heuristic only depends on what is keyed here."""
    from nvmath.bindings import cublasLt as lt

    kind = _kind(dtype)
    trans_a = _CUBLAS_OP_T if layout == "TN" else _CUBLAS_OP_N
    # Library operand 1 is our B (N x K after its op), operand 2 our A (K x M), D our C (N x M), all column-major.
    a_layout = lt.matrix_layout_create(kind, K, N, ldb) if layout == "TN" else lt.matrix_layout_create(kind, N, K, ldb)
    b_layout = lt.matrix_layout_create(kind, K, M, lda)
    d_layout = lt.matrix_layout_create(kind, N, M, ldc)
    desc = _lt_desc(trans_a, epilogue, 0)
    pref = lt.matmul_preference_create()
    try:
        P = lt.MatmulPreferenceAttribute
        _set(lt.matmul_preference_set_attribute, pref, P.MAX_WORKSPACE_BYTES, WORKSPACE_BYTES, np.uint64)
        # Split-K slices are added in fp32 or not at all: never in the output type.
        _set(lt.matmul_preference_set_attribute, pref, P.REDUCTION_SCHEME_MASK, int(lt.ReductionScheme.COMPUTE_TYPE),
             np.uint32)
        b_align, a_align, d_align = aligns
        for attr, value in ((P.MIN_ALIGNMENT_A_BYTES, b_align), (P.MIN_ALIGNMENT_B_BYTES, a_align),
                            (P.MIN_ALIGNMENT_C_BYTES, d_align), (P.MIN_ALIGNMENT_D_BYTES, d_align)):
            _set(lt.matmul_preference_set_attribute, pref, attr, value, np.uint32)
        results = np.zeros(1, dtype=lt.matmul_heuristic_result_dtype)
        count = np.zeros(1, dtype=np.int32)
        lt.matmul_algo_get_heuristic(_lt_handle(), desc, a_layout, b_layout, d_layout, d_layout, pref, 1,
                                     results.ctypes.data, count.ctypes.data)
    except lt.cuBLASLtError as exc:
        raise LabError(f"cuBLASLt has no algorithm for {M} x {N} x {K} {dtype} {layout} with epilogue "
                       f"{epilogue}: {exc}.") from None
    finally:
        lt.matmul_preference_destroy(pref)
        lt.matmul_desc_destroy(desc)
    if count[0] < 1 or results[0]["state"] != 0:
        raise LabError(f"cuBLASLt has no algorithm for {M} x {N} x {K} {dtype} {layout} with epilogue {epilogue}.")
    algo = np.array(results[0]["algo"])  # kept alive with the plan: LtCall passes its address
    return a_layout, b_layout, d_layout, algo, int(results[0]["workspace_size"])


def _lt_desc(trans_a: int, epilogue: str, bias_ptr: int) -> int:
    from nvmath.bindings import cublasLt as lt

    D = lt.MatmulDescAttribute
    desc = lt.matmul_desc_create(_CUBLAS_COMPUTE_32F, _CUDA_R_32F)
    _set(lt.matmul_desc_set_attribute, desc, D.TRANSA, trans_a, np.int32)
    _set(lt.matmul_desc_set_attribute, desc, D.TRANSB, _CUBLAS_OP_N, np.int32)
    _set(lt.matmul_desc_set_attribute, desc, D.EPILOGUE, int(getattr(lt.Epilogue, epilogue)), np.uint32)
    if epilogue != "DEFAULT" and "BIAS" in epilogue:  # the bias in the output's type (its default for 16-bit D)
        _set(lt.matmul_desc_set_attribute, desc, D.BIAS_POINTER, bias_ptr, np.int64)
    return desc


_ONE, _ZERO = np.ones(1, np.float32), np.zeros(1, np.float32)
_ONE_PTR, _ZERO_PTR = _ONE.ctypes.data, _ZERO.ctypes.data


class LtCall:
    """One cuBLASLt matmul bound to its addresses; calling it (with a kernel launch's arguments, which it ignores:
    lab.ops replays it like a kernel) enqueues it on the current stream."""

    __slots__ = ("plan", "desc", "a", "b", "c", "d", "beta", "algo", "ws_bytes", "epilogue", "handle", "ws",
                 "bias16", "__weakref__")

    def __init__(self, M, N, K, dtype, layout, a_ptr, lda, b_ptr, ldb, out_ptr, ldc, *, bias_ptr=0,
                 ops: tuple[str, ...] = (), residual_ptr=0, bias16=None):
        """`bias_ptr`: the bias in the output's type (N values; `bias16`, when given, is that scratch vector, kept
        alive with the call)."""
        import cupy as cp

        if lt_unavailable():
            raise LabError(f"cuBLASLt is not available: {lt_unavailable()}.")
        if not lt_fusable(ops):
            raise LabError(f"cuBLASLt does not fuse the epilogue {'+'.join(ops)}; apply it after the product.")
        self.epilogue = _LT_EPILOGUES[tuple(op for op in ops if op != "residual")]
        beta_one = "residual" in ops
        aligns = (_alignment(b_ptr), _alignment(a_ptr),
                  min(_alignment(out_ptr), _alignment(residual_ptr) if beta_one else 256))
        self.plan = _lt_plan(M, N, K, dtype, layout, lda, ldb, ldc, self.epilogue, beta_one, aligns,
                             cp.cuda.Device().id)
        trans_a = _CUBLAS_OP_T if layout == "TN" else _CUBLAS_OP_N
        self.desc = _lt_desc(trans_a, self.epilogue, bias_ptr)
        self.a, self.b, self.d = b_ptr, a_ptr, out_ptr  # library operands: ours swapped (see the module's note)
        self.c = residual_ptr if beta_one else out_ptr
        self.beta = _ONE_PTR if beta_one else _ZERO_PTR  # host scalars that live as long as the module
        self.algo = self.plan[3].ctypes.data  # the plan (cached) keeps the algorithm's bytes alive
        self.ws_bytes = self.plan[4]
        self.handle = _lt_handle()
        self.bias16 = bias16
        self.ws: dict = {}  # stream -> workspace address (the workspace itself is kept per device and stream)

    def __call__(self, grid=None, block=None, args=None, shared_mem: int = 0) -> None:
        import cupy as cp
        from nvmath.bindings import cublasLt as lt

        stream = cp.cuda.get_current_stream().ptr
        ws = self.ws.get(stream)
        if ws is None:
            ws = self.ws[stream] = _workspace(stream).data.ptr
        a_layout, b_layout, d_layout, _, _ = self.plan
        lt.matmul(self.handle, self.desc, _ONE_PTR, self.a, a_layout, self.b, b_layout, self.beta, self.c, d_layout,
                  self.d, d_layout, self.algo, ws, WORKSPACE_BYTES, stream)

    def __del__(self):
        try:
            from nvmath.bindings import cublasLt as lt

            lt.matmul_desc_destroy(self.desc)
        except Exception:  # interpreter shutdown: the library may be gone already
            pass


# --- cublasGemmEx --------------------------------------------------------------------------------------------

class GemmExCall:
    """C = alpha * A @ B + beta * C through cublasGemmEx (fp32 compute, reduced-precision reductions disallowed),
    bound to its addresses like LtCall. alpha and beta are host scalars."""

    __slots__ = ("args", "alpha", "beta")

    def __init__(self, M, N, K, dtype, layout, a_ptr, lda, b_ptr, ldb, out_ptr, ldc, alpha=1.0, beta=0.0):
        kind = _kind(dtype)
        self.alpha, self.beta = np.array(alpha, np.float32), np.array(beta, np.float32)
        op_b = _CUBLAS_OP_N if layout == "NN" else _CUBLAS_OP_T
        self.args = (op_b, _CUBLAS_OP_N, N, M, K, self.alpha.ctypes.data, b_ptr, kind, ldb, a_ptr, kind, lda,
                     self.beta.ctypes.data, out_ptr, kind, ldc, _CUBLAS_COMPUTE_32F, _CUBLAS_GEMM_DEFAULT)

    def __call__(self, grid=None, block=None, args=None, shared_mem: int = 0) -> None:
        import cupy as cp
        from cupy_backends.cuda.libs import cublas

        handle = cp.cuda.device.get_cublas_handle()
        cublas.setStream(handle, cp.cuda.get_current_stream().ptr)
        mode = cublas.getMathMode(handle)
        cublas.setMathMode(handle, mode | _CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)
        try:
            cublas.gemmEx(handle, *self.args)
        finally:
            cublas.setMathMode(handle, mode)


def gemm_ex(p: dict, a, b, out) -> None:
    """cublasGemmEx on a family's problem parameters (M, N, K, dtype, layout, alpha, beta, lda, ldb, ldc)."""
    GemmExCall(p["M"], p["N"], p["K"], p["dtype"], p["layout"], a.data.ptr, p["lda"], b.data.ptr, p["ldb"],
               out.data.ptr, p["ldc"], p.get("alpha", 1.0), p.get("beta", 0.0))()


def library_call(M, N, K, dtype, layout, a_ptr, lda, b_ptr, ldb, out_ptr, ldc, *, bias_ptr=0, ops=(),
                 residual_ptr=0):
    """The best library call here for a product (and the part of `ops` it fuses): (call, fused), where `fused`
    says whether the whole epilogue chain ran inside it. cuBLASLt where nvmath-python is installed, else GemmEx."""
    if lt_unavailable() is None:
        if ops and lt_fusable(ops):
            bias16 = _bias_scratch(N) if "bias" in ops else None
            try:
                call = LtCall(M, N, K, dtype, layout, a_ptr, lda, b_ptr, ldb, out_ptr, ldc,
                              bias_ptr=0 if bias16 is None else bias16.data.ptr, ops=ops, residual_ptr=residual_ptr,
                              bias16=bias16)
            except LabError:
                pass  # no fused algorithm for this shape: the plain product, the epilogue after
            else:
                return (_BiasFirst(call, bias_ptr, N, dtype) if bias16 is not None else call), True
        return LtCall(M, N, K, dtype, layout, a_ptr, lda, b_ptr, ldb, out_ptr, ldc), not ops
    return GemmExCall(M, N, K, dtype, layout, a_ptr, lda, b_ptr, ldb, out_ptr, ldc), not ops


def _bias_scratch(n: int):
    import cupy as cp

    return cp.empty(n, dtype=cp.uint16)


class _BiasFirst:
    """A fused cuBLASLt call whose fp32 bias is rounded into the call's 16-bit scratch first
    (kernels/common/bias_to_half.cu), so every call (and every replay) reads the bias as it is now."""

    __slots__ = ("call", "kernel", "grid", "args")

    def __init__(self, call: LtCall, bias_ptr: int, n: int, dtype: str):
        from lab.core.build import KernelSpec, get_kernel

        spec = KernelSpec("common/bias_to_half.cu", "lab_bias_to_half", (("BF16", int(dtype == BFLOAT16)),),
                          min_arch=80)
        self.call = call
        self.kernel = get_kernel(spec).raw  # launched directly: this object is the recorded launch
        self.grid, self.args = (-(-n // 256),), (np.uint64(bias_ptr), call.bias16, np.int32(n))

    def __call__(self, grid=None, block=None, args=None, shared_mem: int = 0) -> None:
        self.kernel(self.grid, (256,), self.args)
        self.call()


def library_name() -> str:
    """Which library call `library_call` makes here (for the records)."""
    return "cublasLt" if lt_unavailable() is None else "cublasGemmEx"


# --- PyTorch, the peer ------------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def torch_mm_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


_TORCH_VIEWS: OrderedDict = OrderedDict()  # the last few views (each keeps its CuPy memory alive)
TORCH_VIEWS_KEPT = 16


def torch_view(x, rows: int, cols: int, ld: int, dtype: str):
    """A (rows x cols, row stride ld) PyTorch view of a CuPy array's memory (DLPack, zero-copy), cached per address:
    the memory from x's first element to its last, whatever x's own strides."""
    import cupy as cp
    import torch

    key = (x.data.ptr, rows, cols, ld, dtype)
    view = _TORCH_VIEWS.get(key)
    if view is None:
        flat = torch.from_dlpack(cp.ndarray(((rows - 1) * ld + cols,), x.dtype, x.data))
        flat = flat.view(torch.bfloat16) if dtype == BFLOAT16 else flat
        view = _TORCH_VIEWS[key] = flat.as_strided((rows, cols), (ld, 1))
        while len(_TORCH_VIEWS) > TORCH_VIEWS_KEPT:
            _TORCH_VIEWS.popitem(last=False)
    return view


def torch_mm(p: dict, a, b, out) -> None:
    """torch.mm(A, B) into `out` on the same memory: B as stored (K x N for NN; N x K for TN, passed transposed)."""
    import torch

    M, N, K, dtype = p["M"], p["N"], p["K"], p["dtype"]
    ta = torch_view(a, M, K, p["lda"], dtype)
    tb = torch_view(b, K, N, p["ldb"], dtype) if p["layout"] == "NN" else torch_view(b, N, K, p["ldb"], dtype).t()
    torch.mm(ta, tb, out=torch_view(out, M, N, p["ldc"], dtype))
