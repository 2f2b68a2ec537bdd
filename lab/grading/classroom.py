"""A class at a time: `lab grade` (a batch, resumable, one worker per GPU) and `lab leaderboard`.

Each submission's Gradescope results.json is written the moment it is graded, so an interrupted
batch loses nothing and a rerun skips every submission whose results match its fingerprint (same
files, exercise, seed, hidden checks, lab version). The class CSV and the report are rebuilt from
those files at the end.
"""

from __future__ import annotations

import contextlib
import csv
import json
import queue
import secrets
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

from lab.core.errors import LabError
from lab.grading.exercises import Exercise
from lab.grading.grader import (
    GradingStopped,
    SubmissionResult,
    find_kernel,
    fingerprint,
    gpu_identity,
    grade_submission,
    gradescope_json,
    result_from_json,
    run_checks,
    write_json_atomic,
)

SEED_FILE = "grading.json"  # in the grades folder: the seed a batch was graded with, reused on a resumed run


def submissions_in(folder: Path) -> list[Path]:
    folder = Path(folder)
    if not folder.exists():
        raise LabError(f"{folder} does not exist; give the folder that holds the submissions (one sub-folder per "
                       "student).")
    if not folder.is_dir():
        raise LabError(f"{folder} is not a folder of submissions (one sub-folder per student).")
    subs = sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not subs:
        raise LabError(f"{folder} holds no submission folders; put each student's files in their own folder.")
    return subs


def _already_graded(path: Path, fp: str) -> SubmissionResult | None:
    try:
        payload = json.loads(path.read_text())
        return result_from_json(payload) if payload["extra_data"]["fingerprint"] == fp else None
    except (OSError, KeyError, ValueError, TypeError):
        return None


def batch_seed(out: Path, seed: int | None) -> tuple[int, str]:
    """The seed for a batch's random inputs and where it came from. A given seed is used as it is; without
    one, the seed recorded in OUT/grading.json by an earlier run of this batch (so that a resumed run
    regrades nothing), else a new secret one drawn now. Never a public default: a seed anyone could
    guess would let a kernel tuned to its inputs pass the hidden checks."""
    recorded = Path(out) / SEED_FILE
    if seed is not None:
        return seed, "given"
    try:
        return int(json.loads(recorded.read_text())["seed"]), f"recorded in {recorded}"
    except (OSError, KeyError, ValueError, TypeError):
        return secrets.randbelow(1 << 31), "drawn now"


