"""Results notes generated from records: what a rung header used to carry as typed-in measurements and
tuning logs, now computed from the files under results/h200/ by this module and written next to them.

    python -m lab.lessons.notes            # writes results/h200/gemm_fp32_notes.md and gemm_tc_notes.md

tests/test_notes.py checks that each committed note is what this module writes from the committed
records, so a note can never drift from its data.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from lab.core.errors import LabError
from lab.families import get_family
from lab.lessons import knob_tuning
from lab.measure import records
from lab.measure.records import describe_params, format_value
from lab.studies import profile

GEMM_NOTE = "gemm_fp32_notes.md"
TC_NOTE = "gemm_tc_notes.md"
TC_LATER_HEADLINE = "gemm_tc_headline.json"  # a later headline-only run of the ladder, rung 07 and torch.mm in it
TC_REPEAT = "gemm_tc_repeat_8192.json"
TC_REPACK = "gemm_tc_repack.json"
# Rung 07's stream-K studies (lab/studies/scheduling.py), in the order they were run.
STREAM_K_RECORDS = (("schedule_stream_k_first_run", "the first run: no model, every partial wave split, pieces in "
                     "range order"),
                    ("schedule_stream_k", "the model and the piece order of the rung, the while k-loop"),
                    ("schedule_stream_k_serialized_9a90ba8", "a do-while k-loop with the fix-up added at the store "
                     "(ptxas warning C7520)"),
                    ("schedule_stream_k_do_while", "the do-while k-loop (now the default) beside the while loop"))
_SIZE = ("M", "N", "K")
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


def _headline_table(fam, rs: records.RecordSet, group: list, ceiling: str, others: bool) -> list[str]:
    """One Markdown table of headline records: a row per rung (the ceiling first; with `others`, also the record's
    rungs the family does not list), a column per problem size."""
    sizes = list({describe_params(r.params): r.params for r in group}.values())
    shown = [describe_params({k: v for k, v in p.items() if k not in _kind_keys(p)}) for p in sizes]
    names = [fam.ceiling_name] + [r.key for r in fam.rungs]
    if others:
        names += [r.rung for r in group if r.rung not in names]
    lines = ["| rung | " + " | ".join(f"{s}: {rs.records[0].metric}, x {ceiling}" for s in shown) + " |",
             "|---|" + "---:|" * len(sizes)]
    for name in dict.fromkeys(names):
        cells = []
        for p in sizes:
            rec = next(iter(rs.where(kind="headline", rung=name, params=p)), None)
            cells.append("-" if rec is None else f"{format_value(rec.value, rec.metric)}, {rec.ratio:.3f}x")
        if all(c == "-" for c in cells):
            continue  # a rung this record did not time (the section says which)
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def _kind_keys(params: dict) -> list[str]:
    """The parameters that set a problem's kind rather than its size (layout, dtype), in the record's order: what
    groups the tables."""
    return [k for k in params if k not in _SIZE and describe_params({k: params[k]})]


def _headline_tables(fam, rs: records.RecordSet, ceiling: str = "cuBLAS", others: bool = False) -> list[str]:
    """The headline records as tables, one per kind of problem (a gemm_tc layout and type; gemm_fp32 has one)."""
    heads = rs.where(kind="headline")
    groups: dict[str, list] = {}
    for r in heads:
        groups.setdefault(describe_params({k: r.params[k] for k in _kind_keys(r.params)}), []).append(r)
    lines = []
    for label, group in groups.items():
        if label:
            lines += [f"### {label}", ""]
        lines += _headline_table(fam, rs, group, ceiling, others) + [""]
    return lines


def _from(path_name: str, rs: records.RecordSet) -> str:
    commit = str(rs.provenance.get("commit", "?"))[:12]
    return f"`{_rel(records.reference_dir() / path_name)}` ({rs.label()}, commit {commit})"


def _ladder_section(fam, rs: records.RecordSet, prof: dict | None) -> list[str]:
    from lab.lessons import dram_change, prediction_check

    lines = ["## The ladder at the headline sizes", "", f"From {_from(f'{fam.name}.json', rs)}; cold L2, median of "
             "each setting, cuBLAS timed on the same problem in the same run.", "", *_headline_tables(fam, rs)]
    untimed = [r.key for r in fam.rungs if not rs.where(kind="headline", rung=r.key)]
    if untimed:
        lines += [f"No headline records in this file for {', '.join(untimed)}.", ""]
    lines += ["## Each prediction against these records", "", "```"]
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


def _payload(name: str) -> dict | None:
    try:
        payload = json.loads((records.reference_dir() / name).read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return payload if isinstance(payload, dict) else None


def _stamp(payload: dict) -> str:
    p = payload.get("provenance", {})
    return f"{p.get('device', '?')}, {str(p.get('date', '?'))[:10]}, commit {str(p.get('commit', '?'))[:12]}"


def _later_headline_section(fam) -> list[str]:
    try:
        rs = records.load(records.reference_dir() / TC_LATER_HEADLINE)
    except LabError:
        return []
    return ["## A later headline run, rung 07 and torch.mm in it", "",
            f"From {_from(TC_LATER_HEADLINE, rs)} (`lab bench gemm_tc --kinds headline`); cold L2, median. Each "
            "ratio is to the faster library call on that problem, cuBLAS or torch.mm, as each record's ceiling "
            "names it: the faster of the two reads 1.000x.", "",
            *_headline_tables(fam, rs, ceiling="the faster library", others=True)]


def _repeat_section() -> list[str]:
    payload = _payload(TC_REPEAT)
    if payload is None or not isinstance(payload.get("runs"), list):
        return []
    lines = ["## 8192^3 repeated in one process", "", f"From `{_rel(records.reference_dir() / TC_REPEAT)}` "
             f"({_stamp(payload)}): each repeat times cuBLAS and rungs 05 and 06 at 8192^3 in turn, then reads "
             "nvidia-smi's SM clock, power and temperature (\"after\").", "",
             "| repeat | after | rung | dtype | layout | TFLOP/s | x cuBLAS |", "|---:|---|---|---|---|---:|---:|"]
    for run in payload["runs"]:
        for row in run["rows"]:
            lines.append(f"| {run['repeat']} | {run.get('after', '-')} | {row['rung']} | {row['dtype']} | "
                         f"{row['layout']} | {row['tflops']:.1f} | {row['ratio']:.3f} |")
    return lines + [""]


def _probe_section() -> list[str]:
    from lab.lessons import knob_records

    probes = sorted(p.name for p in records.reference_dir().glob("gemm_tc_knobs*.json"))
    if not probes:
        return []
    lines = ["## Knob probes (scripts/gemm_tc_knobs.py)", "", "Each setting checked, then timed beside cuBLAS in "
             "the same run.", "", "```"]
    for name in probes:
        lines += [f"{_rel(records.reference_dir() / name)}:", knob_records.probe_table(name), ""]
    return lines[:-1] + ["```", ""]


def _epilogue_section() -> list[str]:
    from lab.lessons import fusion

    name = "gemm_tc_epilogue"
    rs = fusion.replayed(name)
    if rs is None:
        return []
    lines = ["## Rung 06's fused epilogue (lab/families/gemm_epilogue.py)", "",
             f"From {_from(f'{name}.json', rs)}: rung 06 with the epilogue chain against itself without it "
             "(plain) and against cuBLAS followed by CuPy's ops, in the same run; cold L2, medians.", "",
             fusion.epilogue_table(rs, name).text, "", "The header's fused-epilogue prediction against it:", "",
             "```", fusion.fused_prediction_check(rs, name), "```", ""]
    try:
        first = records.load(records.reference_dir() / f"{name}_first_run.json")
    except LabError:
        return lines
    return lines + [f"The first run, before the epilogue's loads were issued ahead of its math: "
                    f"{_from(f'{name}_first_run.json', first)}.", "", fusion.epilogue_table(first, name).text, ""]


def _stream_k_section() -> list[str]:
    from lab.lessons import scheduling

    tile = scheduling.tile_knobs()
    lines = ["## Rung 07: stream-K against rung 06 (lab/studies/scheduling.py stream_k_study)", "",
             "Each study times rungs 05, 06 and 07 and cuBLAS on the same shapes in the same run, round after round; "
             "'predicted' is the rung header's model with no fix-up cost. Below each table, rung 06 against rung 05 "
             "on the squares of the same study.", ""]
    for name, what in STREAM_K_RECORDS:
        payload = scheduling.load(name)
        if payload is None:
            continue
        lines += [f"### {name}: {what} ({payload.get('l2', '?')} L2)", "", "```",
                  scheduling.stream_k_ratios(payload, tile, name), scheduling.persistent_rounds(payload, name), "```",
                  ""]
    return lines


def _repack_section() -> list[str]:
    payload = _payload(TC_REPACK)
    if payload is None or not isinstance(payload.get("rows"), list):
        return []
    lines = ["## The repack kernel (kernels/common/repack_rows.cu, scripts/gemm_tc_repack.py)", "",
             f"From `{_rel(records.reference_dir() / TC_REPACK)}` ({_stamp(payload)}): copying a side x side fp16 "
             "matrix into rows a multiple of 8 elements apart, cold L2, the three methods in the same run.", "",
             "| side | method | median us | GB/s |", "|---:|---|---:|---:|"]
    lines += [f"| {r['side']} | {r['method']} | {r['median_ms'] * 1e3:.1f} | {r['gb_per_s']:.0f} |"
              for r in payload["rows"]]
    return lines + [""]


def gemm_tc_notes() -> str:
    """The note for the tensor-core GEMM ladder (gemm_tc rungs 01-07), from the reference records, profile, knob
    probes, repeats, the fused-epilogue and stream-K studies, and the repack kernel's timing under
    records.reference_dir()."""
    fam = get_family("gemm_tc")
    rs = records.reference_records(fam.name)
    prof = profile.reference_profile(fam.name)
    lines = ["# gemm_tc: results notes (generated by `python -m lab.lessons.notes`; do not edit by hand)", "",
             "The measurements behind the tensor-core rung headers' predictions, computed from the records in this "
             "folder. The headers keep what changed, why, the prediction, the requirements and the knobs; the "
             "figures live here and in the records.", ""]
    lines += _ladder_section(fam, rs, prof)
    lines += _later_headline_section(fam)
    lines += _probe_section()
    lines += _repeat_section()
    lines += _epilogue_section()
    lines += _stream_k_section()
    lines += _repack_section()
    return "\n".join(lines).rstrip() + "\n"


def note_path() -> Path:
    return records.reference_dir() / GEMM_NOTE


def tc_note_path() -> Path:
    return records.reference_dir() / TC_NOTE


def notes() -> dict[Path, str]:
    """Every note this module writes: its path and its text."""
    return {note_path(): gemm_fp32_notes(), tc_note_path(): gemm_tc_notes()}


if __name__ == "__main__":
    for path, text in notes().items():
        changed = not path.is_file() or path.read_text() != text
        path.write_text(text)
        print(f"{path}: {'written' if changed else 'already current'}")
