#!/usr/bin/env python3
"""The Python half of scripts/cluster_run.sh (grading across GPUs): the batch it grades, the watcher that kills one Dask
worker mid-batch, the leftover-process check, and the comparison of the three runs that becomes the record.

    python3 scripts/cluster_compare.py batch SUBS_DIR BATCH.json       the fault suite + 20 mixed submissions
    python3 scripts/cluster_compare.py kill-worker GRADES_DIR KILL.json [--after N] [--timeout S]
    python3 scripts/cluster_compare.py leftovers SUBS_DIR [--kill]     grading processes still alive (JSON)
    python3 scripts/cluster_compare.py compare --batch BATCH.json --run NAME GRADES_DIR LOG WALL.json ...
                                       [--kill KILL.json] [--setting KEY=VALUE ...] --out RECORD.json

Every submission must be graded exactly once per run (one line per submission in the `lab grade` log, one
results.json each), and the grades must be identical across runs: the total and every check's score and pass
flag. Timing fields, check outputs (they quote times and error values) and worker identity are left out.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FAULT_SUITE = ROOT / "tests" / "grading"
EXERCISE = "01"
TARGET_RATIO = 0.6  # the target: the 2-GPU wall time at most 0.6x of one GPU's
# The mixed half of the batch: copies of fault-suite submissions under other names (a class has many alike),
# exercise 01's own reference solution and starter, and exercise 02's solution handed in for the wrong exercise.
# No hanging submission (the fault suite's two already cost a time limit each) and no racy one (its outputs
# are nondeterministic by design).
MIXED_COPIES = ["good_reference", "good_scalar", "good_unrolled", "good_starter_style", "extra_files",
                "slow_chunked", "compile_error", "wrong_name", "illegal_address", "oob_write", "unwritten_tail",
                "nan_output", "wrong_values", "off_by_one", "misaligned_float4", "skip_repeated_launches"]
MIXED_SOLUTIONS = ["reference_01", "reference_01", "starter_01", "reference_02"]
GRADED_LINE = re.compile(r"^(?P<name>\S+): (?P<score>[-\d.e+]+)/(?P<max>[-\d.e+]+) \((?:[\d.]+ s|already graded)\)\s*$")


# ----------------------------------------------------------------------------------------------
# The batch
# ----------------------------------------------------------------------------------------------

def _copy_fault_suite_entry(name: str, entry: dict, target: Path) -> None:
    if entry.get("generated"):  # huge_file: made at test time, as tests/test_gpu_grader.py does
        spec = entry["generate"]
        text = (FAULT_SUITE / "submissions" / spec["from"] / "kernel.cu").read_text()
        filler = "// padding to make the file too large to grade\n"
        target.mkdir(parents=True)
        (target / "kernel.cu").write_text(text + filler * (spec["min_bytes"] // len(filler) + 1))
    else:
        shutil.copytree(FAULT_SUITE / "submissions" / name, target)


def _solution_text(kind: str) -> str:
    from lab.grading.exercises import load

    what, number = kind.rsplit("_", 1)
    exercise = load(number)
    return exercise.reference_source() if what == "reference" else exercise.starter_text()


def build_batch(dest: Path, mixed: int = 20) -> dict:
    """The fault suite (every submission of tests/grading) plus `mixed` more under names of their own; returns
    name -> {"origin", "expect"} (the fault suite's expectations; "pass" for exercise 01's reference)."""
    dest = Path(dest)
    if dest.exists() and any(dest.iterdir()):
        raise SystemExit(f"{dest} is not empty: give a fresh folder for the batch")
    manifest = json.loads((FAULT_SUITE / "manifest.json").read_text())
    batch = {}
    for name, entry in manifest.items():
        _copy_fault_suite_entry(name, entry, dest / name)
        batch[name] = {"origin": f"fault suite: {name}", "expect": entry["expect"]}
    plan = (MIXED_SOLUTIONS + MIXED_COPIES)[:mixed]
    if len(plan) < mixed:
        raise SystemExit(f"at most {len(MIXED_SOLUTIONS) + len(MIXED_COPIES)} mixed submissions are planned")
    for i, origin in enumerate(plan, 1):
        name = f"mixed_{i:02d}_{origin}"
        if origin in MIXED_COPIES:
            _copy_fault_suite_entry(origin, manifest[origin], dest / name)
            batch[name] = {"origin": f"copy of {origin}", "expect": manifest[origin]["expect"]}
        else:
            (dest / name).mkdir(parents=True)
            (dest / name / "kernel.cu").write_text(_solution_text(origin))
            expect = {"reference_01": "pass", "starter_01": "starter", "reference_02": "wrong_exercise"}[origin]
            batch[name] = {"origin": origin.replace("_", " of exercise "), "expect": expect}
    return batch


# ----------------------------------------------------------------------------------------------
# Processes, read from /proc (Linux)
# ----------------------------------------------------------------------------------------------

def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]
    except OSError:
        return []


def _parent(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat[stat.rindex(")") + 2:].split()[1])  # the name may hold spaces: fields after ")"
    except (OSError, ValueError, IndexError):
        return None


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text()
        return state[state.rindex(")") + 2] != "Z"  # a zombie is dead, only not yet reaped
    except (OSError, ValueError, IndexError):
        return False


def _pids() -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]


def submission_of(cmdline: list[str]) -> str | None:
    """The submission a grading process works on: its --kernel file's folder."""
    if "--kernel" in cmdline and cmdline.index("--kernel") + 1 < len(cmdline):
        return Path(cmdline[cmdline.index("--kernel") + 1]).parent.name
    return None


