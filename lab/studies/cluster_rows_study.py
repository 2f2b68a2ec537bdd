"""Long rows split over a thread-block cluster (RMSNorm and LayerNorm rung 04, softmax rung 05) beside the rung
before them, PyTorch's kernels and the device copy, in interleaved rounds.

Cases: each operation, both of its types, rows of n = 16384, 32768, 65536 and 131072 values, x 256 MiB (far past
the L2). Methods (every one once a round on each case, the order rotated from round to round, cold L2):

    copy                          the device copy of x (the ceiling: the same bytes read and written)
    torch                         torch.nn.functional.rms_norm / layer_norm, torch.softmax on the same x (DLPack)
    <previous rung>               norms 03_specialized, softmax 04_specialized: one block per row
    <cluster rung>                as the family builds it (cluster size and block from n)
    <cluster rung> KNOB=V         knob probes: the other exchange (EXCHANGE=0, a cluster barrier), other block
                                  targets (BLOCK=128, BLOCK=512: more or fewer blocks a row) and LayerNorm's
                                  statistics in one exchange (STATS=1) where the rung takes the knob

Each rung method is checked once against float64 (lab.measure.verify.check_case, on a few rows of the same n and
type, which builds the same kernel) before it is timed; a method that fails is left out and named in `failed`.
Per case and method the record keeps each round's median time and GB/s, and the same-round ratios (medians over
rounds, lab.studies.rounds): to the copy (x_copy: the fraction of the ceiling) and to PyTorch (x_torch: above 1 is
faster than PyTorch). Each rung's launch notes (the path, cluster, block) ride along. Nothing here asserts a speed.

    python -m lab.studies.cluster_rows_study OUT_DIR [--rounds 3] [--quick]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from lab.families import get_family
from lab.measure.records import provenance, write_json
from lab.studies.hopper_gemm_study import knob_name
from lab.studies.rounds import interleaved_rows, same_round_summary

FILENAME = "cluster_rows_study.json"
ARRAY_BYTES = 256 << 20  # x alone; the output as much again
ROW_LENGTHS = (16384, 32768, 65536, 131072)
QUICK_ROW_LENGTHS = (32768,)
TYPES = {"rmsnorm": ("float16", "bfloat16"), "layernorm": ("float16", "bfloat16"), "softmax": ("float16", "float32")}
PREVIOUS = {"rmsnorm": "03_specialized", "layernorm": "03_specialized", "softmax": "04_specialized"}
CLUSTER_RUNG = {"rmsnorm": "04_cluster", "layernorm": "04_cluster", "softmax": "05_cluster"}
PROBES = ({"EXCHANGE": 0}, {"BLOCK": 128}, {"BLOCK": 512}, {"STATS": 1})
# LayerNorm's rung 04 defaulted to STATS = 1 at these commits (585f423 up to the one before d46a632), and a record
# made at one of them timed STATS = 2, the default before and since, as the probe "04 STATS=2": in such a record that
# row is the cluster rung as built now, and the "04_cluster" row is the knob named here.
STATS_1_COMMITS = ("585f423", "ee06ea4", "aa2b89c", "250b42d", "b988799", "4a077aa", "6a893e3", "32a8735", "5b68074")
BUILT_NOW_AS_PROBE = {"layernorm": ("04 STATS=2", "STATS=1", STATS_1_COMMITS)}
CHECK_ROWS = 3
EPS = 1e-5


def swapped(op: str, commit: str) -> tuple[str, str] | None:
    """(the probe row that is the cluster rung as built now, what the rung's own row was) for a record of `op` made
    at `commit` while its default differed (BUILT_NOW_AS_PROBE); None for every other record."""
    probe, then, commits = BUILT_NOW_AS_PROBE.get(op, (None, None, ()))
    return (probe, then) if commit and str(commit)[:7] in commits else None


def cluster_method(op: str, methods, commit: str = "") -> str:
    """Which of a record's methods for one case (`methods`: their names; `commit`: the record's) is the cluster
    rung as the family builds it now: CLUSTER_RUNG[op], or the probe row `swapped` names where the record has it."""
    swap = swapped(op, commit)
    return swap[0] if swap is not None and swap[0] in methods else CLUSTER_RUNG[op]


def record_path() -> Path | None:
    """The committed record: the reference GPU's (results/h200), else the one measured on an H100 beside it
    (results/h100), else None. Its provenance names the GPU either way."""
    from lab.measure.records import reference_dir

    for folder in (reference_dir(), reference_dir().parent / "h100"):
        if (folder / FILENAME).is_file():
            return folder / FILENAME
    return None


def cases(quick: bool = False) -> list[dict]:
    """Every (op, dtype, n) with its rows: x holds ARRAY_BYTES."""
    out = []
    for op, dtypes in TYPES.items():
        for dtype in dtypes:
            for n in QUICK_ROW_LENGTHS if quick else ROW_LENGTHS:
                itemsize = 4 if dtype == "float32" else 2
                out.append({"op": op, "dtype": dtype, "n": n, "rows": ARRAY_BYTES // (itemsize * n)})
    return out


def rung_methods(fam, op: str) -> dict:
    """name -> rung: the previous rung, the cluster rung and its knob probes (those of PROBES whose knobs it takes,
    other than its defaults). The cluster rung is absent from a family that lacks it."""
    keys = {r.key for r in fam.rungs}
    out = {PREVIOUS[op]: fam.rung(PREVIOUS[op])}
    if CLUSTER_RUNG[op] in keys:
        base = fam.rung(CLUSTER_RUNG[op])
        out[base.key] = base
        defaults = dict(base.spec.knobs)
        for knobs in PROBES:
            if all(k in defaults and defaults[k] != v for k, v in knobs.items()):
                out[knob_name(base.key, knobs)] = dataclasses.replace(base, spec=base.spec.with_knobs(**knobs))
    return out


def torch_call(op: str, x, params: tuple, dtype: str):
    """PyTorch's operation on the lab's arrays (zero-copy through DLPack; bf16 bit patterns viewed as bfloat16), or
    None where PyTorch with CUDA is not installed."""
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None

    def view(a):
        t = torch.from_dlpack(a)
        return t.view(torch.bfloat16) if dtype == "bfloat16" else t

    tx, tp = view(x), [view(p) for p in params]
    n = x.shape[-1]
    if op == "rmsnorm":
        return lambda i: F.rms_norm(tx, (n,), tp[0], EPS)
    if op == "layernorm":
        return lambda i: F.layer_norm(tx, (n,), tp[0], tp[1], EPS)
    return lambda i: torch.softmax(tx, dim=-1)


def case_methods(case: dict, failed: list, notes: dict) -> tuple[dict, int]:
    """name -> launch(i) for one case, and the bytes it moves (x read and the output written once)."""
    import cupy as cp

    from lab.measure.verify import check_case

    op, dtype, n, rows = case["op"], case["dtype"], case["n"], case["rows"]
    fam = get_family(op)
    problem = fam.make_problem(seed=5, rows=rows, n=n, dtype=dtype)
    out = cp.empty(problem.out_shape, problem.dtype)
    methods = {"copy": lambda i: fam.launch_ceiling(problem, out)}
    x = problem.inputs["x"][0]
    params = tuple(problem.inputs[k] for k in ("w", "b") if problem.inputs.get(k) is not None)
    torch_fn = torch_call(op, x, params, dtype)
    if torch_fn is not None:
        methods["torch"] = torch_fn
    for name, rung in rung_methods(fam, op).items():
        try:
            result = check_case(fam, rung, {"rows": CHECK_ROWS, "n": n, "dtype": dtype}, seed=7)
        except Exception as exc:  # noqa: BLE001 - a rung that cannot run here is reported, not fatal
            failed.append(f"{op} {dtype} n={n} {name}: {exc}")
            continue
        if not result.passed:
            failed.append(f"{op} {dtype} n={n} {name}: {result.line()}")
            continue
        notes.setdefault(_case_key(case), {})[name] = fam.launch_notes(rung, problem, out)
        methods[name] = lambda i, rung=rung: fam.launch(rung, problem, out)
    return methods, 2 * x.nbytes


def _case_key(case: dict) -> str:
    return f"{case['op']} {case['dtype']} {case['rows']}x{case['n']}"


def study(rounds: int = 3, quick: bool = False, min_time_ms: float = 10.0, progress=print) -> dict:
    from lab.measure import timing

    failed: list = []
    notes: dict = {}

    def report(case: dict, rows: list[dict]) -> None:
        last = {row["method"]: row["GB/s"] for row in rows if row["shape"] is case and row["round"] == rounds - 1}
        progress(f"{_case_key(case)}: " + ", ".join(f"{m} {v:.0f}" for m, v in last.items()) + " GB/s (last round)")

    rows = interleaved_rows(cases(quick), lambda case: case_methods(case, failed, notes), rounds, timing.L2Flusher(),
                            min_time_ms, lambda moved, ms: {"GB/s": moved / (ms * 1e-3) / 1e9}, report)
    return assemble(rows, rounds, failed, notes, provenance())


def assemble(rows: list[dict], rounds: int, failed: list, notes: dict, prov: dict) -> dict:
    summary = same_round_summary(rows, "GB/s", ("torch",), "x_torch", "copy", "x_copy")
    return {"provenance": prov, "about": __doc__.split("\n\n")[0], "rounds": rounds, "rows": rows,
            "summary": summary, "launch_notes": notes, "failed": failed}


def run(out_dir: Path, *, rounds: int = 3, quick: bool = False, progress=print) -> Path:
    return write_json(Path(out_dir) / FILENAME, study(rounds, quick, progress=progress))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="n = 32768 only, for a smoke run")
    args = parser.parse_args(argv)
    path = run(Path(args.out_dir), rounds=args.rounds, quick=args.quick)
    import json

    record = json.loads(path.read_text())
    ratio = lambda x: "-" if x is None else f"{x:.3f}"  # noqa: E731
    for s in record["summary"]:
        sh = s["shape"]
        print(f"{sh['op']:<9} {sh['dtype']:<8} n={sh['n']:<6} {s['method']:<22} {s['GB/s']:7.0f} GB/s  spread "
              f"{s['spread']:.3f}  x copy {ratio(s['x_copy'])}  x torch {ratio(s['x_torch'])}")
    for f in record["failed"]:
        print("not timed:", f)
    print(f"written: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
