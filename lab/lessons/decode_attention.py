"""Notebook 09's decode section: the decode-attention ladder's records (results/h200/attention_decode.json, written by
`lab bench attention_decode`) and its interleaved study against SDPA (decode_attention_study.json, written by
`python -m lab.studies.decode_attention_study`), as text; the figure is lab.lessons.plots.attention.decode_bandwidth.
Reads records, never measures."""

from __future__ import annotations

import json
import statistics

import numpy as np

from lab.lessons.attention import at, problems, targets
from lab.lessons.common import describe_provenance, shown_path
from lab.measure import records
from lab.measure.records import RecordSet

FAMILY = "attention_decode"
BASELINE = "torch_sdpa"
STUDY = "decode_attention_study"


def record_file():
    return records.reference_dir() / f"{FAMILY}.json"


def replayed() -> RecordSet | None:
    """The reference GPU's decode-attention headline records (replayed), or None."""
    try:
        rs = records.load(record_file())
    except Exception:  # noqa: BLE001 - no file, or not one of records: the cells say so
        return None
    mine = [r for r in rs.records if r.family == FAMILY and r.kind == "headline"]
    return RecordSet(rs.provenance | {"file": shown_path(record_file())}, mine, replayed=True) if mine else None


def missing() -> str:
    return (f"NO RECORDS for {FAMILY}: {shown_path(record_file())} holds none, so this cell draws nothing. On a GPU, "
            f"`lab bench {FAMILY} --kinds headline --json {shown_path(record_file())}` records them.")


def label(params: dict) -> str:
    return (f"B={params['B']} L={params['S_k']} {params['dtype']}" + (" paged" if params.get("page_size") else ""))


def split_kv_text(rs: RecordSet | None) -> str:
    """Per decode step: the blocks each rung launches (rung 02's splits), each target's time and GB/s, and its share
    of SDPA's speed in the same run."""
    if rs is None:
        return missing()
    lines = [f"decode steps (S_q = 1, 32 query heads on 8 key/value heads, D = 128): median time, GB/s of Q, K, V "
             f"and O, share of {BASELINE}'s speed; {rs.label()}"]
    sms = rs.provenance.get("sm_count")
    for params in problems(rs):
        # The grid each launch recorded (its notes), as the GPU that ran it planned it.
        grids = [f"{name} {int(np.prod(rec.extra['grid']))}" for name in targets(rs)
                 if (rec := at(rs, name, params)) is not None and "grid" in (rec.extra or {})]
        lines.append(f"  {label(params)}: blocks {', '.join(grids)} on {sms} SMs")
        base = at(rs, BASELINE, params)
        for name in targets(rs):
            rec = at(rs, name, params)
            if rec is None:
                continue
            share = "" if base is None or name == BASELINE else f", {base.median_ms / rec.median_ms:.2f}x {BASELINE}"
            lines.append(f"    {name:14s} {rec.median_ms * 1e3:8.1f} us {rec.value:6.0f} GB/s{share}")
    return "\n".join(lines)


def load_study() -> dict | None:
    path = records.reference_dir() / f"{STUDY}.json"
    try:
        study = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return study if "summary" in study and "provenance" in study else None


def study_text(study: dict | None) -> str:
    """Per decode step of the study: rung 02's median GB/s and its same-round ratio to the fastest SDPA call (median
    over rounds, and the spread of its rate), rung 01's ratio, and the paged cache's ratio to the contiguous one."""
    if study is None:
        return f"NO STUDY: {shown_path(records.reference_dir() / (STUDY + '.json'))} is missing."
    rows = {}
    for s in study["summary"]:
        rows.setdefault(json.dumps(s["shape"], sort_keys=True), {})[s["method"]] = s
    lines = [f"{STUDY}: {study['rounds']} interleaved rounds, cold L2; {describe_provenance(study['provenance'])}",
             "  step                      rung 02 GB/s  x SDPA (spread)  rung 01 x SDPA  paged 64 x contiguous"]
    ratios = []
    for key, methods in rows.items():
        shape, mine = json.loads(key), methods.get("02_split_kv")
        if mine is None:
            continue
        one, paged = methods.get("01_gqa_packed"), methods.get("02 paged 64")
        if not shape.get("varlen"):
            ratios.append(mine["x_best_sdpa"])
        lines.append(f"  {label(shape) + (' varlen' if shape.get('varlen') else ''):<25} {mine['GB/s']:12.0f}  "
                     f"{mine['x_best_sdpa']:6.2f} ({mine['spread']:.1%})  "
                     f"{'-' if one is None else format(one['x_best_sdpa'], '.2f'):>14}  "
                     f"{'-' if paged is None else format(paged['x_02_split_kv'], '.2f'):>21}")
    if ratios:
        lines.append(f"  rung 02 against SDPA on one length: {min(ratios):.2f}-{max(ratios):.2f}x, median "
                     f"{statistics.median(ratios):.2f}x (the varlen row's SDPA pads every sequence to the longest)")
    return "\n".join(lines)