def grading_children(worker_pid: int) -> list[dict]:
    return [{"pid": pid, "submission": submission_of(_cmdline(pid)), "cmdline": " ".join(_cmdline(pid))[:300]}
            for pid in _pids() if _parent(pid) == worker_pid and "--kernel" in _cmdline(pid)]


def leftover_graders(subs: Path) -> list[dict]:
    """Grading processes still alive whose kernel lies under `subs` (after a run: there should be none)."""
    prefix = str(Path(subs).resolve()) + os.sep
    found = []
    for pid in _pids():
        cmd = _cmdline(pid)
        kernel = cmd[cmd.index("--kernel") + 1] if "--kernel" in cmd[:-1] else ""
        if kernel.startswith(prefix) and alive(pid):
            found.append({"pid": pid, "submission": submission_of(cmd), "parent": _parent(pid)})
    return found


# ----------------------------------------------------------------------------------------------
# Killing one Dask worker mid-batch
# ----------------------------------------------------------------------------------------------

def results_in(grades: Path) -> list[dict]:
    """Every results.json of a grades folder, oldest first, with its submission's name and its mtime."""
    found = []
    for path in Path(grades).glob("*/results.json"):
        try:
            payload = json.loads(path.read_text())
            found.append({"submission": path.parent.name, "mtime": path.stat().st_mtime, "payload": payload})
        except (OSError, ValueError):
            pass  # written atomically, so only a file removed under us
    return sorted(found, key=lambda r: r["mtime"])


def pick_worker(results: list[dict]) -> dict | None:
    """The Dask worker to kill: the one that wrote the latest result and is alive and grading a submission
    now (a kill in the middle of a task); else any live worker that wrote a result. None: no live worker."""
    workers, seen = [], set()
    for r in reversed(results):
        w = r["payload"].get("extra_data", {}).get("dask_worker")
        if w and w["pid"] not in seen and w["host"] == os.uname().nodename:
            seen.add(w["pid"])
            workers.append(w)
    live = [w for w in workers if alive(w["pid"])]
    busy = [w for w in live if grading_children(w["pid"])]
    return (busy or live or [None])[0]


