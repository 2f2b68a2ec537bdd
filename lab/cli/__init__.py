"""The `lab` command: doctor, inspect, verify, bench, profile, study, tour; check, release, grade, leaderboard; ops,
tune."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from lab.core import device
from lab.core.errors import LabError

console = Console()
NOT_GRADED = 3  # `lab check`'s exit status when nothing could be graded (no GPU): not a pass, not a failure


def _arch(text: str) -> int:
    digits = text.lower().removeprefix("sm_").removesuffix("a")
    if not digits.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not an arch; write it like 90 or sm_90")
    return int(digits)


def cmd_doctor(args) -> int:
    from lab.cli.doctor import findings

    table = Table(title="lab doctor", title_justify="left")
    for col in ("", "item", "what is here", "what to do"):
        table.add_column(col)
    results = findings()
    for f in results:
        table.add_row("[green]ok[/green]" if f.ok else "[yellow]--[/yellow]", f.item, f.detail, f.advice)
    console.print(table)
    return 0


def cmd_inspect(args) -> int:
    from lab.core import build
    from lab.families import all_rungs, get_family
    from lab.studies import report

    if not args.exercise and args.kernel and (Path(args.kernel).suffix in (".cu", ".cuh") or
                                              Path(args.kernel).expanduser().is_file()):
        args.exercise = _exercise_of_file(Path(args.kernel))
    if args.exercise:
        return _inspect_student_file(args)
    if args.kernel in (None, "all"):
        rungs = all_rungs()
    elif "/" in args.kernel:
        fam, key = args.kernel.split("/", 1)
        rungs = [get_family(fam).rung(key)]
    else:
        rungs = list(get_family(args.kernel).rungs)
    knobs = dict(_knob(k) for k in args.knob)
    _check_knobs(knobs, rungs)
    reports = []
    for arch in args.arch:
        eligible = [r for r in rungs if arch >= r.spec.min_arch]
        if not eligible:
            oldest = min(r.spec.min_arch for r in rungs)
            raise LabError(f"No selected kernel builds for sm_{arch}; they need sm_{oldest} or newer.")
        for r in eligible:
            rung = dataclasses.replace(r, spec=r.spec.with_knobs(**knobs)) if knobs else r
            reports.append(build.compile_report(rung.spec, arch, get_family(r.family).dynamic_smem_bytes(rung)))
    console.print(report.compile_table(reports, "Compile report (NVRTC, no GPU needed)"))
    return 0


def _check_knobs(knobs: dict, rungs: list) -> None:
    """Refuse a knob that no selected rung takes (a typo would otherwise change nothing, silently)."""
    from lab.core.build import knob_names

    taken = {r: knob_names(r.spec) for r in rungs}
    for name in knobs:
        if not any(name in names for names in taken.values()):
            if len(rungs) == 1:
                r = rungs[0]
                have = ", ".join(taken[r]) or "none"
                raise LabError(f"{r.family}/{r.key} has no knob {name}; its knobs are: {have}.")
            every = ", ".join(sorted(set().union(*taken.values()))) or "none"
            raise LabError(f"No selected kernel has a knob {name}; their knobs are: {every}.")


def _exercise_of_file(path: Path) -> str:
    """The exercise a kernel file belongs to, from the exercise folder it sits in (exercises/NN_topic/); one sentence
    when it sits in none, since a student's file is compiled as its exercise's rung."""
    from lab.grading.exercises import EXERCISES_DIR

    folder = path.expanduser().resolve().parent
    if folder.parent == EXERCISES_DIR.resolve() and folder.name[:2].isdigit():
        return folder.name
    raise LabError(f"{path} is a file, not a family: a student's kernel is compiled as its exercise's rung, so give "
                   f"the exercise, `lab inspect {path} --exercise NN`; `lab inspect FAMILY[/RUNG]` inspects the lab's "
                   "own rungs.")


def _inspect_student_file(args) -> int:
    """`lab inspect FILE --exercise NN`: the compile report of a student's kernel, as the grader builds it."""
    from lab.grading.exercises import load
    from lab.studies import report

    exercise = load(args.exercise)
    path = _student_path(exercise, args.kernel)
    reports = [_student_report(exercise, path, args.kernel, arch) for arch in args.arch]
    console.print(report.compile_table(reports, f"Compile report of {args.kernel} for exercise {exercise.id} "
                                                "(NVRTC, no GPU needed)"))
    _print_wide_accesses(reports[-1])
    return 0