def grade_batch(exercise: Exercise, submissions: Path, out: Path, seed: int | None = None,
                include_hidden: bool = True, gpus: list[str] | None = None,
                on_done: Callable[[SubmissionResult, bool], None] | None = None,
                client=None) -> list[SubmissionResult]:
    """Grade every submission folder; one worker thread per GPU listed (each its own processes), or, with a
    dask.distributed `client`, one Dask task per submission on its workers (lab.grading.cluster).
    `seed` None: the batch's recorded seed, or a secret one drawn and recorded (batch_seed)."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise LabError(f"{out} is a file; give the grades a folder (--out).")
    if out.resolve().is_relative_to(Path(submissions).resolve()):
        raise LabError(f"{out} is inside {submissions}: the next run would grade it as a submission; "
                       "put the grades outside the submissions folder.")
    out.mkdir(parents=True, exist_ok=True)
    seed, _ = batch_seed(out, seed)
    write_json_atomic(out / SEED_FILE, {"exercise": exercise.id, "seed": seed, "include_hidden": include_hidden})
    todo: queue.Queue = queue.Queue()
    results: dict[str, SubmissionResult] = {}
    for sub in submissions_in(submissions):
        path = out / sub.name / "results.json"
        try:
            previous = _already_graded(path, fingerprint(exercise, sub, seed, include_hidden))
        except (OSError, UnicodeError, ValueError):  # an unreadable file: graded again, where it gets its sentence
            previous = None
        if previous is not None:
            results[sub.name] = previous
            if on_done:
                on_done(previous, True)
        else:
            todo.put(sub)
    if client is not None:
        _grade_on_cluster(client, exercise, out, list(todo.queue), seed, include_hidden, results, on_done)
        return _finish(exercise, out, results, seed)
    def grade(sub: Path, gpu: str | None, stop: threading.Event) -> SubmissionResult:
        result = grade_submission(exercise, sub, seed, include_hidden, gpu, stop=stop)
        result.device = gpu_identity(gpu)
        return result

    def record(name: str, result: SubmissionResult) -> None:
        write_json_atomic(out / name / "results.json", gradescope_json(result))
        results[name] = result
        if on_done:
            on_done(result, False)

    try:  # one thread per GPU; a grader failure or Ctrl-C kills every running process and records no grade for it
        _on_gpus(list(todo.queue), gpus or [None], grade, record)
    except LabError as exc:
        raise LabError(f"{exc} Grading stopped; every results.json written so far is kept in {out}, "
                       "and the same command resumes from there.") from None
    return _finish(exercise, out, results, seed)


def _grade_on_cluster(client, exercise: Exercise, out: Path, todo: list[Path], seed: int, include_hidden: bool,
                      results: dict[str, SubmissionResult],
                      on_done: Callable[[SubmissionResult, bool], None] | None) -> None:
    """The Dask path: each result recorded the moment its task finishes, once per submission however often
    Dask had to rerun the task (a lost worker)."""
    from lab.grading import cluster

    def record(name: str, payload: dict) -> None:
        if name in results:
            return
        write_json_atomic(out / name / "results.json", payload)
        results[name] = result_from_json(payload)
        if on_done:
            on_done(results[name], False)

    try:
        cluster.grade_on(client, exercise, todo, seed, include_hidden, record)
    except LabError as exc:
        raise LabError(f"{exc} Grading stopped; every results.json written so far is kept in {out}, and the same "
                       "command resumes from there.") from None


def _finish(exercise: Exercise, out: Path, results: dict[str, SubmissionResult], seed: int) -> list[SubmissionResult]:
    ordered = [results[k] for k in sorted(results)]
    write_class_csv(out / "grades.csv", ordered)
    write_report(out / "report.md", exercise, ordered, seed)
    return ordered


def write_class_csv(path: Path, results: list[SubmissionResult]) -> Path:
    names = list(dict.fromkeys(c.name for r in results for c in r.checks))
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["submission", "score", "max_score", *names, "notes"])
        for r in results:
            by = {c.name: c for c in r.checks}
            w.writerow([r.submission, f"{r.score:g}", f"{r.max_score:g}",
                        *[f"{by[n].score:g}" if n in by else "" for n in names], "; ".join(r.notes)])
    return path


def write_report(path: Path, exercise: Exercise, results: list[SubmissionResult], seed: int | None = None) -> Path:
    lines = [f"# Grades: {exercise.id} — {exercise.title}", "",
             f"{len(results)} submissions; mean {_mean([r.score for r in results]):.2f} of "
             f"{results[0].max_score:g} points." if results else "No submissions.", ""]
    if seed is not None:
        lines += [f"Random inputs drawn with seed {seed} (also in {SEED_FILE}; `--hidden-seed {seed}` "
                  "reproduces these grades).", ""]
    lines += ["| submission | score | failed checks and why |", "|---|---:|---|"]
    for r in results:
        failed = "; ".join(f"**{c.name}**: {summary(c.output).replace('|', '/')}" for c in r.checks
                           if not c.passed and c.max_score > 0 or (c.name == "compile" and not c.passed))
        lines.append(f"| {r.submission} | {r.score:g}/{r.max_score:g} | {failed or 'all passed'} |")
    path.write_text("\n".join(lines) + "\n")
    return path


def summary(text: str, limit: int = 160) -> str:
    """The first line of a check's output, with the next one when the first only introduces it
    ("kernel.cu failed to compile for sm_90:" says nothing without the compiler's error)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines:
        return ""
    first = lines[0] + (" " + lines[1] if lines[0].endswith(":") and len(lines) > 1 else "")
    return first[:limit]


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


# ----------------------------------------------------------------------------------------------
# The classroom leaderboard
# ----------------------------------------------------------------------------------------------
# Fairness: a speed-up is a ratio of two times taken by ONE grading process on ONE GPU (the reference rung and
# the student's kernel, on the same shapes and fresh inputs: lab.grading.grade_worker.run_leaderboard), so it never
# mixes GPUs. Its meaning still depends on the model (a kernel tuned for one memory system gains differently on
# another), so each GPU model is ranked on its own and models are never ranked together.

UNKNOWN_GPU = "unknown GPU"  # a row timed where the GPU could not be named (see grader.gpu_identity)


def leaderboard_entry(exercise: Exercise, sub: Path, seed: int, gpu: str | None = None, stop=None) -> dict:
    """One submission's leaderboard row: its geometric-mean speed-up over the reference rung, both timed in one
    grading process on `gpu`, and that GPU (model, uuid, host); or, unranked, why."""
    kernel, notes = find_kernel(exercise, sub)
    if kernel is None:
        return {"submission": sub.name, "ranked": False, "why": notes[-1], "gpu": None}
    device = gpu_identity(gpu)
    names = ["compile"] + [g.name for g in exercise.checks] + ["leaderboard"]
    done = run_checks(exercise, kernel, names, seed, False, gpu, stop=stop)
    board = done["leaderboard"]
    if board["passed"]:
        return {"submission": sub.name, "ranked": True, "geomean_speedup": board["geomean_speedup"],
                "rows": board["rows"], "gpu": device}
    why = next((f"{n}: {d['output']}" for n, d in done.items() if not d["passed"]), board["output"])
    return {"submission": sub.name, "ranked": False, "why": summary(why, 200), "gpu": device}


def leaderboard_task(exercise_id: str, submission: str, seed: int, worker_module: str,
                     limits: dict | None = None) -> dict:
    """What a Dask worker runs for one submission's leaderboard row: the student's kernel and the reference timed by
    one grading process on this worker's GPU (leaderboard_entry), the row naming the worker."""
    from lab.grading import cluster

    exercise = cluster.worker_exercise(exercise_id, worker_module, limits)
    entry = leaderboard_entry(exercise, Path(submission), seed)
    entry["dask_worker"] = cluster.worker_identity()
    return entry


def check_rankable(exercise: Exercise) -> None:
    """One sentence unless the exercise is a kernel exercise, the only kind a leaderboard ranks."""
    from lab.grading.exercises import KERNEL

    if exercise.kind != KERNEL:
        raise LabError(f"Exercise {exercise.id} is a {exercise.kind.replace('_', ' ')} exercise: its performance "
                       "points (`lab grade`) come from a hidden trace's total time against the reference table, and "
                       "`lab leaderboard` ranks kernel exercises only.")


def leaderboard(exercise: Exercise, submissions: Path, out: Path, seed: int = 0,
                gpu: str | None = None, on_done: Callable[[str, dict], None] | None = None,
                gpus: list[str] | None = None, client=None) -> list[dict]:
    """Each correct submission timed against the reference rung by the same process on the same GPU, on a fixed
    shape set, and ranked by geometric-mean speed-up among the submissions timed on the same GPU model
    (rank_by_gpu_model). On `gpu`, one thread per GPU of `gpus`, or one Dask task per submission with a
    dask.distributed `client` (lab.grading.cluster). Writes leaderboard.csv, leaderboard.png and leaderboard.json."""
    check_rankable(exercise)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    subs = submissions_in(submissions)
    entries: dict[str, dict] = {}

    def record(name: str, entry: dict) -> None:
        if name in entries:  # a task Dask ran twice (a lost worker): its first row stands
            return
        entries[name] = entry
        if on_done:
            on_done(name, entry)

    if client is not None:
        from lab.grading import cluster

        cluster.leaderboard_on(client, exercise, subs, seed, record, leaderboard_task)
    else:
        _on_gpus(subs, gpus or [gpu], lambda sub, g, stop: leaderboard_entry(exercise, sub, seed, g, stop), record)
    ordered = rank_by_gpu_model([entries[s.name] for s in subs])
    _leaderboard_csv(out / "leaderboard.csv", ordered)
    _leaderboard_png(out / "leaderboard.png", exercise, ordered)
    (out / "leaderboard.json").write_text(json.dumps(ordered, indent=1) + "\n")
    return ordered


@contextlib.contextmanager
def sigterm_as_interrupt():
    """Inside the block, SIGTERM (what a job scheduler or `kill` sends) is handled as Ctrl-C is: the running grading
    processes are killed and nothing half-done is recorded, instead of the parent dying and leaving its workers on
    the GPU. Only the main thread can install a handler; elsewhere the block changes nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _on_gpus(subs: list[Path], gpus: list[str | None], work, record) -> None:
    """work(sub, gpu, stop) for every submission, one thread per GPU, each result to record(name, result) as it
    comes. The grader's own failure stops the rest; so does Ctrl-C, after every running process is killed."""
    todo: queue.Queue = queue.Queue()
    for sub in subs:
        todo.put(sub)
    lock, stop, failures = threading.Lock(), threading.Event(), []

    def worker(gpu: str | None) -> None:
        while not stop.is_set():
            try:
                sub = todo.get_nowait()
            except queue.Empty:
                return
            try:
                result = work(sub, gpu, stop)
            except GradingStopped:
                return
            except BaseException as exc:
                failures.append(exc)
                stop.set()
                return
            with lock:
                record(sub.name, result)

    threads = [threading.Thread(target=worker, args=(g,)) for g in gpus]
    for t in threads:
        t.start()
    try:
        _wait_until_done(threads)
    except BaseException:
        stop.set()
        _wait_until_done(threads)
        raise
    if failures:
        raise failures[0]


def _wait_until_done(threads: list[threading.Thread]) -> None:
    """Wait for every thread without Thread.join: an interrupt (Ctrl-C, SIGTERM) arriving inside a blocking join can
    leave CPython 3.11-3.12 believing the thread has stopped, so the interpreter would exit without letting it kill
    its grading process. Sleeping between checks is safe to interrupt."""
    while any(t.is_alive() for t in threads):
        time.sleep(0.05)


def gpu_model(row: dict) -> str:
    """The GPU model a leaderboard row was timed on; "" for a row that never reached a GPU (nothing to time)."""
    device = row.get("gpu")
    if device is None:
        return ""
    return device.get("model") or UNKNOWN_GPU


def rank_by_gpu_model(rows: list[dict]) -> list[dict]:
    """The ranked rows grouped by GPU model (models in name order), each group ranked from 1 by geometric-mean
    speed-up, best first; then the unranked rows. Every row is tagged with its "gpu_model"."""
    models = sorted({gpu_model(r) for r in rows if r["ranked"]})
    ordered = []
    for model in models:
        group = sorted((r for r in rows if r["ranked"] and gpu_model(r) == model),
                       key=lambda r: (-r["geomean_speedup"], r["submission"]))
        for place, r in enumerate(group, 1):
            r["rank"] = place
        ordered += group
    ordered += [r for r in rows if not r["ranked"]]
    for r in ordered:
        r["gpu_model"] = gpu_model(r)
    return ordered


def models_note(rows: list[dict]) -> str | None:
    """The sentence a leaderboard spanning several GPU models carries; None for one model."""
    models = sorted({gpu_model(r) for r in rows if r["ranked"]})
    if len(models) < 2:
        return None
    return (f"These submissions were timed on {len(models)} GPU models ({'; '.join(models)}), so each model has "
            "its own ranking: a speed-up over the reference measured on one model is not comparable with one "
            "measured on another.")


def _leaderboard_csv(path: Path, rows: list[dict]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["gpu_model", "rank", "submission", "geomean_speedup_vs_reference", "gpu_uuid", "host", "note"])
        for r in rows:
            device = r.get("gpu") or {}
            w.writerow([gpu_model(r), r.get("rank", ""), r["submission"],
                        f"{r['geomean_speedup']:.4f}" if r["ranked"] else "", device.get("uuid") or "",
                        device.get("host") or "", r.get("why", "")])


def _leaderboard_png(path: Path, exercise: Exercise, rows: list[dict]) -> None:
    """One panel per GPU model, each with its own axis: bars of different models are never side by side."""
    import matplotlib.pyplot as plt

    models = sorted({gpu_model(r) for r in rows if r["ranked"]}) or [""]
    groups = [[r for r in rows if r["ranked"] and gpu_model(r) == m] for m in models]
    heights = [0.4 * max(3, len(g)) + 0.8 for g in groups]
    fig, axes = plt.subplots(len(models), 1, figsize=(8, sum(heights) + 0.6), squeeze=False,
                             gridspec_kw={"height_ratios": heights})
    for ax, model, group in zip(axes[:, 0], models, groups, strict=True):
        ax.barh([r["submission"] for r in group][::-1], [r["geomean_speedup"] for r in group][::-1], color="#1f77b4")
        ax.axvline(1.0, color="#444444", ls="--", lw=1)
        ax.set_title(f"{model or 'no submission ranked'}: {len(group)} ranked", fontsize=9, loc="left")
    axes[-1, 0].set_xlabel("geometric-mean speed-up over the reference rung (same process and GPU, fresh inputs, "
                           "cold L2)")
    note = models_note(rows)
    fig.suptitle(f"Leaderboard: {exercise.id}" + (f"\n{note}" if note else ""), fontsize=9 if note else 10,
                 wrap=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
