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
from lab.records import Record, RecordSet, describe_params, format_value, tail_key

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


def headline_sizes(rs: RecordSet | None) -> list[dict]:
    """The params of the headline problems in these records, in the order they were run ([] for None)."""
    if rs is None:
        return []
    return list({describe_params(r.params): r.params for r in rs.records if r.kind == "headline"}.values())


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
    return describe_params(params)


def headline_summary(rs: RecordSet | None, family: str | Family, key: str, peak: float | None = None,
                     peak_name: str = "FP32 peak") -> str:
    """This rung's headline records: median, spread, throughput, against the ceiling and the previous rung
    (and against a peak in the records' units, when one is given)."""
    fam = _family(family)
    if rs is None:
        return missing(fam.name)
    rung = _key(rs, fam, key)
    pair = rung_pair(fam, key) if rung in {r.key for r in fam.rungs} else ()
    lines = [f"{rung}, headline sizes ({rs.label()}):"]
    for rec in rs.where(kind="headline", rung=rung):
        lines.append(f"  [{_size(rec.params)}, {rec.l2} L2] median {rec.median_ms:.4f} ms "
                     f"(p10-p90 {rec.p10_ms:.4f}-{rec.p90_ms:.4f} ms, {rec.reps} reps) -> "
                     f"{format_value(rec.value, rec.metric)} {rec.metric} = {rec.ratio:.3f}x {rec.ceiling} "
                     f"({format_value(rec.ceiling_value, rec.metric)} {rec.metric}, same run)")
        if len(pair) == 2:
            prev = one_record(rs, kind="headline", rung=pair[0].key, params=rec.params, l2=rec.l2)
            if prev is not None and prev.value:
                lines.append(f"      vs {pair[0].key}: {rec.value / prev.value:.3f}x")
        if peak:
            lines.append(f"      vs the {peak_name} ({format_value(peak, rec.metric)} {rec.metric}): "
                         f"{rec.value / peak:.3f}x")
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


def _tail_records(rs: RecordSet | None, family: str | Family) -> list[Record] | str:
    """The tail records of a set, or the line to print instead when there are none."""
    if rs is None:
        return missing(_family(family).name)
    recs = [r for r in rs.records if r.kind == "tail"]
    return recs or "(no tail records)"


def tail_sawtooth(rs: RecordSet | None, family: str | Family) -> str:
    """Per target over the tail sizes: median throughput, and how far the worst size falls below it."""
    recs = _tail_records(rs, family)
    if isinstance(recs, str):
        return recs
    key, metric = tail_key(recs), recs[0].metric
    lines = [f"tail sizes {key}={min(r.params[key] for r in recs)}..{max(r.params[key] for r in recs)} "
             f"({rs.label()}): target | median {metric} | worst {metric} (at {key}) | worst/median"]
    width = max(18, *(len(r.rung) for r in recs))
    for target in dict.fromkeys(r.rung for r in recs):
        mine = [r for r in recs if r.rung == target]
        med = statistics.median(r.value for r in mine)
        worst = min(mine, key=lambda r: r.value)
        lines.append(f"  {target:{width}s} | {format_value(med, metric):>8} | {format_value(worst.value, metric):>8} "
                     f"({key}={worst.params[key]}) | {worst.value / med:.3f}")
    return "\n".join(lines)


def tail_residues(rs: RecordSet | None, family: str | Family, modulus: int = 4) -> str:
    """Per target over the tail sizes: the median throughput at sizes that are multiples of `modulus`
    against the median at the others. A ratio well under one is a sawtooth with that period (a
    vectorized path that only multiples can take)."""
    recs = _tail_records(rs, family)
    if isinstance(recs, str):
        return recs
    key, metric = tail_key(recs), recs[0].metric
    lines = [f"tail sizes by {key} mod {modulus} ({rs.label()}): target | median {metric} at multiples of "
             f"{modulus} | median at the others | others/multiples"]
    width = max(18, *(len(r.rung) for r in recs))
    for target in dict.fromkeys(r.rung for r in recs):
        on = [r.value for r in recs if r.rung == target and r.params[key] % modulus == 0]
        off = [r.value for r in recs if r.rung == target and r.params[key] % modulus]
        if not on or not off:
            lines.append(f"  {target:{width}s} | (needs sizes on and off the multiples of {modulus})")
            continue
        a, b = statistics.median(on), statistics.median(off)
        lines.append(f"  {target:{width}s} | {format_value(a, metric):>8} ({len(on)} sizes) | "
                     f"{format_value(b, metric):>8} ({len(off)} sizes) | {b / a:.3f}")
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
                "so the Nsight Compute cells show nothing. On a GPU with Nsight Compute, "
                f"`lab profile {family} --json {profile_shown(family)}` (or `lab tour`) writes it.")
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



