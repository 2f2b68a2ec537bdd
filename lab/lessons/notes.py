"""Results notes generated from records: what a rung header used to carry as typed-in measurements and
tuning logs, now computed from the files under results/h200/ by this module and written next to them.

    python -m lab.lessons.notes            # writes results/h200/gemm_fp32_notes.md from the records there

tests/test_notes.py checks that the committed note is what this module writes from the committed
records, so a note can never drift from its data.
"""

from __future__ import annotations

import re
from pathlib import Path

from lab.families import get_family
from lab.lessons import knob_tuning
from lab.measure import records
from lab.measure.records import describe_params, format_value
from lab.studies import profile

GEMM_NOTE = "gemm_fp32_notes.md"
NCU_FILES = ("gemm_ncu_detailed.txt", "gemm_ncu_stalls.txt")
_NCU_KERNEL = re.compile(r"^  (\S+) \((\d+), (\d+), (\d+)\)x\((\d+), 1, 1\)", re.MULTILINE)
_NCU_METRIC = re.compile(r"^    (.+?)\s{2,}(\S+(?:/\S+)?)\s+([\d,.]+)\s*$", re.MULTILINE)
NCU_SHOWN = ("Duration", "Executed Ipc Active", "Executed Instructions", "Registers Per Thread",
             "Achieved Occupancy")
STALL = re.compile(r"smsp__average_warps_issue_stalled_(\w+)_per_issue_active\.ratio")


def _rel(path: Path) -> str:
    from lab.lessons.common import shown_path

    return shown_path(path)


def ncu_sections(text: str) -> list[dict]:
    """Per kernel profiled in an Nsight Compute text report: its name, grid, block and metrics (name -> number)."""
    starts = list(_NCU_KERNEL.finditer(text))
    out = []
    for i, m in enumerate(starts):
        body = text[m.end(): starts[i + 1].start() if i + 1 < len(starts) else len(text)]
        metrics = {}
        for name, unit, value in _NCU_METRIC.findall(body):
            metrics.setdefault(name.strip(), (float(value.replace(",", "")), unit))
        out.append({"kernel": m[1], "grid": f"{m[2]}x{m[3]}", "block": int(m[5]), "metrics": metrics})
    return out


def _ncu_markdown(path: Path) -> list[str]:
    text = path.read_text()
    first = text.splitlines()[0].lstrip("# ") if text.startswith("#") else "(no header line)"
    lines = [f"### {_rel(path)}", "", f"{first}", ""]
    sections = ncu_sections(text)
    shown = [m for m in NCU_SHOWN if any(m in s["metrics"] for s in sections)]
    stalls = sorted({STALL.fullmatch(k)[1] for s in sections for k in s["metrics"] if STALL.fullmatch(k)})
    top = [k for k in stalls if any(s["metrics"].get(f"smsp__average_warps_issue_stalled_{k}_per_issue_active.ratio",
                                                      (0, ""))[0] >= 0.05 for s in sections)]
    cols = shown + [f"stall {k} per issue" for k in top]
    lines += ["| kernel | grid | block | " + " | ".join(cols) + " |", "|---|---|---:|" + "---:|" * len(cols)]
    for s in sections:
        cells = []
        for m in shown:
            value, unit = s["metrics"].get(m, (None, ""))
            cells.append("-" if value is None else f"{value:,.6g} {unit}")
        for k in top:
            value, _ = s["metrics"].get(f"smsp__average_warps_issue_stalled_{k}_per_issue_active.ratio", (None, ""))
            cells.append("-" if value is None else f"{value:.2f}")
        name = s["kernel"] if len(s["kernel"]) < 40 else s["kernel"][:37] + "..."
        lines.append(f"| {name} | {s['grid']} | {s['block']} | " + " | ".join(cells) + " |")
    return lines


