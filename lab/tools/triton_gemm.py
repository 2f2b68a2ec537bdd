"""A Triton GEMM with the bias + GELU (tanh) epilogue fused into it: the checklist's third level
(lab/studies/checklist.py).

    Y = GELU_tanh(A @ W.T + bias)    A (M x K) fp16 row-major, W (N x K) fp16 row-major (a linear layer's weight),
                                     bias (N,) float32, Y (M x N) fp16

Each program computes one BLOCK_M x BLOCK_N tile of Y: it walks K in steps of BLOCK_K, accumulating fp32 products
on the tensor cores (tl.dot), then adds the bias and applies GELU to the fp32 accumulator and stores fp16 once, so
no intermediate leaves the registers. Programs take their tiles in grouped order: GROUP_M rows of tiles, column by
column, so the tiles in flight together share panels of A and W in L2.

The ideas (tile pointers built with tl.arange, the grouped program order, masking the last K step, out-of-range rows
read modulo M) come from Triton's matrix-multiplication tutorial (python/tutorials/03-matrix-multiplication.py in
the Triton repository); the kernel, its epilogue and its autotune list are the lab's own.

Triton is optional. This module imports without it (`unavailable()` says why it cannot run here). The wrapper
takes CuPy arrays and hands them to Triton as PyTorch tensors through DLPack (no copy), launched on CuPy's current
stream, so CuPy's events and CUDA-graph captures see the kernel where they expect it.
"""

import math
from contextlib import nullcontext

try:
    import triton
    import triton.language as tl
except Exception as exc:  # ImportError, or an install that fails while loading (a driver library missing)
    triton = tl = None
    _IMPORT_ERROR = f"{type(exc).__name__}: {exc}"
else:
    _IMPORT_ERROR = ""

GELU_SCALE = math.sqrt(2.0 / math.pi)  # GELU's tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
GELU_CUBIC = 0.044715


def unavailable() -> str | None:
    """None when the Triton level can run here, else one sentence saying why not."""
    if triton is None:
        return f"triton cannot be imported ({_IMPORT_ERROR}); install it with PyTorch (pip install torch)"
    try:
        import torch
    except Exception as exc:
        return f"PyTorch cannot be imported ({type(exc).__name__}: {exc}); the Triton level launches through it"
    if not torch.cuda.is_available():
        return "PyTorch sees no CUDA device, so Triton cannot launch here"
    return None


if triton is not None:
    _SCALE = tl.constexpr(GELU_SCALE)
    _CUBIC = tl.constexpr(GELU_CUBIC)

    @triton.jit
    def gemm_bias_gelu_kernel(a_ptr, w_ptr, bias_ptr, y_ptr, M, N, K,
                              stride_am, stride_ak, stride_wn, stride_wk, stride_ym, stride_yn,
                              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                              GROUP_M: tl.constexpr):
        # Grouped order: program ids run down GROUP_M rows of tiles before moving one column to the right.
        pid = tl.program_id(0)
        tiles_m = tl.cdiv(M, BLOCK_M)
        tiles_n = tl.cdiv(N, BLOCK_N)
        per_group = GROUP_M * tiles_n
        first_m = (pid // per_group) * GROUP_M
        rows_in_group = tl.minimum(tiles_m - first_m, GROUP_M)
        tile_m = first_m + (pid % per_group) % rows_in_group
        tile_n = (pid % per_group) // rows_in_group

        rows = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
        ks = tl.arange(0, BLOCK_K)
        # Rows and columns past the edge load a valid row instead (modulo): the loads stay unmasked in M and N,
        # and those lanes are never stored.
        a_tile = a_ptr + (rows % M)[:, None] * stride_am + ks[None, :] * stride_ak
        w_tile = w_ptr + (cols % N)[None, :] * stride_wn + ks[:, None] * stride_wk  # W's rows as columns: W.T

        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            a = tl.load(a_tile, mask=ks[None, :] < K - k0, other=0.0)
            w = tl.load(w_tile, mask=ks[:, None] < K - k0, other=0.0)
            acc += tl.dot(a, w)
            a_tile += BLOCK_K * stride_ak
            w_tile += BLOCK_K * stride_wk

        # The epilogue, on the fp32 accumulator: bias, then GELU as x * sigmoid(2u) (= 0.5 x (1 + tanh u)),
        # which stays finite at both ends (exp overflowing to inf gives -0, not NaN).
        x = acc + tl.load(bias_ptr + cols, mask=cols < N, other=0.0)[None, :]
        u = _SCALE * (x + _CUBIC * x * x * x)
        y = x / (1.0 + tl.exp(-2.0 * u))
        y_tile = y_ptr + rows[:, None] * stride_ym + cols[None, :] * stride_yn
        tl.store(y_tile, y.to(tl.float16), mask=(rows[:, None] < M) & (cols[None, :] < N))

    def autotune_configs() -> list:
        """Six tilings for fp16 on Hopper-class GPUs, from wide 128 x 256 tiles to narrow ones for small shapes."""
        shapes = ((128, 256, 64, 8, 3), (256, 128, 64, 8, 3), (128, 128, 64, 8, 4), (128, 128, 64, 4, 4),
                  (64, 256, 64, 4, 4), (128, 64, 64, 4, 4))
        return [triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8}, num_warps=warps,
                              num_stages=stages) for bm, bn, bk, warps, stages in shapes]

    gemm_bias_gelu_autotuned = triton.autotune(configs=autotune_configs(), key=["M", "N", "K"])(
        gemm_bias_gelu_kernel)


def gemm_bias_gelu(a, w, bias, out, config: dict | None = None) -> None:
    """out = GELU_tanh(a @ w.T + bias) for CuPy arrays (a: M x K fp16, w: N x K fp16, bias: (N,) float32, out:
    M x N fp16, all C-contiguous). `config` (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages) skips
    autotuning and launches that tiling, e.g. the one the autotuner chose in another process (best_config())."""
    import cupy as cp
    import torch

    M, K = a.shape
    N = w.shape[0]
    stream = cp.cuda.get_current_stream()
    # The legacy default stream (ptr 0) is PyTorch's default too; any other CuPy stream becomes torch's current.
    on_stream = torch.cuda.stream(torch.cuda.ExternalStream(stream.ptr)) if stream.ptr else nullcontext()
    with on_stream:
        ta, tw, tb, ty = (torch.from_dlpack(x) for x in (a, w, bias, out))
        args = (ta, tw, tb, ty, M, N, K, ta.stride(0), ta.stride(1), tw.stride(0), tw.stride(1), ty.stride(0),
                ty.stride(1))
        if config is None:
            grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)  # noqa: E731
            gemm_bias_gelu_autotuned[grid](*args)
            return
        meta = dict(config)
        grid = (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)
        gemm_bias_gelu_kernel[grid](*args, **meta)


def best_config() -> dict | None:
    """The tiling the autotuner picked for the shape it last ran (None before any autotuned launch)."""
    if triton is None:
        return None
    config = getattr(gemm_bias_gelu_autotuned, "best_config", None)
    if config is None:
        return None
    return {**config.kwargs, "num_warps": config.num_warps, "num_stages": config.num_stages}