def _dram_rows(prof: dict, fam: Family) -> tuple[list[dict], int | None]:
    from lab import profile

    minimum = fam.min_dram_bytes(prof["params"])
    return profile.dram_rows(prof, minimum), minimum


def dram_summary(prof: dict | None, family: str | Family, key: str) -> str:
    """One rung's DRAM traffic (Nsight Compute) against the fewest bytes the problem can move."""
    fam = _family(family)
    if prof is None:
        return "(no profile: DRAM bytes unknown)"
    rows, minimum = _dram_rows(prof, fam)
    rung = fam.rung(key).key
    row = next((r for r in rows if r["rung"] == rung), None)
    if row is None:
        return f"{rung}: no DRAM counters in the profile"
    line = (f"{rung}: DRAM {row['read'] / 1e6:.1f} MB read + {row['write'] / 1e6:.1f} MB written = "
            f"{row['total'] / 1e6:.1f} MB at {_size(prof['params'])}")
    if minimum:
        line += f", {row['over_minimum']:.2f}x the minimum {minimum / 1e6:.1f} MB"
    return line + f"  [{'REPLAYED' if prof.get('replayed') else 'measured now'}]"


def dram_table(prof: dict | None, family: str | Family) -> Markdown:
    """Every rung's DRAM bytes (read, written, over the minimum) as a Markdown table."""
    fam = _family(family)
    if prof is None:
        return md(profile_status(None, fam.name))
    rows, minimum = _dram_rows(prof, fam)
    tag = "REPLAYED from" if prof.get("replayed") else "measured on"
    head = (f"Nsight Compute, one launch per rung at {_size(prof['params'])}, {tag} "
            f"{describe_provenance(prof.get('provenance', {}))}. Minimum: "
            + (f"{minimum / 1e6:.1f} MB (every input read once, the output written once)." if minimum else
               "unknown for this family."))
    lines = ["| rung | DRAM read MB | DRAM write MB | total MB | total / minimum |", "|---|---:|---:|---:|---:|"]
    for r in rows:
        over = f"{r['over_minimum']:.2f}x" if r["over_minimum"] is not None else "-"
        lines.append(f"| {r['rung']} | {r['read'] / 1e6:.1f} | {r['write'] / 1e6:.1f} | {r['total'] / 1e6:.1f} | "
                     f"{over} |")
    if not rows:
        lines.append("| (no DRAM counters in this profile) | | | | |")
    return md(head + "\n\n" + "\n".join(lines))


def dram_plot(prof: dict | None, family: str | Family) -> None:
    from lab import plots

    fam = _family(family)
    if prof is None:
        print(profile_status(None, fam.name))
        return
    rows, minimum = _dram_rows(prof, fam)
    tag = "REPLAYED from " if prof.get("replayed") else "measured on "
    title = (f"{fam.name}: DRAM bytes per rung at {_size(prof['params'])} (Nsight Compute), dashed: the minimum\n"
             f"{tag}{describe_provenance(prof.get('provenance', {}))}")
    figure(plots.dram_bars(rows, minimum, title), "no DRAM counters in the profile")


# ----------------------------------------------------------------------------------------------
# Compute-bound ladders: the FP32 peak, the instruction mix, predictions checked against records
# ----------------------------------------------------------------------------------------------

def fp32_peak(current: Mode, rs: RecordSet | None = None) -> device.Fp32Peak | None:
    """LIVE: this GPU's FP32 peak (lab.device). REPLAY: the peak of the GPU the records were made on, from
    their provenance (arch, SM count) and lab.device's per-arch clock; None when there are no records."""
    if current.live:
        return device.current_fp32_peak()
    if rs is None:
        return None
    p = rs.provenance
    return device.fp32_peak(p.get("arch", DEFAULT_ARCH), int(p.get("sm_count") or 0))


def peak_status(peak: device.Fp32Peak | None, current: Mode) -> str:
    if peak is None:
        return "FP32 peak: unknown here (REPLAY with no records: no GPU to take it from)."
    where = "this GPU" if current.live else "the GPU the records were made on (from their provenance)"
    return f"{peak}\n  for {where}."


def _width(op: str) -> int:
    """32-bit words moved by one load instruction: LDS.128 -> 4, LDS.64 -> 2, LDS -> 1."""
    suffix = op.split(".")[-1]
    return {"128": 4, "64": 2, "U16": 1, "U8": 1}.get(suffix, 1) if "." in op else 1


