"""Tables (rich for the terminal, Markdown for the report) built from Records and compile reports."""

from __future__ import annotations

from pathlib import Path

from rich.table import Table

from lab.core.build import CompileReport
from lab.measure.records import RecordSet, describe_params, format_value


def headline_rows(rs: RecordSet, family: str) -> list[dict]:
    rows = []
    for r in rs.records:
        if r.family == family and r.kind == "headline":
            rows.append({"rung": r.rung, "size": describe_params(r.params),
                         "median_ms": r.median_ms, "spread": f"{r.p10_ms:.4g}-{r.p90_ms:.4g}",
                         "value": r.value, "metric": r.metric, "ratio": r.ratio, "ceiling": r.ceiling,
                         "l2": r.l2})
    return rows


def headline_table(rs: RecordSet, family: str) -> Table:
    table = Table(title=f"{family} — {rs.label()}", title_justify="left")
    for col in ("rung", "size", "median ms", "p10-p90 ms", "throughput", "% of baseline"):
        # Names fold onto a second line rather than lose their end on a narrow terminal.
        table.add_column(col, justify="left" if col in ("rung", "size") else "right",
                         overflow="fold" if col in ("rung", "size") else "ellipsis")
    for row in headline_rows(rs, family):
        table.add_row(row["rung"], row["size"], f"{row['median_ms']:.4f}", row["spread"],
                      f"{format_value(row['value'], row['metric'])} {row['metric']}", f"{100 * row['ratio']:.1f}%")
    return table


def best_table(rs: RecordSet, family: str) -> Table:
    """One row per headline size: the fastest rung, its throughput and its ratio to the baseline timed beside it (what
    a terminal shows; every rung's row is in headline_table and the tour's summary.md)."""
    table = Table(title=f"{family} — {rs.label()}: the fastest rung per size (every rung: summary.md)",
                  title_justify="left")
    for col in ("size", "fastest rung", "throughput", "x baseline"):
        table.add_column(col, justify="right" if col in ("throughput", "x baseline") else "left", overflow="fold")
    rows = headline_rows(rs, family)
    for size in dict.fromkeys(row["size"] for row in rows):
        group = [row for row in rows if row["size"] == size and row["rung"][:2].isdigit()]
        if group:
            best = max(group, key=lambda row: row["value"])
            table.add_row(size, best["rung"], f"{format_value(best['value'], best['metric'])} {best['metric']}",
                          f"{best['ratio']:.3f}x ({best['ceiling']})")
    return table


def headline_markdown(rs: RecordSet, family: str) -> str:
    lines = ["| rung | size | median ms | p10-p90 ms | throughput | vs baseline |", "|---|---|---:|---:|---:|---:|"]
    for row in headline_rows(rs, family):
        lines.append(f"| {row['rung']} | {row['size']} | {row['median_ms']:.4f} | {row['spread']} | "
                     f"{format_value(row['value'], row['metric'])} {row['metric']} | {row['ratio']:.3f}x |")
    return "\n".join(lines)


def smem_text(r: CompileReport) -> str:
    """Static shared memory, plus the dynamic shared memory the launch asks for where there is any."""
    dynamic = getattr(r, "smem_dynamic_bytes", 0)
    return f"{r.smem_static_bytes} + {dynamic} dynamic" if dynamic else str(r.smem_static_bytes)


def kernel_names(reports: list[CompileReport]) -> list[str]:
    """How a table names each report's kernel: its source, and where one source stands in several rows, what tells
    them apart (the entry point, and the knobs that differ between the rows of that source)."""
    names = []
    for r in reports:
        same = [o for o in reports if o.source == r.source and o.arch == r.arch]
        if len(same) == 1:
            names.append(r.source)
            continue
        parts = [r.entry] if len({o.entry for o in same}) > 1 else []
        differ = sorted(k for k in r.knobs if len({o.knobs.get(k) for o in same}) > 1)
        parts += [f"{k}={r.knobs[k]}" for k in differ]
        names.append(f"{r.source} ({', '.join(parts)})" if parts else r.source)
    return names


def compile_table(reports: list[CompileReport], title: str, compact: bool = False) -> Table:
    """The compile report as a terminal table; `compact` leaves out the stack frame and the SASS mix (one line per
    kernel on an 80-column terminal; the full table is in the tour's summary.md)."""
    table = Table(title=title, title_justify="left")
    cols = ("kernel", "arch", "regs", "smem B", "spills B") if compact else \
        ("kernel", "arch", "regs", "smem B", "stack B", "spills B", "notable SASS")
    for col in cols:
        table.add_column(col, justify="left" if col in ("kernel", "notable SASS") else "right",
                         overflow="fold" if col == "kernel" else "ellipsis")
    for r, name in zip(reports, kernel_names(reports), strict=True):
        mix = " ".join(f"{k}x{v}" for k, v in r.instructions.items()) if r.sass_available else "(no nvdisasm)"
        spills = r.spill_store_bytes + r.spill_load_bytes
        spill_text = f"[red]{spills}[/red]" if spills else "0"
        if compact:
            table.add_row(name, r.arch, str(r.registers), smem_text(r), spill_text)
        else:
            table.add_row(name, r.arch, str(r.registers), smem_text(r), str(r.stack_frame_bytes), spill_text, mix)
    return table


