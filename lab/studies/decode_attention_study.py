"""Decode attention (lab.families.attention_decode) beside PyTorch's SDPA, in interleaved rounds, with rung 02's knobs
and its paged cache.

For each decode step (B sequences of L keys, H = 32 query heads on H_kv = 8, S_q = 1, D = 128) every method runs
once a round, in an order rotated from round to round, on cold L2; the figure is GB/s of the step's bytes (Q, K, V
and O once: the family's `min_dram_bytes`) and the ratio to the fastest SDPA call's time in the same round. The
methods:

    sdpa                  torch's scaled_dot_product_attention with enable_gqa=True, its own output
    sdpa_repeat           the same on K and V repeated per query head beforehand (outside the timing)
    01_gqa_packed         rung 01 as the family launches it (one block a key/value head)
    02_split_kv           rung 02 as the family launches it (split_plan)
    02 STAGES=3, ...      rung 02 with other knobs, or with half or twice the planned keys a split
    02 paged 64, 02 paged 16   rung 02 on the same values in a paged cache (pages of 64 or 16 keys, in random order)

A varlen batch (16 sequences of 1 .. 8192 keys) compares rung 02 with SDPA on the cache padded to the longest and
masked. Every rung setting passes a check on a small odd case (check_case) before it is timed; one that fails gets
a row saying so and is not timed. Nothing here asserts a speed.

    python -m lab.studies.decode_attention_study OUT_DIR [--rounds 3] [--quick]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from lab.families import get_family
from lab.measure.records import provenance, write_json
from lab.studies.rounds import same_round_summary

HEADS = {"H": 32, "H_kv": 8, "S_q": 1, "D": 128, "causal": 0}
SHAPES = [dict(B=b, S_k=s, dtype="float16") for b, s in ((1, 8192), (1, 32768), (2, 16384), (4, 8192), (8, 8192),
                                                          (8, 32768), (32, 4096), (32, 8192), (64, 4096))]
SHAPES += [dict(B=1, S_k=8192, dtype="bfloat16"), dict(B=8, S_k=8192, dtype="bfloat16")]
VARLEN = dict(B=16, S_k=8192, dtype="float16", varlen=1)
QUICK_SHAPES = SHAPES[:1]
KNOB_SETTINGS = ({"STAGES": 3}, {"STAGES": 4}, {"STAGES": 6})
SPLIT_FACTORS = (0.5, 2.0)  # keys a split against the plan's
PAGES = (64, 16)


def _problem(fam, shape: dict, **extra):
    return fam.make_problem(seed=9, **HEADS, **shape, **extra)


def _sdpa(fam, problem, repeat: bool):
    import torch
    import torch.nn.functional as F

    p = problem.params
    q, k, v = (fam._torch(problem.inputs[n][0], p["dtype"]) for n in ("Q", "K_dense", "V_dense"))
    kwargs = {"scale": p["D"] ** -0.5}
    if repeat:
        group = p["H"] // p["H_kv"]
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    else:
        kwargs["enable_gqa"] = True

    def launch(i: int) -> None:
        F.scaled_dot_product_attention(q, k, v, **kwargs)

    try:
        launch(0)
        torch.cuda.synchronize()
    except RuntimeError as exc:
        return None, str(exc).splitlines()[0][:160]
    return launch, None


def _checked(fam, rung, name: str, shape: dict, failed: list) -> bool:
    from lab.measure.verify import check_case

    case = {"B": 3, "H": 8, "H_kv": 2, "S_q": 1, "S_k": 1000, "D": 128, "dtype": shape["dtype"], "causal": 1,
            "varlen": 1, "page_size": 16} if fam.launch_scheme(rung) == "split_kv" else \
        {"B": 2, "H": 8, "H_kv": 2, "S_q": 1, "S_k": 1000, "D": 128, "dtype": shape["dtype"], "causal": 1}
    result = check_case(fam, rung, case, seed=12)
    if not result.passed:
        failed.append({"shape": shape, "method": name, "failed": result.reasons})
    return result.passed


def _methods(fam, shape: dict, failed: list, refused: list) -> tuple[dict, object]:
    """name -> launch(i) for one shape, and the contiguous problem (for the bytes)."""
    import cupy as cp

    problem = _problem(fam, shape)
    out = cp.empty(problem.out_shape, problem.dtype)
    methods = {}
    if not shape.get("varlen"):
        for name, repeat in (("sdpa", False), ("sdpa_repeat", True)):
            launch, why = _sdpa(fam, problem, repeat)
            if launch is None:
                refused.append({"shape": shape, "method": name, "reason": why})
            else:
                methods[name] = launch
    else:
        fam.launch_ceiling(problem, out)  # the padded, masked baseline (its mask and repeats made here)
        methods["sdpa_padded"] = lambda i: fam.launch_ceiling(problem, out)
    split = fam.rung("02")
    rungs = {r.key: (r, problem) for r in fam.rungs_for("headline", problem.params)}
    if not shape.get("varlen"):
        for knobs in KNOB_SETTINGS:
            rungs["02 " + " ".join(f"{k}={v}" for k, v in knobs.items())] = (
                dataclasses.replace(split, spec=split.spec.with_knobs(**knobs)), problem)
        planned = fam.plan(split, problem.params).split_keys
        for factor in SPLIT_FACTORS:
            keys = max(64, int(planned * factor) // 64 * 64)
            rungs[f"02 split_keys={keys}"] = (split, _problem(fam, shape, split_keys=keys))
        for page in PAGES:
            rungs[f"02 paged {page}"] = (split, _problem(fam, shape, page_size=page))
    for name, (rung, prob) in rungs.items():
        if _checked(fam, rung, name, shape, failed):
            methods[name] = lambda i, rung=rung, prob=prob: fam.launch(rung, prob, out)
    return methods, problem


def study(rounds: int = 3, shapes=SHAPES, min_time_ms: float = 10.0) -> dict:
    import cupy as cp

    from lab.measure import timing

    fam = get_family("attention_decode")
    flusher = timing.L2Flusher()
    rows, failed, refused = [], [], []
    for shape in list(shapes) + ([VARLEN] if shapes is SHAPES else []):
        methods, problem = _methods(fam, shape, failed, refused)
        names = list(methods)
        for r in range(rounds):
            for name in names[r % len(names):] + names[:r % len(names)]:
                t = timing.measure(methods[name], l2="cold", flusher=flusher, min_time_ms=min_time_ms)
                rows.append({"shape": shape, "method": name, "round": r, "median_ms": t.median_ms,
                             "p10_ms": t.p10_ms, "p90_ms": t.p90_ms, "GB/s": problem.bytes_moved / t.median_ms / 1e6})
        del methods, problem
        cp.get_default_memory_pool().free_all_blocks()
    return {"provenance": provenance(), "about": __doc__.split("\n\n")[0], "heads": HEADS, "rounds": rounds,
            "rows": rows, "summary": summarize(rows), "failed": failed, "refused": refused}


def summarize(rows: list[dict]) -> list[dict]:
    """Per shape and method: the median GB/s over rounds, its spread (max / min - 1), and the median over rounds of
    the same-round ratio to the fastest SDPA call's time (sdpa, sdpa_repeat or sdpa_padded) and to 02_split_kv's."""
    summary = same_round_summary(rows, "GB/s", ("sdpa", "sdpa_repeat", "sdpa_padded"), "x_best_sdpa", "02_split_kv",
                                 "x_02_split_kv")
    for entry in summary:
        entry.pop("x_best_sdpa_min")  # this study's records never held it
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one shape, for a smoke run")
    args = parser.parse_args(argv)
    record = study(args.rounds, QUICK_SHAPES if args.quick else SHAPES)
    path = write_json(Path(args.out_dir) / "decode_attention_study.json", record)
    ratio = lambda x: "-" if x is None else f"{x:.3f}"  # noqa: E731
    for s in record["summary"]:
        sh = s["shape"]
        print(f"B={sh['B']:<3} L={sh['S_k']:<6} {sh['dtype']:<9}{' varlen' if sh.get('varlen') else ''}  "
              f"{s['method']:<22} {s['median_ms'] * 1e3:8.1f} us {s['GB/s']:7.0f} GB/s  spread {s['spread']:.3f}  "
              f"x best SDPA {ratio(s['x_best_sdpa'])}  x 02 {ratio(s['x_02_split_kv'])}")
    for f in record["failed"] + record["refused"]:
        print("not timed:", f)
    print(f"written: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