def operand_mix(reports: list) -> str:
    """FFMA against the loads that feed them, from each compile report's SASS (static counts: the
    instructions in the binary, which for fully unrolled inner loops is the per-iteration mix)."""
    lines = []
    for r in reports:
        if not r.sass_available:
            lines.append(f"{r.source}: (nvdisasm is not installed: no instruction mix)")
            continue
        mix = r.instructions
        ffma = mix.get("FFMA", 0)
        lds = {k: v for k, v in mix.items() if k.split(".")[0] in ("LDS", "LDSM")}
        ldg = {k: v for k, v in mix.items() if k.split(".")[0] == "LDG"}
        async_copies = sum(v for k, v in mix.items() if k.split(".")[0] == "LDGSTS")
        line = f"{r.source}: FFMA x{ffma}"
        if lds:
            n, words = sum(lds.values()), sum(v * _width(k) for k, v in lds.items())
            line += (f"; shared loads {n} ({words} floats): {ffma / n:.1f} FFMA per LDS instruction, "
                     f"{ffma / words:.1f} per float read from shared memory")
        elif ldg:
            n, words = sum(ldg.values()), sum(v * _width(k) for k, v in ldg.items())
            line += f"; no shared loads: {ffma / n:.2f} FFMA per global load (LDG x{n}, {words} floats)"
        if async_copies:
            line += f"; async global->shared copies (LDGSTS) x{async_copies}"
        lines.append(line)
    return "\n".join(lines)


@dataclass(frozen=True)
class Claim:
    """A numeric range a prediction states: a throughput, a ratio to an earlier rung, or to the ceiling."""

    text: str
    lo: float
    hi: float
    against: str  # "" (an absolute throughput), a rung number ("05"), or "ceiling"


_NUM = r"(\d+(?:\.\d+)?)\s*[-\u2013]\s*(\d+(?:\.\d+)?)"
_CLAIMS = (
    (re.compile(_NUM + r"\s*(?:TFLOP/s|GB/s)"), lambda m: ""),
    (re.compile(_NUM + r"x\s+(?:over\s+)?rung\s+(\d+)"), lambda m: f"{int(m[3]):02d}"),
    (re.compile(_NUM + r"x\s+(?:of\s+)?(?:cuBLAS|the device copy|the ceiling)"), lambda m: "ceiling"),
)


def claims(text: str) -> list[Claim]:
    """The numeric ranges in a prediction ("6-10x rung 01", "~3-5 TFLOP/s", "0.6-0.75x of cuBLAS")."""
    found = []
    for pattern, against in _CLAIMS:
        for m in pattern.finditer(text):
            claim = Claim(m[0], float(m[1]), float(m[2]), against(m))
            if claim not in found:
                found.append(claim)
    return sorted(found, key=lambda c: text.index(c.text))


def _square(params: dict, n: int) -> bool:
    return all(params.get(k) == n for k in ("M", "N", "K")) and not params.get("beta") and not params.get("pad")


def prediction_check(rs: RecordSet | None, family: str | Family, key: str) -> str:
    """Each numeric range of the rung's prediction against the headline records it is about (the sizes
    "N^3" it names, else every headline size): inside, below or above, with the measured figure."""
    fam = _family(family)
    if rs is None:
        return missing(fam.name)
    text = prediction(fam, key)
    found = claims(text)
    if not found:
        return f"{fam.rung(key).key}: the prediction states no numeric range to check; compare it by eye."
    rung = fam.rung(key).key
    mine = rs.where(kind="headline", rung=rung)
    sides = [int(n) for n in dict.fromkeys(re.findall(r"(\d+)\^3", text))]
    if sides:
        mine = [r for n in sides for r in mine if _square(r.params, n)]
    if not mine:
        return f"{rung}: no headline records at the sizes the prediction names ({rs.label()})"
    lines = [f"{rung}: the prediction's ranges against the records ({rs.label()}):"]
    for rec in mine:
        at = f"{rec.params['M']}^3" if sides else _size(rec.params)
        for c in found:
            if c.against == "":
                value, unit = rec.value, f" {rec.metric}"
            elif c.against == "ceiling":
                value, unit = rec.ratio, f"x {rec.ceiling}"
            else:
                other = one_record(rs, kind="headline", rung=fam.rung(c.against).key, params=rec.params, l2=rec.l2)
                if other is None or not other.value:
                    lines.append(f"  at {at}: {c.text}: no record of rung {c.against} to compare with")
                    continue
                value, unit = rec.value / other.value, f"x rung {c.against}"
            shown = format_value(value, rec.metric) if c.against == "" else f"{value:.3f}"
            verdict = ("inside the range" if c.lo <= value <= c.hi else
                       f"BELOW the range ({value / c.lo:.3f} of its low end)" if value < c.lo else
                       f"ABOVE the range ({value / c.hi:.3f} of its high end)")
            lines.append(f"  at {at}: predicted {c.text:28s} measured {shown}{unit} -> {verdict}")
    return "\n".join(lines)