def compile_markdown(reports: list[CompileReport]) -> str:
    lines = ["| kernel | arch | registers | smem B | spills B | notable SASS |", "|---|---|---:|---:|---:|---|"]
    for r, name in zip(reports, kernel_names(reports), strict=True):
        mix = " ".join(f"{k}x{v}" for k, v in r.instructions.items()) if r.sass_available else "-"
        lines.append(f"| {name} | {r.arch} | {r.registers} | {smem_text(r)} | "
                     f"{r.spill_store_bytes + r.spill_load_bytes} | {mix} |")
    return "\n".join(lines)


def profile_markdown(payload: dict, min_dram_bytes: int | None = None) -> str:
    """Nsight Compute counters per rung as a Markdown table; with the problem's minimum DRAM traffic,
    a last column holds each rung's DRAM bytes (read + write) over it. The load conflicts are shown
    beside their share of all shared-load wavefronts too: a count alone grows with the problem."""
    extra = f" DRAM / minimum ({min_dram_bytes / 1e6:.1f} MB) |" if min_dram_bytes else ""
    lines = ["| rung | smem ld conflicts | of ld wavefronts | smem st conflicts | L2 hit % | DRAM read MB | "
             "DRAM write MB |" + extra, "|---|---:|---:|---:|---:|---:|---:|" + ("---:|" if extra else "")]
    for r in payload["rows"]:
        dram = r.get("dram_read_bytes", 0) + r.get("dram_write_bytes", 0)
        lines.append(f"| {r['rung']} | {r.get('smem_bank_conflicts_ld', 0):.0f} | {conflict_share(r)} | "
                     f"{r.get('smem_bank_conflicts_st', 0):.0f} | {r.get('l2_hit_rate_pct', 0):.1f} | "
                     f"{r.get('dram_read_bytes', 0) / 1e6:.1f} | {r.get('dram_write_bytes', 0) / 1e6:.1f} |"
                     + (f" {dram / min_dram_bytes:.2f}x |" if extra else ""))
    return "\n".join(lines)


def conflict_share(row: dict) -> str:
    """Shared-load bank conflicts over shared-load wavefronts (each conflict is one extra wavefront), as a
    percentage; "-" where the profile has no wavefronts (older files, or a rung with no shared loads)."""
    wavefronts, conflicts = row.get("smem_wavefronts_ld"), row.get("smem_bank_conflicts_ld")
    if not wavefronts or conflicts is None:
        return "-"
    return f"{conflicts / wavefronts:.1%}"


def provenance_markdown(rs: RecordSet) -> str:
    p = rs.provenance
    keys = ("device", "arch", "sm_count", "l2_bytes", "driver_cuda", "runtime_cuda", "cupy", "nvrtc", "commit", "date")
    return "\n".join(f"- {k}: `{p.get(k, '?')}`" for k in keys)


def write_summary(out_dir: Path, header: str, sections: list[str]) -> Path:
    path = Path(out_dir) / "summary.md"
    path.write_text(header.rstrip() + "\n\n" + "\n\n".join(s.rstrip() for s in sections) + "\n")
    return path


README_BEGIN = "<!-- results:begin (generated by `python -m lab.studies.report`; do not edit by hand) -->"
README_END = "<!-- results:end -->"


def readme_results(rs_by_family: dict[str, RecordSet]) -> str:
    """The README's results block: the best rung of each family against its same-run baseline at each
    headline size, then one sentence per family on where that rung stands against it (and, where the baseline falls
    off an alignment cliff, by how much)."""
    lines = ["| ladder | size | best rung | throughput | baseline (same run) | ratio | measured on |",
             "|---|---|---|---:|---:|---:|---|"]
    sentences = []
    from lab.families import families

    catalogue = families()
    for family, rs in rs_by_family.items():
        shown = catalogue[family].in_readme if family in catalogue else (lambda params: True)
        rows = [r for r in rs.records if r.family == family and r.kind == "headline" and r.rung != r.ceiling
                and shown(r.params)]
        bests = []
        for size in dict.fromkeys(describe_params(r.params) for r in rows):
            group = [r for r in rows if describe_params(r.params) == size and r.rung[:2].isdigit()]
            if not group:
                continue
            best = max(group, key=lambda r: r.value)
            bests.append(best)
            lines.append(f"| {family} | {size} | {best.rung} | {format_value(best.value, best.metric)} {best.metric} | "
                         f"{format_value(best.ceiling_value, best.metric)} {best.metric} ({best.ceiling}) | "
                         f"{best.ratio:.3f}x | "
                         f"{rs.provenance.get('device')}, {rs.provenance.get('date', '')[:10]} |")
        if bests:
            sentences.append(best_rung_sentence(rs, family, bests))
            cliff = alignment_cliff_sentence(family, bests)
            if cliff:
                sentences.append(cliff)
    return "\n".join(lines + [""] + sentences + hopper_lines() + stream_k_cluster_lines() + fused_epilogue_lines()
                     + split_k_rounds_lines() + cluster_rows_lines() + attention_study_lines()
                     + varlen_study_lines() + ops_lines())


