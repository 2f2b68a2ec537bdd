"""GEMM + bias + GELU fused, against what a PyTorch user writes: gemm_tc rung 06 and rung 10 with the epilogue chain
(lab.families.gemm_epilogue) beside torch's `F.gelu(F.linear(x, w, b), approximate="tanh")`, and the plain GEMMs
(rung 10 without the chain, torch.mm) for what the chain costs each, in interleaved rounds on cold L2.

Methods (every one once a round on each case, the order rotated from round to round):

    torch_composed   F.linear then F.gelu (two kernels, as a user composes them); for an int8 output also the
                     per-row quantization (multiply, round, clamp, cast), one more kernel each
    torch_mm         torch.mm alone (the plain GEMM the library gives)
    06 fused         gemm_tc_epilogue rung 06: the chain in its register stores
    10 fused         gemm_tc_epilogue's rung 10: the chain in registers before the TMA-store staging (int8: its
                     register stores)
    10 plain         gemm_tc rung 10 without the chain

The figure is TFLOP/s of the GEMM (2 M N K over the median time) and the same-round ratio to torch_composed
(x_torch). Each lab method is checked on a small odd case of its chain first, and torch's result on each case up to
4096^3 is compared with the lab's float64 reference (its largest error recorded, not asserted: torch rounds the bias
to the input type). Nothing here asserts a speed.

    python -m lab.studies.fused_epilogue_study OUT_DIR [--rounds 3] [--quick]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from lab.families import get_family
from lab.measure.records import provenance, write_json
from lab.studies.rounds import interleaved_rows, same_round_summary

CASES = [dict(M=n, N=n, K=n, layout="TN", dtype=t, epilogue="bias+gelu_tanh")
         for n, t in ((4096, "float16"), (8192, "float16"), (4096, "bfloat16"))]
CASES.append(dict(M=4096, N=4096, K=4096, layout="TN", dtype="float16", epilogue="bias+gelu_tanh", out="int8",
                  q_per_row=True))
QUICK_CASES = CASES[:1]
CHECK_SHAPE = {"M": 129, "N": 264, "K": 65}  # the TMA store's conditions, with M and K tails
REFERENCE_MAX_WORK = 4096 ** 3  # torch's result is compared with the float64 reference up to this M N K


def _torch_composed(problem, fam):
    """The PyTorch user's call on the problem's memory: y = gelu(linear(A, W, bias)), quantized per row for int8."""
    import torch
    import torch.nn.functional as F

    from lab.tools.library_gemm import torch_view

    p = problem.params
    dtype = p["dtype"]
    a = torch_view(problem.inputs["A"][0], p["M"], p["K"], p["lda"], dtype)
    w = torch_view(problem.inputs["B"][0], p["N"], p["K"], p["ldb"], dtype)
    arrays = problem.inputs["epilogue"]
    bias = torch.from_dlpack(arrays["bias"]).to(a.dtype)
    q_scale = torch.from_dlpack(arrays["q_scale"]) if "q_scale" in arrays else None

    def call(_i=0):
        y = F.gelu(F.linear(a, w, bias), approximate="tanh")
        if q_scale is not None:
            scale = q_scale[:, None] if q_scale.numel() > 1 else q_scale
            y = torch.clamp(torch.round(y.float() * scale), -128, 127).to(torch.int8)
        return y
    return call


def _torch_error(call, problem, fam) -> float:
    """Torch's largest |error| over the lab's float64 reference, in units of the reference's bound."""
    import numpy as np

    y = call().float().cpu().numpy()
    ref, bound = fam.expected(problem, rounded_product=True)
    n = problem.params["N"]
    return float(np.max(np.abs(y - ref[:, :n]) / np.maximum(bound[:, :n], 1e-30)))


