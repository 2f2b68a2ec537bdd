"""`lab tour`: every ladder on the GPU found here, or compile-only plus replayed results without one."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from lab.core import build, device
from lab.core.errors import LabError
from lab.core.ladder import Family, runnable_rungs
from lab.families import families
from lab.lessons import plots
from lab.measure import bench, records
from lab.measure.records import describe_params
from lab.studies import report
from lab.studies.profile import reference_profile


def _progress(console: Console) -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    TextColumn("{task.fields[step]}"), console=console, transient=True)


def compile_reports(arch: int, fams: list[Family]) -> list[build.CompileReport]:
    """Every rung compiled for `arch`; a rung a GPU of that arch cannot run (an sm_90a rung on an sm_86 GPU)
    is compiled for the arch it needs instead, so the table still shows it, compile-only (its arch column
    says which)."""
    return [build.compile_report(r.spec, build.report_arch(r.spec, arch), f.dynamic_smem_bytes(r))
            for f in fams for r in f.rungs]


def _family_plots(rs: records.RecordSet, fam: Family, out: Path) -> list[Path]:
    name = fam.name
    sweep = (plots.bandwidth_vs_bytes(rs, name, out / f"{name}_bandwidth.png") if fam.sweep_figure == "bandwidth"
             else plots.throughput_vs_size(rs, name, out / f"{name}_sizes.png"))
    made = [plots.ladder_bars(rs, name, out / f"{name}_ladder.png"), sweep,
            plots.tail(rs, name, out / f"{name}_tail.png")]
    return [p for p in made if p is not None]


def _section(rs: records.RecordSet, fam: Family, images: list[Path], extra: str = "") -> str:
    pics = "\n".join(f"![{p.stem}]({p.name})" for p in images)
    return f"## {fam.title}\n\n{rs.label()}\n\n{report.headline_markdown(rs, fam.name)}\n\n{extra}{pics}"


def run_live(out: Path, console: Console, quick: bool, names: list[str], profile: bool) -> Path:
    from lab.measure.verify import check_rung

    gpu = device.current()
    console.print(f"[bold]GPU found: {gpu.name} ({gpu.sm}, {gpu.sm_count} SMs, "
                  f"{records.format_bytes(gpu.l2_bytes)} L2) — running every ladder live.[/bold]")
    fams = [families()[n] for n in names]
    reports = compile_reports(gpu.arch, fams)
    console.print(report.compile_table(reports, f"Compile report for {gpu.sm} (SASS mix: summary.md)", compact=True))
    sections = [f"## Compile report ({gpu.sm})\n\n{report.compile_markdown(reports)}"]
    stripped = stripped_note(live=True)
    if stripped:
        console.print(f"[yellow]{stripped}[/yellow]")
        sections.append(stripped)
        fams = [without_starters(f) for f in fams]
        profile = False  # Nsight Compute profiles whole ladders, starters included
    plan = bench.BenchPlan(quick=quick)
    for fam in fams:
        failures = []
        here, skipped = runnable_rungs(fam.rungs, gpu.arch)
        for line in skipped:
            console.print(f"[yellow]{line}[/yellow]")
        with _progress(console) as prog:
            cases = fam.check_cases()[:: 4 if quick else 1]
            task = prog.add_task(f"check {fam.name}", total=len(cases) * len(here), step="")
            for rung in here:
                for res in check_rung(fam, rung, cases):
                    prog.update(task, advance=1, step=res.case)
                    if not res.passed:
                        failures.append(res)
        if failures:
            for f in failures[:10]:
                console.print(f"[red]{f.line()}[/red]")
            raise LabError(f"{len(failures)} correctness check(s) failed in {fam.name}; fix them before timing.")
        console.print(f"[green]{fam.name}: every rung passed {len(cases)} cases x 3 input distributions.[/green]")
        with _progress(console) as prog:
            task = prog.add_task(f"bench {fam.name}", total=bench.job_count(fam, plan), step="")
            rs = bench.run(fam, plan, progress=lambda s, t=task: prog.update(t, advance=1, step=s))
        records.save(out / f"{fam.name}.json", rs)
        console.print(report.best_table(rs, fam.name))
        extra = ""
        if profile and fam.profile_figure:
            extra = _profile_section(fam, out, _measure_profile(fam, out, console))
        sections.append(_section(rs, fam, _family_plots(rs, fam, out), extra))
    header = f"# Lab tour — measured live on {gpu.name}\n\n{report.provenance_markdown(rs)}"
    return report.write_summary(out, header, sections)


def _profile_section(fam: Family, out: Path, payload: dict | None) -> str:
    """The Nsight Compute table and the family's figure (bank conflicts, or DRAM bytes against the
    minimum) for a payload, measured now or replayed."""
    from lab.studies import profile

    if payload is None:
        return ""
    tag = "REPLAYED from the reference GPU" if payload.get("replayed") else "measured in this run"
    params = payload["params"]
    minimum = fam.min_dram_bytes(params)
    if fam.profile_figure == "dram_bytes":
        png = plots.dram_bars(profile.dram_rows(payload, minimum), minimum, fam.name, params, tag,
                              out / f"{fam.name}_dram_bytes.png")
    else:
        png = plots.profile_bars(payload["rows"], "smem_bank_conflicts_ld", fam.name, params, tag,
                                 out / f"{fam.name}_bank_conflicts.png")
    picture = f"![{png.stem}]({png.name})\n\n" if png is not None else ""
    return (f"Nsight Compute, one launch of each rung at {describe_params(params)} ({tag}):\n\n"
            f"{report.profile_markdown(payload, minimum)}\n\n{picture}")


def _measure_profile(fam: Family, out: Path, console: Console) -> dict | None:
    from lab.studies import profile

    if profile.find_ncu() is None:
        console.print("[yellow]ncu not found: skipping the Nsight Compute counters.[/yellow]")
        return None
    payload = profile.ladder_counters(
        fam.name, on_error=lambda key, exc: console.print(f"[yellow]ncu on {key}: {exc}[/yellow]"))
    if payload is not None:
        profile.save(out / f"{fam.name}_profile.json", payload)
    return payload


def recorded_on(provenances: list[dict]) -> str:
    """'results recorded on NVIDIA H200 from 2026-11-29 to 2026-12-01 (each section gives its own date)', or on one
    date where they share it: the records of a replayed tour can be of several days."""
    if not provenances:
        return "no recorded results"
    devices = sorted({p.get("device", "?") for p in provenances})
    dates = sorted({str(p.get("date", "?"))[:10] for p in provenances})
    when = f"on {dates[0]}" if len(dates) == 1 else f"from {dates[0]} to {dates[-1]} (each section gives its own date)"
    return f"results recorded on {' and '.join(devices)} {when}"


def run_replay(out: Path, console: Console, arch: int, names: list[str]) -> Path:
    fams = [families()[n] for n in names]
    replays = {}
    for fam in fams:
        try:
            replays[fam.name] = records.reference_records(fam.name)
        except LabError:
            replays[fam.name] = None
    source = recorded_on([r.provenance for r in replays.values() if r])
    console.print(f"[bold yellow]No GPU here ({device.why_no_gpu()}): compiling every kernel for sm_{arch} with "
                  f"NVRTC, and replaying {source}. Nothing below was measured on this machine.[/bold yellow]")
    reports = compile_reports(arch, fams)
    console.print(report.compile_table(reports, f"Compile report for sm_{arch} (compile-only, no GPU; SASS mix: "
                                               "summary.md)", compact=True))
    stripped = stripped_note()
    if stripped:
        console.print(f"[yellow]{stripped}[/yellow]")
    sections = [f"## Compile report (sm_{arch}, compile-only)\n\n{report.compile_markdown(reports)}"]
    latest = report.reference_sets()  # a later headline run where there is one: the README's table reads the same
    for fam in fams:
        rs = replays[fam.name]
        if rs is None:
            console.print(f"[yellow]{fam.name}: no recorded results under {records.reference_dir()}.[/yellow]")
            continue
        console.print(report.best_table(latest.get(fam.name, rs), fam.name))
        extra = _profile_section(fam, out, reference_profile(fam.name)) if fam.profile_figure else ""
        sections.append(_section(rs, fam, _family_plots(rs, fam, out), extra))
    where = records.reference_dir().resolve()  # results/h200/ unless LAB_REFERENCE_RESULTS says otherwise
    where = where.relative_to(build.REPO_ROOT) if where.is_relative_to(build.REPO_ROOT) else where
    header = ("# Lab tour — NO GPU: compile-only, with REPLAYED results\n\n"
              f"Every figure below is replayed from `{where}/`: {source}. None was measured here."
              + (f"\n\n{stripped}" if stripped else ""))
    return report.write_summary(out, header, sections)


def stripped_note(live: bool = False) -> str:
    """In a student bundle, the sentence that says which kernels are starters (lab.grading.release strips the
    exercises' solutions), so that nobody reads their compile report against the replayed figures of the
    complete kernels, and (live) why they are not checked or timed; "" in the development tree."""
    from lab.grading.release import stripped_kernels

    names = stripped_kernels()
    if not names:
        return ""
    if live:
        return (f"This is a student bundle: {', '.join(names)} are shipped as exercise starters (TODOs where the "
                "solution was), so the tour checks and times every other rung and leaves these out; solve an "
                "exercise and grade it with `lab check NN`.")
    return (f"This is a student bundle: {', '.join(names)} are shipped as exercise starters (TODOs where the "
            "solution was). Their compile report above is the starter's; their replayed figures were measured "
            "with the complete kernels.")


def without_starters(fam: Family) -> Family:
    """The family with the rungs a student bundle ships as starters left out (a shallow copy)."""
    import copy

    from lab.grading.release import stripped_kernels

    starters = set(stripped_kernels())
    trimmed = copy.copy(fam)
    # a rung built with a plugin header (exercise 08's functor) is a starter when that header is
    trimmed.rungs = tuple(r for r in fam.rungs if not {r.spec.source, r.spec.plugin} & starters)
    return trimmed


def run(out_dir: str = "report", arch: int | None = None, quick: bool = False, names: list[str] | None = None,
        profile: bool = True, console: Console | None = None) -> Path:
    console = console or Console()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    names = names or list(families())
    unknown = [n for n in names if n not in families()]
    if unknown:
        raise LabError(f"Unknown family {unknown[0]!r}; the ladders are: {', '.join(families())}.")
    if device.gpu_available():
        summary = run_live(out, console, quick, names, profile)
    else:
        summary = run_replay(out, console, arch or device.REFERENCE_ARCH, names)
    console.print(f"Report written: {summary}")
    return summary