CLIFF = 0.5  # a baseline under half its own rate at the nearest aligned size has fallen off an alignment cliff


def alignment_cliff_sentence(family: str, bests: list) -> str:
    """For GEMM rows whose sizes are not multiples of 8 elements: where the baseline runs at under CLIFF of its own
    rate at the nearest aligned size of the same type and layout, say so with both rates, so a large ratio there reads
    as the library's cliff and not as a faster main loop. '' when no row shows one."""
    def dims(r):
        return tuple(r.params.get(k) for k in ("M", "N", "K"))

    def same_kind(a, b):
        return all(a.params.get(k) == b.params.get(k) for k in ("dtype", "layout"))

    found = []
    for r in bests:
        if None in dims(r) or all(d % 8 == 0 for d in dims(r)):
            continue
        aligned = [o for o in bests if None not in dims(o) and all(d % 8 == 0 for d in dims(o)) and same_kind(o, r)]
        if not aligned:
            continue
        near = min(aligned, key=lambda o: sum(abs(a - b) for a, b in zip(dims(o), dims(r), strict=True)))
        if r.ceiling_value < CLIFF * near.ceiling_value:
            kind = "/".join(str(r.params[k]) for k in ("dtype", "layout") if k in r.params)
            where, there = "x".join(map(str, dims(r))), "x".join(map(str, dims(near)))
            found.append(f"{where} {kind}: {format_value(r.ceiling_value, r.metric)} against "
                         f"{format_value(near.ceiling_value, near.metric)} {r.metric} at {there}")
    if not found:
        return ""
    return (f"{family}: the baseline falls off its alignment cliff where rows are not a multiple of 8 elements "
            f"(not 16-byte aligned, which the library's fastest kernels need): " + "; ".join(found)
            + ". The lab's rungs repack such operands into aligned scratch first (kernels/common/repack_rows.cu), so "
            "the ratios at those sizes measure the library's cliff, not a faster main loop.")


def _by_shape(summary: list[dict]) -> dict[tuple, dict]:
    """A study summary's rows by shape (a sorted tuple of its items), then by method."""
    by_shape: dict[tuple, dict] = {}
    for row in summary:
        by_shape.setdefault(tuple(sorted(row["shape"].items())), {})[row["method"]] = row
    return by_shape


def _library_rate(methods: dict) -> float | None:
    """The faster library call's median TFLOP/s among a shape's methods (torch.mm, cuBLASLt), None without one."""
    return max((methods[m]["TFLOP/s"] for m in ("torch_mm", "cublaslt") if m in methods), default=None)


# The latest study of every shape (older ones stay in results/h200), then rung 10's tile builds per shape (the
# family picks one per shape: lab/families/gemm_tc_tiles.py).
HOPPER_STUDIES = ("hopper_gemm_study", "hopper_tile_study")


def hopper_lines() -> list[str]:
    """The Hopper GEMM rungs against the library in interleaved rounds (lab.studies.hopper_gemm_study), from each of
    its records that exists: per shape, each rung's (and knob variant's) median TFLOP/s and the median of its
    same-round ratios to the faster of torch.mm and cuBLASLt."""
    import json

    from lab.measure.records import reference_dir

    out = ["", "The Hopper GEMM rungs 06 (persistent), 09 (clusters of two, B multicast), 10 (the epilogue "
               "through a TMA store) and 11 (ping-pong consumers) against the library, in interleaved rounds; "
               "notebook 03 sets each beside its header's prediction."]
    for name in HOPPER_STUDIES:
        path = reference_dir() / f"{name}.json"
        if not path.is_file():
            continue
        study = json.loads(path.read_text())
        p = study["provenance"]
        rungs = list(dict.fromkeys(r["method"] for r in study["summary"] if r["method"][:2].isdigit()))
        out += ["", f"`results/h200/{name}.json` ({p.get('device')}, {str(p.get('date', ''))[:10]}, commit "
                    f"{str(p.get('commit', ''))[:7]}; `python -m lab.studies.{name}`, {study['rounds']} "
                    "interleaved rounds, cold L2" + (f"; rebuilt from the run's console log `{study['rebuilt_from']}`, "
                                                    "figures as printed" if study.get("rebuilt_from") else "")
                + "): median TFLOP/s, in brackets the median of the per-round ratios to the faster of torch.mm and "
                  "cuBLASLt, the lowest round's after the slash.", "",
                "| M x N x K | layout, type | library | " + " | ".join(rungs) + " |",
                "|---|---|---:|" + "---:|" * len(rungs)]
        for key, methods in _by_shape(study["summary"]).items():
            shape = dict(key)
            library = _library_rate(methods)
            cells = [f"{methods[r]['TFLOP/s']:.0f} ({methods[r]['x_library']:.2f}x / "
                     f"{methods[r]['x_library_min']:.2f}x)" if r in methods and methods[r].get("x_library") else "-"
                     for r in rungs]
            out.append(f"| {shape['M']} x {shape['N']} x {shape['K']} | {shape['layout']}, {shape['dtype']} | "
                       f"{'-' if library is None else f'{library:.0f}'} | " + " | ".join(cells) + " |")
    return out


