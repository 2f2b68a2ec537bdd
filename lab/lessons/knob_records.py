"""The knob sweep's records (scripts/knob_sweep.py -> results/h200/knobs.json) as a table a notebook prints:
the tuning log that rung headers no longer carry, read from the file that holds it."""

from __future__ import annotations

import json

KNOBS_FILE = "knobs.json"


def table(family: str, rung: str) -> str:
    """Every setting the sweep timed for one rung: knobs, size, and time as a fraction of the device copy's."""
    from lab.measure import records

    path = records.reference_dir() / KNOBS_FILE
    try:
        payload = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return f"(no knob sweep records at {path.name}: `python3 scripts/knob_sweep.py {KNOBS_FILE}` on a GPU)"
    rows = [r for r in payload.get("rows", []) if r["family"] == family and r["rung"] == rung.split("_")[0]]
    if not rows:
        return f"(the knob sweep has no rows for {family}/{rung})"
    p = payload.get("provenance", {})
    lines = [f"knob sweep of {family}/{rung}, cold L2 (REPLAYED: {p.get('device', '?')}, {p.get('date', '?')[:10]}); "
             "ratio = device copy time / rung time"]
    for params in dict.fromkeys(tuple(sorted(r["params"].items())) for r in rows):
        mine = sorted((r for r in rows if tuple(sorted(r["params"].items())) == params), key=lambda r: -r["ratio"])
        lines.append("  " + ", ".join(f"{k}={v}" for k, v in params) + ":")
        lines += [f"    {', '.join(f'{k}={v}' for k, v in r['knobs'].items()):<36} {r['ratio']:.3f}" for r in mine]
    return "\n".join(lines)


def _reference_payload(filename: str) -> dict | None:
    from lab.measure import records

    try:
        payload = json.loads((records.reference_dir() / filename).read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return payload if isinstance(payload, dict) and isinstance(payload.get("rows"), list) else None


def _replayed_from(payload: dict) -> str:
    p = payload.get("provenance", {})
    return f"REPLAYED: {p.get('device', '?')}, {str(p.get('date', '?'))[:10]}, commit {str(p.get('commit', '?'))[:12]}"


def probe_table(filename: str = "gemm_tc_knobs.json") -> str:
    """A knob probe (scripts/gemm_tc_knobs.py: a few settings of one rung, each checked, then timed beside
    cuBLAS in the same run) as a table: setting, TFLOP/s, and time as a fraction of cuBLAS's."""
    payload = _reference_payload(filename)
    if payload is None:
        return f"(no knob probe at results/h200/{filename}: `python3 scripts/gemm_tc_knobs.py {filename}` on a GPU)"
    lines = [f"knob probe of {payload.get('rung', '?')} at {payload.get('side', '?')}^3 fp16 TN, cold L2 "
             f"({_replayed_from(payload)}); x cuBLAS = cuBLAS time / rung time"]
    for row in payload["rows"]:
        setting = row["setting"]
        name = setting if isinstance(setting, str) else ", ".join(f"{k}={v}" for k, v in setting.items())
        if "error" in row:
            lines.append(f"  {name:24s} refused: {row['error']}")
        elif "tflops" not in row:
            lines.append(f"  {name:24s} failed its check: not timed")
        else:
            ratio = f"{row['x_cublas']:.3f}x cuBLAS" if "x_cublas" in row else "(the library baseline)"
            lines.append(f"  {name:24s} {row['tflops']:7.1f} TFLOP/s  {ratio}")
    return "\n".join(lines)


def margin_table(filename: str = "gemm_tc_margin.json") -> str:
    """scripts/gemm_tc_margin.py's record: per rung, the largest share of the error bound's statistical part
    any element used over the check cases, and where. Below 1 passes."""
    payload = _reference_payload(filename)
    if payload is None:
        return f"(no bound margins at results/h200/{filename}: `python3 scripts/gemm_tc_margin.py {filename}` on a GPU)"
    lines = [f"share of the error bound's statistical part E used, worst element over the check cases "
             f"({_replayed_from(payload)}):"]
    lines += [f"  {row['rung']:24s} {row['worst_share_of_E']:.3f} of E  at {row['worst_case']}"
              for row in payload["rows"]]
    return "\n".join(lines)
