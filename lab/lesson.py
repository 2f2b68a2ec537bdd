"""What the notebooks share: live or replay mode, rung sources and diffs, and figures read from records.

The notebooks import from lab/ and do one thing per cell. The steps that only present a lesson (a
banner, a diff between rungs, a ratio picked out of the records, a figure shown or "nothing to
show") live here, as tested code, rather than being re-typed in every notebook.

Mode: LIVE when a GPU is here (the notebook checks and measures now), REPLAY when none is (the
notebook replays the reference GPU's records from results/h200/, and says so loudly). The variable
LAB_NOTEBOOK_MODE=replay forces replay on a GPU machine (the CPU tests use it); =live insists on a GPU.
No figure in a notebook is typed in: every number printed here is computed from records.
"""

from __future__ import annotations

import difflib
import json
import math
import os
import re
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from lab import device, records
from lab.build import read_source
from lab.errors import LabError
from lab.ladder import Family, Rung, get_family
from lab.records import Record, RecordSet

MODE_VARIABLE = "LAB_NOTEBOOK_MODE"
DEFAULT_ARCH = 90  # compile reports target sm_90 (the reference H200) when no GPU is here


# ----------------------------------------------------------------------------------------------
# Mode
# ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Mode:
    live: bool
    reason: str  # why this mode: the GPU found, or why there is none / why replay was forced

    @property
    def name(self) -> str:
        return "LIVE" if self.live else "REPLAY"


def mode() -> Mode:
    """LIVE when a GPU is usable here, else REPLAY; LAB_NOTEBOOK_MODE=replay|live overrides the choice."""
    wanted = os.environ.get(MODE_VARIABLE, "").strip().lower()
    if wanted not in ("", "auto", "live", "replay"):
        raise LabError(f"{MODE_VARIABLE} must be live, replay or auto, not {wanted!r}.")
    if wanted == "replay":
        return Mode(False, f"{MODE_VARIABLE}=replay was set, so no GPU is used")
    if device.gpu_available():
        gpu = device.current()
        return Mode(True, f"{gpu.name} ({gpu.sm}) found")
    if wanted == "live":
        raise LabError(f"{MODE_VARIABLE}=live asks for a GPU, but {device.why_no_gpu()}. Unset it to replay.")
    return Mode(False, f"no GPU here ({device.why_no_gpu()})")


def compile_arch(current: Mode | None = None) -> int:
    """The arch compile reports are made for: this GPU's (as the build would load it), else sm_90."""
    current = current or mode()
    if not current.live:
        return DEFAULT_ARCH
    from lab import nvrtc

    arch = device.current().arch
    supported = nvrtc.supported_archs()
    return arch if arch in supported else max(a for a in supported if a <= arch)


def _box(lines: list[str], char: str = "#") -> str:
    width = max(len(line) for line in lines) + 4
    edge = char * width
    return "\n".join([edge] + [f"{char} {line.ljust(width - 4)} {char}" for line in lines] + [edge])


def mode_banner(*family_names: str, current: Mode | None = None) -> str:
    """A loud box saying whether the numbers below are measured now or replayed, and from where."""
    current = current or mode()
    if current.live:
        gpu = device.current()
        return _box([
            f"LIVE MODE: measuring on this machine's {gpu.name} ({gpu.sm}, {gpu.sm_count} SMs,",
            f"{gpu.l2_bytes / 2**20:.0f} MiB L2, CUDA {gpu.driver_cuda} driver) right now.",
            "Every figure below is measured in this run, with a reduced plan (fewer sizes",
            "and shorter timings than `lab bench`; the notebook prints it).",
        ], "=")
    lines = ["REPLAY MODE: NOTHING BELOW IS MEASURED ON THIS MACHINE.", f"Why: {current.reason}."]
    for name in family_names or ("copy",):
        rs = reference(name)
        if rs is None:
            lines.append(f"{name}: NO RECORDED RESULTS at {reference_path(name)};")
            lines.append("  its measurement cells say so and show nothing. Record them on a GPU with")
            lines.append(f"  `lab bench {name} --json {reference_path(name)}`.")
        else:
            lines.append(f"{name}: REPLAYED from {describe_provenance(rs.provenance)}.")
    lines.append("Compile reports ARE computed here: NVRTC compiles without a GPU.")
    return _box(lines, "#")


