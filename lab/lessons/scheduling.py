"""The scheduling lesson (notebook 04: when and where work runs): where its records come from, what
lab.core.tile_order predicts before anything is measured, and the summaries that hold the lesson's expectations
against the records. The short LIVE plan is lab.lessons.scheduling_live.

The records are JSON payloads, not RecordSets: `lab study orders` writes schedule_orders.json,
schedule_orders_ncu.json, schedule_orders_fp32.json and schedule_stream_k.json (lab.studies.scheduling), and
`lab study items` writes small_items.json (lab.families.work_queue). Every number printed here is computed from
lab.core.tile_order or from those payloads; the expectations are thresholds stated before measuring.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lab.core import tile_order
from lab.core.errors import LabError
from lab.lessons.common import Markdown, describe_provenance, md, mode_box, record_lines, run_stamp, shown_path
from lab.lessons.plots import setting_label
from lab.measure import records
from lab.studies import scheduling

if TYPE_CHECKING:
    from lab.lessons.mode import Mode

PAYLOADS = ("schedule_orders", "schedule_orders_ncu", "schedule_orders_fp32", "schedule_stream_k", "small_items")
_RECORDED_BY = {
    "schedule_orders": "lab study orders --out {dir}",
    "schedule_orders_ncu": "lab study counters --out {dir}",
    "schedule_orders_fp32": "lab study fp32 --out {dir}",
    "schedule_stream_k": "lab study streamk --out {dir}",
    "small_items": "lab study items --out {dir}",
}
# What the lesson expects each measurement to show, stated before measuring (thresholds, not measurements).
EXPECTED = {"order_speedup": 1.3, "order_dram": 0.6, "queue_speedup": 5.0, "queue_item_us": 10.0,
           "persistent": 1.0, "wave-quantized": 1.15, "well-quantized": 0.98}
HEADLINE_SHAPE = scheduling.ORDER_SHAPES[0]  # where the order expectations are stated: 4096 x 32768 x 8192
TC_FAMILY, TC_RUNG = "gemm_tc", "06_persistent"
TILE_ORDER_HEADER = "common/lab_tile_order.cuh"  # under kernels/: the RASTER orders the rungs include
DP_RUNG, SK_RUNG, WS_RUNG = "06_persistent", "07_stream_k", "05_warp_specialized"
FORCED_RUNG = "07_forced_split"  # rung 07 with SK_MIN_GAIN = 0: splits every partial wave
# Variants of rung 07 a record may hold beside it, with their column titles in stream_k_ratios.
# "07_do_while": the do-while k-loop before it became the default (5a65fcb); "07_while_loop": the old loop after.
VARIANTS = ((FORCED_RUNG, "forced / 06"), ("07_do_while", "do-while / 06"), ("07_while_loop", "old loop / 06"))
# When neither this GPU nor any record says how many SMs and how much L2 the reference GPU has, the predictions
# use what the driver reports for the reference H200 (its records' provenance); the line printed says so.
ASSUMED_GPU = {"device": "the reference H200 (assumed: no records here to read it from)", "sm_count": 132,
               "l2_bytes": 60 * 2**20}



# ----------------------------------------------------------------------------------------------
# Where the records come from
# ----------------------------------------------------------------------------------------------

def payload_path(name: str) -> Path:
    return records.reference_dir() / f"{name}.json"


def recorded_by(name: str) -> str:
    return _RECORDED_BY[name].format(dir=shown_path(records.reference_dir()))


def load(name: str) -> dict | None:
    """The reference GPU's payload `name` (one of PAYLOADS), marked replayed; None when absent or unreadable."""
    path = payload_path(name)
    if name == "small_items":
        from lab.families import work_queue

        try:
            return work_queue.load_payload(path)
        except LabError:
            return None
    try:
        payload = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    if not isinstance(payload, dict) or not isinstance(payload.get("provenance"), dict):
        return None
    return payload | {"replayed": True}


