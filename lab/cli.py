"""The `lab` command: doctor, inspect, verify, bench, profile, tour; check, release, grade, leaderboard."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from lab.errors import LabError

console = Console()


def _arch(text: str) -> int:
    digits = text.lower().removeprefix("sm_").removesuffix("a")
    if not digits.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not an arch; write it like 90 or sm_90")
    return int(digits)


def cmd_doctor(args) -> int:
    from lab.doctor import findings

    table = Table(title="lab doctor", title_justify="left")
    for col in ("", "item", "what is here", "what to do"):
        table.add_column(col)
    results = findings()
    for f in results:
        table.add_row("[green]ok[/green]" if f.ok else "[yellow]--[/yellow]", f.item, f.detail, f.advice)
    console.print(table)
    return 0


def cmd_inspect(args) -> int:
    from lab import build, report
    from lab.ladder import all_rungs, get_family

    if args.kernel in (None, "all"):
        rungs = all_rungs()
    elif "/" in args.kernel:
        fam, key = args.kernel.split("/", 1)
        rungs = [get_family(fam).rung(key)]
    else:
        rungs = list(get_family(args.kernel).rungs)
    knobs = dict(_knob(k) for k in args.knob)
    reports = []
    for arch in args.arch:
        eligible = [r for r in rungs if arch >= r.spec.min_arch]
        if not eligible:
            oldest = min(r.spec.min_arch for r in rungs)
            raise LabError(f"No selected kernel builds for sm_{arch}; they need sm_{oldest} or newer.")
        reports += [build.compile_report(r.spec.with_knobs(**knobs) if knobs else r.spec, arch) for r in eligible]
    console.print(report.compile_table(reports, "Compile report (NVRTC, no GPU needed)"))
    return 0


def _knob(text: str) -> tuple[str, int]:
    name, _, value = text.partition("=")
    if not name or not value.lstrip("-").isdigit():
        raise LabError(f"--knob takes NAME=INTEGER (e.g. --knob UNROLL=8), not {text!r}.")
    return name, int(value)


def cmd_verify(args) -> int:
    from lab import device
    from lab.ladder import get_family
    from lab.verify import check_rung

    fam = get_family(args.family)
    rungs = [fam.rung(args.rung)] if args.rung else fam.rungs
    device.current()  # a sentence, not a CUDA traceback, when there is no GPU
    failed = 0
    for rung in rungs:
        results = check_rung(fam, rung)
        bad = [r for r in results if not r.passed]
        failed += len(bad)
        for r in bad:
            console.print(f"[red]{r.line()}[/red]")
        status = "[green]PASS[/green]" if not bad else f"[red]FAIL ({len(bad)})[/red]"
        console.print(f"{status} {fam.name}/{rung.key}: {len(results)} cases x 3 input distributions")
    return 1 if failed else 0


def cmd_bench(args) -> int:
    from lab import bench, records, report
    from lab.ladder import get_family

    fam = get_family(args.family)
    plan = bench.BenchPlan(kinds=tuple(args.kinds.split(",")), quick=args.quick)
    bad = set(plan.kinds) - {"headline", "sweep", "tail"}
    if bad:
        raise LabError(f"--kinds takes headline, sweep and/or tail, not {', '.join(sorted(bad))}.")
    rs = bench.run(fam, plan)
    console.print(report.headline_table(rs, fam.name))
    if args.json:
        console.print(f"Records written: {records.save(args.json, rs)}")
    return 0


def _params(text: str | None) -> dict | None:
    if text is None:
        return None
    try:
        params = json.loads(text)
    except json.JSONDecodeError:
        params = None
    if not isinstance(params, dict):
        raise LabError(f"--params takes a JSON object such as '{{\"M\": 4096, \"N\": 4096, \"K\": 4096}}', "
                       f"not {text!r}.")
    return params


def cmd_profile(args) -> int:
    from lab import device, profile, report
    from lab.ladder import get_family

    fam = get_family(args.family)
    params = _params(args.params)
    device.current()  # a sentence, not a CUDA traceback, when there is no GPU
    if profile.find_ncu() is None:
        raise LabError("Nsight Compute (ncu) is not installed here; install it with the CUDA toolkit to read "
                       "hardware counters.")
    payload = profile.ladder_counters(
        fam.name, params, on_error=lambda key, exc: console.print(f"[yellow]ncu on {key}: {exc}[/yellow]"))
    if payload is None:
        raise LabError(f"ncu read no counters for any {fam.name} rung (its messages are above).")
    console.print(f"Nsight Compute, one launch of each rung at {payload['params']}:")
    console.print(report.profile_markdown(payload, fam.min_dram_bytes(payload["params"])))
    if args.json:
        console.print(f"Profile written: {profile.save(args.json, payload)}")
    return 0


def cmd_tour(args) -> int:
    from lab import tour

    tour.run(args.out, arch=args.arch, quick=args.quick, names=args.family or None, profile=not args.no_profile,
             console=console)
    return 0


def cmd_check(args) -> int:
    import random
    import shutil
    import tempfile

    from lab import device
    from lab.build import compile_cubin
    from lab.exercises import load
    from lab.grader import find_kernel, grade_submission

    exercise = load(args.exercise)
    path = Path(args.file) if args.file else exercise.path / exercise.student_file
    if not path.is_file():
        target = exercise.path / exercise.student_file
        raise LabError(f"No kernel at {path}: copy {exercise.path / 'starter.cu'} to {target}, fill in its TODOs, "
                       f"then run `lab check {exercise.id[:2]}` again (or pass the file's path).")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "submission"
        folder.mkdir()
        shutil.copy(path, folder / exercise.student_file)
        kernel, notes = find_kernel(exercise, folder)
        if kernel is None:
            raise LabError(notes[-1])
        if not device.gpu_available():
            compile_cubin(exercise.student_spec(kernel), 90)  # raises a readable CompileError
            console.print(f"[yellow]No GPU here ({device.why_no_gpu()}): {path.name} compiles for sm_90, but the "
                          "checks and the timing need a CUDA GPU. Run `lab check` on a GPU machine.[/yellow]")
            return 0
        seed = args.seed if args.seed is not None else random.randrange(1 << 30)
        console.print(f"Checking {path} against {exercise.id} (seed {seed}: fresh random inputs every run)...")
        result = grade_submission(exercise, folder, seed=seed, include_hidden=False)
    table = Table(title=f"lab check {exercise.id}", title_justify="left", show_lines=True)
    for col in ("check", "result", "points", "details"):
        table.add_column(col)
    for c in result.checks:
        status = "[green]pass[/green]" if c.passed else "[red]FAIL[/red]"
        table.add_row(c.name, status, f"{c.score:g}/{c.max_score:g}", c.output)
    console.print(table)
    console.print(f"[bold]{result.score:g} of {result.max_score:g} points[/bold] (visible checks; the instructor's "
                  "grade adds hidden checks and a secret seed).")
    return 0 if all(c.passed for c in result.checks if c.name != "performance") else 1


def cmd_release(args) -> int:
    from lab.release import release

    console.print(f"Student bundle written: {release(Path(args.out_dir))}")
    return 0


def _gpus(text: str | None) -> list[str] | None:
    if text is None:
        return None
    gpus = [g.strip() for g in text.split(",") if g.strip()]
    if not gpus or not all(g.isdigit() for g in gpus):
        raise LabError(f"--gpus takes GPU indices separated by commas, e.g. 0,1 — not {text!r}.")
    return gpus


def cmd_grade(args) -> int:
    from rich.progress import Progress

    from lab import device
    from lab.classroom import grade_batch, submissions_in
    from lab.exercises import load

    exercise = load(args.exercise)
    gpus = _gpus(args.gpus)
    device.current()  # one clear sentence when there is no GPU
    total = len(submissions_in(args.submissions))
    subs = Path(args.submissions).resolve()  # `lab grade .` works too
    out = Path(args.out) if args.out else subs.with_name(subs.name + "-graded")
    with Progress(console=console, transient=True) as prog:
        task = prog.add_task(f"grading {exercise.id}", total=total)

        def done(result, cached: bool) -> None:
            prog.update(task, advance=1)
            tag = "(already graded)" if cached else f"({result.seconds:.1f} s)"
            prog.console.print(f"{result.submission}: {result.score:g}/{result.max_score:g} {tag}")

        results = grade_batch(exercise, Path(args.submissions), out, seed=args.hidden_seed,
                              include_hidden=not args.no_hidden, gpus=gpus, on_done=done)
    console.print(f"{len(results)} graded: per-submission results.json, grades.csv and report.md in {out}")
    return 0


def cmd_leaderboard(args) -> int:
    from lab import device
    from lab.classroom import leaderboard
    from lab.exercises import load

    exercise = load(args.exercise)
    device.current()
    subs = Path(args.submissions).resolve()
    out = Path(args.out) if args.out else subs.with_name(subs.name + "-leaderboard")
    rows = leaderboard(exercise, Path(args.submissions), out, seed=args.seed,
                       on_done=lambda name, e: console.print(f"{name}: " + (
                           f"{e['geomean_speedup']:.3f}x" if e["ranked"] else f"not ranked ({e['why']})")))
    table = Table(title=f"Leaderboard {exercise.id}", title_justify="left")
    for col in ("rank", "submission", "speed-up vs reference (geomean)", "note"):
        table.add_column(col)
    for r in rows:
        table.add_row(str(r.get("rank", "-")), r["submission"],
                      f"{r['geomean_speedup']:.3f}x" if r["ranked"] else "", r.get("why", ""))
    console.print(table)
    console.print(f"leaderboard.csv, leaderboard.png and leaderboard.json in {out}")
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="lab", description="CuPy Kernel Lab: build, check and measure kernel ladders.")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("doctor", help="what is installed and what to do about what is not").set_defaults(fn=cmd_doctor)

    s = sub.add_parser("inspect", help="compile report (registers, smem, spills, SASS mix); no GPU needed")
    s.add_argument("kernel", nargs="?", help="'all' (default), a family, or family/rung, e.g. copy/03")
    s.add_argument("--arch", type=_arch, nargs="+", default=[90], help="target arch(s), e.g. 80 90 (default 90)")
    s.add_argument("--knob", action="append", default=[], help="override a knob: NAME=VALUE (repeatable)")
    s.set_defaults(fn=cmd_inspect)

    s = sub.add_parser("verify", help="check every rung of a family against its float64 reference (GPU)")
    s.add_argument("family")
    s.add_argument("--rung", help="one rung, e.g. 03 or 03_vectorized")
    s.set_defaults(fn=cmd_verify)

    s = sub.add_parser("bench", help="measure a family against its ceiling and write records (GPU)")
    s.add_argument("family")
    s.add_argument("--json", type=Path, help="write the records to this JSON file")
    s.add_argument("--kinds", default="headline,sweep,tail", help="comma list of headline, sweep, tail")
    s.add_argument("--quick", action="store_true", help="fewer sizes and shorter timings (a smoke run)")
    s.set_defaults(fn=cmd_bench)

    s = sub.add_parser("profile", help="Nsight Compute counters (DRAM bytes, L2 hits, bank conflicts) per rung (GPU)")
    s.add_argument("family")
    s.add_argument("--json", type=Path, help="write the profile to this JSON file (what the notebooks replay)")
    s.add_argument("--params", help="the problem as JSON, e.g. '{\"M\": 4096, \"N\": 4096, \"K\": 4096}' "
                   "(default: the family's first headline size)")
    s.set_defaults(fn=cmd_profile)

    s = sub.add_parser("tour", help="run every ladder here (or compile-only + replay without a GPU)")
    s.add_argument("--out", default="report", help="report folder (default: report/)")
    s.add_argument("--arch", type=_arch, default=None, help="arch to compile for when there is no GPU (default 90)")
    s.add_argument("--family", action="append", help="only this family (repeatable)")
    s.add_argument("--quick", action="store_true", help="fewer sizes and shorter timings")
    s.add_argument("--no-profile", action="store_true", help="skip Nsight Compute counters")
    s.set_defaults(fn=cmd_tour)

    s = sub.add_parser("check", help="a student's check of an exercise: compile, visible checks, speed, points")
    s.add_argument("exercise", help="exercise number or name, e.g. 01")
    s.add_argument("file", nargs="?", help="the kernel to check (default: the exercise's kernel.cu)")
    s.add_argument("--seed", type=int, default=None, help="fix the random inputs (default: fresh each run)")
    s.set_defaults(fn=cmd_check)

    s = sub.add_parser("release", help="write a student bundle: no solutions, no hidden checks")
    s.add_argument("out_dir")
    s.set_defaults(fn=cmd_release)

    s = sub.add_parser("grade", help="grade a folder of submissions (one sub-folder each), resumable")
    s.add_argument("submissions")
    s.add_argument("--exercise", required=True)
    s.add_argument("--hidden-seed", type=int, default=0, help="the secret seed for the random inputs")
    s.add_argument("--no-hidden", action="store_true", help="visible checks only")
    s.add_argument("--gpus", help="GPU indices, one worker each, e.g. 0,1 (default: the current GPU)")
    s.add_argument("--out", help="output folder (default: SUBMISSIONS-graded)")
    s.set_defaults(fn=cmd_grade)

    s = sub.add_parser("leaderboard", help="time every correct submission against the reference and rank them")
    s.add_argument("submissions")
    s.add_argument("--exercise", required=True)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--out", help="output folder (default: SUBMISSIONS-leaderboard)")
    s.set_defaults(fn=cmd_leaderboard)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.fn(args)
    except LabError as exc:
        console.print(f"[bold red]error:[/bold red] {exc}", highlight=False)
        return 2
    except KeyboardInterrupt:
        console.print("interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main())