def _committed(filename: str) -> Path | None:
    """A study's committed record: the reference GPU's (results/h200), else an H100's beside it (results/h100)."""
    from lab.measure.records import reference_dir

    return next((f / filename for f in (reference_dir(), reference_dir().parent / "h100") if (f / filename).is_file()),
                None)


def stream_k_cluster_lines() -> list[str]:
    """Rung 12 (stream-K over clusters on rung 10's loop; a candidate, not yet in the ladder) beside rung 10's tiles
    and the library (lab.studies.stream_k_cluster_study), when its record exists."""
    import json

    from lab.studies.stream_k_cluster_study import verdicts_table_rows

    path = _committed("stream_k_cluster_study.json")
    if path is None:
        return []
    study = json.loads(path.read_text())
    return ["", "Stream-K over clusters on rung 10's main loop (rung 12, a rung outside the ladder's walk that the "
                "family and lab.ops run where its model puts it ahead) beside rung 10 with the tile picked for the "
                "shape "
                f"({_study_source(path, study, 'stream_k_cluster_study')}): the median of the per-round ratios to "
                "the faster of torch.mm and cuBLASLt.", "",
            "| M x N x K | type | split | rung 12 | rung 10, its tile for the shape | rung 12 / rung 10 | "
            "the family runs |",
            "|---|---|---|---:|---:|---:|---|", *verdicts_table_rows(study)]


def fused_epilogue_lines() -> list[str]:
    """GEMM + bias + GELU fused on rungs 06 and 10 against torch's composition (lab.studies.fused_epilogue_study),
    when its record exists."""
    import json

    path = _committed("fused_epilogue_study.json")
    if path is None:
        return []
    study = json.loads(path.read_text())
    methods = ("06 fused", "10 fused", "10 plain", "torch_mm")
    out = ["", "GEMM + bias + GELU with the chain fused into rung 06's stores and into rung 10's registers before its "
               "TMA store (a candidate rung of gemm_tc_epilogue), against torch's `F.gelu(F.linear(x, w, b))` "
               f"({_study_source(path, study, 'fused_epilogue_study')}): the median of the per-round speed ratios "
               "to torch's composition (for int8, with its per-row quantization).", "",
           "| M x N x K | type, output | " + " | ".join(methods) + " |", "|---|---|" + "---:|" * len(methods)]
    for key, rows in _by_shape(study["summary"]).items():
        c = dict(key)
        out_type = c.get("out", "same") + (" per row" if c.get("q_per_row") else "")
        cells = [f"{rows[m]['x_torch']:.2f}x" if m in rows and rows[m].get("x_torch") else "-" for m in methods]
        out.append(f"| {c['M']} x {c['N']} x {c['K']} | {c['dtype']}, {out_type} | " + " | ".join(cells) + " |")
    return out


def hopper_path_lines() -> list[str]:
    """lab.ops's hopper path in a sweep that timed it (results/h100/ops_sweep.json, when it exists): per shape class,
    its geometric-mean speed over the library beside the class's winner, and the rules whose choice differs from the
    built-in table (lab.ops.rules.DEFAULT)."""
    import json

    from lab.measure.records import reference_dir
    from lab.ops import rules

    path = reference_dir().parent / "h100" / f"{OPS_SWEEP}.json"
    if not path.is_file():
        return []
    sweep = json.loads(path.read_text())
    choices = [c for c in sweep.get("choices", []) if "hopper" in c.get("scores", {})]
    if not choices:
        return []
    p = sweep["provenance"]
    out = ["", "lab.ops's hopper path (rung 10 with the tile for the shape, or rung 12, as the family schedules them; "
               "a call with an epilogue on gemm_tc_epilogue's rung 10) in the sweep of `lab tune --table` "
               f"(`results/h100/{OPS_SWEEP}.json`, {p.get('device')}, {str(p.get('date', ''))[:10]}, commit "
               f"{str(p.get('commit', ''))[:7]}; {sweep['rounds']} interleaved rounds, cold L2): the geometric mean "
               "over each class's samples of the library's time over the path's.", "",
           "| shape class | hopper | persistent (best BN) | the class's winner |", "|---|---:|---:|---|"]
    for c in choices:
        sc = c["scores"]
        persistent = max((v for k, v in sc.items() if k.startswith("persistent")), default=None)
        shown = f"{persistent:.2f}x" if persistent is not None else "-"
        out.append(f"| {c['class']} | {sc['hopper']:.2f}x | {shown} | {c['method']} ({c['score']:.2f}x) |")
    swept = rules.parse(sweep["table"], "the H100 sweep's table")
    moved = [f"rule {i} ({c['class']}) would take {a.path}" for i, (a, b, c) in
             enumerate(zip(swept.rules, rules.DEFAULT.rules, sweep["choices"], strict=False), 1) if a != b]
    if moved:
        out.append("")
        out.append("Against the built-in table (`lab/ops/default_table.json`, from the H200's sweep): "
                   + "; ".join(moved) + ". The built-in table stays the H200's until the sweep runs there again.")
    return out


