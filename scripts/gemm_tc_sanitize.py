#!/usr/bin/env python3
"""compute-sanitizer over every rung of gemm_tc: memcheck (out-of-bounds and misaligned accesses), racecheck
(shared-memory hazards) and synccheck (barrier misuse), on small odd shapes. In the same process every case
goes through the lab's own checks (lab.measure.verify.check_case: poisoned output, guard zones, float64 reference,
repeated runs), so a run passes only when the sanitizer is clean AND the answers are right.

    python3 scripts/gemm_tc_sanitize.py OUT.json [--budget 180] [--tools memcheck,racecheck,synccheck]
    python3 scripts/gemm_tc_sanitize.py OUT.json --family softmax     (also gemm_tc_epilogue, rmsnorm, layernorm,
                                                                      gemm_split_k, decode, grouped_gemm)
    python3 scripts/gemm_tc_sanitize.py OUT.json --rungs 10 --knobs BN=192,STAGES=4,C_PARTS=1 --layouts TN
                                                                     (rungs built with other knobs, on the cases
                                                                      of the layouts named)

Each (tool, rung) is a child process (this script with --child TOOL RUNG) under the sanitizer, with its
own time limit, so one crash or hang hides nothing else. Rungs come from the family's rungs and its candidate
rungs (not yet in the ladder), so rungs added later are covered; a rung the GPU cannot run (KernelSpec.min_arch,
arch_suffix) is listed as skipped with the reason. OUT.json (provenance, sanitizer version, per tool and rung:
shapes, error and hazard counts, pass/fail, wall time) is rewritten after every child, so a run stopped from outside
keeps what it finished; children left when the budget is spent are listed as not run.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lab.measure.records import describe_params  # noqa: E402
from lab.tools import sanitizer  # noqa: E402  (after the path, as a script)

ALPHA_BETA = {"alpha": 0.5, "beta": -1.5}
COMBOS = [(layout, dtype) for layout in ("TN", "NN") for dtype in ("float16", "bfloat16")]


def _each_layout_and_type(shapes: list[dict]) -> list[dict]:
    """Every shape in both layouts and both types; beta != 0 on alternate ones, so that every shape and
    every (layout, type) meets both the beta = 0 path (C never read) and the beta != 0 one."""
    return [shape | {"layout": layout, "dtype": dtype} | (ALPHA_BETA if (i + j) % 2 else {})
            for i, shape in enumerate(shapes) for j, (layout, dtype) in enumerate(COMBOS)]


# memcheck: tails in every direction. Leading dimensions not a multiple of 8 take the scalar path (VEC=1;
# the TMA rungs repack such operands first); 129x131x67 with pad 5 has leading dimensions 72 and 136, so it
# takes the 16-byte path (VEC=8; TMA reads the operands as they are) with ragged edges, and 40x24x72 that
# path on partial tiles without padding.
MEMCHECK_SHAPES = [{"M": 1, "N": 1, "K": 1}, {"M": 17, "N": 9, "K": 33}, {"M": 65, "N": 63, "K": 67},
                   {"M": 129, "N": 131, "K": 67, "pad": 5}, {"M": 40, "N": 24, "K": 72}]
# racecheck is the slow tool: one block per case, but K past twice STAGES * BK (4 * 64 in the deepest rungs)
# so that a multistage pipeline's ring of shared-memory stages wraps around at least twice, where a missing
# barrier (or mbarrier wait) shows.
SMALL_CASES = [
    {"M": 1, "N": 1, "K": 1, "layout": "TN", "dtype": "float16"},
    {"M": 17, "N": 9, "K": 525, "layout": "NN", "dtype": "bfloat16", **ALPHA_BETA},
    {"M": 40, "N": 24, "K": 520, "layout": "TN", "dtype": "bfloat16"},
    {"M": 40, "N": 24, "K": 520, "layout": "NN", "dtype": "float16", **ALPHA_BETA},
]
CASES = {"memcheck": _each_layout_and_type(MEMCHECK_SHAPES), "racecheck": SMALL_CASES, "synccheck": SMALL_CASES}
# The other families' small cases: tails and odd shapes, each a few blocks (the sanitizers are slow).
EPILOGUE_CASES = [{"M": 17, "N": 33, "K": 72, "epilogue": "bias+gelu_tanh", "layout": "TN", "dtype": "float16"},
                  {"M": 65, "N": 63, "K": 67, "epilogue": "bias+gelu_tanh", "out": "int8", "q_per_row": True,
                   "layout": "NN", "dtype": "bfloat16"},
                  {"M": 40, "N": 37, "K": 520, "epilogue": "row_scale+col_scale+silu+residual", "layout": "TN",
                   "dtype": "float16", "pad": 3},
                  {"M": 9, "N": 5, "K": 33, "epilogue": "gelu_tanh", "out": "e4m3", "layout": "TN", "dtype": "float16"}]
# Row ops: short rows, then rows split over clusters of 2 and 8 blocks (the cluster rungs; one block for the others).
ROW_CASES = [{"rows": 3, "n": n} for n in (1, 33, 1025, 4097)] + [{"rows": 2, "n": n} for n in (16385, 65536)]
# The underfill lesson's families: split-K with S not dividing the k-tiles and a K tail, decode across its M buckets
# and a K tail, grouped GEMM with empty groups and tails in every size.
SPLIT_K_CASES = [{"M": 17, "N": 9, "K": 1000, "splits": 7, "layout": "TN", "dtype": "float16"},
                 {"M": 65, "N": 130, "K": 650, "splits": 3, "layout": "NN", "dtype": "bfloat16", **ALPHA_BETA},
                 # 16 splits of 16 k-tiles: the cluster mode's two clusters of 8 a tile (slices and counters)
                 {"M": 130, "N": 40, "K": 1000, "splits": 16, "layout": "TN", "dtype": "bfloat16", **ALPHA_BETA}]
DECODE_CASES = [{"M": 1, "N": 97, "K": 131, "dtype": "float16"}, {"M": 17, "N": 61, "K": 4099, "dtype": "bfloat16"},
                {"M": 33, "N": 70, "K": 250, "pad": 6, "dtype": "float16"}]
GROUPED_CASES = [{"groups": [(0, 64, 64), (17, 33, 40), (65, 64, 128), (0, 1, 1)], "dtype": "float16"},
                 {"groups": [(1, 1, 9), (130, 257, 72)], "dtype": "bfloat16"}]
# Attention: sequence tails, GQA, causal with rows that see no key (S_q > S_k), every head dim (D = 256 only where a
# rung builds it: rungs 01 and 05, the family's cases_for); racecheck's cases run past twice rung 04-05's ring of 2 K/V
# stages (of 128 keys; of 64 at D = 256), so the stages are refilled while read.
ATTENTION_CASES = [{"B": 1, "H": 2, "H_kv": 1, "S_q": 17, "S_k": 300, "D": 64, "dtype": "float16", "causal": 1},
                   {"B": 1, "H": 1, "S_q": 130, "S_k": 257, "D": 128, "dtype": "bfloat16", "causal": 0},
                   {"B": 1, "H": 1, "S_q": 300, "S_k": 100, "D": 64, "dtype": "float16", "causal": 1},
                   {"B": 1, "H": 2, "H_kv": 1, "S_q": 130, "S_k": 200, "D": 256, "dtype": "bfloat16", "causal": 1},
                   # 136 query blocks: past one block an SM, so rung 05's PERSISTENT build runs two items on a few
                   {"B": 2, "H": 34, "H_kv": 2, "S_q": 140, "S_k": 140, "D": 64, "dtype": "float16", "causal": 1}]
ATTENTION_RACE_CASES = [{"B": 1, "H": 1, "S_q": 65, "S_k": 600, "D": 64, "dtype": "bfloat16", "causal": 0},
                        {"B": 1, "H": 1, "S_q": 65, "S_k": 300, "D": 256, "dtype": "float16", "causal": 0},
                        {"B": 2, "H": 34, "H_kv": 2, "S_q": 140, "S_k": 400, "D": 64, "dtype": "bfloat16", "causal": 0}]
# Decode attention: GQA packings of 4 and 32 rows (two row groups), a key tail, forced splits ending inside a tile,
# causal rows that see no key; rung 02 also on paged caches (pages of 7 keys) with per-sequence lengths.
DECODE_ATTENTION_CASES = [
    {"B": 2, "H": 8, "H_kv": 2, "S_q": 1, "S_k": 333, "D": 128, "dtype": "float16", "causal": 0, "split_keys": 100},
    {"B": 1, "H": 16, "H_kv": 1, "S_q": 2, "S_k": 200, "D": 64, "dtype": "bfloat16", "causal": 1},
    {"B": 3, "H": 8, "H_kv": 2, "S_q": 4, "S_k": 150, "D": 64, "dtype": "float16", "causal": 1, "page_size": 7,
     "varlen": 1, "split_keys": 64}]
# Packed (varlen) attention: an empty sequence, one token, lengths across the 128-row blocks, more keys than queries,
# GQA, both head dims and types; racecheck's batch holds a sequence of 600 keys (the ring refilled while read).
ATTENTION_VARLEN_CASES = [
    {"H": 4, "H_kv": 2, "seq_lens": [1, 17, 0, 129], "D": 64, "dtype": "float16", "causal": 1},
    {"H": 2, "seq_lens": [130, 5], "seq_lens_k": [257, 40], "D": 128, "dtype": "bfloat16", "causal": 0},
    {"H": 2, "H_kv": 1, "seq_lens": [300, 1], "seq_lens_k": [100, 1], "D": 64, "dtype": "float16", "causal": 1}]
ATTENTION_VARLEN_RACE_CASES = [{"H": 1, "seq_lens": [65, 3], "seq_lens_k": [600, 70], "D": 64, "dtype": "bfloat16",
                                "causal": 0}]
FAMILY_CASES = {
    "gemm_tc": CASES,
    "attention_decode": {tool: DECODE_ATTENTION_CASES for tool in sanitizer.TOOLS},
    "attention": {"memcheck": ATTENTION_CASES, "racecheck": ATTENTION_RACE_CASES, "synccheck": ATTENTION_RACE_CASES},
    "attention_varlen": {"memcheck": ATTENTION_VARLEN_CASES, "racecheck": ATTENTION_VARLEN_RACE_CASES,
                         "synccheck": ATTENTION_VARLEN_RACE_CASES},
    "gemm_split_k": {tool: SPLIT_K_CASES for tool in sanitizer.TOOLS},
    "decode": {tool: DECODE_CASES for tool in sanitizer.TOOLS},
    "grouped_gemm": {tool: GROUPED_CASES for tool in sanitizer.TOOLS},
    "gemm_tc_epilogue": {"memcheck": EPILOGUE_CASES, "racecheck": EPILOGUE_CASES[:2], "synccheck": EPILOGUE_CASES[:2]},
    "softmax": {tool: [c | {"dtype": d} for c in ROW_CASES for d in ("float16", "float32")]
                for tool in sanitizer.TOOLS},
    **{norm: {tool: [c | {"dtype": d} for c in ROW_CASES for d in ("float16", "bfloat16")] for tool in sanitizer.TOOLS}
       for norm in ("rmsnorm", "layernorm")},
}


def cases_for(family: str, tool: str) -> list[dict]:
    return FAMILY_CASES[family][tool]


TIMEOUT_S = {"memcheck": 75, "racecheck": 90, "synccheck": 60}  # one child, at most (the first compiles)
SMALL_FAMILY_TIMEOUT_S = 45  # the other families' children: a few small cases each


def timeout_for(family: str, tool: str, child_s: float | None = None) -> float:
    """One child's limit: `child_s` where given (--child-timeout), else the tool's for gemm_tc and 45 s for the
    other families."""
    if child_s:
        return child_s
    return TIMEOUT_S[tool] if family == "gemm_tc" else SMALL_FAMILY_TIMEOUT_S


MIN_CHILD_S = 15  # below this much budget a child is not started (it would only be killed)
DEFAULT_BUDGET_S = 180


# --- the plan: which (tool, rung) children, and which rungs are skipped -----------------------------

def plan(rungs, arch: int, tools=sanitizer.TOOLS, family: str = "gemm_tc") -> list[dict]:
    """One row per tool and rung (tool by tool, memcheck first: the most important finishes first when
    the budget runs short), with the reason a rung is skipped on this GPU, if it is."""
    from lab.core.build import arch_refusal

    return [{"tool": tool, "rung": rung.key, "shapes": [describe_params(c) for c in cases_for(family, tool)],
             "skip": arch_refusal(rung.spec, arch)} for tool in tools for rung in rungs]


def child_command(tool: str, rung: str) -> list[str]:
    """The target a sanitizer wraps: this script, checking one rung on `tool`'s cases."""
    return [sys.executable, str(Path(__file__).resolve()), "--child", tool, rung]


