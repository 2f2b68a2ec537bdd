"""Records as a lesson reads them: measured now (LIVE) or the reference GPU's (REPLAY), picked apart
by rung, size and kind, and printed as summaries, ratios, tables and figures. Every number printed here
is computed from records; none is typed in."""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lab.core import device
from lab.core.errors import LabError
from lab.core.ladder import Family
from lab.lessons.common import Markdown, family_of, md, shown_path
from lab.measure import records
from lab.measure.records import Record, RecordSet, describe_params, format_bytes, format_value, tail_key

if TYPE_CHECKING:
    from lab.lessons.mode import Mode


# ----------------------------------------------------------------------------------------------
# Where the records come from
# ----------------------------------------------------------------------------------------------

def reference_path(family: str) -> str:
    return shown_path(records.reference_dir() / f"{family}.json")


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
    """LIVE: lab.measure.bench.run on the family now, once per plan, records merged (the notebook checks first).

    REPLAY: the reference GPU's records. Every record still carries the ceiling timed beside it on the
    same problem, so merging runs keeps the same-run rule.
    """
    fam = family_of(family)
    if not current.live:
        return reference(fam.name)
    from lab.measure import bench

    runs = [bench.run(fam, plan) for plan in (plans or (bench.BenchPlan(quick=True),))]
    return RecordSet(runs[0].provenance, [r for rs in runs for r in rs.records])


def records_status(rs: RecordSet | None, family: str) -> str:
    if rs is None:
        return missing(family)
    kinds = sorted({r.kind for r in rs.records})
    loud = "REPLAYED, NOT MEASURED HERE: " if rs.replayed else ""
    return f"{loud}{len(rs.records)} {family} records ({', '.join(kinds)}), {rs.label()}."


def headline_table(rs: RecordSet | None, family: str) -> Markdown:
    """lab.studies.report's headline table of a family, as Markdown (or the sentence saying there are no records)."""
    from lab.studies import report

    if rs is None:
        return md(missing(family))
    return md(f"{rs.label()}\n\n{report.headline_markdown(rs, family)}")


# ----------------------------------------------------------------------------------------------
# Picking records
# ----------------------------------------------------------------------------------------------

def ceiling_name(rs: RecordSet) -> str:
    return rs.records[0].ceiling if rs.records else ""


def record_key(rs: RecordSet, family: str | Family, key: str) -> str:
    """A rung key ('02', '02_grid_stride'), 'ceiling', or a baseline's name, as the records spell it."""
    if key == "ceiling":
        return ceiling_name(rs)
    if any(r.rung == key for r in rs.records):
        return key
    return family_of(family).rung(key).key


def select(rs: RecordSet | None, family: str | Family, keys: Iterable[str],
           ceiling: bool = True) -> RecordSet | None:
    """Only these rungs' records (plus the ceiling's), keeping the provenance and the replay flag."""
    if rs is None:
        return None
    wanted = {record_key(rs, family, k) for k in keys} | ({ceiling_name(rs)} if ceiling else set())
    return RecordSet(rs.provenance, [r for r in rs.records if r.rung in wanted], rs.replayed)


def so_far(rs: RecordSet | None, family: str | Family, key: str) -> RecordSet | None:
    """The ceiling, the library baselines and every rung up to and including `key`: the climb so far."""
    if rs is None:
        return None
    fam = family_of(family)
    last = fam.rung(key).number
    rungs = {r.key for r in fam.rungs}
    baselines = [r.rung for r in rs.records if r.rung not in rungs]
    keep = [r.key for r in fam.rungs if r.number <= last] + baselines
    return select(rs, fam, list(dict.fromkeys(keep)))


def headline_sizes(rs: RecordSet | None, **match) -> list[dict]:
    """The params of the headline problems in these records, in the order they were run ([] for None);
    with `match` (layout="TN", dtype="float16"), only the problems whose params have those values."""
    if rs is None:
        return []
    found = {describe_params(r.params): r.params for r in rs.records if r.kind == "headline"
             and all(r.params.get(k) == v for k, v in match.items())}
    return list(found.values())