def _student_path(exercise, given: str | None) -> Path:
    """The kernel a student named (relative paths from the current folder), or the exercise's kernel.cu;
    one sentence saying where it was looked for when it is not there."""
    if given:
        path = Path(given).expanduser()
        if not path.is_file():
            where = path if path.is_absolute() else Path.cwd() / path
            raise LabError(f"No kernel file at {given}: looked for {where} ({'a folder' if path.is_dir() else 'absent'}"
                           f"; a relative path is read from the current folder, {Path.cwd()}).")
        return path
    path = exercise.path / exercise.student_file
    if not path.is_file():
        raise LabError(f"No kernel at {path} (where `lab check {exercise.id[:2]}` looks when given no file): copy "
                       f"{exercise.starter_path} to it, fill in its TODOs, and run `lab check {exercise.id[:2]}` "
                       "again, or give the kernel's path.")
    return path


def _student_report(exercise, path: Path, shown: str, arch: int, entry: str | None = None):
    """The compile report of a student's file built as the grader builds it (entry point, knobs)."""
    from lab.core import build

    spec = dataclasses.replace(exercise.student_spec(path), label=shown)
    spec = dataclasses.replace(spec, entry=entry) if entry else spec
    rung = exercise.student_rung(path)
    return build.compile_report(spec, arch, exercise.family_object().dynamic_smem_bytes(rung))


def _student_reports(exercise, path: Path, shown: str, arch: int) -> list:
    """One report per kernel of the student's file that the exercise's launches use (split-K's reduction too)."""
    companions = exercise.family_object().companion_entries(exercise.reference_rung())
    return [_student_report(exercise, path, shown, arch)] + [_student_report(exercise, path, shown, arch, e)
                                                             for e in companions]


def _print_wide_accesses(rep) -> None:
    """Whether the kernel moves global memory 16 bytes per instruction, in the report's own spelling."""
    if not rep.sass_available:
        console.print("(no nvdisasm here: install the `inspect` extra to see the SASS instruction mix)")
        return
    wide = {k: v for k, v in rep.instructions.items() if k in ("LDG.128", "STG.128")}
    if wide:
        console.print("16-byte global loads/stores: " + ", ".join(f"{k} x{v}" for k, v in wide.items())
                      + " (SASS's LDG.E.128/STG.E.128).")
    else:
        console.print("16-byte global loads/stores: none (no LDG.128 or STG.128 in the SASS).")


def _knob(text: str) -> tuple[str, int]:
    name, _, value = text.partition("=")
    if not name or not value.lstrip("-").isdigit():
        raise LabError(f"--knob takes NAME=INTEGER (e.g. --knob UNROLL=8), not {text!r}.")
    return name, int(value)


def cmd_verify(args) -> int:
    from lab.core import device
    from lab.core.ladder import runnable_rungs
    from lab.families import get_family
    from lab.measure import records
    from lab.measure.verify import bound_margins

    fam = get_family(args.family)
    rungs = [fam.rung(args.rung)] if args.rung else fam.rungs
    rungs, skipped = runnable_rungs(rungs, device.current().arch)  # a sentence, not a traceback, with no GPU
    for line in skipped:
        console.print(f"[yellow]{line}[/yellow]")
    seeds = range(args.seed, args.seed + args.seeds)
    rows = []
    for rung in rungs:
        row = bound_margins(fam, rung, seeds)
        rows.append(row)
        for line in row["failed"]:
            console.print(f"[red]{line}[/red]")
        status = "[green]PASS[/green]" if not row["failed"] else f"[red]FAIL ({len(row['failed'])})[/red]"
        margin = (f"; worst element at {row['worst_ratio']:.3g} of its error bound ({row['worst_case']}), "
                  f"worst normwise error {row['worst_normwise']:.2g}") if row["worst_ratio"] else ""
        console.print(f"{status} {fam.name}/{rung.key}: {row['checks']} checks (cases x {args.seeds} seed(s)), "
                      f"3 input distributions each{margin}")
    if args.json:
        payload = {"provenance": records.provenance(), "seeds": list(seeds), "rungs": rows}
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(payload, indent=1) + "\n")
        console.print(f"written: {args.json}")
    return 1 if any(row["failed"] for row in rows) else 0