# --- the child: the lab's checks on one rung -------------------------------------------------------

def check_cases(family, rung_key: str, cases: list[dict], seed: int = 17) -> dict:
    """lab.measure.verify.check_case on every case (three input distributions, two runs each); what failed, as
    lines. A LabError (a compile error, say) fails that case and the rest still run; any other error (a
    CUDA context lost to a faulting kernel) fails it and stops, since nothing after it could run."""
    from lab.core.errors import LabError
    from lab.measure.verify import check_case

    rung = built(family.rung(rung_key))
    layouts = [x for x in os.environ.get("LAB_SANITIZE_LAYOUTS", "").split(",") if x]
    cases = [c for c in cases if not layouts or c.get("layout") in layouts]
    if hasattr(family, "cases_for"):  # a family whose rungs serve different cases (decode attention's)
        cases = family.cases_for(rung, cases)
    labels, failed, worst = [], [], 0.0
    for case in cases:
        try:
            result = check_case(family, rung, case, seed=seed)
        except Exception as exc:
            labels.append(describe_params(case))
            failed.append(f"FAIL {family.name}/{rung.key} [{describe_params(case)}]: {str(exc).splitlines()[0]}")
            if isinstance(exc, LabError):
                continue
            break
        labels.append(result.case)
        worst = max(worst, result.worst_ratio)
        if not result.passed:
            failed.append(result.line())
    return {"rung": rung.key, "checks": len(cases), "cases": labels, "failed": failed, "worst_ratio": worst}


