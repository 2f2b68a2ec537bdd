"""Notebook 06's optimization checklist (the record of `lab study checklist`, lab.studies.checklist): its table, the
DRAM bytes of each level against the minimum, the study's verdicts, and its figure."""

from __future__ import annotations

from collections.abc import Callable

from lab.lessons.common import Markdown, md
from lab.lessons.fusion.records import CHECKLIST, checklist_status, missing
from lab.measure.records import format_bytes

# ----------------------------------------------------------------------------------------------
# Notebook 06: the optimization checklist (lab.studies.checklist's record)
# ----------------------------------------------------------------------------------------------

_CHECKLIST_COLUMNS = (("size", "size"), ("level", "level"), ("status", "status"), ("median_ms", "median ms"),
                      ("p10_p90_ms", "p10-p90 ms"), ("x_gemm", "x GEMM"), ("kernels", "kernels"),
                      ("dram", "DRAM bytes"), ("lines", "lines of code"))


def checklist_table(record: dict | None) -> Markdown:
    """lab.studies.checklist.summary_rows as a Markdown table: time, its spread, multiple of the plain GEMM, kernels per
    call, DRAM bytes against the minimum and the lines of code of each level."""
    from lab.studies import checklist

    if record is None:
        return md(missing(CHECKLIST))
    head = "| " + " | ".join(t for _, t in _CHECKLIST_COLUMNS) + " |"
    lines = [checklist_status(record), "", head, "|" + "---|" * len(_CHECKLIST_COLUMNS)]
    for row in checklist.summary_rows(record):
        lines.append("| " + " | ".join(str(row[k]).replace("|", "/") for k, _ in _CHECKLIST_COLUMNS) + " |")
    return md("\n".join(lines))


def checklist_bytes(record: dict | None) -> str:
    """Per size: the minimum DRAM bytes of the operation, then each level's bytes as a multiple of it, and the
    unfused (library) path's bytes over the fused levels'."""
    from lab.studies import checklist

    if record is None:
        return missing(CHECKLIST)
    lines = [checklist_status(record)]
    for size in record["sizes"]:
        minimum = size["min_dram_bytes"]
        lines.append(f"{size['M']}x{size['N']}x{size['K']}: minimum {format_bytes(minimum)} "
                     "(A, W and the bias read once, Y written once)")
        entries = [("gemm (no epilogue)", size["gemm"])] + list(size["levels"].items())
        moved = {}
        for label, entry in entries:
            b = checklist.dram_bytes(entry) if entry.get("status", "ok") == "ok" else None
            if b is None:
                why = (entry.get("dram") or {}).get("error") or entry.get("reason") or "not measured"
                lines.append(f"  {label:20s} -: {why}")
                continue
            moved[label] = b
            lines.append(f"  {label:20s} {format_bytes(b):>10s} = {b / minimum:.2f}x the minimum")
        unfused = moved.get("library")
        for fused in ("triton", "lab_fused"):
            if unfused and moved.get(fused):
                lines.append(f"  library / {fused}: {unfused / moved[fused]:.2f}x the DRAM bytes")
    return "\n".join(lines)


def checklist_verdicts(record: dict | None) -> str:
    """lab.studies.checklist.verdicts: sentences derived from the record's numbers, one per finding and size."""
    from lab.studies import checklist

    if record is None:
        return missing(CHECKLIST)
    sentences = checklist.verdicts(record)
    return "\n".join(f"- {s}" for s in sentences) or "(the record holds no sizes to judge)"


def show_checklist(fn: Callable, record: dict | None, **kwargs) -> None:
    """lab.lessons.plots.<fn>(record) shown inline, or the sentence saying the record is missing."""
    from lab.lessons.views import figure

    if record is None:
        print(missing(CHECKLIST))
        return
    figure(fn(record, **kwargs), f"{CHECKLIST} holds no timed levels for {fn.__name__}")
