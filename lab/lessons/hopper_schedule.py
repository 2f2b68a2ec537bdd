"""Which Hopper build the family runs per shape (lab.families.gemm_tc_tiles.schedule: rung 10 with its tile, or rung
12, stream-K over clusters), beside what the stream-K cluster study measured for each (lab.studies.
stream_k_cluster_study); and GEMM + bias + GELU fused on rungs 06 and 10 against torch's composition
(lab.studies.fused_epilogue_study). Every figure is read from a committed record, which names the GPU it ran on; the
model's costs are arithmetic on the shape."""

from __future__ import annotations

import json
from pathlib import Path

from lab.families import gemm_tc_tiles as tiles

STREAM_K_STUDY = "stream_k_cluster_study.json"
FUSED_STUDY = "fused_epilogue_study.json"


def load(filename: str) -> tuple[dict, Path] | None:
    """A study's committed record and its path (results/h200, else results/h100), or None."""
    from lab.measure.records import study_record_paths

    for path in study_record_paths(filename):
        try:
            payload = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if isinstance(payload, dict) and payload.get("summary"):
            return payload, path
    return None


def replayed_line(found: tuple[dict, Path]) -> str:
    payload, path = found
    p = payload.get("provenance", {})
    return (f"REPLAYED from {path.parent.parent.name}/{path.parent.name}/{path.name}: measured on "
            f"{p.get('device', '?')} at commit {str(p.get('commit', '?'))[:7]}, {str(p.get('date', '?'))[:10]}; "
            f"{payload.get('rounds', '?')} interleaved rounds, cold L2")


def _label(shape: dict) -> str:
    return f"{shape['M']}x{shape['N']}x{shape['K']} {shape['dtype']} {shape['layout']}"


def schedule_lines(shapes: list[dict], slots: int) -> str:
    """The model's costs (tile-times of a 256-column pair tile, lower is faster) for each build on each shape, and the
    build the family runs."""
    lines = [f"{slots} clusters at once; predicted cost of each build (lower is faster) -> the family's pick"]
    for shape in shapes:
        costs = tiles.schedule_costs(shape["M"], shape["N"], shape["K"], shape["layout"], slots)
        key, bn = tiles.schedule(shape["M"], shape["N"], shape["K"], shape["layout"], slots)
        pick = "rung 12" if key == tiles.STREAM_K_RUNG else f"rung 10 BN={bn}"
        lines.append(f"{_label(shape):<28} " + "  ".join(f"{k}: {v:5.2f}" for k, v in costs.items()) + f"  -> {pick}")
    return "\n".join(lines)


def stream_k_table(found: tuple[dict, Path] | None) -> str:
    """Per shape of the record: rung 12 and rung 10's tile against the library, rung 12 over that build (same
    rounds), and which the family runs with its ratio."""
    if found is None:
        return "(no stream-K cluster study record: run python -m lab.studies.stream_k_cluster_study on an H100 or H200)"
    payload, _ = found
    lines = [replayed_line(found),
             "ratios to the faster of torch.mm and cuBLASLt, each the median of same-round ratios",
             f"{'shape':<28} {'split':>5} {'rung 12':>8} {'rung 10 (its tile)':>25} {'12 / 10':>8}  family runs"]
    for v in payload.get("verdicts", []):
        sh, mine, picked = v["shape"], v.get("stream_k"), v.get("picked_10")
        if not mine or not picked:
            lines.append(f"{_label(sh):<28} (not every build was timed)")
            continue
        runs_12 = tiles.schedule(sh["M"], sh["N"], sh["K"], sh["layout"], payload["cluster_slots"])[0] == \
            tiles.STREAM_K_RUNG
        tile = picked["method"].split(" STAGES")[0]
        family = f"rung 12 ({mine['x_library']:.2f}x)" if runs_12 else f"rung 10 ({picked['x_library']:.2f}x)"
        lines.append(f"{_label(sh):<28} {'yes' if v['split'] else 'no':>5} {mine['x_library']:7.2f}x "
                     f"{picked['x_library']:7.2f}x {'(' + tile + ')':<16} {mine['x_10'] / picked['x_10']:7.2f}x  "
                     f"{family}")
    return "\n".join(lines)


FUSED_METHODS = ("06 fused", "10 fused", "10 plain", "torch_mm")


def fused_table(found: tuple[dict, Path] | None) -> str:
    """Per case of the record: each method's median same-round speed ratio to torch's F.gelu(F.linear(...)) (for
    int8, with its per-row quantization)."""
    if found is None:
        return "(no fused epilogue study record: run python -m lab.studies.fused_epilogue_study on an H100 or H200)"
    payload, _ = found
    by_case: dict = {}
    for s in payload["summary"]:
        case = s["shape"]
        by_case.setdefault(json.dumps(case, sort_keys=True), {})[s["method"]] = s
    lines = [replayed_line(found), "speed over torch's composition, median of same-round ratios",
             f"{'case':<36} " + " ".join(f"{m:>9}" for m in FUSED_METHODS)]
    for key, rows in by_case.items():
        c = json.loads(key)
        out = c.get("out", "same") + (" per row" if c.get("q_per_row") else "")
        cells = [f"{rows[m]['x_torch']:8.2f}x" if rows.get(m, {}).get("x_torch") else f"{'-':>9}"
                 for m in FUSED_METHODS]
        lines.append(f"{c['M']}x{c['N']}x{c['K']} {c['dtype']} -> {out:<12} ".ljust(37) + " ".join(cells))
    return "\n".join(lines)