def parse_knobs(text: str) -> dict:
    """"BN=192,STAGES=4" -> {"BN": 192, "STAGES": 4}."""
    pairs = [item.split("=", 1) for item in text.split(",") if item]
    if any(len(p) != 2 or not p[1].lstrip("-").isdigit() for p in pairs):
        raise SystemExit(f"--knobs takes NAME=INTEGER pairs separated by commas, not {text!r}.")
    return {name: int(value) for name, value in pairs}


def built(rung):
    """The rung with the knobs of LAB_SANITIZE_KNOBS (the parent's --knobs), as it is when none are set."""
    import dataclasses

    knobs = parse_knobs(os.environ.get("LAB_SANITIZE_KNOBS", ""))
    return dataclasses.replace(rung, spec=rung.spec.with_knobs(**knobs)) if knobs else rung


def child(tool: str, rung_key: str) -> None:
    import cupy as cp

    from lab.families import get_family

    # Every array its own cudaMalloc: memcheck knows allocations, not arrays, so inside a memory pool's
    # chunk a read past the end of A or B would land on a neighbour and go unseen.
    cp.cuda.set_allocator(None)
    family = os.environ.get("LAB_SANITIZE_FAMILY", "gemm_tc")
    sanitizer.emit_result({"tool": tool, **check_cases(get_family(family), rung_key, cases_for(family, tool))})


