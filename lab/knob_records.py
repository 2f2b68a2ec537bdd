"""The knob sweep's records (scripts/knob_sweep.py -> results/h200/knobs.json) as a table a notebook prints:
the tuning log that rung headers no longer carry, read from the file that holds it."""

from __future__ import annotations

import json

KNOBS_FILE = "knobs.json"


def table(family: str, rung: str) -> str:
    """Every setting the sweep timed for one rung: knobs, size, and time as a fraction of the device copy's."""
    from lab import records

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