def _ladder_section(fam, rs: records.RecordSet, prof: dict | None) -> list[str]:
    from lab.lessons import dram_change, prediction_check

    sizes = list({describe_params(r.params): r.params for r in rs.where(kind="headline")}.values())
    head = ["| rung | " + " | ".join(f"{describe_params(p)}: {rs.records[0].metric}, x cuBLAS" for p in sizes)
            + " |", "|---|" + "---:|" * len(sizes)]
    for name in [fam.ceiling_name] + [r.key for r in fam.rungs]:
        cells = []
        for p in sizes:
            rec = next(iter(rs.where(kind="headline", rung=name, params=p)), None)
            cells.append("-" if rec is None else f"{format_value(rec.value, rec.metric)}, {rec.ratio:.3f}x")
        head.append(f"| {name} | " + " | ".join(cells) + " |")
    lines = ["## The ladder at the headline sizes", "", f"From `{_rel(records.reference_dir() / 'gemm_fp32.json')}` "
             f"({rs.label()}, commit {str(rs.provenance.get('commit', '?'))[:12]}); cold L2, median of each "
             "setting, cuBLAS timed on the same problem in the same run.", "", *head, "",
             "## Each prediction against these records", "", "```"]
    lines += [prediction_check(rs, fam, r.key) for r in fam.rungs]
    lines += ["```", ""]
    if prof is not None:
        lines += ["## DRAM traffic from rung to rung (Nsight Compute, one launch each)", "", "```"]
        lines += [dram_change(prof, fam, a.key, b.key) for a, b in zip(fam.rungs, fam.rungs[1:], strict=False)]
        lines += ["```", ""]
    return lines


def _tuning_section(fam, payload: dict) -> list[str]:
    rung = fam.rungs[-1]
    defaults = dict(rung.spec.knobs)
    lines = ["## Tuning rounds of rung 08", "", f"From `{_rel(knob_tuning.tuning_path())}` (scripts/gemm_sweep.py, one "
             "round per run; cuBLAS timed at the start and the end of each round, ratios against the start).", "",
             str(payload.get("about", "")), "",
             "| round | commit | settings measured | cuBLAS 4096^3 start / end TFLOP/s | best setting at 4096^3 | "
             "its x cuBLAS at " + ", ".join(f"{n}^3" for n in payload["rounds"][0]["sizes"]) + " |",
             "|---|---|---:|---|---|---|"]
    best = {s.round: s for s in knob_tuning.best_per_round(payload, rung.key, "4096")}
    for rnd in payload["rounds"]:
        n = rnd["round"]
        mine = [s for s in knob_tuning.settings(payload) if s.round == n and s.rung == rung.key]
        cub = " / ".join(f"{c['4096']:.1f}" for c in rnd["cublas"])
        b = best.get(n)
        shape = " ".join(f"{k}={v}" for k, v in b.knobs.items() if k != "THREADS") if b else "-"
        at = ", ".join(f"{r:.3f}" for r in b.ratio.values()) if b else "-"
        lines.append(f"| {n} | {rnd['provenance'].get('commit', '?')[:7]} | {len(mine)} | {cub} | {shape} | {at} |")
    lines += ["", "What single knobs did, everything else held still (groups from the same round):", "", "```"]
    for knob in ("STAGES", "FRAG_DB", "ORDER", "MINB", "BK"):
        lines += [knob_tuning.knob_effect(payload, rung.key, knob, defaults), ""]
    lines += ["```", ""]
    return lines


def gemm_fp32_notes() -> str:
    """The note for the FP32 GEMM ladder, from the reference records, profile, tuning rounds and the
    Nsight Compute reports under records.reference_dir()."""
    fam = get_family("gemm_fp32")
    rs = records.reference_records(fam.name)
    prof = profile.reference_profile(fam.name)
    payload = knob_tuning.load()
    lines = ["# gemm_fp32: results notes (generated by `python -m lab.lessons.notes`; do not edit by hand)", "",
             "The measurements behind the rung headers' predictions, computed from the records in this folder. "
             "The headers keep what changed, why, the prediction, the requirements and the knobs; the figures "
             "live here and in the records.", ""]
    lines += _ladder_section(fam, rs, prof)
    if payload is not None:
        lines += _tuning_section(fam, payload)
    ncu = [records.reference_dir() / name for name in NCU_FILES if (records.reference_dir() / name).is_file()]
    if ncu:
        lines += ["## Nsight Compute reports of rung 08 against cuBLAS's FFMA kernel (4096^3)", "",
                  "Read from the text reports (each names the command and commit that made it): instructions, "
                  "issue rate and the stall reasons per issued instruction at least 0.05 for some kernel.", ""]
        for path in ncu:
            lines += _ncu_markdown(path) + [""]
    return "\n".join(lines).rstrip() + "\n"


def note_path() -> Path:
    return records.reference_dir() / GEMM_NOTE


if __name__ == "__main__":
    path = note_path()
    text = gemm_fp32_notes()
    changed = not path.is_file() or path.read_text() != text
    path.write_text(text)
    print(f"{path}: {'written' if changed else 'already current'}")
