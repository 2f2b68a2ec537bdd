"""Nsight Compute counters in a lesson: measured now where ncu works, else the reference GPU's profile
(results/h200/<family>_profile.json), as one-line summaries, tables and figures."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lab.core.ladder import Family
from lab.lessons.common import Markdown, describe_provenance, family_of, md, shown_path
from lab.lessons.views import figure, one_record
from lab.measure import records
from lab.measure.records import RecordSet, describe_params
from lab.studies import profile

if TYPE_CHECKING:
    from lab.lessons.mode import Mode


def _profile_file(family: str) -> str:
    return shown_path(records.reference_dir() / f"{family}_profile.json")


def _tag(prof: dict) -> str:
    return "REPLAYED" if prof.get("replayed") else "measured in this run"


def profile_records(family: str | Family, current: Mode) -> dict | None:
    """LIVE: measure with ncu where it works here; otherwise (and in REPLAY) the reference GPU's file."""
    fam = family_of(family)
    if current.live:
        measured = profile.ladder_counters(fam.name, on_error=lambda key, exc: print(f"ncu on {key}: {exc}"))
        if measured is not None:
            return measured
        print("Nsight Compute could not read counters here; falling back to the reference GPU's profile.")
    return profile.reference_profile(fam.name)


def profile_status(prof: dict | None, family: str) -> str:
    if prof is None:
        return (f"NO PROFILE for {family}: no counters were read here and {_profile_file(family)} is absent, "
                "so the Nsight Compute cells show nothing. On a GPU with Nsight Compute, "
                f"`lab profile {family} --json {_profile_file(family)}` (or `lab tour`) writes it.")
    loud = "REPLAYED, NOT MEASURED HERE: " if prof.get("replayed") else "measured in this run: "
    line = (f"{loud}Nsight Compute counters at {describe_params(prof.get('params') or {})} for {len(prof['rows'])} "
            f"rungs, {describe_provenance(prof.get('provenance', {}))}.")
    skipped = prof.get("skipped") or []
    if skipped:  # rungs the profiling GPU could not run (lab.studies.profile lists them with the reason)
        line += " Not profiled: " + "; ".join(f"{s['rung']} ({s['reason']})" for s in skipped) + "."
    return line


# The wavefronts each bank-conflict counter is a share of (each conflict costs one extra wavefront).
WAVEFRONTS = {"smem_bank_conflicts_ld": "smem_wavefronts_ld", "smem_bank_conflicts_ldsm": "smem_wavefronts_ldsm"}


def profile_value(prof: dict | None, family: str | Family, key: str,
                  metric: str = "smem_bank_conflicts_ld") -> str:
    fam = family_of(family)
    if prof is None:
        return f"(no profile: {metric} unknown)"
    rung = fam.rung(key).key
    row = next((r for r in prof["rows"] if r.get("rung") == rung), None)
    if row is None or metric not in row:
        return f"{rung}: no {metric} in the profile"
    line = f"{rung}: {metric} = {row[metric]:.0f}"
    wavefronts = row.get(WAVEFRONTS.get(metric, ""))
    if wavefronts:
        what = "ldmatrix" if metric.endswith("ldsm") else "shared-load"
        line += f" ({row[metric] / wavefronts:.1%} of {wavefronts:.0f} {what} wavefronts)"
    return line + f"  [{_tag(prof)}]"


def conflict_metrics(prof: dict | None) -> list[str]:
    """The bank-conflict counters a profile holds: plain shared loads (LDS) always, ldmatrix (LDSM) where the
    profile read them."""
    found = ["smem_bank_conflicts_ld"]
    if prof is not None and any("smem_bank_conflicts_ldsm" in r for r in prof["rows"]):
        found.append("smem_bank_conflicts_ldsm")
    return found


def profile_plot(prof: dict | None, family: str, metric: str = "smem_bank_conflicts_ld") -> None:
    from lab.lessons import plots

    if prof is None:
        print(profile_status(None, family))
        return
    if plots.all_zero(prof["rows"], metric):  # bars of height zero would say nothing: say it in a sentence
        print(f"{metric}: 0 on every rung profiled ({', '.join(r['rung'] for r in prof['rows'])}); "
              f"{_tag(prof)}: {describe_provenance(prof.get('provenance', {}))}.")
        return
    source = f"{_tag(prof)}: {describe_provenance(prof.get('provenance', {}))}"
    figure(plots.profile_bars(prof["rows"], metric, family, prof.get("params"), source), f"no {metric} rows")


# ----------------------------------------------------------------------------------------------
# DRAM traffic against the fewest bytes a problem can move
# ----------------------------------------------------------------------------------------------

def _dram_rows(prof: dict, fam: Family) -> tuple[list[dict], int | None]:
    minimum = fam.min_dram_bytes(prof["params"])
    return profile.dram_rows(prof, minimum), minimum


def _dram_row(prof: dict, fam: Family, key: str) -> dict | None:
    rows, _ = _dram_rows(prof, fam)
    return next((r for r in rows if r["rung"] == fam.rung(key).key), None)