def best_rung(rs: RecordSet | None, family: str | Family, kind: str = "headline") -> str | None:
    """The rung with the highest median fraction of the ceiling over the records of one kind (None when no
    rung has such records): the rung a summary cell names, whichever rungs the records hold."""
    fam = family_of(family)
    if rs is None:
        return None
    ratios = {}
    for rung in fam.rungs:
        mine = [r.ratio for r in rs.where(kind=kind, rung=rung.key) if math.isfinite(r.ratio)]
        if mine:
            ratios[rung.key] = statistics.median(mine)
    return max(ratios, key=ratios.get) if ratios else None


def kinds_status(rs: RecordSet | None, family: str | Family, kinds: Iterable[str] = ("headline", "sweep", "tail")
                 ) -> str:
    """One line per kind of measurement: how many records of it these records hold, or, loudly, that they
    hold none (so the cells that plot it show nothing) and what would produce them."""
    fam = family_of(family)
    if rs is None:
        return missing(fam.name)
    lines = [f"{fam.name} records by kind ({rs.label()}):"]
    for kind in kinds:
        mine = [r for r in rs.records if r.kind == kind]
        if mine:
            targets = len({r.rung for r in mine})
            lines.append(f"  {kind:9s} {len(mine)} records, {targets} targets, "
                         f"{len({describe_params(r.params) for r in mine})} problems")
        else:
            lines.append(f"  {kind:9s} NOT IN THESE RECORDS: its cells below show nothing. On a GPU, this notebook "
                         f"in LIVE mode measures them, and `lab bench {fam.name} --json {reference_path(fam.name)}` "
                         "records them for replay.")
    return "\n".join(lines)


def launch_paths(rs: RecordSet | None, family: str | Family, kind: str = "tail") -> str:
    """Which path each rung's launcher took (the records' extra["path"], where a family notes it: 16-byte or
    element loads, TMA or repack + TMA) over the problems of one kind, with the sizes on each path."""
    fam = family_of(family)
    if rs is None:
        return missing(fam.name)
    if not any(r.kind == kind for r in rs.records):
        return f"(no {kind} records)"
    recs = [r for r in rs.records if r.kind == kind and r.extra.get("path")]
    if not recs:
        return (f"(these {kind} records do not say which path each launch took: records made before the family "
                "noted it, or a family that does not)")
    key = tail_key(recs) if kind == "tail" else None
    lines = [f"launch paths, {kind} records ({rs.label()}):"]
    for rung in dict.fromkeys(r.rung for r in recs):
        by_path: dict[str, list] = {}
        for r in recs:
            if r.rung == rung:
                by_path.setdefault(r.extra["path"], []).append(r.params[key] if key else describe_params(r.params))
        for path, where in by_path.items():
            shown = ", ".join(map(str, where[:6])) + (", ..." if len(where) > 6 else "")
            lines.append(f"  {rung:24s} {path:22s} at {len(where)} problems ({key + '=' if key else ''}{shown})")
    return "\n".join(lines)


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


# ----------------------------------------------------------------------------------------------
# Summaries and ratios
# ----------------------------------------------------------------------------------------------

