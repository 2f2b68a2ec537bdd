"""Autotune: for one shape's bucket, every path and configuration that serves it is run on fresh random inputs,
checked element by element against a float64 reference (computed on the GPU) with the tensor-core bound of
lab.measure.bounds, and only then timed (cold L2, median); the fastest is stored in the tune cache under this machine's
environment key, with every candidate's time or the reason it was rejected.

The environment key names what a tuned choice depends on: the GPU's name and arch, the NVRTC and driver versions,
and a hash of the kernels' sources (an edited kernel is a different candidate). A cache written under another key
is kept but never served here.
"""

from __future__ import annotations

import datetime
import functools
import hashlib
import time

import numpy as np

from lab.core.errors import LabError
from lab.ops.paths import PATHS, Call
from lab.ops.shapes import GemmShape, bucket, m_bucket

# The configurations tried per path (a rule's config picks one of these, or another the path accepts).
CANDIDATES = {
    "decode": ({},),
    "split_k": ({"splits": 0},),
    "persistent": ({"BN": 256, "GROUP_M": 8}, {"BN": 128, "GROUP_M": 8}),
    "hopper": ({},),
    "stream_k": ({},),
    "generic": ({},),
    "cublas": ({},),
}
TIMING_MS = 10.0  # minimum measured time per candidate


@functools.lru_cache(maxsize=1)
def kernels_hash() -> str:
    """A hash of every kernel source and header (kernels/**/*.cu, *.cuh)."""
    from lab.core.build import KERNELS_DIR

    h = hashlib.sha256()
    for path in sorted(KERNELS_DIR.rglob("*.cu*")):
        h.update(path.relative_to(KERNELS_DIR).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:12]


def environment_key() -> str:
    import cupy as cp

    from lab.core import device
    from lab.core.build import nvrtc_version

    gpu = device.current()
    driver = cp.cuda.runtime.driverGetVersion()
    return (f"{gpu.name} sm_{gpu.arch} nvrtc {'.'.join(map(str, nvrtc_version()))} driver {driver} "
            f"kernels {kernels_hash()}")


def candidates(shape: GemmShape, arch: int) -> list[tuple[str, dict]]:
    return [(name, dict(cfg)) for name, cfgs in CANDIDATES.items() for cfg in cfgs
            if PATHS[name].refusal(shape, arch) is None]


def make_inputs(shape: GemmShape, seed: int):
    """Random operands (never zeros) for `shape`, contiguous, plus the epilogue's arrays."""
    import cupy as cp

    from lab.families.gemm_tc import to_storage
    from lab.measure.check import random_array

    def draw(rows, cols, s):
        return to_storage(random_array((rows, cols), np.float32, s, "normal", xp=cp), shape.dtype, cp)

    a = draw(shape.M, shape.K, seed)
    b = draw(shape.K, shape.N, seed + 1) if shape.layout == "NN" else draw(shape.N, shape.K, seed + 1)
    ops = shape.epilogue.split("+") if shape.epilogue != "none" else []
    bias = random_array((shape.N,), np.float32, seed + 2, "normal", xp=cp) if "bias" in ops else None
    residual = draw(shape.M, shape.N, seed + 3) if "residual" in ops else None
    activation = next((op for op in ops if op not in ("bias", "residual")), None)
    return a, b, bias, activation, residual


def reference_and_bound(shape: GemmShape, a, b, bias, activation, residual, rounded_product: bool = False):
    """The float64 result of the whole call and each element's allowed error, on the GPU: the product's bound is
    lab.measure.bounds.tensor_core_matmul_bound's (fp32 accumulation, one rounding to the output type); the epilogue's
    ops add their slopes and fp32 roundings as lab.families.epilogue's bounds do. `rounded_product`: the path stores the
    product in the output type before its epilogue reads it back (every path but the fused one), one more rounding
    of the product (as lab.families.gemm_epilogue's library baselines are checked). A bias may be read rounded to
    the output type (cuBLASLt's bias epilogue does): the bound allows one unit roundoff of |bias| for it."""
    import cupy as cp

    from lab.families.epilogue import Epilogue, output_reference
    from lab.families.gemm_tc import to_float32
    from lab.measure.bounds import BFLOAT16, tensor_core_matmul_bound

    a64 = to_float32(a, shape.dtype, cp).astype(cp.float64)
    b64 = to_float32(b, shape.dtype, cp).astype(cp.float64)
    b64 = b64 if shape.layout == "NN" else b64.T
    v = a64 @ b64
    out_dtype = BFLOAT16 if shape.dtype == "bfloat16" else np.float16
    if shape.epilogue == "none":
        return v, tensor_core_matmul_bound(a64, b64, v, out_dtype=out_dtype)
    from lab.families.epilogue import ChainInputs

    acc_bound = tensor_core_matmul_bound(a64, b64, v, out_dtype=np.float32)
    if bias is not None:  # the library's bias epilogue reads the bias rounded to the output type: one more rounding
        from lab.measure.bounds import unit_roundoff

        acc_bound = acc_bound + unit_roundoff(out_dtype) * cp.abs(bias.astype(cp.float64))
    if rounded_product:
        from lab.measure.bounds import half_subnormal_spacing, unit_roundoff

        acc_bound = acc_bound + unit_roundoff(out_dtype) * (cp.abs(v) + acc_bound) + half_subnormal_spacing(out_dtype)
    residual64 = None if residual is None else to_float32(residual, shape.dtype, cp).astype(cp.float64)
    chain = ChainInputs(bias=None if bias is None else bias.astype(cp.float64), residual=residual64)
    epi = Epilogue(tuple(shape.epilogue.split("+")))
    # lab.families.epilogue's ops are NumPy ufuncs, which run on CuPy arrays too (all but gelu_erf's vectorized erf)
    try:
        return output_reference(epi, v, acc_bound, chain, out_dtype)
    except (TypeError, ValueError):
        host = ChainInputs(bias=None if bias is None else cp.asnumpy(chain.bias),
                           residual=None if residual is None else cp.asnumpy(residual64))
        ref, bound = output_reference(epi, cp.asnumpy(v), cp.asnumpy(acc_bound), host, out_dtype)
        return cp.asarray(ref), cp.asarray(bound)