def cmd_bench(args) -> int:
    from lab.families import get_family
    from lab.measure import bench, records
    from lab.studies import report

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
    from lab.core import device
    from lab.families import get_family
    from lab.studies import profile, report

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


def _progress(item) -> None:
    """A study's progress: a line of text as it is, a row (a dict) with its floats rounded and its TFLOP/s left out,
    escaped so that rich reads no markup into either."""
    if isinstance(item, dict):
        item = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in item.items() if k != "tflops"}
    console.print(escape(str(item)), highlight=False, soft_wrap=True)  # one line stays one line (for grep and tail)


def _study_list() -> Table:
    from lab.studies import STUDIES

    table = Table(title=escape("lab study NAME --out DIR [options]: each study measures and writes one record"),
                  caption="`lab study NAME --help`: its options. Per family: `lab bench FAMILY`, `lab profile FAMILY`.",
                  title_justify="left", caption_justify="left")
    table.add_column("name", no_wrap=True)
    table.add_column("what it measures")
    table.add_column("record (under --out)", no_wrap=True)
    for study in STUDIES.values():
        table.add_row(study.name, study.what + ("" if study.needs_gpu else " (no GPU needed)"), study.record)
    return table


def _study_parser(study, out: Path) -> argparse.ArgumentParser:
    """`lab study NAME`'s own options: --out, then the study's (lab.studies.Option)."""
    p = argparse.ArgumentParser(prog=f"lab study {study.name}", description=f"{study.what}; writes "
                                f"{study.record} under --out{'' if study.needs_gpu else ' (no GPU needed)'}.")
    p.add_argument("--out", type=Path, default=out, help=f"folder for the record (default: {out})")
    for opt in study.options:
        shown = " ".join(map(str, opt.default)) if isinstance(opt.default, tuple) else opt.default
        help_text = opt.help + ("" if opt.default is None or opt.type is bool else f" (default: {shown})")
        if opt.type is bool:
            p.add_argument(opt.flag, dest=opt.name, action="store_false" if opt.default else "store_true",
                           help=help_text)
            continue
        kind = _at_least(opt) if opt.at_least is not None else opt.type
        p.add_argument(opt.flag, dest=opt.name, type=kind, default=opt.default, nargs="+" if opt.many else None,
                       choices=opt.choices or None, help=help_text)
    return p


def _at_least(opt):
    def parse(text: str):
        value = opt.type(text)
        if value < opt.at_least:
            raise argparse.ArgumentTypeError(f"must be at least {opt.at_least}, not {text}")
        return value

    parse.__name__ = opt.type.__name__  # argparse names the type in its own messages
    return parse


def cmd_study(args) -> int:
    """`lab study`: the list of studies; `lab study NAME --out DIR [options]`: one study measured and its record
    written."""
    from lab.studies import get

    if args.name is None:
        if args.help:
            args.parser.print_help()
        console.print(_study_list())
        return 0
    study = get(args.name)  # one sentence naming the studies when there is no such one
    p = _study_parser(study, args.out)
    if args.help:
        p.print_help()
        return 0
    opts = p.parse_args(args.options)
    options = {o.name: tuple(v) if o.many and v is not None else v
               for o in study.options for v in [getattr(opts, o.name)]}
    if study.needs_gpu:
        device.current()  # a sentence, not a CUDA traceback, when there is no GPU
    console.print(f"[bold]{study.name}[/bold] ...")
    path = study.run(opts.out, progress=_progress, **options)
    console.print(f"  written: {escape(str(path))}", highlight=False, soft_wrap=True)
    return 0


def cmd_ops(args) -> int:
    """`lab ops stats`: what lab.ops decided in the processes that saved their counters (at exit)."""
    from lab.ops import counters

    path = counters.stats_path()
    if args.reset:
        path.unlink(missing_ok=True)
        console.print(f"cleared {path}")
        return 0
    saved = counters.load()
    totals = saved.get("totals")
    if not totals:
        console.print(f"No lab.ops counters saved yet ({path}): they are saved when a process that called lab.ops "
                      "exits.")
        return 0
    table = Table(title=f"lab.ops counters, {len(saved.get('processes', []))} recent processes ({path})",
                  title_justify="left")
    table.add_column("section")
    table.add_column("what")
    table.add_column("count", justify="right")
    for section in ("counts", "paths", "families", "fallbacks", "compiles", "compiles_by_path"):
        for what, n in sorted(totals.get(section, {}).items(), key=lambda kv: -kv[1]):
            table.add_row(section, escape(str(what)), f"{n:g}")
    console.print(table)
    return 0