def describe_gpu(current: Mode, rs: RecordSet | None = None) -> str:
    """LIVE: what lab.device reads from the driver. REPLAY: the GPU the records were made on."""
    if current.live:
        gpu = device.current()
        rows = gpu.as_dict() | {"datasheet_bandwidth_gbs": round(gpu.datasheet_bandwidth_gbs, 1)}
        return "This machine's GPU (lab.device.current()):\n" + "\n".join(
            f"  {k:22s} {v}" for k, v in rows.items())
    lines = [f"REPLAY: {current.reason}."]
    if rs is None:
        return "\n".join(lines + ["No records to replay either, so no GPU to describe."])
    keys = ("device", "arch", "sm_count", "l2_bytes", "driver_cuda", "runtime_cuda", "cupy", "date", "host")
    return "\n".join(lines + ["The replayed records were made on (their provenance):"]
                     + [f"  {k:22s} {rs.provenance.get(k, '?')}" for k in keys])


def describe_provenance(p: dict) -> str:
    commit = str(p.get("commit", "?"))[:12]
    return (f"{p.get('device', '?')} ({p.get('arch', '?')}) on {str(p.get('date', '?'))[:10]}, "
            f"commit {commit}")


# ----------------------------------------------------------------------------------------------
# Sources, headers, diffs
# ----------------------------------------------------------------------------------------------

