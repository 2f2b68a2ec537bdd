"""Notebook 08's autotune (lab.lessons.ops): ops_tune.json's buckets, each candidate's time or why it was rejected, and
one bucket's tune loop replayed step by step from the record."""

from __future__ import annotations

import re
import statistics
from collections import Counter

from lab.lessons.common import Markdown, md
from lab.lessons.ops_dispatch import table_decision
from lab.lessons.ops_records import TUNE, as_x, bucket_label, candidate_label, md_table, missing, share_of, us_text

# ----------------------------------------------------------------------------------------------
# 4. Autotune per bucket
# ----------------------------------------------------------------------------------------------

_BUCKET = re.compile(r"M<=(\d+) N=(\d+) K=(\d+) (\S+) (\S+) (\S+) epilogue=(\S+)")


def parse_bucket(text: str) -> dict | None:
    """lab.ops.shapes.bucket's string back into its fields; None for a string it did not write."""
    m = _BUCKET.fullmatch(text.strip())
    if not m:
        return None
    return {"M": int(m[1]), "N": int(m[2]), "K": int(m[3]), "dtype": m[4], "layout": m[5], "aligned": m[6] == "aligned",
            "epilogue": m[7]}


def gemm_name(n: int, k: int, epilogue: str, gemms=None) -> str:
    """The layer's GEMM with these sizes and epilogue (lab.studies.serving_trace.GEMMS), else 'N x K epilogue'."""
    from lab.studies import serving_trace as st

    for name, gn, gk, ge in gemms or st.GEMMS:
        if (gn, gk, ge) == (n, k, epilogue):
            return name
    return f"{n}x{k} {epilogue}"


def tune_rows(record: dict | None) -> list[dict] | None:
    """One row per tuned bucket: its GEMM, M bucket, tuned M, winner and every candidate's us (or rejection)."""
    if record is None:
        return None
    out = []
    for b in record.get("buckets", []):
        fields = parse_bucket(b.get("bucket", "")) or {}
        cands, rejected = {}, {}
        for c in b.get("candidates", []):
            key = candidate_label(c["path"], c.get("config"))
            if "us" in c:
                cands[key] = c["us"]
            else:
                rejected[key] = c.get("rejected", "rejected")
        out.append({"bucket": b.get("bucket", "?"), "gemm": gemm_name(fields.get("N"), fields.get("K"),
                                                                      fields.get("epilogue")),
                    "N": fields.get("N"), "K": fields.get("K"), "epilogue": fields.get("epilogue"),
                    "m_bucket": fields.get("M", b.get("tuned_M")), "tuned_M": b.get("tuned_M"),
                    "winner": candidate_label(b["path"], b.get("config")), "winner_path": b["path"],
                    "winner_us": b.get("us"), "candidates": cands, "rejected": rejected, "seconds": b.get("seconds")})
    return sorted(out, key=lambda r: (str(r["gemm"]), r["m_bucket"] or 0))


def tune_table(record: dict | None) -> Markdown:
    """Every bucket: the winner, its time, the runner-up and by how much, cuBLAS's and the generic path's time
    against the winner, and the rejected candidates with their reasons."""
    rows = tune_rows(record)
    if rows is None:
        return md(missing(TUNE))
    table = []
    for r in rows:
        timed = sorted(r["candidates"].items(), key=lambda kv: kv[1])
        second = timed[1] if len(timed) > 1 else None
        best = r["winner_us"]
        table.append([r["gemm"], bucket_label(r["m_bucket"]), r["tuned_M"], r["winner"], us_text(best),
                      f"{second[0]} {as_x(second[1] / best) if best else '-'}" if second else "-",
                      as_x(r["candidates"]["cublas"] / best) if best and "cublas" in r["candidates"] else "-",
                      as_x(r["candidates"]["generic"] / best) if best and "generic" in r["candidates"] else "-",
                      "; ".join(f"{k}: {v}" for k, v in r["rejected"].items()) or "-"])
    head = ["GEMM", "bucket", "tuned at M", "winner", "winner us", "runner-up (its time / winner's)",
            "cublas / winner", "generic / winner", "rejected (why)"]
    return md(md_table(head, table))


def tune_wins(record: dict | None) -> str:
    """Wins per path, how long the whole autotune took and under which environment key."""
    if record is None:
        return missing(TUNE)
    wins = record.get("wins") or Counter(b["path"] for b in record.get("buckets", []))
    n = sum(wins.values())
    per_bucket = [b["seconds"] for b in record.get("buckets", []) if b.get("seconds") is not None]
    lines = [f"{n} buckets tuned; wins: " + ", ".join(f"{p} {w} ({share_of(w, n):.0%})" for p, w in
                                                         sorted(wins.items(), key=lambda kv: -kv[1]))]
    if per_bucket:
        lines.append(f"autotune time: {record.get('seconds', sum(per_bucket)):.0f} s in all, median "
                     f"{statistics.median(per_bucket):.1f} s per bucket (each candidate checked, then timed)")
    if record.get("environment"):
        lines.append(f"tune cache environment key: {record['environment']}")
    return "\n".join(lines)


def recorded_candidates(record: dict | None, bucket_text: str) -> list[dict] | None:
    """The candidates of one bucket as ops_tune.json keeps them (each {"path", "config"} with "us" or "rejected"):
    the rows the tune loop wrote for `bucket_text` (lab.ops.shapes.bucket's string); None without the record or the
    bucket."""
    for b in (record or {}).get("buckets", []):
        if b.get("bucket") == bucket_text:
            return [dict(c) for c in b.get("candidates", [])]
    return None


def table_against_tune(record: dict | None, arch: int, sm_count: int, table=None) -> str:
    """The dispatch table as a prediction of the autotune: for every tuned bucket, the path the table alone picks at
    the bucket's tuned M against the path the tune loop kept; how often they agree, and where they do not (with the
    table's pick's time over the winner's, from the same record)."""
    from lab.ops import rules
    from lab.ops.shapes import GemmShape

    rows = tune_rows(record)
    if rows is None:
        return missing(TUNE)
    table = table or rules.DEFAULT
    agree, apart = 0, []
    for r in rows:
        fields = parse_bucket(r["bucket"]) or {}
        shape = GemmShape(r["tuned_M"], r["N"], r["K"], fields.get("dtype", "float16"), fields.get("layout", "TN"),
                          fields.get("aligned", True), r["epilogue"], sm_count)
        path, config, why = table_decision(table, shape, arch)
        picked = candidate_label(path, config)
        if picked == r["winner"]:
            agree += 1
            continue
        cost = r["candidates"].get(picked)
        apart.append(f"  {r['gemm']} {bucket_label(r['m_bucket'])}: the table ({why}) picks {picked}, the tune loop "
                     f"kept {r['winner']}" + (f"; the table's pick takes {as_x(cost / r['winner_us'])} the winner's "
                                             "time" if cost and r["winner_us"] else ""))
    lines = [f"the table alone picks the tune loop's winner in {agree} of {len(rows)} buckets "
             f"({share_of(agree, len(rows)):.0%})"]
    if apart:
        lines += ["where they differ:", *apart]
    return "\n".join(lines)
