"""One call per rung for the steps every rung of a ladder repeats: what changed (source or diff), the
prediction and knobs, the compile report, the checks, the measurement, the profiled counters (DRAM
traffic or bank conflicts), the figure of the climb so far, and the prediction held against the
records. Cells that do something distinct for one rung stay cells in the notebook; this is only the
part that would otherwise be retyped."""

from __future__ import annotations

from dataclasses import dataclass

from lab.ladder import Family
from lab.lessons.common import Markdown, md
from lab.lessons.demos import check_summary
from lab.lessons.nsight import dram_summary, profile_value
from lab.lessons.predictions import prediction, prediction_check
from lab.lessons.sources import compile_pair, instruction_delta, knobs_line, operand_mix, show_diff, show_source
from lab.lessons.views import headline_summary, plot, select, so_far
from lab.records import RecordSet


def _show(item) -> None:
    """Markdown rendered in Jupyter (printed elsewhere); text printed."""
    if isinstance(item, Markdown):
        try:
            from IPython.display import display
        except ImportError:
            print(item)
            return
        display(item)
    else:
        print(item)


@dataclass
class RungWalk:
    """The context a notebook's rungs share (family, arch, records, checks, profile, peak); calling it
    with a rung key shows that rung's repeated steps and returns its compile reports.

        WALK = lessons.RungWalk(GEMM, ARCH, GEMM_RS, GEMM_CHECKS, profile=GEMM_PROFILE, peak=PEAK_TFLOPS)
        WALK("03")
        WALK("05", source=True)  # the whole source, where a diff from the rung before would mislead

    The profile line is the family's profile figure: bank conflicts (`profile_figure="bank_conflicts"`)
    or DRAM bytes against the minimum (otherwise)."""

    family: Family
    arch: int
    records: RecordSet | None
    checks: dict | None
    profile: dict | None = None
    peak: float | None = None  # in the records' metric (TFLOP/s), for compute-bound ladders
    peak_label: str = "FP32 peak"
    operand_mix: bool = False  # FFMA per shared/global load from the SASS (compute-bound ladders)

    def steps(self, key: str, source: bool = False) -> list:
        """What the walk shows for a rung, in order: Markdown, text, or a callable that draws a figure.
        `source`: the whole source instead of the diff, for a rung that is not an edit of the one before
        (the first rung always shows its source)."""
        fam, rs = self.family, self.records
        reports = compile_pair(fam, key, self.arch)
        first = fam.rungs.index(fam.rung(key)) == 0
        out: list = [show_source(fam, key) if first or source else show_diff(fam, key),
                     f"Predicted: {prediction(fam, key)}\n{knobs_line(fam, key)}",
                     md(_compile_markdown(reports))]
        occupancy = _occupancy_lines(fam, key, reports, self.arch)
        if occupancy:
            out.append(occupancy)
        if not first:
            out.append(instruction_delta(reports))
        if self.operand_mix:
            out.append(operand_mix(reports if first else reports[-1:]))
        out += [check_summary(self.checks, fam, key),
                headline_summary(rs, fam, key, peak=self.peak, peak_name=self.peak_label)]
        if self.profile is not None:  # the counters the family's profile figure is about
            out.append(profile_value(self.profile, fam, key) if fam.profile_figure == "bank_conflicts"
                       else dram_summary(self.profile, fam, key))
        if fam.sweep_figure == "bandwidth":
            from lab import plots

            out.append(lambda: plot(plots.bandwidth_vs_bytes, select(rs, fam, [key]), fam.name))
        out += [lambda: self._climb(key), prediction_check(rs, fam, key)]
        return out

    def _climb(self, key: str) -> None:
        from lab import plots

        extra = {"peak": self.peak, "peak_label": self.peak_label} if self.peak else {}
        plot(plots.ladder_bars, so_far(self.records, self.family, key), self.family.name, **extra)

    def __call__(self, key: str, source: bool = False) -> list:
        """Show the rung's steps; returns its compile reports (previous rung's first) for later cells."""
        for step in self.steps(key, source):
            step() if callable(step) else _show(step)
        return compile_pair(self.family, key, self.arch)


def _compile_markdown(reports: list) -> str:
    from lab import report

    return report.compile_markdown(reports)


def _occupancy_lines(fam: Family, key: str, reports: list, arch: int) -> str:
    """Blocks per SM of each rung in the pair at its registers and shared memory (lab.occupancy), where the
    family says its block size and the arch is in the occupancy table; '' otherwise."""
    from lab.lessons.sources import rung_pair
    from lab.occupancy import occupancy

    lines = []
    for rung, rep in zip(rung_pair(fam, key), reports, strict=True):
        resources = fam.block_resources(rung)
        if resources is None:
            return ""
        threads, dynamic = resources
        try:
            occ = occupancy(arch, threads, rep.registers, rep.smem_static_bytes + dynamic)
        except ValueError:  # an arch lab.occupancy has no limits for
            return ""
        lines.append(f"{rung.key}: {threads} threads, {rep.registers} registers, "
                     f"{rep.smem_static_bytes + dynamic} B shared memory a block -> {occ} on sm_{arch}")
    return "\n".join(lines)
