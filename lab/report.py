"""Tables (rich for the terminal, Markdown for the report) built from Records and compile reports."""

from __future__ import annotations

from pathlib import Path

from rich.table import Table

from lab.build import CompileReport
from lab.records import RecordSet


def headline_rows(rs: RecordSet, family: str) -> list[dict]:
    rows = []
    for r in rs.records:
        if r.family == family and r.kind == "headline":
            rows.append({"rung": r.rung, "size": ", ".join(f"{k}={v}" for k, v in r.params.items() if v or k == "n"),
                         "median_ms": r.median_ms, "spread": f"{r.p10_ms:.4g}-{r.p90_ms:.4g}",
                         "value": r.value, "metric": r.metric, "ratio": r.ratio, "ceiling": r.ceiling,
                         "l2": r.l2})
    return rows


def headline_table(rs: RecordSet, family: str) -> Table:
    table = Table(title=f"{family} — {rs.label()}", title_justify="left")
    for col in ("rung", "size", "median ms", "p10-p90 ms", "throughput", "% of ceiling"):
        table.add_column(col, justify="left" if col in ("rung", "size") else "right")
    for row in headline_rows(rs, family):
        table.add_row(row["rung"], row["size"], f"{row['median_ms']:.4f}", row["spread"],
                      f"{row['value']:.0f} {row['metric']}", f"{100 * row['ratio']:.1f}%")
    return table


def headline_markdown(rs: RecordSet, family: str) -> str:
    lines = ["| rung | size | median ms | p10-p90 ms | throughput | vs ceiling |", "|---|---|---:|---:|---:|---:|"]
    for row in headline_rows(rs, family):
        lines.append(f"| {row['rung']} | {row['size']} | {row['median_ms']:.4f} | {row['spread']} | "
                     f"{row['value']:.0f} {row['metric']} | {row['ratio']:.3f}x |")
    return "\n".join(lines)


def compile_table(reports: list[CompileReport], title: str) -> Table:
    table = Table(title=title, title_justify="left")
    for col in ("kernel", "arch", "regs", "smem B", "stack B", "spills B", "notable SASS"):
        table.add_column(col, justify="left" if col in ("kernel", "notable SASS") else "right")
    for r in reports:
        mix = " ".join(f"{k}x{v}" for k, v in r.instructions.items()) if r.sass_available else "(no nvdisasm)"
        spills = r.spill_store_bytes + r.spill_load_bytes
        table.add_row(r.source, r.arch, str(r.registers), str(r.smem_static_bytes), str(r.stack_frame_bytes),
                      f"[red]{spills}[/red]" if spills else "0", mix)
    return table


def compile_markdown(reports: list[CompileReport]) -> str:
    lines = ["| kernel | arch | registers | smem B | spills B | notable SASS |", "|---|---|---:|---:|---:|---|"]
    for r in reports:
        mix = " ".join(f"{k}x{v}" for k, v in r.instructions.items()) if r.sass_available else "-"
        lines.append(f"| {r.source} | {r.arch} | {r.registers} | {r.smem_static_bytes} | "
                     f"{r.spill_store_bytes + r.spill_load_bytes} | {mix} |")
    return "\n".join(lines)


def provenance_markdown(rs: RecordSet) -> str:
    p = rs.provenance
    keys = ("device", "arch", "sm_count", "l2_bytes", "driver_cuda", "runtime_cuda", "cupy", "nvrtc", "commit", "date")
    return "\n".join(f"- {k}: `{p.get(k, '?')}`" for k in keys)


def write_summary(out_dir: Path, header: str, sections: list[str]) -> Path:
    path = Path(out_dir) / "summary.md"
    path.write_text(header.rstrip() + "\n\n" + "\n\n".join(s.rstrip() for s in sections) + "\n")
    return path
