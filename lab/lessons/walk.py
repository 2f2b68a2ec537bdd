"""One call per rung for the steps every rung of a ladder repeats: what changed (source or diff), the
prediction and knobs, the compile report, the checks, the measurement, the profiled counters (DRAM
traffic or bank conflicts), the figure of the climb so far, and the prediction held against the
records. Cells that do something distinct for one rung stay cells in the notebook; this is only the
part that would otherwise be retyped."""

from __future__ import annotations

from dataclasses import dataclass

from lab.core.ladder import Family
from lab.lessons.common import Markdown, md
from lab.lessons.demos import check_summary
from lab.lessons.mode import Mode, arch_note
from lab.lessons.nsight import conflict_metrics, dram_summary, profile_value
from lab.lessons.predictions import prediction, prediction_check
from lab.lessons.sources import (
    compile_pair,
    instruction_delta,
    knobs_line,
    mma_mix,
    operand_mix,
    show_diff,
    show_source,
)
from lab.lessons.views import headline_summary, plot, select, so_far
from lab.measure.records import RecordSet


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
    mma_mix: bool = False  # tensor-core instructions against what feeds them (the tensor-core ladder)
    mode: Mode | None = None  # LIVE or REPLAY: says so for a rung this machine can only compile

    def steps(self, key: str, source: bool = False) -> list:
        """What the walk shows for a rung, in order: Markdown, text, or a callable that draws a figure.
        `source`: the whole source instead of the diff, for a rung that is not an edit of the one before
        (the first rung always shows its source)."""
        fam, rs = self.family, self.records
        reports = compile_pair(fam, key, self.arch)
        first = fam.rungs.index(fam.rung(key)) == 0
        out: list = [show_source(fam, key) if first or source else show_diff(fam, key),
                     f"Predicted: {prediction(fam, key)}\n{knobs_line(fam, key)}"]
        note = arch_note(fam, key, self.mode) if self.mode is not None else ""
        if note:
            out.append(note)
        out.append(md(_compile_markdown(reports)))
        occupancy = _occupancy_lines(fam, key, reports)
        if occupancy:
            out.append(occupancy)
        if not first:
            out.append(instruction_delta(reports))
        if self.operand_mix:
            out.append(operand_mix(reports if first else reports[-1:]))
        if self.mma_mix:
            out.append(mma_mix(reports if first else reports[-1:]))
        out += [check_summary(self.checks, fam, key),
                headline_summary(rs, fam, key, peak=self.peak, peak_name=self.peak_label)]
        if self.profile is not None:  # the counters the family's profile figure is about
            if fam.profile_figure == "bank_conflicts":
                out.append("\n".join(profile_value(self.profile, fam, key, m) for m in conflict_metrics(self.profile)))
            else:
                out.append(dram_summary(self.profile, fam, key))
        if fam.sweep_figure == "bandwidth":
            from lab.lessons import plots

            out.append(lambda: plot(plots.bandwidth_vs_bytes, select(rs, fam, [key]), fam.name))
        out += [lambda: self._climb(key), prediction_check(rs, fam, key)]
        return out

    def _climb(self, key: str) -> None:
        from lab.lessons import plots

        extra = {"peak": self.peak, "peak_label": self.peak_label} if self.peak else {}
        plot(plots.ladder_bars, so_far(self.records, self.family, key), self.family.name, **extra)

    def chapter(self, key: str) -> list:
        """A rung with no hand-written section (a rung added to the family after the notebook was written):
        a heading, the rung's header as its author wrote it, then the walk, with the whole source instead of
        the diff where the rung rewrote most of the previous one."""
        from lab.lessons.sources import mostly_rewritten, rung_header

        rung = self.family.rung(key)
        _show(md(f"### Rung {rung.number:02d} — {rung.title}\n\nThe header of `kernels/{rung.spec.source}`:\n\n"
                 f"```text\n{rung_header(self.family, key)}\n```"))
        return self(key, source=mostly_rewritten(self.family, key))

    def __call__(self, key: str, source: bool = False) -> list:
        """Show the rung's steps; returns its compile reports (previous rung's first) for later cells."""
        for step in self.steps(key, source):
            step() if callable(step) else _show(step)
        return compile_pair(self.family, key, self.arch)


def _compile_markdown(reports: list) -> str:
    from lab.studies import report

    return report.compile_markdown(reports)


def _occupancy_lines(fam: Family, key: str, reports: list) -> str:
    """Blocks per SM of each rung in the pair at its registers and shared memory (lab.core.occupancy), where the
    family says its block size and the arch is in the occupancy table; '' otherwise."""
    from lab.core.device import arch_number
    from lab.core.occupancy import occupancy
    from lab.lessons.sources import rung_pair

    lines = []
    for rung, rep in zip(rung_pair(fam, key), reports, strict=True):
        resources = fam.block_resources(rung)
        if resources is None:
            return ""
        threads, dynamic = resources
        try:  # at the arch each report was made for (sm_90a for a Hopper-only rung, whatever GPU is here)
            occ = occupancy(arch_number(rep.arch), threads, rep.registers, rep.smem_static_bytes + dynamic)
        except ValueError:  # an arch lab.core.occupancy has no limits for
            return ""
        lines.append(f"{rung.key}: {threads} threads, {rep.registers} registers, "
                     f"{rep.smem_static_bytes + dynamic} B shared memory a block -> {occ} on {rep.arch}")
    return "\n".join(lines)