def kill_one_worker(grades: Path, after: int, timeout_s: float = 300, watch_s: float = 10,
                    poll_s: float = 0.2, prefer_busy_s: float = 5) -> dict:
    """Wait for `after` results in `grades`, then SIGKILL one Dask worker (pick_worker) and watch its grading
    processes: they must die with it (lab.grading.cluster ties them to it). Returns what happened, for the record."""
    start = time.time()
    while time.time() - start < timeout_s:
        results = results_in(grades)
        if len(results) >= after:
            break
        time.sleep(poll_s)
    else:
        return {"killed": False, "why": f"fewer than {after} results within {timeout_s:g} s"}
    deadline = time.time() + prefer_busy_s  # a worker between two tasks is not "mid-task": wait a little for one
    while True:
        results = results_in(grades)
        worker = pick_worker(results)
        if worker is None and time.time() > start + timeout_s:
            return {"killed": False, "why": "no live Dask worker found in the results"}
        if worker is not None and (grading_children(worker["pid"]) or time.time() > deadline):
            break
        time.sleep(poll_s)
    children = grading_children(worker["pid"])
    worker_cmdline = " ".join(_cmdline(worker["pid"]))[:300]
    t_kill = time.time()
    os.kill(worker["pid"], signal.SIGKILL)
    gone_after = {}
    while time.time() - t_kill < watch_s and len(gone_after) < len(children):
        for c in children:
            if c["pid"] not in gone_after and not alive(c["pid"]):
                gone_after[c["pid"]] = round(time.time() - t_kill, 2)
        time.sleep(0.05)
    survivors = [c for c in children if c["pid"] not in gone_after]
    for c in survivors:  # leave no orphaned student kernel on the GPU, but say so: it is a failure
        try:
            os.kill(c["pid"], signal.SIGKILL)
        except ProcessLookupError:
            pass
    end = time.time() + 5
    while any(alive(c["pid"]) for c in survivors) and time.time() < end:
        time.sleep(0.05)
    return {"killed": True, "t_kill": t_kill, "results_before_kill": len(results), "worker": worker,
            "worker_cmdline": worker_cmdline, "in_flight": children,
            "children_gone_after_s": {str(k): v for k, v in gone_after.items()},
            "orphans": survivors, "children_died_with_worker": not survivors}


# ----------------------------------------------------------------------------------------------
# The comparison
# ----------------------------------------------------------------------------------------------

def graded_lines(log_text: str) -> Counter:
    """How often `lab grade` announced each submission as graded (one line each, printed as it is recorded)."""
    return Counter(m["name"] for m in map(GRADED_LINE.match, log_text.splitlines()) if m)


def grades_of(grades: Path) -> dict[str, dict]:
    """name -> the grade as compared: total, maximum, and each check's score and pass flag."""
    out = {}
    for r in results_in(grades):
        extra = r["payload"]["extra_data"]
        out[r["submission"]] = {"score": r["payload"]["score"], "max": extra["max_score"],
                                "checks": {c["name"]: [c["score"], c["passed"]] for c in extra["checks"]}}
    return out


def workers_of(grades: Path) -> dict[str, dict]:
    """name -> who graded it: the Dask worker (host, pid, CUDA_VISIBLE_DEVICES) and the GPU's identity."""
    out = {}
    for r in results_in(grades):
        extra = r["payload"]["extra_data"]
        out[r["submission"]] = {"dask_worker": extra.get("dask_worker"), "device": extra.get("device"),
                                "seconds": r["payload"].get("execution_time")}
    return out


def once_each(batch: list[str], grades: dict[str, dict], lines: Counter) -> list[str]:
    """What breaks "every submission graded exactly once" in one run; [] when nothing does."""
    problems = [f"{n}: no results.json" for n in batch if n not in grades]
    problems += [f"{n}: announced {lines[n]} times" for n in batch if lines[n] != 1]
    problems += [f"{n}: graded but not in the batch" for n in sorted(set(grades) | set(lines)) if n not in batch]
    return problems