def _shape_arg(text: str) -> tuple[int, int, int]:
    parts = text.lower().split("x")
    if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise argparse.ArgumentTypeError(f"{text!r} is not a shape; write it as MxNxK, e.g. 8x4096x4096")
    return tuple(int(p) for p in parts)


def cmd_tune(args) -> int:
    """Autotune shapes' buckets into the tune cache, with a progress bar and a table of the winners."""
    from rich.progress import Progress

    from lab.ops import api
    from lab.ops.shapes import GemmShape, bucket
    from lab.ops.tune import candidates, tune_shape

    gpu = device.current()
    if args.table:
        return _tune_table(args)
    runtime = api.default_runtime()
    shapes = [GemmShape(m, n, k, args.dtype, args.layout, True, args.epilogue, gpu.sm_count) for m, n, k in args.shape]
    if args.trace:
        from lab.studies.ops_study import shapes_of, trace

        shapes += shapes_of(trace())
    if not shapes:
        raise LabError("Give shapes to tune (--shape 8x4096x4096 ...) or --trace for the serving trace's buckets.")
    rows = []
    with Progress(console=console) as progress:
        total = sum(len(candidates(s, gpu.arch)) for s in shapes)
        task = progress.add_task("tuning", total=total)
        for shape in shapes:
            def step(name, config, shape=shape):
                progress.update(task, advance=1, description=f"{bucket(shape)}: {name} {config or ''}")

            rows.append((shape, tune_shape(runtime, shape, progress=step)))
    table = Table(title=f"lab tune on {gpu.name} (cache: {runtime.store.path})", title_justify="left")
    for col in ("bucket", "winner", "us", "runner-up", "rejected"):
        table.add_column(col)
    for shape, entry in rows:
        timed = sorted((r for r in entry["candidates"] if "us" in r), key=lambda r: r["us"])
        second = f"{timed[1]['path']} {timed[1]['us']:.1f}" if len(timed) > 1 else "-"
        rejected = ", ".join(r["path"] for r in entry["candidates"] if "rejected" in r) or "-"
        table.add_row(escape(bucket(shape)), f"{entry['path']} {entry['config'] or ''}", f"{entry['us']:.1f}", second,
                      rejected)
    console.print(table)
    return 0


def _tune_table(args) -> int:
    """`lab tune --table`: the sweep over shape classes, the table chosen from it, lab.ops under it against PyTorch."""
    import shutil

    from lab.grading.exercises import load
    from lab.studies import ops_sweep

    path = ops_sweep.run_sweep(Path(args.out), rounds=args.rounds, progress=console.print,
                               write_table=ops_sweep.TABLE_FILE if args.write else None)
    record = json.loads(path.read_text())
    if args.write:
        shutil.copyfile(ops_sweep.TABLE_FILE, load("09").solution_path)
    table = Table(title=f"lab.ops under the sweep's table against PyTorch ({record['library']}; {path})",
                  title_justify="left")
    for col in ("sample", "path", "lab.ops TFLOP/s", "torch TFLOP/s", "torch / lab.ops per round"):
        table.add_column(col)
    for row in record["summary"]:
        table.add_row(escape(row["sample"]), escape(str(row["decision"])), f"{row['lab_tflops']:.1f}",
                      f"{row['torch_tflops']:.1f}", " ".join(f"{r:.2f}" for r in row["ratio_cold"]))
    console.print(table)
    return 0


def cmd_tour(args) -> int:
    from lab.cli import tour

    tour.run(args.out, arch=args.arch, quick=args.quick, names=args.family or None, profile=not args.no_profile,
             console=console)
    return 0