def split_k_rounds_lines() -> list[str]:
    """Split-K's workspace and cluster modes against the library in interleaved rounds (lab.studies.split_k_rounds),
    when its record exists: per shape, each mode's median TFLOP/s, the median of its same-round ratios to the faster
    of torch.mm and cuBLASLt (the lowest round's after the slash), and the cluster mode's over the workspace mode."""
    from lab.studies.split_k_rounds import RUNGS, committed_record

    found = committed_record()
    if found is None:
        return []
    study, path = found
    splits = {(tuple(sorted(e["shape"].items())), e["method"]): e for e in study.get("launches", [])}
    out = ["", f"Split-K's workspace mode (rung 08, a reduction kernel after it) and its cluster mode (the partial "
               f"tiles summed through distributed shared memory) against the library "
               f"({_study_source(path, study, 'split_k_rounds')}): median TFLOP/s with S, in brackets the median of "
               "the per-round ratios to the faster of torch.mm and cuBLASLt, the lowest round's after the slash; "
               "the last column, the cluster mode's time ratio to the workspace mode's.", "",
           "| M x N x K | type | library | " + " | ".join(RUNGS) + " | cluster / workspace |",
           "|---|---|---:|" + "---:|" * (len(RUNGS) + 1)]
    for key, methods in _by_shape(study["summary"]).items():
        shape = dict(key)
        library = _library_rate(methods)
        cells = []
        for rung in RUNGS:
            row, launch = methods.get(rung), splits.get((key, rung), {})
            cells.append("-" if not row or row.get("x_library") is None else
                         f"{row['TFLOP/s']:.0f}, S = {launch.get('splits', '?')} ({row['x_library']:.2f}x / "
                         f"{row['x_library_min']:.2f}x)")
        cluster = methods.get(RUNGS[-1], {})
        out.append(f"| {shape['M']} x {shape['N']} x {shape['K']} | {shape['dtype']} | "
                   f"{'-' if library is None else f'{library:.0f}'} | " + " | ".join(cells) + " | "
                   + ("-" if cluster.get("x_08") is None else f"{cluster['x_08']:.2f}x") + " |")
    return out


CLUSTER_ROWS = "cluster_rows_study"


def _study_source(path: Path, study: dict, module: str) -> str:
    """Where a study's figures come from, for the README: the file, GPU, date, commit, command and rounds."""
    from lab.core.build import REPO_ROOT

    p = study["provenance"]
    shown = path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path
    return (f"`{shown}`, {p.get('device')}, {str(p.get('date', ''))[:10]}, commit {str(p.get('commit', ''))[:7]}; "
            f"`python -m lab.studies.{module}`, {study.get('rounds', '?')} interleaved rounds, cold L2")


def cluster_rows_lines() -> list[str]:
    """Long rows split over a thread-block cluster (lab.studies.cluster_rows_study), when its record exists: per
    operation, type and row length, the one-block rung, the cluster rung and PyTorch as fractions of the device copy
    in the same round, and the cluster rung's speed over PyTorch's."""
    import json

    from lab.studies.cluster_rows_study import PREVIOUS, cluster_method, record_path

    path = record_path()
    if path is None:
        return []
    study = json.loads(path.read_text())
    p = study["provenance"]
    out = ["", "Long rows split over a thread-block cluster (RMSNorm and LayerNorm rung 04, softmax rung 05) against "
               f"the one-block rung before them and PyTorch ({_study_source(path, study, 'cluster_rows_study')}): "
               "the median of the same-round fractions of the device copy, and the cluster rung's speed over "
               "PyTorch's.",
           "", "| operation, type | n | one block | cluster | PyTorch | cluster / PyTorch |",
           "|---|---:|---:|---:|---:|---:|"]
    by_case: dict[tuple, dict] = {}
    for row in study["summary"]:
        sh = row["shape"]
        by_case.setdefault((sh["op"], sh["dtype"], sh["n"]), {})[row["method"]] = row

    def cell(row: dict | None, key: str, unit: str = "") -> str:
        return "-" if not row or row.get(key) is None else f"{row[key]:.2f}{unit}"

    for (op, dtype, n), methods in by_case.items():
        one = methods.get(PREVIOUS[op])
        cluster = methods.get(cluster_method(op, methods, p.get("commit", "")))
        out.append(f"| {op}, {dtype} | {n} | {cell(one, 'x_copy')} | {cell(cluster, 'x_copy')} | "
                   f"{cell(methods.get('torch'), 'x_copy')} | {cell(cluster, 'x_torch', 'x')} |")
    return out