# --- the parent: every child under its tool, one JSON ------------------------------------------------

def row_of(planned: dict, run: sanitizer.Run | None, reason: str = "") -> dict:
    """A JSON row: what was planned, and the run's verdict (or why there was none)."""
    row = {"tool": planned["tool"], "rung": planned["rung"], "shapes": planned["shapes"]}
    if run is None:
        return row | {"status": "skipped" if planned["skip"] else "not run", "reason": planned["skip"] or reason}
    result = run.result or {}
    return row | {
        "status": "pass" if run.passed else "fail", "problems": run.problems,
        "errors": run.summary.errors, "hazards": run.summary.hazards, "hazard_warnings": run.summary.warnings,
        "checks": result.get("checks"), "failed_checks": result.get("failed"),
        "worst_error_over_bound": result.get("worst_ratio"), "returncode": run.returncode, "wall_s": run.wall_s,
        **({"output_tail": run.output_tail} if run.output_tail else {})}


def summarize(rows: list[dict]) -> dict:
    counts = {s: sum(r["status"] == s for r in rows) for s in ("pass", "fail", "skipped", "not run")}
    return {"counts": counts, "passed": counts["fail"] == 0 and counts["not run"] == 0}


def _detail(row: dict) -> str:
    if "reason" in row:
        return row["reason"]
    counts = f"{row['checks']} cases, {row['errors']} errors" + (
        f", {row['hazards']} hazards" if row["hazards"] is not None else "")
    return f"{counts}, {row['wall_s']:.1f} s" + (f" ({'; '.join(row['problems'])})" if row["problems"] else "")