def cmd_check(args) -> int:
    import random
    import shutil
    import tempfile

    from lab.core import build
    from lab.grading.exercises import DISPATCH_RULES, load
    from lab.grading.grader import find_kernel, grade_submission
    from lab.studies import report

    exercise = load(args.exercise)
    if exercise.kind == DISPATCH_RULES and not args.file and not exercise.starter_path.is_file():
        raise LabError(f"No dispatch table at {exercise.starter_path} (where `lab check {exercise.id[:2]}` looks "
                       "when given no file): write one in lab.ops.rules's format (the exercise's README.md shows "
                       "it), or give the table's path.")
    path = _student_path(exercise, args.file)
    shown = args.file or _relative(path)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "submission"
        folder.mkdir()
        shutil.copyfile(path, folder / exercise.student_file)
        kernel, notes = find_kernel(exercise, folder, shown)
        if kernel is None:
            raise LabError(notes[-1])
        for note in notes:
            console.print(f"[yellow]note: {note}[/yellow]")
        if not device.gpu_available() and exercise.kind == DISPATCH_RULES:
            _print_table_routes(exercise, kernel, shown)
            console.print(f"[bold yellow]Nothing was graded: there is no GPU here ({device.why_no_gpu()}). "
                          f"{shown} is a valid dispatch table (its routes on sm_{device.REFERENCE_ARCH} are above), "
                          f"but the checks and the timing run only on a CUDA GPU: run `lab check {exercise.id[:2]}` "
                          "on a machine with one.[/bold yellow]")
            return NOT_GRADED
        if not device.gpu_available():
            reps = _student_reports(exercise, kernel, shown, device.REFERENCE_ARCH)  # a readable CompileError
            target = build.arch_string(device.REFERENCE_ARCH, exercise.reference_spec().arch_suffix)
            console.print(report.compile_table(reps, f"Compile report of {shown} ({target}, compile-only)"))
            _print_wide_accesses(reps[0])
            if kernel.read_bytes() == exercise.starter_text().encode():
                console.print(f"{shown} is the starter as released: its TODOs are still to do.")
            console.print(f"[bold yellow]Nothing was graded: there is no GPU here ({device.why_no_gpu()}). "
                          f"{shown} compiles for {target} (report above), but the checks and "
                          f"the timing run only on a CUDA GPU: run `lab check {exercise.id[:2]}` on a machine "
                          "with one.[/bold yellow]")
            return NOT_GRADED
        seed = args.seed if args.seed is not None else random.randrange(1 << 30)
        console.print(f"Checking {shown} against {exercise.id} (seed {seed}: fresh random inputs every run)...")
        result = grade_submission(exercise, folder, seed=seed, include_hidden=False, shown=shown)
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


def _print_table_routes(exercise, path: Path, shown: str) -> None:
    """Without a GPU, what a dispatch table does to the exercise's visible traces: for each GEMM of the layer, the
    runs of M that go to one path (and which rule sent them), decided as on the reference GPU."""
    from lab.ops import rules
    from lab.ops.dispatch import Runtime
    from lab.ops.shapes import GemmShape
    from lab.studies.serving_trace import gemm_shapes

    runtime = Runtime(rules.load(path))
    runtime._arch = device.REFERENCE_ARCH  # decide as on the reference GPU, without asking for a device
    traces = [c for g in exercise.checks for c in g.cases] + exercise.performance.params
    shapes = gemm_shapes([s for spec in traces for s in exercise.trace_steps(spec)], exercise.vocab)
    ms = sorted({m for m, _ in shapes})
    table = Table(title=f"{shown}: the path of each GEMM at the M values of the visible traces "
                        f"(sm_{device.REFERENCE_ARCH}, {len(ms)} values of M)", title_justify="left")
    table.add_column("GEMM (N x K, epilogue)")
    table.add_column("M: path (the rule that chose it)")
    for gemm in dict.fromkeys(g for _, g in shapes):
        name, n, k, epilogue = gemm
        runs: list[list] = []  # [first M, last M, decision]
        for m in sorted(m for m, g in shapes if g == gemm):
            decision = runtime.rule_decision(GemmShape(m, n, k, "float16", "TN", True, epilogue))
            if runs and runs[-1][2] == decision:
                runs[-1][1] = m
            else:
                runs.append([m, m, decision])
        text = "; ".join(f"{lo}{f'-{hi}' if hi != lo else ''}: {d.path}"
                         f"{''.join(f' {key}={value}' for key, value in d.config)} ({d.source})" for lo, hi, d in runs)
        table.add_row(f"{name} ({n} x {k}, {epilogue})", escape(text))
    console.print(table)