def headline_summary(rs: RecordSet | None, family: str | Family, key: str, peak: float | None = None,
                     peak_name: str = "FP32 peak") -> str:
    """This rung's headline records: median, spread, throughput, against the ceiling and the previous rung
    (and against a peak in the records' units, when one is given)."""
    from lab.lessons.sources import rung_pair

    fam = family_of(family)
    if rs is None:
        return missing(fam.name)
    rung = record_key(rs, fam, key)
    pair = rung_pair(fam, key) if rung in {r.key for r in fam.rungs} else ()
    lines = [f"{rung}, headline sizes ({rs.label()}):"]
    for rec in rs.where(kind="headline", rung=rung):
        lines.append(f"  [{describe_params(rec.params)}, {rec.l2} L2] median {rec.median_ms:.4f} ms "
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

    def above(self, threshold: float = 1.0) -> list[dict]:
        """The problems at which the ratio is above `threshold` (1.0: where `rung` beats `against`)."""
        return [p for p, _, r in self.pairs if r > threshold]

    def __str__(self) -> str:
        if not self.pairs:
            return f"{self.rung} / {self.against}, {self.where}: no matching records"
        if len(self.pairs) <= 3:
            at = "; ".join(f"{r:.3f}x at {format_bytes(b)} moved" for _, b, r in self.pairs)
            return f"{self.rung} / {self.against}, {self.where}: {at}"
        lo = min(p[2] for p in self.pairs)
        hi = max(p[2] for p in self.pairs)
        first, last = format_bytes(self.pairs[0][1]), format_bytes(self.pairs[-1][1])
        return (f"{self.rung} / {self.against}, {self.where}: median {self.median:.3f}x over "
                f"{len(self.pairs)} sizes ({lo:.3f}x-{hi:.3f}x, {first} to {last})")


def ratio(rs: RecordSet | None, family: str | Family, key: str, against: str = "ceiling", *,
          kind: str = "headline", l2: str = "cold", regime: str | None = None) -> Ratio | str:
    """key's throughput over `against`'s (a rung, 'ceiling' or a baseline) on the same problems."""
    fam = family_of(family)
    if rs is None:
        return missing(fam.name)
    a, b = record_key(rs, fam, key), record_key(rs, fam, against)
    lo, hi = regime_bounds(rs, regime) if regime else (0, math.inf)
    where = f"{kind}, {l2} L2"
    if regime:
        top = " and up" if math.isinf(hi) else f"-{format_bytes(hi)}"
        where += f", {regime} regime ({format_bytes(lo)}{top} moved)"
    mine = sorted((r for r in rs.where(kind=kind, rung=a, l2=l2) if lo <= r.bytes_moved <= hi),
                  key=lambda r: r.bytes_moved)
    pairs = []
    for rec in mine:
        other = one_record(rs, kind=kind, rung=b, l2=l2, params=rec.params)
        if other is not None and other.value:
            pairs.append((rec.params, rec.bytes_moved, rec.value / other.value))
    return Ratio(a, b, where, pairs)


def ratio_by_size(rs: RecordSet | None, family: str | Family, key: str, against: str = "ceiling", *,
                  kind: str = "sweep", l2: str = "cold") -> str:
    """key over `against`, one line per problem (size by size), with where key is the faster of the two."""
    found = ratio(rs, family, key, against, kind=kind, l2=l2)
    if isinstance(found, str):
        return found
    if not found.pairs:
        return str(found)
    lines = [f"{found.rung} / {found.against}, {found.where}, size by size:"]
    lines += [f"  {describe_params(p):28s} {r:.3f}x" + ("  <- faster" if r > 1 else "") for p, _, r in found.pairs]
    faster = found.above(1.0)
    lines.append(f"  {found.rung} is faster than {found.against} at {len(faster)} of {len(found.pairs)} sizes"
                 + (f": {'; '.join(describe_params(p) for p in faster)}" if faster else ""))
    return "\n".join(lines)


def cold_versus_warm(rs: RecordSet | None, family: str | Family, key: str = "ceiling") -> str:
    """Warm-L2 over cold-L2 throughput of one target, size by size (the sweep records)."""
    fam = family_of(family)
    if rs is None:
        return missing(fam.name)
    target = record_key(rs, fam, key)
    l2 = rs.provenance.get("l2_bytes", 0)
    lines = [f"{target} (L2 = {format_bytes(l2)}; {rs.label()})",
             "  bytes moved | cold GB/s | warm GB/s | warm/cold"]
    for cold in sorted(rs.where(kind="sweep", rung=target, l2="cold"), key=lambda r: r.bytes_moved):
        warm = one_record(rs, kind="sweep", rung=target, l2="warm", params=cold.params)
        if warm is None:
            continue
        mark = "  <- fits in L2" if l2 and cold.bytes_moved <= l2 else ""
        lines.append(f"  {format_bytes(cold.bytes_moved):>9} | {cold.value:9.4g} | {warm.value:9.4g} | "
                     f"{warm.value / cold.value:8.2f}x{mark}")
    if len(lines) == 2:
        lines.append("  (no sweep records with both cold and warm L2)")
    return "\n".join(lines)


def spread_table(rs: RecordSet | None, family: str | Family, key: str = "ceiling", l2: str = "cold") -> str:
    """Median, p10-p90 and the spread relative to the median, size by size: small sizes are noisier."""
    fam = family_of(family)
    if rs is None:
        return missing(fam.name)
    target = record_key(rs, fam, key)
    lines = [f"{target}, {l2} L2: bytes moved | median ms | p10-p90 ms | (p90-p10)/median | reps"]
    for r in sorted(rs.where(kind="sweep", rung=target, l2=l2), key=lambda r: r.bytes_moved):
        rel = (r.p90_ms - r.p10_ms) / r.median_ms if r.median_ms else math.nan
        lines.append(f"  {format_bytes(r.bytes_moved):>9} | {r.median_ms:9.4f} | "
                     f"{r.p10_ms:.4f}-{r.p90_ms:.4f} | {100 * rel:6.1f}% | {r.reps}")
    return "\n".join(lines)


def ceiling_summary(rs: RecordSet | None, family: str | Family, current: Mode) -> str:
    """The family's ceiling at its headline sizes, and against the datasheet peak where it is known."""
    fam = family_of(family)
    if rs is None:
        return missing(fam.name)
    name = ceiling_name(rs)
    peak = device.current().datasheet_bandwidth_gbs if current.live else 0.0
    lines = [f"{name} ({rs.label()}):"]
    for rec in rs.where(kind="headline", rung=name):
        tail = f" = {rec.value / peak:.3f}x the datasheet peak ({peak:.0f} GB/s)" if peak else ""
        lines.append(f"  [{describe_params(rec.params)}, {rec.l2} L2] {rec.value:.0f} {rec.metric}{tail}")
    if not peak:
        lines.append("  (the datasheet peak needs the GPU's memory clock and bus width: LIVE mode only)")
    return "\n".join(lines)


def copy_ceiling(device_name: str | None) -> tuple[float, str] | None:
    """The device copy's bandwidth (GB/s) at the largest headline size of the reference copy records, and
    where it comes from, if those records were made on `device_name`; None otherwise. A DRAM bandwidth
    measured in a run, to hold another family's DRAM traffic against."""
    rs = reference("copy")
    if rs is None or not device_name or rs.provenance.get("device") != device_name or not rs.records:
        return None
    heads = rs.where(kind="headline", rung=ceiling_name(rs))
    if not heads:
        return None
    best = max(heads, key=lambda r: r.bytes_moved)
    return best.value, f"{best.rung} at {describe_params(best.params)}, {rs.label()}"


def size_change(rs: RecordSet | None, family: str | Family, key: str, base: dict, others: Iterable[dict]) -> str:
    """key's headline throughput at other sizes against `base`, beside the ceiling's change over the same
    sizes: how much a size one off a tile multiple costs a rung, and how much it costs the library."""
    fam = family_of(family)
    if rs is None:
        return missing(fam.name)
    rung, ceiling = record_key(rs, fam, key), ceiling_name(rs)
    lines = [f"{rung} against its own {describe_params(base)} figure, beside {ceiling}'s ({rs.label()}):"]
    for target in (rung, ceiling):
        at_base = one_record(rs, kind="headline", rung=target, params=base)
        for params in others:
            rec = one_record(rs, kind="headline", rung=target, params=params)
            if at_base is None or rec is None:
                lines.append(f"  {target:16s} at {describe_params(params)}: no headline record to compare")
                continue
            lines.append(f"  {target:16s} at {describe_params(params):24s} "
                         f"{format_value(rec.value, rec.metric)} {rec.metric} = "
                         f"{rec.value / at_base.value:.3f}x its {describe_params(base)} figure")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# Tails
# ----------------------------------------------------------------------------------------------

def _tail_records(rs: RecordSet | None, family: str | Family) -> list[Record] | str:
    """The tail records of a set, or the line to print instead when there are none."""
    if rs is None:
        return missing(family_of(family).name)
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


def tail_steps(rs: RecordSet | None, family: str | Family) -> str:
    """The sizes the tail records step through and by how much: what the tail plot's x axis holds."""
    recs = _tail_records(rs, family)
    if isinstance(recs, str):
        return recs
    key = tail_key(recs)
    sizes = sorted({r.params[key] for r in recs})
    steps = sorted({b - a for a, b in zip(sizes, sizes[1:], strict=False)})
    step = f"stepping by {steps[0]}" if len(steps) == 1 else f"steps of {', '.join(map(str, steps))}"
    return f"tail records: {key} = {sizes[0]}..{sizes[-1]}, {len(sizes)} sizes, {step} ({rs.label()})"


# ----------------------------------------------------------------------------------------------
# Figures
# ----------------------------------------------------------------------------------------------

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
    """lab.lessons.plots.<fn>(rs, family, ...) shown inline, or a sentence when there are no records for it."""
    if rs is None:
        print(missing(family))
        return
    figure(fn(rs, family, **kwargs), f"no {fn.__name__} records for {family} in this set")