def save(path: Path, payload: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=1) + "\n")


def main(out: Path, budget_s: float, tools: tuple[str, ...], rungs: tuple[str, ...] = (),
         family: str = "gemm_tc", knobs: str = "", layouts: str = "", child_s: float | None = None) -> int:
    from lab.core import device
    from lab.families import get_family
    from lab.measure import records

    # `timeout` stops this process with SIGTERM; as SystemExit it lets run_under end the child in flight.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    start = time.monotonic()
    path = sanitizer.find_sanitizer()
    fam = get_family(family)
    chosen = [r for r in fam.rungs + fam.candidate_rungs
              if not rungs or any(r.key.startswith(prefix) for prefix in rungs)]
    rows_planned = plan(chosen, device.current().arch, tools, family)
    payload = {"provenance": records.provenance(), "family": family, "budget_s": budget_s,
               "sanitizer": {"path": path, "version": sanitizer.sanitizer_version(path) if path else None},
               "cases": {t: [describe_params(c) for c in cases_for(family, t)] for t in tools}, "rows": [],
               **({"knobs": parse_knobs(knobs)} if knobs else {}), **({"layouts": layouts} if layouts else {}),
               **({"child_timeout_s": child_s} if child_s else {})}
    env = os.environ | {"PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
                        "LAB_SANITIZE_FAMILY": family, "LAB_SANITIZE_KNOBS": knobs, "LAB_SANITIZE_LAYOUTS": layouts}
    for planned in rows_planned:
        left = budget_s - (time.monotonic() - start)
        limit = timeout_for(family, planned["tool"], child_s)
        if planned["skip"] or path is None or left < max(MIN_CHILD_S, limit):
            why = "compute-sanitizer is not installed here" if path is None else \
                f"the time budget ({budget_s:.0f} s) had less left than one child's timeout"
            row = row_of(planned, None, why)
        else:
            run = sanitizer.run_under(path, planned["tool"], child_command(planned["tool"], planned["rung"]),
                                      min(limit, left), env)
            row = row_of(planned, run)
        payload["rows"].append(row)
        payload.update(summarize(payload["rows"]), wall_s=round(time.monotonic() - start, 1))
        save(out, payload)
        print(f"{row['status'].upper():8} {row['tool']:10} {row['rung']}: {_detail(row)}", flush=True)
    print(f"{payload['counts']} in {payload['wall_s']:.0f} s; written: {out}")
    return 0 if payload["passed"] else 1


def _args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", nargs="?", type=Path, help="the JSON to write")
    p.add_argument("--budget", type=float, default=DEFAULT_BUDGET_S, help="seconds for all children together")
    p.add_argument("--tools", default=",".join(sanitizer.TOOLS), help="comma list of memcheck, racecheck, synccheck")
    p.add_argument("--rungs", default="", help="comma list of rung keys or prefixes (01,05_warp); default: all")
    p.add_argument("--family", default="gemm_tc", choices=sorted(FAMILY_CASES), help="the ladder (default gemm_tc)")
    p.add_argument("--knobs", default="", help="NAME=VALUE,... to build the rungs with (default: their own)")
    p.add_argument("--layouts", default="", help="comma list of layouts whose cases run (default: every case's)")
    p.add_argument("--child-timeout", type=float, default=None,
                   help="seconds one child may run (default: the tool's for gemm_tc, 45 for the other families)")
    p.add_argument("--child", nargs=2, metavar=("TOOL", "RUNG"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.tools = tuple(t for t in args.tools.split(",") if t)
    args.rungs = tuple(r for r in args.rungs.split(",") if r)
    bad = set(args.tools) - set(sanitizer.TOOLS)
    if bad:
        p.error(f"--tools takes {', '.join(sanitizer.TOOLS)}, not {', '.join(sorted(bad))}")
    if args.child is None and args.out is None:
        p.error("give the JSON file to write")
    return args


if __name__ == "__main__":
    from lab.core.errors import LabError

    a = _args(sys.argv[1:])
    try:
        if a.child:
            child(*a.child)
        else:
            sys.exit(main(a.out, a.budget, a.tools, a.rungs, a.family, a.knobs, a.layouts, a.child_timeout))
    except LabError as exc:  # no GPU, say: one sentence, not a traceback
        print(exc, file=sys.stderr)
        sys.exit(2)