def dram_summary(prof: dict | None, family: str | Family, key: str) -> str:
    """One rung's DRAM traffic (Nsight Compute) against the fewest bytes the problem can move."""
    fam = family_of(family)
    if prof is None:
        return "(no profile: DRAM bytes unknown)"
    row = _dram_row(prof, fam, key)
    if row is None:
        return f"{fam.rung(key).key}: no DRAM counters in the profile"
    minimum = fam.min_dram_bytes(prof["params"])
    line = (f"{row['rung']}: DRAM {row['read'] / 1e6:.1f} MB read + {row['write'] / 1e6:.1f} MB written = "
            f"{row['total'] / 1e6:.1f} MB at {describe_params(prof['params'])}")
    if minimum:
        line += f", {row['over_minimum']:.2f}x the minimum {minimum / 1e6:.1f} MB"
    return line + f"  [{_tag(prof)}]"


def dram_change(prof: dict | None, family: str | Family, before: str, after: str) -> str:
    """How DRAM bytes and the L2 hit rate moved from one rung to another: the change, in numbers, that a
    lesson's prose explains (a step that moves more bytes than the one before must be said out loud)."""
    fam = family_of(family)
    if prof is None:
        return "(no profile: DRAM bytes unknown)"
    a, b = _dram_row(prof, fam, before), _dram_row(prof, fam, after)
    if a is None or b is None:
        return f"{fam.rung(before).key} -> {fam.rung(after).key}: no DRAM counters for both in the profile"
    hits = {r["rung"]: r.get("l2_hit_rate_pct") for r in prof["rows"]}
    way = "MORE" if b["total"] > a["total"] else "less"
    line = (f"{a['rung']} -> {b['rung']}: DRAM {a['total'] / 1e6:.0f} -> {b['total'] / 1e6:.0f} MB, "
            f"{b['total'] / a['total']:.2f}x ({way} traffic)")
    if a["over_minimum"] is not None:
        line += f"; {a['over_minimum']:.1f}x -> {b['over_minimum']:.1f}x the minimum"
    if hits.get(a["rung"]) is not None and hits.get(b["rung"]) is not None:
        line += f"; L2 hit rate {hits[a['rung']]:.1f}% -> {hits[b['rung']]:.1f}%"
    return line + f"  [{_tag(prof)}]"


def dram_rate(prof: dict | None, rs: RecordSet | None, family: str | Family, key: str,
              bandwidth_gbs: float | None = None, bandwidth_name: str = "") -> str:
    """A rung's DRAM bytes (profile) over its median time at the same problem (records): the DRAM
    bandwidth it used, and that as a fraction of a bandwidth when one is given. Whether extra DRAM traffic
    can cost time at all: a compute-bound kernel using a few % of the bandwidth cannot be slowed by it."""
    fam = family_of(family)
    if prof is None or rs is None:
        return "(needs both the profile and the records)"
    row = _dram_row(prof, fam, key)
    rec = one_record(rs, kind="headline", rung=fam.rung(key).key, params=prof["params"])
    if rec is None:
        rec = next((r for r in rs.where(rung=fam.rung(key).key)
                    if all(r.params.get(k) == v for k, v in prof["params"].items())), None)
    if row is None or rec is None:
        return f"{fam.rung(key).key}: no DRAM counters or no record at {describe_params(prof['params'])}"
    gbs = row["total"] / (rec.median_ms * 1e-3) / 1e9
    line = (f"{row['rung']}: {row['total'] / 1e6:.0f} MB of DRAM traffic in {rec.median_ms:.3f} ms "
            f"(median, {rec.kind}, {rec.l2} L2) = {gbs:.0f} GB/s")
    if bandwidth_gbs:
        line += f", {gbs / bandwidth_gbs:.1%} of {bandwidth_name or 'the bandwidth'} ({bandwidth_gbs:.0f} GB/s)"
    return line


def dram_table(prof: dict | None, family: str | Family) -> Markdown:
    """Every rung's DRAM bytes (read, written, over the minimum) as a Markdown table."""
    fam = family_of(family)
    if prof is None:
        return md(profile_status(None, fam.name))
    rows, minimum = _dram_rows(prof, fam)
    tag = "REPLAYED from" if prof.get("replayed") else "measured on"
    head = (f"Nsight Compute, one launch per rung at {describe_params(prof['params'])}, {tag} "
            f"{describe_provenance(prof.get('provenance', {}))}. Minimum: "
            + (f"{minimum / 1e6:.1f} MB (every input read once, the output written once)." if minimum else
               "unknown for this family."))
    hits = {r["rung"]: r.get("l2_hit_rate_pct") for r in prof["rows"]}
    lines = ["| rung | DRAM read MB | DRAM write MB | total MB | total / minimum | L2 hit % |",
             "|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        over = f"{r['over_minimum']:.2f}x" if r["over_minimum"] is not None else "-"
        hit = f"{hits[r['rung']]:.1f}" if hits.get(r["rung"]) is not None else "-"
        lines.append(f"| {r['rung']} | {r['read'] / 1e6:.1f} | {r['write'] / 1e6:.1f} | {r['total'] / 1e6:.1f} | "
                     f"{over} | {hit} |")
    if not rows:
        lines.append("| (no DRAM counters in this profile) | | | | | |")
    return md(head + "\n\n" + "\n".join(lines))


def dram_plot(prof: dict | None, family: str | Family) -> None:
    from lab.lessons import plots

    fam = family_of(family)
    if prof is None:
        print(profile_status(None, fam.name))
        return
    rows, minimum = _dram_rows(prof, fam)
    source = f"{_tag(prof)}: {describe_provenance(prof.get('provenance', {}))}"
    figure(plots.dram_bars(rows, minimum, fam.name, prof["params"], source), "no DRAM counters in the profile")