def differences(batch: list[str], runs: dict[str, dict[str, dict]]) -> list[str]:
    """Every submission whose grade differs between the runs (the first run is the reference)."""
    names = list(runs)
    first, out = names[0], []
    for n in batch:
        for other in names[1:]:
            a, b = runs[first].get(n), runs[other].get(n)
            if a is None or b is None:
                continue  # reported by once_each
            if a != b:
                changed = sorted(c for c in set(a["checks"]) | set(b["checks"])
                                 if a["checks"].get(c) != b["checks"].get(c))
                out.append(f"{n}: {first} {a['score']:g}/{a['max']:g}, {other} {b['score']:g}/{b['max']:g}"
                           + (f" (checks {', '.join(changed)})" if changed else ""))
    return out


def score_table(batch: dict, runs: dict[str, dict[str, dict]]) -> dict[str, dict]:
    table = {}
    for n, about in batch.items():
        first = next((g[n] for g in runs.values() if n in g), None)
        row = {"origin": about["origin"], "expect": about["expect"], "max": first["max"] if first else None}
        row |= {run: grades[n]["score"] if n in grades else None for run, grades in runs.items()}
        row["checks"] = first["checks"] if first else None
        table[n] = row
    return table


def compare(batch: dict, runs: dict[str, dict], kill: dict | None = None, settings: dict | None = None) -> dict:
    """The record of the three runs. `runs`: name -> {"grades": DIR, "log": FILE, "wall": WALL.json}, in the
    order one GPU, cluster, cluster with a worker killed."""
    names = list(batch)
    graded, summaries = {}, {}
    for run, where in runs.items():
        wall = json.loads(Path(where["wall"]).read_text()) if Path(where["wall"]).is_file() else {}
        log = Path(where["log"]).read_text(errors="replace") if Path(where["log"]).is_file() else ""
        graded[run] = grades_of(Path(where["grades"]))
        who = workers_of(Path(where["grades"]))
        pids = Counter(str((w["dask_worker"] or {}).get("pid", "this process")) for w in who.values())
        models = Counter(str((w["device"] or {}).get("model")) for w in who.values())
        gpus = Counter(str((w["device"] or {}).get("uuid")) for w in who.values())
        summaries[run] = {
            "wall_s": round(wall["end"] - wall["start"], 2) if {"start", "end"} <= set(wall) else None,
            "start": wall.get("start"), "exit_code": wall.get("exit_code"), "graded": len(graded[run]),
            "graded_once": not once_each(names, graded[run], graded_lines(log)),
            "problems": once_each(names, graded[run], graded_lines(log)),
            "submissions_per_worker": dict(pids), "gpu_models": dict(models), "submissions_per_gpu": dict(gpus),
            "sum_of_submission_seconds": round(sum(w["seconds"] or 0 for w in who.values()), 1),
        }
        if kill and kill.get("killed") and where.get("killed_here"):
            victim = kill["worker"]["pid"]
            summaries[run]["kill"] = {
                **kill, "t_kill_s_into_run": round(kill["t_kill"] - wall["start"], 2) if wall.get("start") else None,
                "results_by_killed_worker": sorted(n for n, w in who.items()
                                                   if (w["dask_worker"] or {}).get("pid") == victim),
                "in_flight_regraded_by": {c["submission"]: (who.get(c["submission"], {}).get("dask_worker") or {})
                                          .get("pid") for c in kill["in_flight"] if c["submission"]},
            }
    diffs = differences(names, graded)
    walls = [s["wall_s"] for s in summaries.values()]
    ratio = round(walls[1] / walls[0], 3) if len(walls) > 1 and walls[0] and walls[1] else None
    return {
        "about": "Grading across GPUs: the grader's fault suite plus mixed submissions for exercise 01, graded three "
                 "ways with `lab grade`: on one GPU, with --cluster local (dask-cuda, one worker per GPU), and with "
                 "--cluster local while one Dask worker is SIGKILLed mid-batch. Grades compared on the total and "
                 "every check's score and pass flag (times, outputs and worker identity left out).",
        "settings": settings or {},
        "batch": {"size": len(names), "origins": Counter(a["origin"].split(":")[0] for a in batch.values())},
        "runs": summaries,
        "ratio_cluster_over_one_gpu": ratio, "target_ratio": TARGET_RATIO,
        # Met only by complete runs with identical grades: a run that failed at once is no speed-up (seen on the
        # H200 x2 when Dask did not install: a 0.4 s "cluster" run against a timed-out one-GPU run).
        "meets_target": (ratio is not None and ratio <= TARGET_RATIO and not diffs
                         and all(s["graded_once"] and s["graded"] == len(names) for s in summaries.values())),
        "every_run_graded_each_once": all(s["graded_once"] for s in summaries.values()),
        "identical": not diffs and all(s["graded"] == len(names) for s in summaries.values()),
        "differences": diffs,
        "scores": score_table(batch, graded),
    }