def attention_study_lines() -> list[str]:
    """The attention ladder beside SDPA's backends in interleaved rounds (lab.studies.attention_study), from the
    newest of its committed records: per shape, cuDNN's TFLOP/s, the two Hopper rungs' and the fastest rung
    setting's, and rung 05's (the build lab.ops runs) against cuDNN and the flash backend in the same rounds."""
    from lab.studies.attention_study import newest_record

    newest = newest_record()
    if newest is None:
        return []
    study, path = newest
    out = ["", "Attention's forward ladder against each of PyTorch SDPA's backends "
               f"({_study_source(path, study, 'attention_study')}): TFLOP/s, and rung 05's median same-round speed "
               "against cuDNN's kernel and the flash backend (FlashAttention-2).",
           "", "| B x H x S x D, type | cuDNN | 04_wgmma_ws | 05_pingpong | fastest setting | 05 x cuDNN "
               "| 05 x flash |",
           "|---|---:|---:|---:|---|---:|---:|"]
    by_shape: dict[str, dict] = {}
    for row in study["summary"]:
        sh = row["shape"]
        label = (f"{sh['B']} x {sh['H']} x {sh['S']} x {sh['D']}, {sh['dtype']}"
                 + (", causal" if sh.get("causal") else ""))
        by_shape.setdefault(label, {})[row["method"]] = row

    def tflops(row: dict | None) -> str:
        return "-" if not row else f"{row['TFLOP/s']:.0f}"

    def ratio(row: dict, key: str) -> str:
        return "-" if row.get(key) is None else f"{row[key]:.2f}"

    for label, methods in by_shape.items():
        mine = [r for name, r in methods.items() if name[:2].isdigit()]
        if not mine:
            continue
        best = max(mine, key=lambda r: r["TFLOP/s"])
        shipped = methods.get("05_pingpong", {})
        out.append(f"| {label} | {tflops(methods.get('sdpa_cudnn'))} | {tflops(methods.get('04_wgmma_ws'))} | "
                   f"{tflops(methods.get('05_pingpong'))} | {best['method']} ({best['TFLOP/s']:.0f}) | "
                   f"{ratio(shipped, 'x_sdpa_cudnn')} | {ratio(shipped, 'x_sdpa_flash')} |")
    out += ["", "Rung 05's columns are its default build at the record's commit; the fastest setting may be another "
                "build of a rung, timed in the same rounds. Where a setting of rung 05 became its default for a head "
                "dim after the record, the kernel's header says so and cites the rows."]
    return out


def varlen_study_lines() -> list[str]:
    """Packed (varlen) attention against padding (lab.studies.varlen_attention_study), from the newest committed
    record: per batch, the share of the padded work that is real, the packed kernel's TFLOP/s, and how many times
    its time each other method takes in the same rounds."""
    from lab.studies.varlen_attention_study import newest_record

    newest = newest_record()
    if newest is None:
        return []
    study, path = newest
    peers = ("lab_dense_padded", "sdpa_padded", "sdpa_cudnn_padded", "torch_varlen")
    out = ["", "Prefill batches of prompts of different lengths, packed, against padding them to the longest "
               f"({_study_source(path, study, 'varlen_attention_study')}; H = 32 on 8, D = 128, causal): the "
               "packed kernel's useful TFLOP/s and each other method's time over its time in the same rounds.",
           "", "| batch | real share of padded work | packed TFLOP/s | " + " | ".join(f"{p} x" for p in peers) + " |",
           "|---|---:|---:|" + "---:|" * len(peers)]
    shares = {tuple(sorted(b["batch"].items())): b["real_share_of_padded_work"] for b in study.get("batches", [])}
    rows: dict[tuple, dict] = {}
    for row in study["summary"]:
        rows.setdefault(tuple(sorted(row["batch"].items())), {})[row["method"]] = row
    for key, methods in rows.items():
        batch, mine = dict(key), methods.get("lab_varlen")
        if mine is None:
            continue
        cells = ["-" if p not in methods else f"{methods[p]['time_x_lab_varlen']:.2f}" for p in peers]
        share = shares.get(key)
        out.append(f"| {batch['mix']} B={batch['B']} {batch['dtype']} | {'-' if share is None else f'{share:.3f}'} | "
                   f"{mine['TFLOP/s']:.0f} | " + " | ".join(cells) + " |")
    return out