def replayed() -> dict[str, dict | None]:
    """Every payload of the lesson from lab.measure.records.reference_dir() (results/h200 unless
    LAB_REFERENCE_RESULTS)."""
    return {name: load(name) for name in PAYLOADS}


def missing(name: str) -> str:
    return (f"NO RECORDS for {name}: {shown_path(payload_path(name))} is absent or unreadable, so this cell shows "
            f"nothing. On a GPU, `{recorded_by(name)}` records it.")


def source(payload: dict | None, name: str) -> str:
    """Where a payload's numbers come from: replayed (device, date, commit) or measured in this run; or that it is
    missing."""
    if payload is None:
        return missing(name)
    where = describe_provenance(payload.get("provenance", {}))
    if payload.get("replayed"):
        return f"{name}: REPLAYED from {where} ({shown_path(payload_path(name))}), not measured here."
    return f"{name}: measured in this run, on {where}."


def banner(current: Mode, payloads: dict[str, dict | None]) -> str:
    """A loud box: LIVE (what this run measures, and that the full records are replayed beside it) or REPLAY;
    then each record file with its provenance, or NO RECORDED RESULTS."""
    live = []
    if current.live:
        live = [f"A SHORT plan, {run_stamp()};", "no Nsight Compute in it.",
                "Beside each live measurement, the FULL records of the reference GPU are",
                "REPLAYED, and labelled so:"]
    body = []
    for name in PAYLOADS:
        payload = payloads.get(name)
        body += record_lines(name, None if payload is None else payload["provenance"], payload_path(name),
                             f"Recorded on a GPU by `{recorded_by(name)}`")
    body.append("Predictions (tile orders, wave footprints, rounds) ARE computed here, from lab.core.tile_order.")
    return mode_box(current.live, current.reason, live, body)


@dataclass(frozen=True)
class Gpu:
    """What the predictions need from the GPU: SMs (one persistent block each) and the L2 size."""

    sm_count: int
    l2_bytes: int
    where: str

    def __str__(self) -> str:
        return (f"{self.sm_count} SMs, L2 {records.format_bytes(self.l2_bytes)} ({self.l2_bytes / 1e6:.1f} MB), "
                f"from {self.where}")


def gpu_facts(current: Mode, payloads: dict[str, dict | None]) -> Gpu:
    """LIVE: this GPU. REPLAY: the GPU the records were made on (their provenance), else the gemm_tc records',
    else ASSUMED_GPU."""
    if current.live:
        from lab.core import device

        gpu = device.current()
        return Gpu(gpu.sm_count, gpu.l2_bytes, f"this GPU, {gpu.name}")
    provenances = [(name, p["provenance"]) for name, p in payloads.items() if p is not None]
    from lab.lessons.views import reference

    tc = reference(TC_FAMILY)
    if tc is not None:
        provenances.append((TC_FAMILY, tc.provenance))
    for name, prov in provenances:
        if prov.get("sm_count") and prov.get("l2_bytes"):
            return Gpu(int(prov["sm_count"]), int(prov["l2_bytes"]),
                       f"the provenance of {name}.json ({describe_provenance(prov)})")
    return Gpu(ASSUMED_GPU["sm_count"], ASSUMED_GPU["l2_bytes"], ASSUMED_GPU["device"])