def _provenance() -> dict:
    from lab.core.errors import LabError
    from lab.measure import records

    try:
        return records.provenance()
    except LabError as exc:  # a dry run on a machine without a GPU: the record says so
        return {"device": None, "why": str(exc), "commit": records.git_commit()}


# ----------------------------------------------------------------------------------------------
# Command line
# ----------------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="what", required=True)
    b = sub.add_parser("batch")
    b.add_argument("subs", type=Path)
    b.add_argument("manifest", type=Path)
    b.add_argument("--mixed", type=int, default=20)
    k = sub.add_parser("kill-worker")
    k.add_argument("grades", type=Path)
    k.add_argument("record", type=Path)
    k.add_argument("--after", type=int, default=12)
    k.add_argument("--timeout", type=float, default=300)
    lo = sub.add_parser("leftovers")
    lo.add_argument("subs", type=Path)
    lo.add_argument("--kill", action="store_true")
    c = sub.add_parser("compare")
    c.add_argument("--batch", type=Path, required=True)
    c.add_argument("--run", nargs=4, action="append", metavar=("NAME", "GRADES", "LOG", "WALL"), required=True)
    c.add_argument("--kill", type=Path, help="kill-worker's record; applies to the last --run")
    c.add_argument("--setting", action="append", default=[], help="KEY=VALUE, kept in the record")
    c.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)

    if args.what == "batch":
        batch = build_batch(args.subs, args.mixed)
        args.manifest.write_text(json.dumps(batch, indent=1) + "\n")
        print(f"{len(batch)} submissions in {args.subs}")
    elif args.what == "kill-worker":
        outcome = kill_one_worker(args.grades, args.after, args.timeout)
        args.record.write_text(json.dumps(outcome, indent=1) + "\n")
        print("kill-worker:", json.dumps({k: outcome.get(k) for k in ("killed", "why", "worker", "in_flight",
                                                                     "children_died_with_worker")}))
    elif args.what == "leftovers":
        found = leftover_graders(args.subs)
        for f in found if args.kill else []:
            try:
                os.kill(f["pid"], signal.SIGKILL)
            except ProcessLookupError:
                pass
        print(json.dumps({"leftover_grading_processes": found, "killed": bool(found and args.kill)}))
    else:
        batch = json.loads(args.batch.read_text())
        runs = {name: {"grades": grades, "log": log, "wall": wall} for name, grades, log, wall in args.run}
        runs[args.run[-1][0]]["killed_here"] = True
        kill = json.loads(args.kill.read_text()) if args.kill and args.kill.is_file() else None
        settings = dict(s.split("=", 1) for s in args.setting)
        record = {"provenance": {**_provenance(), "command": "bash scripts/cluster_run.sh"},
                  **compare(batch, runs, kill, settings)}
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(record, indent=1) + "\n")
        brief = {k: record[k] for k in ("ratio_cluster_over_one_gpu", "meets_target", "every_run_graded_each_once",
                                         "identical", "differences")}
        brief["walls"] = {n: s["wall_s"] for n, s in record["runs"].items()}
        print(json.dumps(brief, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
