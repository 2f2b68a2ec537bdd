"""The `lab` command: doctor, inspect, verify, bench, tour."""

from __future__ import annotations

import argparse
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


def cmd_tour(args) -> int:
    from lab import tour

    tour.run(args.out, arch=args.arch, quick=args.quick, names=args.family or None, profile=not args.no_profile,
             console=console)
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

    s = sub.add_parser("tour", help="run every ladder here (or compile-only + replay without a GPU)")
    s.add_argument("--out", default="report", help="report folder (default: report/)")
    s.add_argument("--arch", type=_arch, default=None, help="arch to compile for when there is no GPU (default 90)")
    s.add_argument("--family", action="append", help="only this family (repeatable)")
    s.add_argument("--quick", action="store_true", help="fewer sizes and shorter timings")
    s.add_argument("--no-profile", action="store_true", help="skip Nsight Compute counters")
    s.set_defaults(fn=cmd_tour)
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