def _relative(path: Path) -> str:
    """A path as short as it can be written from the current folder."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def cmd_release(args) -> int:
    from lab.grading.release import release

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

    from lab.core import device
    from lab.grading.classroom import SEED_FILE, batch_seed, grade_batch, sigterm_as_interrupt, submissions_in
    from lab.grading.exercises import load

    exercise = load(args.exercise)
    gpus = _gpus(args.gpus)
    total = len(submissions_in(args.submissions))  # a missing folder is said before anything else
    if args.gpus and (args.cluster or args.scheduler):
        raise LabError("--gpus picks this host's GPUs for the built-in workers; with --cluster or --scheduler, "
                       "Dask's workers decide (one per GPU), so leave --gpus out.")
    client = None
    if args.cluster or args.scheduler:
        from lab.grading.cluster import client_for

        client = client_for(args.cluster, args.scheduler)  # the workers' GPUs, not this host's, do the work
        console.print(f"Dask: {len(client.scheduler_info()['workers'])} workers at {client.scheduler.address}")
    else:
        device.current()  # one clear sentence when there is no GPU
    subs = Path(args.submissions).resolve()  # `lab grade .` works too
    out = Path(args.out) if args.out else subs.with_name(subs.name + "-graded")
    seed, origin = batch_seed(out, args.hidden_seed)
    console.print(f"seed {seed} ({origin}; recorded in {out / SEED_FILE} and report.md)")
    with Progress(console=console, transient=True) as prog:
        task = prog.add_task(f"grading {exercise.id}", total=total)

        def done(result, cached: bool) -> None:
            prog.update(task, advance=1)
            tag = "(already graded)" if cached else f"({result.seconds:.1f} s)"
            prog.console.print(f"{result.submission}: {result.score:g}/{result.max_score:g} {tag}")

        try:
            with sigterm_as_interrupt():
                results = grade_batch(exercise, subs, out, seed=seed, include_hidden=not args.no_hidden, gpus=gpus,
                                      on_done=done, client=client)
        finally:
            if client is not None:
                client.close()
    console.print(f"{len(results)} graded: per-submission results.json, grades.csv and report.md in {out}")
    return 0


def cmd_leaderboard(args) -> int:
    from lab.core import device
    from lab.grading.classroom import check_rankable, leaderboard, sigterm_as_interrupt, submissions_in
    from lab.grading.exercises import load

    exercise = load(args.exercise)
    check_rankable(exercise)  # what needs no GPU is said first: a table exercise, a missing or empty folder
    submissions_in(Path(args.submissions))
    device.current()
    subs = Path(args.submissions).resolve()
    out = Path(args.out) if args.out else subs.with_name(subs.name + "-leaderboard")
    with sigterm_as_interrupt():
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


def _family_help() -> str:
    from lab.families import families

    return f"the ladder: {', '.join(families())}"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="lab", description="CuPy Kernel Lab: build, check and measure kernel ladders.")
    sub = p.add_subparsers(dest="command", required=True)
    family_help = _family_help()
    sub.add_parser("doctor", help="what is installed and what to do about what is not").set_defaults(fn=cmd_doctor)

    s = sub.add_parser("inspect", help="compile report (registers, smem, spills, SASS mix); no GPU needed")
    s.add_argument("kernel", nargs="?", help="'all' (default), a family, or family/rung, e.g. copy/03; with "
                   "--exercise, a kernel file of yours")
    s.add_argument("--exercise", help="read KERNEL as a student's file for this exercise (e.g. 01) and build it as "
                   "the grader does")
    s.add_argument("--arch", type=_arch, nargs="+", default=[device.REFERENCE_ARCH],
                   help=f"target arch(s), e.g. 80 90 (default {device.REFERENCE_ARCH})")
    s.add_argument("--knob", action="append", default=[], help="override a knob: NAME=VALUE (repeatable)")
    s.set_defaults(fn=cmd_inspect)

    s = sub.add_parser("verify", help="check every rung of a family against its float64 reference (GPU)")
    s.add_argument("family", help=family_help)
    s.add_argument("--rung", help="one rung, e.g. 03 or 03_vectorized")
    s.add_argument("--seeds", type=int, default=1, help="run every case on this many seeds (default 1)")
    s.add_argument("--seed", type=int, default=0, help="the first seed (default 0)")
    s.add_argument("--json", help="write each rung's worst error/bound ratio here, with provenance")
    s.set_defaults(fn=cmd_verify)

    s = sub.add_parser("bench", help="measure a family against its ceiling and write records (GPU)")
    s.add_argument("family", help=family_help)
    s.add_argument("--json", type=Path, help="write the records to this JSON file")
    s.add_argument("--kinds", default="headline,sweep,tail", help="comma list of headline, sweep, tail")
    s.add_argument("--quick", action="store_true", help="fewer sizes and shorter timings (a smoke run)")
    s.set_defaults(fn=cmd_bench)

    s = sub.add_parser("profile", help="Nsight Compute counters (DRAM bytes, L2 hits, bank conflicts) per rung (GPU)")
    s.add_argument("family", help=family_help)
    s.add_argument("--json", type=Path, help="write the profile to this JSON file (what the notebooks replay)")
    s.add_argument("--params", help="the problem as JSON, e.g. '{\"M\": 4096, \"N\": 4096, \"K\": 4096}' "
                   "(default: the family's first headline size)")
    s.set_defaults(fn=cmd_profile)

    s = sub.add_parser("study", add_help=False, help="the studies, each measured and written as one record "
                       "(`lab study` lists them; most need a GPU)", description="With no NAME, the list of studies; "
                       "with one, that study measured and its record written under --out.")
    s.add_argument("-h", "--help", action="store_true", help="this help, or with NAME that study's options")
    s.add_argument("--out", type=Path, default=Path("results/local"), help="folder for the record "
                   "(default: results/local)")
    s.add_argument("name", nargs="?", help="the study (`lab study` lists them)")
    s.add_argument("options", nargs=argparse.REMAINDER, help="the study's options (`lab study NAME --help`)")
    s.set_defaults(fn=cmd_study, parser=s)

    s = sub.add_parser("tour", help="run every ladder here (or compile-only + replay without a GPU)")
    s.add_argument("--out", default="report", help="report folder (default: report/)")
    s.add_argument("--arch", type=_arch, default=None,
                   help=f"arch to compile for when there is no GPU (default {device.REFERENCE_ARCH})")
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
    s.add_argument("--hidden-seed", type=int, default=None,
                   help="the secret seed for the random inputs (default: the one recorded in the grades folder by an "
                        "earlier run, else a new secret one, drawn and recorded there)")
    s.add_argument("--no-hidden", action="store_true", help="visible checks only")
    s.add_argument("--gpus", help="GPU indices, one worker each, e.g. 0,1 (default: the current GPU)")
    s.add_argument("--cluster", help="'local': a Dask worker per GPU of this host (dask-cuda; the [cluster] extra)")
    s.add_argument("--scheduler", help="a running Dask scheduler's address, e.g. tcp://10.0.0.5:8786, whose "
                   "workers grade (the submissions folder must be at the same path on every host)")
    s.add_argument("--out", help="output folder (default: SUBMISSIONS-graded)")
    s.set_defaults(fn=cmd_grade)

    s = sub.add_parser("ops", help="lab.ops's counters: decisions, fallbacks, compiles (`lab ops stats`)")
    s.add_argument("action", choices=["stats"])
    s.add_argument("--reset", action="store_true", help="clear the saved counters")
    s.set_defaults(fn=cmd_ops)

    s = sub.add_parser("tune", help="autotune lab.ops for shapes' buckets into the tune cache (GPU)")
    s.add_argument("--shape", type=_shape_arg, action="append", default=[], help="MxNxK (repeatable)")
    s.add_argument("--dtype", choices=["float16", "bfloat16"], default="float16")
    s.add_argument("--layout", choices=["NN", "TN"], default="TN")
    s.add_argument("--epilogue", default="none", help="none, or ops joined by '+': bias+silu, residual, ...")
    s.add_argument("--trace", action="store_true", help="every bucket of the serving trace (lab.studies.serving_trace)")
    s.add_argument("--table", action="store_true",
                   help="measure every path, the library and PyTorch on each shape class and write the dispatch "
                        "table from the times (lab.studies.ops_sweep)")
    s.add_argument("--out", default="results/local", help="with --table: where the sweep's record goes")
    s.add_argument("--rounds", type=int, default=3, help="with --table: interleaved rounds per sample")
    s.add_argument("--write", action="store_true",
                   help="with --table: make the new table lab.ops's built-in one (lab/ops/default_table.json and "
                        "exercise 09's reference solution)")
    s.set_defaults(fn=cmd_tune)

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
        # escape: a sentence may hold brackets that rich would read as markup ("cupy-kernel-lab[cluster]" lost them)
        console.print(f"[bold red]error:[/bold red] {escape(str(exc))}", highlight=False)
        return 2
    except KeyboardInterrupt:
        console.print("interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main())