@dataclass(frozen=True)
class Tile:
    """The block tile of the gemm_tc rungs the lesson times (their knobs): bm x bn of C, bk deep per k-step."""

    bm: int
    bn: int
    bk: int

    def grid(self, shape: dict) -> tuple[int, int]:
        return -(-shape["M"] // self.bm), -(-shape["N"] // self.bn)

    def tiles(self, shape: dict) -> int:
        tiles_m, tiles_n = self.grid(shape)
        return tiles_m * tiles_n

    def k_tiles(self, shape: dict) -> int:
        return -(-shape["K"] // self.bk)

    def __str__(self) -> str:
        return f"{self.bm} x {self.bn} tiles of C, k-steps of {self.bk}"


def sm_count_of(payload: dict | None, gpu: Gpu) -> int:
    """The SM count a payload was measured with (its own field, else its provenance's), else `gpu`'s: predictions
    set beside replayed records use the records' GPU, not the one here."""
    if payload is None:
        return gpu.sm_count
    return int(payload.get("sm_count") or payload.get("provenance", {}).get("sm_count") or gpu.sm_count)


def tile_knobs(rung: str = TC_RUNG) -> Tile:
    from lab.families import get_family

    knobs = dict(get_family(TC_FAMILY).rung(rung).spec.knobs)
    return Tile(knobs["BM"], knobs["BN"], knobs["BK"])


# ----------------------------------------------------------------------------------------------
# Predictions (lab.core.tile_order; no GPU, no records)
# ----------------------------------------------------------------------------------------------

def shape_label(shape: dict) -> str:
    return f"{shape['M']}x{shape['N']}x{shape['K']}"


def min_reads(shape: dict, element_bytes: int = 2) -> int:
    """A and B read once each: the fewest DRAM bytes a GEMM can read."""
    return element_bytes * shape["K"] * (shape["M"] + shape["N"])


def rounds(shape: dict, tile: Tile, sm_count: int) -> dict:
    """Rung 06's rounds of tiles (ceil(tiles / SMs)) against rung 07's busiest block
    (lab.core.tile_order.stream_k_rounds,
    without the fix-up), and the speed-up that predicts."""
    tiles, k_tiles = tile.tiles(shape), tile.k_tiles(shape)
    dp = -(-tiles // min(tiles, sm_count))
    sk = tile_order.stream_k_rounds(tiles, k_tiles, min(sm_count, tiles * k_tiles))
    return {"tiles": tiles, "k_tiles": k_tiles, "waves": tiles / sm_count, "dp_rounds": dp, "sk_rounds": sk,
            "predicted": dp / sk, "dp_efficiency": tiles / (sm_count * dp), "sk_efficiency": tiles / (sm_count * sk)}


def rounds_table(shapes: Iterable[dict], tile: Tile, sm_count: int, kinds: dict | None = None) -> str:
    lines = [f"{'shape':18s} {'kind':15s} {'tiles':>6s} {'/ SMs':>6s} {'06 rounds':>9s} {'07 rounds':>9s} "
             f"{'07 / 06 predicted':>18s}"]
    for shape in shapes:
        r = rounds(shape, tile, sm_count)
        kind = (kinds or {}).get(shape_label(shape), "")
        lines.append(f"{shape_label(shape):18s} {kind:15s} {r['tiles']:6d} {r['waves']:6.2f} {r['dp_rounds']:9d} "
                     f"{r['sk_rounds']:9.3f} {r['predicted']:18.2f}")
    return "\n".join(lines)


def named_kinds() -> dict[str, str]:
    """The stream-K study's named shapes by kind (lab.studies.scheduling)."""
    kinds = {shape_label(s): "wave-quantized" for s in scheduling.WAVE_QUANTIZED}
    kinds |= {shape_label(s): "well-quantized" for s in scheduling.WELL_QUANTIZED}
    return kinds | {shape_label(s): "square" for s in scheduling.SQUARES}


def sawtooth_prediction(ms: Iterable[int], tile: Tile, sm_count: int, n: int = scheduling.WAVE_N,
                        k: int = scheduling.WAVE_K) -> list[dict]:
    """For each M: the share of the SMs' tile-times that does useful work, data-parallel (tiles / (SMs x rounds))
    and stream-K (tiles / (SMs x stream_k_rounds)): throughput relative to full waves, before any fix-up."""
    return [{"M": m, **rounds({"M": m, "N": n, "K": k}, tile, sm_count)} for m in ms]


# ----------------------------------------------------------------------------------------------
# The records, summarised against the expectations
# ----------------------------------------------------------------------------------------------

def _key(row: dict) -> tuple[int, int, int]:
    return row["M"], row["N"], row["K"]


def shapes_of(rows: Iterable[dict]) -> list[dict]:
    return [{"M": m, "N": n, "K": k} for m, n, k in dict.fromkeys(map(_key, rows))]


def _same(shape: dict) -> Callable[[dict], bool]:
    return lambda row: _key(row) == _key(shape)


def order_table(payload: dict | None, name: str = "schedule_orders") -> str:
    """TFLOP/s per order per shape, against the row order and cuBLAS in the same run."""
    if payload is None:
        return missing(name)
    rows = payload.get("rows") or []
    lines = [source(payload, name), f"{payload.get('family')} rung {payload.get('rung')}, {payload.get('l2')} L2:",
             f"  {'shape':18s} {'order':12s} {'TFLOP/s':>8s} {'x row':>6s} {'x cuBLAS':>9s}"]
    for row in rows:
        x_row = row.get("x_row")
        lines.append(f"  {shape_label(row):18s} {setting_label(row['order'], row['group_m']):12s} {row['tflops']:8.1f} "
                     f"{x_row if x_row is None else format(x_row, '.3f'):>6} {row['x_cublas']:9.3f}")
    return "\n".join(lines)


def best_order(payload: dict | None, shape: dict = HEADLINE_SHAPE) -> dict | None:
    """The fastest order's row at `shape` (None without rows there)."""
    mine = [r for r in (payload or {}).get("rows", []) if _same(shape)(r)]
    return min(mine, key=lambda r: r["median_ms"]) if mine else None


def _row_of(rows: Iterable[dict], shape: dict, order: str, group: int) -> dict | None:
    return next((r for r in rows if _same(shape)(r) and r["order"] == order and r["group_m"] == group), None)


def _verdict(value: float, expected: float, at_least: bool = True) -> str:
    """'as expected (>= 1.3)' or 'NOT as expected (>= 1.3)': a measured value against the lesson's expectation."""
    ok = value >= expected if at_least else value <= expected
    return f"{'as expected' if ok else 'NOT as expected'} ({'>=' if at_least else '<='} {expected})"


def order_gains(orders: dict | None, ncu: dict | None, shape: dict = HEADLINE_SHAPE) -> str:
    """The lesson's two order expectations at `shape`: the best order's speed over row-major, and its DRAM reads over
    row-major's (Nsight Compute)."""
    if orders is None:
        return missing("schedule_orders")
    best, row = best_order(orders, shape), _row_of(orders["rows"], shape, "row", 0)
    if best is None or row is None:
        return f"(no row-order record at {shape_label(shape)} in schedule_orders: nothing to compare)"
    speed = row["median_ms"] / best["median_ms"]
    label = setting_label(best["order"], best["group_m"])
    lines = [f"at {shape_label(shape)}: the fastest order is {label}, {best['tflops']:.1f} TFLOP/s against "
             f"{row['tflops']:.1f} in row order: {speed:.3f}x, {_verdict(speed, EXPECTED['order_speedup'])}"]
    if ncu is None:
        lines.append(missing("schedule_orders_ncu"))
        return "\n".join(lines)
    nbest = _row_of(ncu.get("rows", []), shape, best["order"], best["group_m"])
    nrow = _row_of(ncu.get("rows", []), shape, "row", 0)
    if nbest is None or nrow is None:
        lines.append(f"(the counters hold no {label} and row rows at {shape_label(shape)})")
        return "\n".join(lines)
    ratio = nbest["dram_read_bytes"] / nrow["dram_read_bytes"]
    lines.append(f"its DRAM reads: {nbest['dram_read_bytes'] / 1e9:.2f} GB against {nrow['dram_read_bytes'] / 1e9:.2f} "
                 f"GB in row order: {ratio:.3f}x, {_verdict(ratio, EXPECTED['order_dram'], at_least=False)} "
                 f"(L2 hit rate {nbest['l2_hit_rate_pct']:.1f} against {nrow['l2_hit_rate_pct']:.1f} percent)")
    return "\n".join(lines)


def ncu_table(payload: dict | None, name: str = "schedule_orders_ncu") -> str:
    """DRAM bytes and the L2 hit rate per order per shape, with reads as a multiple of the minimum."""
    if payload is None:
        return missing(name)
    lines = [source(payload, name), f"  {'shape':18s} {'order':12s} {'read GB':>8s} {'x min':>6s} {'write GB':>9s} "
             f"{'L2 hit %':>9s}"]
    for row in payload.get("rows", []):
        lines.append(f"  {shape_label(row):18s} {setting_label(row['order'], row['group_m']):12s} "
                     f"{row['dram_read_bytes'] / 1e9:8.2f} {row['dram_read_bytes'] / min_reads(row):6.2f} "
                     f"{row['dram_write_bytes'] / 1e9:9.2f} {row['l2_hit_rate_pct']:9.1f}")
    return "\n".join(lines)


def fp32_contrast(payload: dict | None, name: str = "schedule_orders_fp32") -> str:
    """The FP32 rung's grouped order against its row order, per shape: time, and DRAM reads where counted."""
    if payload is None:
        return missing(name)
    rows = payload.get("rows", [])
    counted = (payload.get("counters") or {}).get("rows", [])
    lines = [source(payload, name)]
    for shape in shapes_of(rows):
        row = _row_of(rows, shape, "row", 0)
        for other in (r for r in rows if _same(shape)(r) and r["order"] != "row"):
            if row is None:
                continue
            label = setting_label(other["order"], other["group_m"])
            line = (f"  {shape_label(shape)}: {label} {other['tflops']:.1f} TFLOP/s, row {row['tflops']:.1f}: "
                    f"{row['median_ms'] / other['median_ms']:.3f}x")
            c_other, c_row = (_row_of(counted, shape, other["order"], other["group_m"]),
                              _row_of(counted, shape, "row", 0))
            if c_other and c_row:
                mine, base = c_other["dram_read_bytes"], c_row["dram_read_bytes"]
                line += f"; DRAM reads {mine / 1e9:.2f} GB against {base / 1e9:.2f} GB ({mine / base:.3f}x)"
            lines.append(line)
    return "\n".join(lines)


def small_items_gains(payload: dict | None, name: str = "small_items") -> str:
    """The queue's speed-up over one launch per item, for items under the expected microseconds of work (an
    item's own time: one item alone, `alone_us`), and where the CUDA graph of those launches lands."""
    if payload is None:
        return missing(name)
    limit, expected = EXPECTED["queue_item_us"], EXPECTED["queue_speedup"]
    rows = sorted(payload.get("rows", []), key=lambda r: r["bytes_per_item"])
    lines = [source(payload, name),
             f"  {'length':>8s} {'mix':8s} {'alone us':>9s} {'launch/queue':>13s} {'graph/queue':>12s} "
             f"{'launch/graph':>13s}"]
    small = []
    for r in rows:
        lq, gq, lg = r["launch_us"] / r["queue_us"], r["graph_us"] / r["queue_us"], r["launch_us"] / r["graph_us"]
        if r["alone_us"] < limit:
            small.append(lq)
        lines.append(f"  {r['length']:8d} {r['mix']:8s} {r['alone_us']:9.2f} {lq:13.1f} {gq:12.1f} {lg:13.1f}")
    if small:
        lines.append(f"items under {limit:g} us of work (alone): the queue is {min(small):.1f}x to {max(small):.1f}x "
                     f"faster per item than one launch per item; the slowest of those {_verdict(min(small), expected)}")
    else:
        lines.append(f"(no item in these records takes under {limit:g} us alone)")
    if "empty_kernel" in payload:
        e = payload["empty_kernel"]
        lines.append(f"an empty kernel: {e['events_us']:.2f} us between two events, {e['graph_us']:.2f} us per graph "
                     "node (what a launch costs before any work)")
    return "\n".join(lines)


def _named(payload: dict | None, kind: str) -> list[dict]:
    return [r for r in (payload or {}).get("named", []) if r.get("kind") == kind]


def persistent_rounds(payload: dict | None, name: str = "schedule_stream_k") -> str:
    """Rung 06 over rung 05 on the squares, round by round (the rungs take turns, so a drifting clock touches
    both alike), and the median per shape against the expectation."""
    if payload is None:
        return missing(name)
    rows = _named(payload, "square")
    if not rows:
        return f"(no square rows in {name}: nothing to compare)"
    lines = [source(payload, name)]
    for shape in shapes_of(rows):
        ratios = [r[f"{WS_RUNG}_ms"] / r[f"{DP_RUNG}_ms"] for r in rows if _same(shape)(r)]
        med = statistics.median(ratios)
        lines.append(f"  {shape_label(shape)}: 06 / 05 per round " + ", ".join(f"{x:.3f}" for x in ratios)
                     + f"; median {med:.3f}x, {_verdict(med, EXPECTED['persistent'])}")
    return "\n".join(lines)


def stream_k_ratios(payload: dict | None, tile: Tile, name: str = "schedule_stream_k") -> str:
    """Rung 07 over rung 06 on each named shape (median over its rounds) beside the prediction, the variant that
    splits every partial wave (SK_MIN_GAIN = 0) where the record has it, and per kind whether every shape meets
    the lesson's expectation (the squares have none: they show what the model chose)."""
    if payload is None:
        return missing(name)
    sm_count = sm_count_of(payload, Gpu(ASSUMED_GPU["sm_count"], ASSUMED_GPU["l2_bytes"], ""))
    named = payload.get("named") or []
    shown = [(key, title) for key, title in VARIANTS if any(f"{key}_ms" in r for r in named)]
    lines = [source(payload, name),
             f"  {'shape':18s} {'kind':15s} {'rounds':>6s} {'07 / 06':>8s}"
             + "".join(f" {title:>13s}" for _, title in shown) + f" {'predicted':>9s} {'07 / cuBLAS':>11s}"]
    by_kind: dict[str, list[float]] = {}
    for kind in ("wave-quantized", "well-quantized", "square"):
        rows = _named(payload, kind)
        for shape in shapes_of(rows):
            mine = [r for r in rows if _same(shape)(r)]
            ratio = statistics.median(r[f"{DP_RUNG}_ms"] / r[f"{SK_RUNG}_ms"] for r in mine)
            vs_cublas = statistics.median(r["cublas_ms"] / r[f"{SK_RUNG}_ms"] for r in mine)
            by_kind.setdefault(kind, []).append(ratio)
            extra = "".join(f" {statistics.median(r[f'{DP_RUNG}_ms'] / r[f'{key}_ms'] for r in mine):13.3f}"
                            for key, _ in shown)
            lines.append(f"  {shape_label(shape):18s} {kind:15s} {len(mine):6d} {ratio:8.3f}{extra} "
                         f"{rounds(shape, tile, sm_count)['predicted']:9.2f} {vs_cublas:11.3f}")
    for kind, ratios in by_kind.items():
        if kind in EXPECTED:
            lines.append(f"{kind}: 07 / 06 from {min(ratios):.3f}x to {max(ratios):.3f}x (median "
                         f"{statistics.median(ratios):.3f}x); the lowest {_verdict(min(ratios), EXPECTED[kind])}")
    return "\n".join(lines)


def determinism(payload: dict | None, name: str = "schedule_stream_k") -> str:
    if payload is None:
        return missing(name)
    d = payload.get("determinism")
    if not d:
        return f"(no determinism record in {name})"
    verdict = "the same bits every run" if d["differing_elements"] == 0 else "NOT the same bits every run"
    return (f"rung 07 run {d['runs']} times on {shape_label(d['shape'])}: {d['differing_elements']} output elements "
            f"differ between runs: {verdict}")


def sweep_crossings(payload: dict | None) -> str:
    """Where the sweep's tile count crosses a multiple of the SM count, and each side's throughput."""
    if payload is None:
        return missing("schedule_stream_k")
    rows = sorted(payload.get("sweep", []), key=lambda r: r["M"])
    sm_count = int(payload.get("sm_count") or ASSUMED_GPU["sm_count"])
    lines = []
    for before, after in zip(rows, rows[1:], strict=False):
        if -(-before["tiles"] // sm_count) != -(-after["tiles"] // sm_count):  # one more round of tiles
            lines.append(f"  M {before['M']} -> {after['M']} (tiles {before['tiles']} -> {after['tiles']}): "
                         + ", ".join(f"{k} {before['tflops'][k]:.0f} -> {after['tflops'][k]:.0f}"
                                     for k in ("06_persistent", "07_stream_k", "cublas") if k in before["tflops"])
                         + " TFLOP/s")
    return "\n".join(["wave boundaries in the sweep:", *lines]) if lines else "(the sweep crosses no wave boundary)"


# ----------------------------------------------------------------------------------------------
# Showing
# ----------------------------------------------------------------------------------------------

def show(fn: Callable, payload: dict | None, name: str, **kwargs) -> None:
    """lab.lessons.plots.<fn>(payload, ...) shown inline, or the sentence saying the payload is missing."""
    from lab.lessons.views import figure

    if payload is None:
        print(missing(name))
        return
    figure(fn(payload, **kwargs), f"{name} holds no rows for {fn.__name__}")


def predicted_ratios(tile: Tile, sm_count: int) -> dict[str, float]:
    """Rung 07 over rung 06 as the rounds predict it (no fix-up), for every named shape of the stream-K study."""
    shapes = scheduling.WAVE_QUANTIZED + scheduling.WELL_QUANTIZED + scheduling.SQUARES
    return {shape_label(s): rounds(s, tile, sm_count)["predicted"] for s in shapes}


def sawtooth_summary(predicted: list[dict]) -> str:
    """The predicted sawtooth in numbers: each schedule's share of busy SM time, on average and at its worst."""
    lines = []
    for key, name in (("dp_efficiency", "data-parallel (rung 06)"), ("sk_efficiency", "stream-K (rung 07)")):
        worst = min(predicted, key=lambda p: p[key])
        lines.append(f"{name:24s}: mean share of busy SM time {statistics.mean(p[key] for p in predicted):.3f}, "
                     f"lowest {worst[key]:.3f} at M={worst['M']} ({worst['tiles']} tiles)")
    return "\n".join(lines)


def item_sizes() -> str:
    """The small-items study's tables before anything runs: each length's bytes per item and item count."""
    from lab.families import work_queue

    lines = [f"{'length':>8s} {'bytes/item':>11s} {'items':>6s}"]
    for length in work_queue.SIZES:
        lines.append(f"{length:8d} {records.format_bytes(work_queue.BYTES_PER_ELEMENT * length):>11s} "
                     f"{work_queue.n_items_for(length):6d}")
    return "\n".join(lines)


def tiles_per_sm(shapes: Iterable[dict], tile: Tile, sm_count: int) -> str:
    """Tiles per persistent block: how many pipeline fills rung 06 saves per SM over rung 05."""
    return "\n".join(f"{shape_label(s)}: {tile.tiles(s)} tiles, {tile.tiles(s) / sm_count:.2f} per SM, "
                     f"{tile.k_tiles(s)} k-steps per tile" for s in shapes)


# ----------------------------------------------------------------------------------------------
# Sources and records for the cells written out in the notebook
# ----------------------------------------------------------------------------------------------

def tile_order_source() -> Markdown:
    """The kernels' tile-order function (lab_tile_coords in kernels/common/lab_tile_order.cuh), as a code block."""
    from lab.core.build import KERNELS_DIR

    text = (KERNELS_DIR / TILE_ORDER_HEADER).read_text()
    start = text.index("template <int TILE_ORDER")
    return md(f"`kernels/{TILE_ORDER_HEADER}`\n\n```cuda\n{text[start:].rstrip()}\n```")


def header_prediction(source_path: str) -> str:
    """The "Prediction" field of a kernel's header comment (kernels/<source_path>), line by line, up to the next
    field ("Requires:", "Knobs:", ...)."""
    import re

    from lab.core.build import KERNELS_DIR

    header = []
    for line in (KERNELS_DIR / source_path).read_text().splitlines():
        if not line.startswith("//"):
            break
        header.append(line[2:].removeprefix(" "))
    start = next((i for i, line in enumerate(header) if line.startswith("Prediction")), None)
    if start is None:
        return f"(kernels/{source_path} states no prediction)"
    stop = next((i for i in range(start + 1, len(header)) if re.match(r"[A-Z][\w ]*:", header[i])), len(header))
    return "\n".join(header[start:stop]).rstrip()


def checked_shapes(payload: dict | None, name: str = "schedule_stream_k") -> str:
    """The shapes on which the study checked rung 07 against float64 before timing it (the payload's "checked")."""
    if payload is None:
        return missing(name)
    shapes = payload.get("checked") or []
    if not shapes:
        return f"({name} does not list the shapes it checked rung {SK_RUNG} on)"
    return (f"{source(payload, name)}\nbefore timing, rung {SK_RUNG} was checked against the float64 reference "
            f"(lab.measure.verify.check_case on each, guard zones included) on: {', '.join(map(shape_label, shapes))}")


def recorded_times(payload: dict | None, shape: dict, name: str = "schedule_stream_k") -> str:
    """At one named shape of the stream-K study: the median time of rungs 06 and 07 and cuBLAS over the rounds,
    timed in the same run, and rung 07's speed against each."""
    if payload is None:
        return missing(name)
    mine = [r for r in payload.get("named", []) if _same(shape)(r)]
    if not mine:
        return f"(no rows at {shape_label(shape)} in {name})"
    ms = {key: statistics.median(r[f"{key}_ms"] for r in mine) for key in (DP_RUNG, SK_RUNG, "cublas")}
    times = ", ".join(f"{key} {value * 1e3:.1f} us" for key, value in ms.items())
    return (f"{source(payload, name)}\nat {shape_label(shape)} (cold L2, median of {len(mine)} rounds): {times}\n"
            f"rung 07 runs at {ms['cublas'] / ms[SK_RUNG]:.3f}x cuBLAS's speed and "
            f"{ms[DP_RUNG] / ms[SK_RUNG]:.3f}x rung 06's")


def rung_excerpt(key: str, first: str, lines: int) -> Markdown:
    """`lines` lines of gemm_tc rung `key`'s source from the first line that contains `first`, as a code block."""
    from lab.core.build import read_source
    from lab.families import get_family

    spec = get_family(TC_FAMILY).rung(key).spec
    text = read_source(spec).splitlines()
    start = next((i for i, line in enumerate(text) if first in line), None)
    if start is None:
        return md(f"(`kernels/{spec.source}` has no line with `{first}`)")
    body = "\n".join(text[start:start + lines])
    return md(f"`kernels/{spec.source}`, lines {start + 1}-{start + lines}:\n\n```cuda\n{body}\n```")


def code_diff(key: str, context: int = 1) -> Markdown:
    """The diff of gemm_tc rung `key` against the rung before it, code lines only: lines that are only a comment
    (the header's prose among them, which the cells above quote) are left out."""
    import re

    from lab.lessons.sources import rung_diff

    lines = [line for line in rung_diff(TC_FAMILY, key, context).splitlines() if not re.match(r"^[-+ ]\s*//", line)]
    return md("```diff\n" + "\n".join(lines) + "\n```")
