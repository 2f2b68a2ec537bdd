"""What the interleaved studies share: the rounds themselves (every method once a round, the order rotated from round
to round, cold L2) and their summary: a ratio is taken between timings of the same round (a clock or a neighbour that
moves between rounds moves both), then the median over rounds.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable


def interleaved_rows(cases: Iterable, methods_for: Callable, rounds: int, flusher, min_time_ms: float,
                     rates: Callable, after_case: Callable | None = None) -> list[dict]:
    """Every method of methods_for(case) -> (name -> launch(i), problem) once a round on each case, in an order
    rotated from round to round, on cold L2: one row per case, method and round, with the median time, its 10th and
    90th percentiles and rates(problem, median_ms) (a dict: {"TFLOP/s": ...}). after_case(case, rows) runs once a
    case is timed (progress lines)."""
    import cupy as cp

    from lab.measure import timing

    rows: list[dict] = []
    for case in cases:
        methods, problem = methods_for(case)
        names = list(methods)
        for r in range(rounds):
            for name in names[r % len(names):] + names[:r % len(names)]:
                t = timing.measure(methods[name], l2="cold", flusher=flusher, min_time_ms=min_time_ms)
                rows.append({"shape": case, "method": name, "round": r, "median_ms": t.median_ms,
                             "p10_ms": t.p10_ms, "p90_ms": t.p90_ms} | rates(problem, t.median_ms))
        if after_case is not None:
            after_case(case, rows)
        del methods, problem
        cp.get_default_memory_pool().free_all_blocks()
    return rows


def same_round_summary(rows: list[dict], metric: str, peers: tuple[str, ...], peer_key: str, reference: str,
                       reference_key: str) -> list[dict]:
    """Per shape and method (rows: shape, method, round, median_ms and `metric`): the median of `metric` over rounds,
    its spread (max / min - 1), the median time, and the medians over rounds of the same-round ratios to the fastest
    of `peers` (`peer_key`; its lowest round as `peer_key`_min) and to `reference` (`reference_key`), None where a
    round lacks them."""
    key = lambda r: tuple(sorted(r["shape"].items()))  # noqa: E731
    by_round = {(key(r), r["method"], r["round"]): r for r in rows}
    out = []
    for shape_key, method in dict.fromkeys((key(r), r["method"]) for r in rows):
        mine = [r for r in rows if key(r) == shape_key and r["method"] == method]
        rates = [r[metric] for r in mine]
        entry = {"shape": dict(shape_key), "method": method, metric: statistics.median(rates),
                 "spread": max(rates) / min(rates) - 1, "median_ms": statistics.median(r["median_ms"] for r in mine)}
        best, against = [], []
        for r in mine:
            times = [by_round[(shape_key, m, r["round"])]["median_ms"] for m in peers
                     if (shape_key, m, r["round"]) in by_round]
            if times:
                best.append(min(times) / r["median_ms"])
            if (shape_key, reference, r["round"]) in by_round:
                against.append(by_round[(shape_key, reference, r["round"])]["median_ms"] / r["median_ms"])
        entry[peer_key] = statistics.median(best) if best else None
        entry[peer_key + "_min"] = min(best) if best else None
        entry[reference_key] = statistics.median(against) if against else None
        out.append(entry)
    return out


def ratio_text(x: float | None) -> str:
    """A same-round ratio as the studies print it, "-" where a round lacked it."""
    return "-" if x is None else f"{x:.3f}"


def summary_line(entry: dict, label: str, ratios: dict[str, str], metric: str = "TFLOP/s", width: int = 20) -> str:
    """One summary entry (same_round_summary's) as a console line: `label`, the method, the metric with its spread,
    then each ratio key of `ratios` under its printed name."""
    return (f"{label} {entry['method']:<{width}} {entry[metric]:6.1f} {metric}  spread {entry['spread']:.3f}  "
            + "  ".join(f"{name} {ratio_text(entry.get(key))}" for key, name in ratios.items()))
