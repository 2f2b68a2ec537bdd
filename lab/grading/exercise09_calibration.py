"""Exercise 09's calibration: how far a good dispatch table is ahead of one that sends every GEMM to the library.

The exercise scores a table by the serving trace's total GPU time against the reference table, timed in the same
process (lab.grading.grade_worker.run_rules_performance). That score means something only if the reference is clearly
faster than the trivial table, so this study times, on the exercise's own traces and one Layer:
    reference   the exercise's reference solution (solution/rules.json)
    default     lab.ops.rules.DEFAULT
    library     one rule: the library path (cuBLASLt) for every GEMM
in `rounds` rounds (the tables' order rotated between rounds), and reports each table's total, the ratios, and the
performance points each would earn under the exercise's scoring. It also probes shapes a trace family could add
(an output head with an odd vocabulary) through every path that serves them, so that the next trace can be
chosen from measurements.

    python -m lab.grading.exercise09_calibration --out results/h200/grading --write-solution
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from lab.core.errors import LabError

RECORD = "exercise09_calibration.json"
DEFAULT_TABLE = Path(__file__).parents[1] / "ops" / "default_table.json"
HEAD_MIN_N = 16384  # wider than every GEMM of the layer (14336 at most): only the output head
LIBRARY_TABLE = {"rules": [{"when": {}, "path": "cublas", "note": "the library for every GEMM"}]}
# Output heads whose vocabulary is odd (GPT-2's 50257, a Llama vocabulary with one added token): C's rows are not
# 16-byte aligned, the library's fast kernels' requirement.
PROBE_M = (1, 4, 8, 16, 64, 256, 1024, 2048)
PROBE_HEADS = ((50257, 4096), (32001, 4096))
PROBE_METHODS = (("decode", "decode", {}), ("persistent BN=256", "persistent", {"BN": 256, "GROUP_M": 8}),
                 ("persistent BN=128", "persistent", {"BN": 128, "GROUP_M": 8}), ("stream_k", "stream_k", {}),
                 ("cublas", "cublas", {}))


def time_traces(exercise, rounds: int, progress=print) -> list[dict]:
    """Each trace the exercise grades performance on (the visible one and the hidden one), every table timed on it
    in every round; totals per round and the points each table would earn against the reference."""
    from lab.grading import grade_worker as gw
    from lab.ops import rules
    from lab.ops.dispatch import Runtime
    from lab.studies.serving_trace import totals

    reference, _ = exercise.reference_table()
    tables = {"reference": reference, "default": rules.DEFAULT,
              "library": rules.parse(LIBRARY_TABLE, "the library everywhere")}
    perf = exercise.performance
    out = []
    for which, spec in (("visible", exercise.performance.params[0]), ("hidden", exercise.performance_trace(True))):
        steps = exercise.trace_steps(spec)
        per_round = []
        for r in range(rounds):
            names = list(tables)[r % len(tables):] + list(tables)[:r % len(tables)]
            progress(f"  {which} trace, round {r + 1}: {', '.join(names)}")
            times = gw.time_tables(steps, {n: Runtime(tables[n]) for n in names}, vocab=exercise.vocab)
            per_round.append({n: round(t["total_us"], 1) for n, t in totals(steps, times).items()})
        ratios = {n: [round(rd["reference"] / rd[n], 4) for rd in per_round] for n in tables}
        points = {n: [gw.performance_score(x, perf.target_of_ceiling, perf.points, perf.zero_at) for x in ratios[n]]
                  for n in tables}
        out.append({"trace": which, "spec": spec, "steps": len(steps), "distinct": len(set(steps)),
                    "total_us": per_round, "ratio_to_reference": ratios, "points": points,
                    "reference_over_library": [round(rd["library"] / rd["reference"], 4) for rd in per_round]})
    return out


def probe_heads(rounds: int, progress=print) -> list[dict]:
    """Every path that serves an output head of an odd vocabulary, checked against float64 and timed cold."""
    from lab.studies.ops_sweep import Sample, measure_sample

    rows = []
    for n, k in PROBE_HEADS:
        for i, m in enumerate(PROBE_M):
            sample = Sample(m, n, k, "float16", "TN", "none")
            progress(f"  head {m} x {n} x {k}")
            rows.append(measure_sample(sample, list(PROBE_METHODS), rounds, 90_000 + i))
    return rows


def _median(values) -> float:
    return sorted(values)[len(values) // 2]


def head_rules(heads: list[dict], vocab: int, where: str) -> list[dict]:
    """The reference's rules for the output head, read off the probe of its width: the GEMV (decode) up to the
    largest M below which it is fastest at every probed M, then the fastest path at every larger M (which must be one
    path and configuration); each note gives the medians it rests on."""
    rows = sorted((r for r in heads if r["params"]["N"] == vocab), key=lambda r: r["params"]["M"])
    if not rows:
        raise LabError(f"the probe holds no head of width {vocab}; add it to PROBE_HEADS")
    best = [(r["params"]["M"], min((_median(t), m) for m, t in r["cold_us"].items() if t), r) for r in rows]
    small = [b for b in best if b[1][1] == "decode"]
    edge = max((m for m, *_ in small if all(b[1][1] == "decode" for b in best if b[0] <= m)), default=0)
    large = {b[1][1] for b in best if b[0] > edge}
    if len(large) != 1:
        raise LabError(f"past M = {edge} the head's fastest path changes with M ({', '.join(sorted(large))}); "
                       "the reference needs a rule per range")
    method = large.pop()
    path, config = next((p, c) for name, p, c in PROBE_METHODS if name == method)

    def spread(lo: int, hi: int, name: str) -> str:
        inside = [b for b in best if lo <= b[0] <= hi]
        mine = [_median(b[2]["cold_us"][name]) for b in inside]
        lib = [_median(b[2]["cold_us"]["cublas"]) for b in inside]
        return (f"{min(mine):.0f}-{max(mine):.0f} us against the library's {min(lib):.0f}-{max(lib):.0f} us at "
                f"M = {inside[0][0]}-{inside[-1][0]}")

    rules = []
    if edge:
        rules.append({"when": {"min_n": HEAD_MIN_N, "max_m": edge}, "path": "decode",
                      "note": f"output head ({vocab} columns): decode, {spread(1, edge, 'decode')}; {where}"})
    rules.append({"when": {"min_n": HEAD_MIN_N}, "path": path, **({"config": config} if config else {}),
                  "note": f"output head ({vocab} columns): {method}, {spread(edge + 1, 1 << 30, method)}; {where}"})
    return rules


def reference_table(heads: list[dict], vocab: int, where: str) -> dict:
    """lab.ops's default table with the output head's rules after its first (the GEMV for the smallest batches)."""
    default = json.loads(DEFAULT_TABLE.read_text())
    rules = default["rules"]
    return {**default, "rules": rules[:1] + head_rules(heads, vocab, where) + rules[1:]}


def run(out_dir: Path, rounds: int = 3, write_solution: bool = False, progress=print) -> Path:
    from lab.grading.exercises import load
    from lab.measure.records import provenance, write_json
    from lab.tools.library_gemm import library_name

    started = time.perf_counter()
    exercise = load("09")
    prov = provenance()
    record = {"provenance": prov, "library": library_name(), "rounds": rounds, "model": {"vocab": exercise.vocab},
              "heads": probe_heads(rounds, progress)}
    if write_solution and exercise.vocab:
        where = f"results/h200/grading/{RECORD}, {prov['device']}, {prov['commit']}, {prov['date'][:10]}"
        table = reference_table(record["heads"], exercise.vocab, where)
        exercise.solution_path.write_text(json.dumps(table, indent=1) + "\n")
        exercise = load("09")  # timed against the table just written
    record["reference"] = json.loads(exercise.solution_path.read_text())
    record["scoring"] = {"target": exercise.performance.target_of_ceiling, "zero_at": exercise.performance.zero_ratio,
                         "points": exercise.performance.points}
    record["traces"] = time_traces(exercise, rounds, progress)
    record["seconds"] = round(time.perf_counter() - started, 1)
    out = Path(out_dir) / RECORD
    write_json(out, record)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--write-solution", action="store_true",
                   help="write the exercise's reference table from the head probe before timing the traces")
    args = p.parse_args(argv)
    print(run(args.out, args.rounds, args.write_solution))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