def methods_for(case: dict, failed: list, torch_errors: list):
    """name -> launch(i) for one case, and its problem."""
    import cupy as cp

    from lab.families.gemm_tc import GemmTcFamily
    from lab.measure.verify import check_case
    from lab.tools.library_gemm import torch_mm, torch_mm_available

    fam, plain = get_family("gemm_tc_epilogue"), GemmTcFamily()
    problem = fam.make_problem(seed=3, **case)
    out = cp.empty(problem.out_shape, problem.dtype)
    plain_out = cp.empty((problem.params["M"], problem.params["ldc"]), dtype=fam._plain_dtype(problem))
    ten = plain.rung("10_tma_store")
    methods = {}
    if torch_mm_available():
        composed = _torch_composed(problem, fam)
        if case["M"] * case["N"] * case["K"] <= REFERENCE_MAX_WORK:  # the float64 reference runs on the host
            torch_errors.append({"case": case, "max_error_over_bound": _torch_error(composed, problem, fam)})
        methods["torch_composed"] = composed
        methods["torch_mm"] = lambda i: torch_mm(problem.params, problem.inputs["A"][0], problem.inputs["B"][0],
                                                 plain_out)
    check = CHECK_SHAPE | {k: v for k, v in case.items() if k not in ("M", "N", "K")}
    for name, rung in (("06 fused", fam.rung("06_persistent")), ("10 fused", fam.rung("10_tma_store"))):
        result = check_case(fam, rung, check, seed=15)
        if result.passed:
            methods[name] = lambda i, rung=rung: fam.launch(rung, problem, out)
        else:
            failed.append({"case": case, "method": name, "failed": result.reasons})
    methods["10 plain"] = lambda i: plain.launch(ten, problem, plain_out)
    return methods, problem


def study(rounds: int = 3, cases=CASES, min_time_ms: float = 20.0, progress=None) -> dict:
    from lab.measure import timing

    failed: list = []
    torch_errors: list = []
    rows = interleaved_rows(cases, lambda case: methods_for(case, failed, torch_errors), rounds, timing.L2Flusher(),
                            min_time_ms, lambda problem, ms: {"TFLOP/s": problem.flops / ms / 1e9},
                            progress and (lambda case, rows: progress({"case": case, "rows": len(rows)})))
    return assemble(rows, rounds, failed, torch_errors, provenance())


def assemble(rows: list[dict], rounds: int, failed: list, torch_errors: list, prov: dict) -> dict:
    summary = same_round_summary(rows, "TFLOP/s", ("torch_composed",), "x_torch", "06 fused", "x_06")
    return {"provenance": prov, "about": __doc__.split("\n\n")[0], "rounds": rounds, "rows": rows,
            "summary": summary, "torch_errors": torch_errors, "failed": failed}


def report_lines(record: dict) -> list[str]:
    ratio = lambda x: "-" if x is None else f"{x:.3f}"  # noqa: E731
    lines = []
    for s in record["summary"]:
        c = s["shape"]
        out = c.get("out", "same") + (" per row" if c.get("q_per_row") else "")
        lines.append(f"{c['M']}x{c['N']}x{c['K']} {c['dtype']:<9} {out:<12} {s['method']:<15} {s['TFLOP/s']:6.1f} "
                     f"TFLOP/s  spread {s['spread']:.3f}  x torch {ratio(s['x_torch'])} (min "
                     f"{ratio(s['x_torch_min'])})  x 06 fused {ratio(s['x_06'])}")
    lines += [f"torch's largest error over the bound: {e['max_error_over_bound']:.2f} at {e['case']}"
              for e in record["torch_errors"]]
    lines += [f"not timed: {f}" for f in record["failed"]]
    return lines


def run(out_dir: Path, *, rounds: int = 3, quick: bool = False, progress=None) -> Path:
    """The study (`lab study`), written to out_dir/fused_epilogue_study.json; returns the path. progress(item) gets a
    line a case."""
    record = study(rounds, QUICK_CASES if quick else CASES, progress=progress)
    return write_json(Path(out_dir) / "fused_epilogue_study.json", record)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one case, for a smoke run")
    args = parser.parse_args(argv)
    path = run(Path(args.out_dir), rounds=args.rounds, quick=args.quick)
    record = json.loads(path.read_text())
    print("\n".join(report_lines(record)))
    print(f"written: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