OPS_TRACE, OPS_GEMMS, OPS_OVERHEAD, OPS_LATENCY = "ops_trace", "ops_trace_gemms", "ops_overhead", "ops_latency"


def ops_lines() -> list[str]:
    """lab.ops on the serving trace, from its records (lab.studies.ops_study), when they exist: whole-layer GPU time
    against
    each baseline, the GEMMs alone against cuBLAS, the dispatch overhead and the first request's latency."""
    import json

    from lab.measure.records import reference_dir

    def load(name: str) -> dict | None:
        path = reference_dir() / f"{name}.json"
        return json.loads(path.read_text()) if path.is_file() else None

    trace, gemms, overhead, latency = (load(n) for n in (OPS_TRACE, OPS_GEMMS, OPS_OVERHEAD, OPS_LATENCY))
    head = torch_lines(load) + hopper_path_lines()
    if trace is None:
        return head
    t = trace["totals_us"]
    base = t["lab_ops"]["total_us"]
    p = trace["provenance"]
    out = ["", f"lab.ops on the serving trace ({trace['trace']['steps']} steps of a Llama-like layer, "
               f"{100 * trace['trace']['decode_share']:.1f}% decode; `results/h200/ops_trace.json`, "
               f"{p.get('device')}, {str(p.get('date', ''))[:10]}), total GPU time over the trace, one layer per "
               "step:",
           "", "| method | total ms | time / lab.ops |", "|---|---:|---:|"]
    for method in ("lab_ops", "lab_ops_table", "cublas", "persistent", "generic"):
        if method in t:
            out.append(f"| {trace['methods'][method]} | {t[method]['total_us'] / 1e3:.1f} | "
                       f"{t[method]['total_us'] / base:.2f}x |")
    if gemms is not None:
        g = gemms["totals_us"]
        out += ["", f"The GEMMs alone (epilogues included, no RMSNorm; `ops_trace_gemms.json`): lab.ops "
                    f"{g['lab_ops']['total_us'] / 1e3:.1f} ms, cuBLAS {g['cublas']['total_us'] / 1e3:.1f} ms "
                    f"({g['cublas']['total_us'] / g['lab_ops']['total_us']:.2f}x)."]
    if overhead is not None:
        over = [v["overhead_us"] for v in overhead["paths"].values()]
        out.append(f"Dispatch overhead over a raw replay of the same launches: {min(over):.2f}-{max(over):.2f} us per "
                   "call (`ops_overhead.json`).")
    if latency is not None:
        sc = latency["scenarios"]
        if "warm_caches" in sc and "warm_caches_with_manifest" in sc:
            w, m = sc["warm_caches"], sc["warm_caches_with_manifest"]
            out.append(f"First request of a second process on warm caches: {w['first_ms']:.1f} ms, "
                       f"{w['compiles_total'].get('compiled', 0)} compiles; after a warm-up manifest "
                       f"({m['warmup']['seconds']:.2f} s): {m['first_ms']:.1f} ms (`ops_latency.json`).")
    return head + out


OPS_SWEEP, OPS_HOST = "ops_sweep", "ops_host_cost"
TORCH_TRACES = tuple(f"ops_vs_torch_{m}_{d}" for m in ("llama3_8b", "qwen25_7b") for d in ("float16", "bfloat16"))