def check_candidate(runtime, shape: GemmShape, name: str, config: dict, inputs, expected) -> str | None:
    """None when the candidate's output is within the bound everywhere, else why not (one phrase). `expected`:
    (reference, bound) for a fused epilogue and for one applied after the product (the same when there is none)."""
    import cupy as cp

    from lab.families.gemm_tc import to_float32
    from lab.ops.paths import apply_epilogue

    a, b, bias, activation, residual = inputs
    out = cp.full((shape.M, shape.N), 0x7E00 if shape.dtype == "float16" else 0x7FC0, dtype=cp.uint16)
    out = out.view(cp.float16) if shape.dtype == "float16" else out  # poisoned with NaN
    call = Call(a, b, out, shape, shape.K, b.shape[1], shape.N, bias, activation, residual)
    try:
        PATHS[name].launch(call, config)
        exact = PATHS[name].exact_epilogue(call)
        if not PATHS[name].fuses(call):
            apply_epilogue(call)
        cp.cuda.get_current_stream().synchronize()
    except LabError as exc:
        return f"did not run: {exc}"
    # An epilogue run after the GEMM reads the product rounded once to the output type: the looser bound.
    ref, bound = expected[0] if exact or shape.epilogue == "none" else expected[1]
    got = to_float32(out, shape.dtype, cp).astype(cp.float64)
    bad = ~(cp.abs(got - ref) <= bound)  # NaN (an unwritten element) is bad too
    count = int(bad.sum())
    return None if count == 0 else f"{count} of {bad.size} elements outside the bound"


def time_candidate(shape: GemmShape, name: str, config: dict, inputs) -> float:
    """Median microseconds of one call (cold L2)."""
    import cupy as cp

    from lab.measure.timing import measure
    from lab.ops.paths import apply_epilogue

    a, b, bias, activation, residual = inputs
    out = cp.empty((shape.M, shape.N), dtype=a.dtype)
    call = Call(a, b, out, shape, shape.K, b.shape[1], shape.N, bias, activation, residual)

    from lab.core.build import recording

    # Timed as lab.ops runs it: the launches (the library's call too) recorded once and replayed, so the family's
    # host work stays out of the spin kernel's window.
    with recording() as launches:
        PATHS[name].launch(call, config)
    post = not PATHS[name].fuses(call)

    def launch(_index: int) -> None:
        for raw, grid, block, args, smem in launches:
            raw(grid, block, args, shared_mem=smem)
        if post:
            apply_epilogue(call)

    return 1e3 * measure(launch, l2="cold", min_time_ms=TIMING_MS).median_ms


def tune_shape(runtime, shape: GemmShape, seed: int = 20261130, progress=None) -> dict:
    """Tune `shape`'s bucket at the bucket's largest M, store the result and return its entry."""
    import dataclasses

    from lab.ops import counters

    started = time.perf_counter()
    top = dataclasses.replace(shape, M=m_bucket(shape.M))
    inputs = make_inputs(top, seed)
    fused = reference_and_bound(top, *inputs)
    expected = (fused, reference_and_bound(top, *inputs, rounded_product=True) if top.epilogue != "none" else fused)
    rows = []
    for name, config in candidates(top, runtime.arch):
        if progress:
            progress(name, config)
        why = check_candidate(runtime, top, name, config, inputs, expected)
        row = {"path": name, "config": config}
        if why:
            row["rejected"] = why
        else:
            row["us"] = round(time_candidate(top, name, config, inputs), 3)
        rows.append(row)
    timed = [r for r in rows if "us" in r]
    if not timed:
        raise LabError(f"No candidate passed its check for {bucket(shape)}; see the rejections: {rows}.")
    best = min(timed, key=lambda r: r["us"])
    entry = {"path": best["path"], "config": best["config"], "us": best["us"], "tuned_M": top.M, "candidates": rows,
             "seconds": round(time.perf_counter() - started, 2),
             "tuned_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    if runtime.store is not None:
        runtime.store.put(runtime.env, bucket(shape), entry)
    counters.COUNTS["tuned"] += 1
    return entry