class Markdown:
    """Text that Jupyter renders as Markdown and a terminal prints as it is."""

    def __init__(self, text: str):
        self.text = text

    def _repr_markdown_(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return self.text

    __str__ = __repr__


def md(text: str) -> Markdown:
    return Markdown(text)


def _family(family: str | Family) -> Family:
    return get_family(family) if isinstance(family, str) else family


def rung_pair(family: str | Family, key: str) -> tuple[Rung, ...]:
    """(previous rung, this rung), or (this rung,) for the first rung of a ladder."""
    fam = _family(family)
    rung = fam.rung(key)
    index = fam.rungs.index(rung)
    return (fam.rungs[index - 1], rung) if index else (rung,)


def rung_source(family: str | Family, key: str) -> str:
    return read_source(_family(family).rung(key).spec)


def rung_header(family: str | Family, key: str) -> str:
    """The rung's opening comment (what changed, why, prediction, requirements, knobs), as text."""
    lines = []
    for line in rung_source(family, key).splitlines():
        if not line.startswith("//"):
            break
        lines.append(line[2:].removeprefix(" "))
    return "\n".join(lines).strip()


# A header's fields start with one of these words and a colon; the prediction runs up to the next one.
_FIELDS = r"Requires|Tails[^:]*|Knobs|Cost|What[^:]*|Why|Measured[^:]*|Left for later[^:]*|Not more"
# "Prediction: ..." or "Prediction (4096^3, H200): ...": the parenthesis says where it holds.
_PREDICTION = re.compile(rf"Prediction(?:\s*\((?P<where>[^)]*)\))?:\s*(?P<text>.*?)(?=\s(?:{_FIELDS}):|$)",
                         re.DOTALL)


def prediction(family: str | Family, key: str) -> str:
    """The header's "Prediction:" sentence(s), joined onto one line (with its "(where)", if any)."""
    header = " ".join(rung_header(family, key).split())
    m = _PREDICTION.search(header)
    if not m:
        return "(this rung's header states no prediction)"
    return (f"({m['where']}) " if m["where"] else "") + m["text"].strip()


def knobs_line(family: str | Family, key: str) -> str:
    """The knobs this rung is built and launched with (the ladder's defaults, from lab/families/)."""
    rung = _family(family).rung(key)
    knobs = ", ".join(f"{k}={v}" for k, v in rung.spec.knobs) or "none"
    return f"{rung.spec.source} as the ladder builds it: entry {rung.spec.entry}, knobs {knobs}"


def rung_diff(family: str | Family, key: str, context: int = 3) -> str:
    """Unified diff of the previous rung's source against this one's ('' for a ladder's first rung)."""
    pair = rung_pair(family, key)
    if len(pair) == 1:
        return ""
    before, after = (read_source(r.spec).splitlines(keepends=True) for r in pair)
    return "".join(difflib.unified_diff(before, after, fromfile=pair[0].spec.source,
                                        tofile=pair[1].spec.source, n=context))


def show_source(family: str | Family, key: str) -> Markdown:
    rung = _family(family).rung(key)
    return md(f"`kernels/{rung.spec.source}`\n\n```cuda\n{read_source(rung.spec).rstrip()}\n```")


def show_diff(family: str | Family, key: str, context: int = 3) -> Markdown:
    diff = rung_diff(family, key, context)
    if not diff:
        first = _family(family).rung(key).spec.source
        return md(f"`{first}` is the first rung: there is nothing to diff against.")
    return md(f"```diff\n{diff.rstrip()}\n```")


def instruction_delta(reports: list) -> str:
    """How registers, shared memory, spills and the notable SASS opcodes changed between two reports."""
    if len(reports) < 2:
        only = reports[0]
        mix = ", ".join(f"{k} x{v}" for k, v in only.instructions.items()) or "(no nvdisasm: no mix)"
        return f"{only.source}: {only.registers} registers, {only.smem_static_bytes} B static smem; {mix}"
    a, b = reports[-2], reports[-1]
    lines = [f"{a.source} -> {b.source} ({b.arch}):",
             f"  registers {a.registers} -> {b.registers}; static smem {a.smem_static_bytes} -> "
             f"{b.smem_static_bytes} B; spills {a.spill_store_bytes + a.spill_load_bytes} -> "
             f"{b.spill_store_bytes + b.spill_load_bytes} B"]
    if not (a.sass_available and b.sass_available):
        lines.append("  (nvdisasm is not installed: no instruction mix; `pip install nvidia-cuda-nvdisasm`)")
        return "\n".join(lines)
    for op in sorted(set(a.instructions) | set(b.instructions)):
        x, y = a.instructions.get(op, 0), b.instructions.get(op, 0)
        if x != y:
            lines.append(f"  {op:10s} {x:3d} -> {y:3d}")
    if len(lines) == 2:
        lines.append("  the notable SASS opcodes are the same")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# Records: measured now, or replayed
# ----------------------------------------------------------------------------------------------

def _shown(path: Path) -> str:
    """A path as a reader of this repository would type it: relative to the repo root when inside it."""
    from lab.build import REPO_ROOT

    resolved = path.resolve()
    return str(resolved.relative_to(REPO_ROOT)) if resolved.is_relative_to(REPO_ROOT) else str(path)


def reference_path(family: str) -> str:
    return _shown(records.reference_dir() / f"{family}.json")


def reference(family: str) -> RecordSet | None:
    """The reference GPU's records of a family, or None when the file is absent or unreadable."""
    try:
        return records.reference_records(family)
    except LabError:
        return None


def missing(family: str) -> str:
    return (f"NO RECORDS for {family}: nothing was measured here (no GPU) and {reference_path(family)} is "
            f"absent or unreadable, so there is nothing to show. On a GPU, `lab bench {family} --json "
            f"{reference_path(family)}` records them.")


def ladder_records(family: str | Family, current: Mode, *plans) -> RecordSet | None:
    """LIVE: lab.bench.run on the family now, once per plan, records merged (the notebook checks first).

    REPLAY: the reference GPU's records. Every record still carries the ceiling timed beside it on the
    same problem, so merging runs keeps the same-run rule.
    """
    fam = _family(family)
    if not current.live:
        return reference(fam.name)
    from lab import bench

    runs = [bench.run(fam, plan) for plan in (plans or (bench.BenchPlan(quick=True),))]
    return RecordSet(runs[0].provenance, [r for rs in runs for r in rs.records])


def records_status(rs: RecordSet | None, family: str) -> str:
    if rs is None:
        return missing(family)
    kinds = sorted({r.kind for r in rs.records})
    loud = "REPLAYED, NOT MEASURED HERE: " if rs.replayed else ""
    return f"{loud}{len(rs.records)} {family} records ({', '.join(kinds)}), {rs.label()}."


def headline_table(rs: RecordSet | None, family: str) -> Markdown:
    """lab.report's headline table of a family, as Markdown (or the sentence saying there are no records)."""
    from lab import report

    if rs is None:
        return md(missing(family))
    return md(f"{rs.label()}\n\n{report.headline_markdown(rs, family)}")


def ceiling_name(rs: RecordSet) -> str:
    return rs.records[0].ceiling if rs.records else ""


def _key(rs: RecordSet, family: str | Family, key: str) -> str:
    """A rung key ('02', '02_grid_stride'), 'ceiling', or a baseline's name, as the records spell it."""
    if key == "ceiling":
        return ceiling_name(rs)
    if any(r.rung == key for r in rs.records):
        return key
    return _family(family).rung(key).key


def select(rs: RecordSet | None, family: str | Family, keys: Iterable[str],
           ceiling: bool = True) -> RecordSet | None:
    """Only these rungs' records (plus the ceiling's), keeping the provenance and the replay flag."""
    if rs is None:
        return None
    wanted = {_key(rs, family, k) for k in keys} | ({ceiling_name(rs)} if ceiling else set())
    return RecordSet(rs.provenance, [r for r in rs.records if r.rung in wanted], rs.replayed)


def so_far(rs: RecordSet | None, family: str | Family, key: str) -> RecordSet | None:
    """The ceiling, the library baselines and every rung up to and including `key`: the climb so far."""
    if rs is None:
        return None
    fam = _family(family)
    last = fam.rung(key).number
    rungs = {r.key for r in fam.rungs}
    baselines = [r.rung for r in rs.records if r.rung not in rungs]
    keep = [r.key for r in fam.rungs if r.number <= last] + baselines
    return select(rs, fam, list(dict.fromkeys(keep)))


def one_record(rs: RecordSet | None, **conditions) -> Record | None:
    found = rs.where(**conditions) if rs is not None else []
    return found[0] if found else None


def record_fields(rec: Record | None) -> str:
    if rec is None:
        return "(no record to show: see the banner at the top)"
    d = rec.as_dict()
    width = max(map(len, d))
    lines = [f"{k.ljust(width)} : {v!r}" for k, v in d.items()]
    lines.append(f"{'ratio'.ljust(width)} : {rec.ratio:.4f}  (a property: value / ceiling_value)")
    return "\n".join(lines)


def provenance_fields(rs: RecordSet | None) -> str:
    if rs is None:
        return "(no records, so no provenance: see the banner at the top)"
    return json.dumps(rs.provenance, indent=1)


def _fmt_bytes(b: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if b < 1024:
            return f"{b:.0f} {unit}"
        b /= 1024
    return f"{b:.0f} TiB"


def _size(params: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items() if v or k in ("n", "rows", "cols"))


def headline_summary(rs: RecordSet | None, family: str | Family, key: str) -> str:
    """This rung's headline records: median, spread, throughput, against the ceiling and the previous rung."""
    fam = _family(family)
    if rs is None:
        return missing(fam.name)
    rung = _key(rs, fam, key)
    pair = rung_pair(fam, key) if rung in {r.key for r in fam.rungs} else ()
    lines = [f"{rung}, headline sizes ({rs.label()}):"]
    for rec in rs.where(kind="headline", rung=rung):
        lines.append(f"  [{_size(rec.params)}, {rec.l2} L2] median {rec.median_ms:.4f} ms "
                     f"(p10-p90 {rec.p10_ms:.4f}-{rec.p90_ms:.4f} ms, {rec.reps} reps) -> "
                     f"{rec.value:.0f} {rec.metric} = {rec.ratio:.3f}x {rec.ceiling} "
                     f"({rec.ceiling_value:.0f} {rec.metric}, same run)")
        if len(pair) == 2:
            prev = one_record(rs, kind="headline", rung=pair[0].key, params=rec.params, l2=rec.l2)
            if prev is not None and prev.value:
                lines.append(f"      vs {pair[0].key}: {rec.value / prev.value:.3f}x")
    if len(lines) == 1:
        lines.append("  (no headline records for this rung)")
    return "\n".join(lines)


# Regimes by bytes moved, relative to the L2 size of the GPU that made the records.
REGIMES = {
    "launch": (0, 1 / 64),  # so small that launch overhead dominates
    "l2": (1 / 16, 1 / 2),  # read + write fit in L2 with room to spare
    "hbm": (8, math.inf),  # far past L2: DRAM bandwidth
}


def regime_bounds(rs: RecordSet, regime: str) -> tuple[float, float]:
    l2 = rs.provenance.get("l2_bytes") or 0
    if regime not in REGIMES:
        raise ValueError(f"regime must be one of {', '.join(REGIMES)}, not {regime!r}")
    if not l2:
        return (0, math.inf)
    lo, hi = REGIMES[regime]
    return (lo * l2, hi * l2)


@dataclass
class Ratio:
    """Throughput of one target over another at matching problems, from the same run's records."""

    rung: str
    against: str
    where: str
    pairs: list[tuple[dict, int, float]]  # (params, bytes moved, ratio)

    @property
    def median(self) -> float:
        return statistics.median(p[2] for p in self.pairs) if self.pairs else math.nan

    def __str__(self) -> str:
        if not self.pairs:
            return f"{self.rung} / {self.against}, {self.where}: no matching records"
        if len(self.pairs) <= 3:
            at = "; ".join(f"{r:.3f}x at {_fmt_bytes(b)} moved" for _, b, r in self.pairs)
            return f"{self.rung} / {self.against}, {self.where}: {at}"
        lo = min(p[2] for p in self.pairs)
        hi = max(p[2] for p in self.pairs)
        first, last = _fmt_bytes(self.pairs[0][1]), _fmt_bytes(self.pairs[-1][1])
        return (f"{self.rung} / {self.against}, {self.where}: median {self.median:.3f}x over "
                f"{len(self.pairs)} sizes ({lo:.3f}x-{hi:.3f}x, {first} to {last})")


def ratio(rs: RecordSet | None, family: str | Family, key: str, against: str = "ceiling", *,
          kind: str = "headline", l2: str = "cold", regime: str | None = None) -> Ratio | str:
    """key's throughput over `against`'s (a rung, 'ceiling' or a baseline) on the same problems."""
    fam = _family(family)
    if rs is None:
        return missing(fam.name)
    a, b = _key(rs, fam, key), _key(rs, fam, against)
    lo, hi = regime_bounds(rs, regime) if regime else (0, math.inf)
    where = f"{kind}, {l2} L2"
    if regime:
        top = " and up" if math.isinf(hi) else f"-{_fmt_bytes(hi)}"
        where += f", {regime} regime ({_fmt_bytes(lo)}{top} moved)"
    mine = sorted((r for r in rs.where(kind=kind, rung=a, l2=l2) if lo <= r.bytes_moved <= hi),
                  key=lambda r: r.bytes_moved)
    pairs = []
    for rec in mine:
        other = one_record(rs, kind=kind, rung=b, l2=l2, params=rec.params)
        if other is not None and other.value:
            pairs.append((rec.params, rec.bytes_moved, rec.value / other.value))
    return Ratio(a, b, where, pairs)


def cold_versus_warm(rs: RecordSet | None, family: str | Family, key: str = "ceiling") -> str:
    """Warm-L2 over cold-L2 throughput of one target, size by size (the sweep records)."""
    fam = _family(family)
    if rs is None:
        return missing(fam.name)
    target = _key(rs, fam, key)
    l2 = rs.provenance.get("l2_bytes", 0)
    lines = [f"{target} (L2 = {_fmt_bytes(l2)}; {rs.label()})",
             "  bytes moved | cold GB/s | warm GB/s | warm/cold"]
    for cold in sorted(rs.where(kind="sweep", rung=target, l2="cold"), key=lambda r: r.bytes_moved):
        warm = one_record(rs, kind="sweep", rung=target, l2="warm", params=cold.params)
        if warm is None:
            continue
        mark = "  <- fits in L2" if l2 and cold.bytes_moved <= l2 else ""
        lines.append(f"  {_fmt_bytes(cold.bytes_moved):>9} | {cold.value:9.4g} | {warm.value:9.4g} | "
                     f"{warm.value / cold.value:8.2f}x{mark}")
    if len(lines) == 1:
        lines.append("  (no sweep records with both cold and warm L2)")
    return "\n".join(lines)


def spread_table(rs: RecordSet | None, family: str | Family, key: str = "ceiling", l2: str = "cold") -> str:
    """Median, p10-p90 and the spread relative to the median, size by size: small sizes are noisier."""
    fam = _family(family)
    if rs is None:
        return missing(fam.name)
    target = _key(rs, fam, key)
    lines = [f"{target}, {l2} L2: bytes moved | median ms | p10-p90 ms | (p90-p10)/median | reps"]
    for r in sorted(rs.where(kind="sweep", rung=target, l2=l2), key=lambda r: r.bytes_moved):
        rel = (r.p90_ms - r.p10_ms) / r.median_ms if r.median_ms else math.nan
        lines.append(f"  {_fmt_bytes(r.bytes_moved):>9} | {r.median_ms:9.4f} | "
                     f"{r.p10_ms:.4f}-{r.p90_ms:.4f} | {100 * rel:6.1f}% | {r.reps}")
    return "\n".join(lines)


def ceiling_summary(rs: RecordSet | None, family: str | Family, current: Mode) -> str:
    """The family's ceiling at its headline sizes, and against the datasheet peak where it is known."""
    fam = _family(family)
    if rs is None:
        return missing(fam.name)
    name = ceiling_name(rs)
    peak = device.current().datasheet_bandwidth_gbs if current.live else 0.0
    lines = [f"{name} ({rs.label()}):"]
    for rec in rs.where(kind="headline", rung=name):
        tail = f" = {rec.value / peak:.3f}x the datasheet peak ({peak:.0f} GB/s)" if peak else ""
        lines.append(f"  [{_size(rec.params)}, {rec.l2} L2] {rec.value:.0f} {rec.metric}{tail}")
    if not peak:
        lines.append("  (the datasheet peak needs the GPU's memory clock and bus width: LIVE mode only)")
    return "\n".join(lines)


def tail_sawtooth(rs: RecordSet | None, family: str | Family) -> str:
    """Per target over the tail sizes: median throughput, and how far the worst size falls below it."""
    fam = _family(family)
    if rs is None:
        return missing(fam.name)
    recs = [r for r in rs.records if r.kind == "tail"]
    if not recs:
        return "(no tail records)"
    key = "n" if "n" in recs[0].params else "cols"
    lines = [f"tail sizes {key}={min(r.params[key] for r in recs)}..{max(r.params[key] for r in recs)} "
             f"({rs.label()}): target | median GB/s | worst GB/s (at {key}) | worst/median"]
    for target in dict.fromkeys(r.rung for r in recs):
        mine = [r for r in recs if r.rung == target]
        med = statistics.median(r.value for r in mine)
        worst = min(mine, key=lambda r: r.value)
        lines.append(f"  {target:18s} | {med:8.0f} | {worst.value:8.0f} ({key}={worst.params[key]}) | "
                     f"{worst.value / med:.3f}")
    return "\n".join(lines)


def figure(fig, what: str = "") -> None:
    """Show a figure (and close it, so Jupyter does not show it twice), or say why there is none."""
    if fig is None:
        print(f"(nothing to plot{': ' + what if what else ''})")
        return
    try:
        from IPython.display import display
    except ImportError:  # a plain interpreter: leave the figure to matplotlib
        return
    import matplotlib.pyplot as plt

    display(fig)
    plt.close(fig)


def plot(fn: Callable, rs: RecordSet | None, family: str, **kwargs) -> None:
    """lab.plots.<fn>(rs, family, ...) shown inline, or a sentence when there are no records for it."""
    if rs is None:
        print(missing(family))
        return
    figure(fn(rs, family, **kwargs), f"no {fn.__name__} records for {family} in this set")


# ----------------------------------------------------------------------------------------------
# Live-only checks and demonstrations (need a GPU)
# ----------------------------------------------------------------------------------------------

def few_cases(family: str | Family, count: int = 8) -> list[dict]:
    """`count` of the family's check cases, spread evenly from the smallest to the largest."""
    cases = _family(family).check_cases()
    if len(cases) <= count:
        return cases
    step = (len(cases) - 1) / (count - 1)
    return [cases[round(i * step)] for i in range(count)]


def check_ladder(family: str | Family, cases: list[dict]) -> dict:
    """lab.verify.check_rung for every rung; raises LabError (stopping the notebook) if any fails."""
    from lab.verify import check_rung

    fam = _family(family)
    results = {rung.key: check_rung(fam, rung, cases) for rung in fam.rungs}
    failed = [r.line() for rs in results.values() for r in rs if not r.passed]
    if failed:
        raise LabError(f"{len(failed)} check(s) failed in {fam.name}; fix them before measuring:\n" +
                       "\n".join(failed[:10]))
    return results


def check_summary(results: dict | None, family: str | Family, key: str) -> str:
    fam = _family(family)
    if results is None:
        return (f"(not run: checks need a GPU. LIVE mode runs lab.verify.check_rung on {fam.name}/"
                f"{fam.rung(key).key} here before anything is measured.)")
    mine = results[fam.rung(key).key]
    lines = [r.line() for r in mine]
    passed = sum(r.passed for r in mine)
    return "\n".join(lines) + f"\n{passed}/{len(mine)} cases passed, 3 input distributions each."


def host_clock_versus_events(launch: Callable[[int], None]) -> str:
    """The wrong way (a host clock around an asynchronous launch) beside the right way (CUDA events)."""
    import cupy as cp

    from lab import timing

    stream = cp.cuda.get_current_stream()
    launch(0)
    stream.synchronize()
    t0 = time.perf_counter()
    launch(0)
    enqueue_ms = (time.perf_counter() - t0) * 1e3  # returns as soon as the launch is queued
    stream.synchronize()
    synced_ms = (time.perf_counter() - t0) * 1e3  # includes Python, the queue and the sync's own cost
    events = timing.measure(launch, l2="warm")
    return "\n".join([
        f"host clock, no synchronize : {enqueue_ms:8.4f} ms  (only the time to queue the launch)",
        f"host clock, synchronize    : {synced_ms:8.4f} ms  (one sample, host overheads included)",
        f"CUDA events, median        : {events.median_ms:8.4f} ms  (p10-p90 {events.p10_ms:.4f}-"
        f"{events.p90_ms:.4f} ms over {events.reps} launches)",
    ])


def first_launch_versus_steady(launch: Callable[[int], None]) -> str:
    """Events around the very first launch (module load, first touch, clocks ramping) vs the warm median."""
    import cupy as cp

    from lab import timing

    start, end = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    launch(0)
    end.record()
    end.synchronize()
    first = cp.cuda.get_elapsed_time(start, end)
    steady = timing.measure(launch, l2="warm")
    return (f"first launch: {first:.4f} ms; after warm-up: median {steady.median_ms:.4f} ms "
            f"-> the first launch took {first / steady.median_ms:.1f}x the steady time")


# ----------------------------------------------------------------------------------------------
# Profiles (Nsight Compute counters)
# ----------------------------------------------------------------------------------------------

def profile_path(family: str) -> Path:
    return records.reference_dir() / f"{family}_profile.json"


def profile_shown(family: str) -> str:
    return _shown(profile_path(family))


def reference_profile(family: str) -> dict | None:
    """{"provenance", "params", "rows": [{"rung", <counter>: value}]} from the reference GPU, or None."""
    from lab import profile

    return profile.reference_profile(family)


def measure_profile(family: str | Family, params: dict | None = None) -> dict | None:
    """Counters for one launch of every rung, through lab.profile (ncu); None when ncu is absent or fails."""
    from lab import profile

    return profile.ladder_counters(_family(family).name, params,
                                   on_error=lambda key, exc: print(f"ncu on {key}: {exc}"))


def profile_records(family: str | Family, current: Mode) -> dict | None:
    """LIVE: measure with ncu where it works here; otherwise (and in REPLAY) the reference GPU's file."""
    fam = _family(family)
    if current.live:
        measured = measure_profile(fam)
        if measured is not None:
            return measured
        print("Nsight Compute could not read counters here; falling back to the reference GPU's profile.")
    return reference_profile(fam.name)


def profile_status(prof: dict | None, family: str) -> str:
    if prof is None:
        return (f"NO PROFILE for {family}: no counters were read here and {profile_shown(family)} is absent, "
                "so the bank-conflict cells show nothing. `lab tour` on a GPU with Nsight Compute writes it.")
    loud = "REPLAYED, NOT MEASURED HERE: " if prof.get("replayed") else "measured now: "
    return (f"{loud}Nsight Compute counters at {prof.get('params')} for {len(prof['rows'])} rungs, "
            f"{describe_provenance(prof.get('provenance', {}))}.")


def profile_value(prof: dict | None, family: str | Family, key: str,
                  metric: str = "smem_bank_conflicts_ld") -> str:
    fam = _family(family)
    if prof is None:
        return f"(no profile: {metric} unknown)"
    rung = fam.rung(key).key
    row = next((r for r in prof["rows"] if r.get("rung") == rung), None)
    if row is None or metric not in row:
        return f"{rung}: no {metric} in the profile"
    line = f"{rung}: {metric} = {row[metric]:.0f}"
    wavefronts = row.get("smem_wavefronts_ld")
    if wavefronts and metric == "smem_bank_conflicts_ld":
        line += f" ({row[metric] / wavefronts:.1%} of {wavefronts:.0f} shared-load wavefronts)"
    return line + f"  [{'REPLAYED' if prof.get('replayed') else 'measured now'}]"


def profile_plot(prof: dict | None, family: str, metric: str = "smem_bank_conflicts_ld") -> None:
    from lab import plots

    if prof is None:
        print(profile_status(None, family))
        return
    tag = "REPLAYED from " if prof.get("replayed") else "measured on "
    title = (f"{family}: {metric} at {prof.get('params')} (Nsight Compute)\n"
             f"{tag}{describe_provenance(prof.get('provenance', {}))}")
    figure(plots.profile_bars(prof["rows"], metric, title), f"no {metric} rows")