def torch_lines(load) -> list[str]:
    """lab.ops against PyTorch in the same process, from the records of `lab tune --table` (lab.studies.ops_sweep) and
    lab.studies.ops_compare: per shape class, the range of per-round ratios; per trace, eager and graphed."""
    import statistics

    sweep = load(OPS_SWEEP)
    out = []
    if sweep is not None:
        p = sweep["provenance"]
        out += ["", f"lab.ops against PyTorch {sweep.get('torch')} (torch.mm / F.linear, same process, same memory; "
                    f"{sweep['rounds']} interleaved rounds, cold L2; `results/h200/{OPS_SWEEP}.json`, "
                    f"{p.get('device')}, {str(p.get('date', ''))[:10]}): PyTorch's time over lab.ops's, per sample "
                    "and round (above 1: lab.ops is faster); lab.ops's library path is cuBLASLt "
                    f"({sweep.get('library')}).", "",
                "| shape class | samples | lab.ops path(s) | median | min | max |", "|---|---:|---|---:|---:|---:|"]
        class_of = {s["sample"]: s["class"] for s in sweep["samples"]}
        classes = {}
        for row in sweep["summary"]:
            classes.setdefault(class_of.get(row["sample"], "?"), []).append(row)
        for name, rows in classes.items():
            ratios = [r for row in rows for r in row["ratio_cold"]]
            paths = ", ".join(dict.fromkeys(row["decision"].split(" (")[0] for row in rows))
            out.append(f"| {name} | {len(rows)} | {paths} | {statistics.median(ratios):.2f}x | {min(ratios):.2f}x | "
                       f"{max(ratios):.2f}x |")
    traces = [(n, load(n)) for n in TORCH_TRACES]
    traces = [(n, r) for n, r in traces if r is not None]
    if traces:
        p = traces[0][1]["provenance"]
        out += ["", f"A serving trace from outside the lab's own ({traces[0][1]['trace'].get('steps')} steps, "
                    f"lab.studies.ops_compare; {p.get('device')}, {str(p.get('date', ''))[:10]}): one layer per step, "
                    "lab.ops against the same layer in PyTorch (F.rms_norm, F.linear / torch.addmm, F.silu), "
                    "eager and as CUDA graphs, PyTorch's time over lab.ops's per round:", "",
                "| model, type | lab.ops eager ms | PyTorch eager ms | eager ratio | lab.ops graph ms | "
                "torch.cuda.graph ms | graph ratio |", "|---|---:|---:|---:|---:|---:|---:|"]
        for _, r in traces:
            m, ratios = r["summary"]["methods"], r["summary"]["ratios"]
            eager = ratios["eager"]["torch_over_lab"]
            graph = ratios.get("graph", {}).get("torch_over_lab", [])
            g = (f"{m['lab_graph']['median_ms']:.1f} | {m['torch_graph']['median_ms']:.1f} | "
                 f"{min(graph):.3f}-{max(graph):.3f}x") if graph and "lab_graph" in m else "- | - | -"
            out.append(f"| {r['model']['name'] if isinstance(r.get('model'), dict) else r.get('model')}, "
                       f"{r['dtype']} | {m['lab_eager']['median_ms']:.1f} | {m['torch_eager']['median_ms']:.1f} | "
                       f"{min(eager):.3f}-{max(eager):.3f}x | {g} |")
    return out


def best_rung_sentence(rs: RecordSet, family: str, bests: list) -> str:
    """Where the ladder stands against the ceiling, from the records: which rung is best at how many of the
    table's headline sizes and in what range, then, for the rung best at the first size, the sweep sizes
    (cold L2) at which it is faster or slower than the ceiling."""
    ceiling = bests[0].ceiling
    parts = []
    for rung in dict.fromkeys(r.rung for r in bests):
        mine = [r for r in bests if r.rung == rung]
        lo, hi = min(r.ratio for r in mine), max(r.ratio for r in mine)
        span = f"{lo:.3f}x" if len(mine) == 1 else f"{lo:.3f}x-{hi:.3f}x"
        parts.append(f"{rung} is the best rung at {len(mine)} of the {len(bests)} sizes above ({span} of {ceiling})")
    text = f"{family}: " + "; ".join(parts)
    rung = bests[0].rung
    sweep = sorted((r for r in rs.records if r.family == family and r.kind == "sweep" and r.rung == rung
                    and r.l2 == "cold"), key=lambda r: r.bytes_moved)
    if sweep:
        faster = [r for r in sweep if r.ratio > 1]
        if faster:
            text += (f"; in the size sweep (cold L2) {rung} is faster than {ceiling} at "
                     + ", ".join(f"{describe_params(r.params)} ({r.ratio:.3f}x)" for r in faster)
                     + f" and slower at the other {len(sweep) - len(faster)} of {len(sweep)} sizes")
        else:
            text += f"; in the size sweep (cold L2) {rung} is slower than {ceiling} at all {len(sweep)} sizes"
    return text + "."


def update_readme(readme: Path, table: str) -> bool:
    """Replace the table between the README's markers; True if the file changed."""
    text = readme.read_text()
    start, end = text.index(README_BEGIN) + len(README_BEGIN), text.index(README_END)
    new = text[:start] + "\n" + table + "\n" + text[end:]
    if new != text:
        readme.write_text(new)
    return new != text


def reference_sets() -> dict[str, RecordSet]:
    """The reference GPU's records of every family that has them; a family with no file yet has no row (an
    unreadable file is still an error). A family's `<family>_headline.json`, where present, is a later headline
    run (`lab bench FAMILY --kinds headline`) whose rows the table shows instead: it times a newer baseline."""
    from lab.families import families
    from lab.measure.records import load, reference_dir, reference_records

    sets = {}
    for name in families():
        later = reference_dir() / f"{name}_headline.json"
        if later.is_file():
            sets[name] = load(later)
        elif (reference_dir() / f"{name}.json").is_file():
            sets[name] = reference_records(name)
    return sets


if __name__ == "__main__":
    from lab.core.build import REPO_ROOT

    changed = update_readme(REPO_ROOT / "README.md", readme_results(reference_sets()))
    print("README.md results table", "updated" if changed else "already current")
