"""The lesson of notebook 05: shapes that do not fill the GPU. Split-K for long K and few output tiles,
decode (a handful of tokens against a large weight), and grouped GEMM (many small GEMMs of different sizes).

What it reads, all replayed from lab.measure.records.reference_dir() (results/h200 unless LAB_REFERENCE_RESULTS):
- JSON payloads (loaded as lab.lessons.scheduling loads its own): split_k_factors.json (lab.studies.split_k, `lab study
  splitk`), split_k_ncu.json (scripts/split_k_ncu.py: the raw Nsight Compute CSV rows of the split kernels) and
  grouped_table_cost.json (lab.studies.grouped_table_cost, `lab study grouped-table-cost`: the host time to build
  the grouped problem table);
- the RecordSets of `lab bench FAMILY --json`: gemm_split_k, decode, grouped_gemm;
- for the predictions: the copy records (the device copy's time against bytes) and the gemm_tc records (rung 06's
  time per k-step of one tile).
In LIVE mode (a GPU here) a short plan is checked and measured now and shown first, the full records beside it.

Every number printed is computed: from the shapes and the families' own launch arithmetic (predictions), or from
records (measurements). The targets are the lesson's, named as targets.
"""

from __future__ import annotations

import functools
import json
import math
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lab.core.errors import LabError
from lab.lessons import scheduling as _payloads  # its loader reads any {"provenance": ...} payload
from lab.lessons.common import describe_provenance, mode_box, record_lines, run_stamp, shown_path
from lab.measure import records
from lab.measure.records import Record, RecordSet, format_bytes
from lab.tools import ncu as nsight_compute

if TYPE_CHECKING:
    from lab.core.ladder import Family
    from lab.lessons.mode import Mode
    from lab.lessons.scheduling import Gpu

SPLIT_FACTORS, SPLIT_NCU, TABLE_COST = "split_k_factors", "split_k_ncu", "grouped_table_cost"
PAYLOADS = (SPLIT_FACTORS, SPLIT_NCU, TABLE_COST)
SPLIT_FAMILY, DECODE_FAMILY, GROUPED_FAMILY = "gemm_split_k", "decode", "grouped_gemm"
FAMILIES = (SPLIT_FAMILY, DECODE_FAMILY, GROUPED_FAMILY)
PREDICTION_INPUTS = ("copy", "gemm_tc")  # other ladders' records the predictions read
FILES = (SPLIT_FACTORS, SPLIT_FAMILY, SPLIT_NCU, DECODE_FAMILY, GROUPED_FAMILY, TABLE_COST) + PREDICTION_INPUTS
_RECORDED_BY = {
    SPLIT_FACTORS: "lab study splitk --out {dir}",
    SPLIT_NCU: "python3 scripts/split_k_ncu.py {dir}",
    TABLE_COST: "lab study grouped-table-cost --out {dir}",
}

# The lesson's targets (what it sets out to show), not measurements.
TARGETS = {"split_x_cublas": 1.0, "decode_x_copy": 0.85, "decode_x_cublas": 1.15, "decode_side": 8192,
           "decode_max_tokens": 16, "grouped_x_loop": 5.0, "grouped_min_groups": 64, "grouped_small_case": "small",
           "grouped_batched_time": 1.2}

SPLIT_SHAPES = ({"M": 256, "N": 256, "K": 65536}, {"M": 128, "N": 128, "K": 131072})  # lab.studies.split_k.SHAPES
SPLIT_MODES = ("08_split_k", "08_split_k_in_kernel", "08_split_k_atomic")  # lab.studies.split_k.MODES
PLAIN_RUNG, CUBLAS = "06_persistent", "cublas"
BK = 64  # the gemm_tc rungs' k-step
RATE_SHAPE = {"M": 4096, "N": 4096, "K": 4096, "dtype": "float16", "layout": "TN"}  # rung 06's rate is read here
DECODE_RUNG, DECODE_CUBLAS, COPY = "01_mma_gemv", "cublas", "cupy_device_copy"
DECODE_SIDES, DECODE_TOKENS = (4096, 8192), (1, 2, 4, 8, 16, 32, 64, 128)
# Little's law needs a latency; rung 01's header assumes about a microsecond of DRAM latency. An assumption stated
# as one, not a measurement.
ASSUMED_DRAM_LATENCY_US = 1.0
GROUPED_RUNG, LOOP, BATCHED = "01_grouped_persistent", "cupy_loop", "cublas_batched"
GROUPED_CASES = ("moe", "uniform", "small")

# LIVE: a short plan (a few minutes on an H200), the full studies being `lab study splitk` and `lab bench`.
LIVE_SPLIT_SHAPE = SPLIT_SHAPES[0]
LIVE_FACTORS = (1, 4, 16, 33, 66, 132)
LIVE_DETERMINISM_RUNS = 5
LIVE_DECODE = tuple({"M": m, "N": n, "K": n, "dtype": "float16"} for n in DECODE_SIDES for m in (1, 16, 128))
LIVE_GROUPED = tuple({"case": c, "dtype": "float16"} for c in GROUPED_CASES)
LIVE_MIN_TIME_MS = 5.0


# ----------------------------------------------------------------------------------------------
# Families and where their records come from
# ----------------------------------------------------------------------------------------------

def ladder(name: str) -> Family | None:
    """The family `name`: from lab.families' catalogue, else (decode, before it is registered) from its module;
    None when this checkout has neither."""
    from lab.families import get_family

    try:
        return get_family(name)
    except LabError:
        pass
    if name == DECODE_FAMILY:
        try:
            from lab.families.decode import DecodeFamily
        except ImportError:
            return None
        return DecodeFamily()
    return None


def record_path(name: str) -> Path:
    return records.reference_dir() / f"{name}.json"


def recorded_by(name: str) -> str:
    where = shown_path(records.reference_dir())
    if name in _RECORDED_BY:
        return _RECORDED_BY[name].format(dir=where)
    return f"lab bench {name} --json {where}/{name}.json"


def missing(name: str) -> str:
    return (f"NO RECORDS for {name}: {shown_path(record_path(name))} is absent or unreadable, so this cell shows "
            f"nothing from it. On a GPU, `{recorded_by(name)}` records it.")


def load(name: str) -> dict | None:
    """A JSON payload of PAYLOADS, marked replayed; None when absent or unreadable."""
    return _payloads.load(name)


def replayed_records(name: str) -> RecordSet | None:
    """The reference GPU's RecordSet of family (or prediction input) `name`, None when absent."""
    from lab.lessons.views import reference

    return reference(name)


def replayed() -> dict[str, dict | RecordSet | None]:
    """Every file of FILES: payloads as dicts, family records as RecordSets."""
    return {name: load(name) if name in PAYLOADS else replayed_records(name) for name in FILES}


def _provenance(item: dict | RecordSet) -> dict:
    return item.provenance if isinstance(item, RecordSet) else item.get("provenance", {})


def source(item: dict | RecordSet | None, name: str) -> str:
    """Where a payload's or RecordSet's numbers come from: replayed (device, date, commit), measured now, or
    missing."""
    if item is None:
        return missing(name)
    where = describe_provenance(_provenance(item))
    again = item.replayed if isinstance(item, RecordSet) else item.get("replayed")
    if again:
        return f"{name}: REPLAYED from {where} ({shown_path(record_path(name))}), not measured here."
    return f"{name}: measured in this run, on {where}."


def banner(current: Mode, files: dict[str, dict | RecordSet | None]) -> str:
    """A loud box: LIVE (a short plan measured in this run, the full records replayed beside it) or REPLAY; then every
    record file with its provenance, or NO RECORDED RESULTS and the command that records it."""
    live = []
    if current.live:
        live = [f"A SHORT plan, checked and {run_stamp()};", "no Nsight Compute in it.",
                "Beside each live table, the FULL records of the reference GPU are REPLAYED, and labelled so:"]
    body = []
    for name in FILES:
        item = files.get(name)
        role = " (read by the predictions)" if name in PREDICTION_INPUTS else ""
        body += record_lines(name + role, None if item is None else _provenance(item), record_path(name),
                             f"Recorded on a GPU by `{recorded_by(name)}`")
    body.append("Predictions (tiles, waves, bytes, launch plans) ARE computed here, from the shapes and the families.")
    return mode_box(current.live, current.reason, live, body)


def gpu_facts(current: Mode, files: dict[str, dict | RecordSet | None]) -> Gpu:
    """LIVE: this GPU; REPLAY: the GPU the records were made on (lab.lessons.scheduling.gpu_facts on their
    provenance), else the reference H200 as that module assumes it."""
    with_provenance = {name: {"provenance": _provenance(item)} for name, item in files.items() if item is not None}
    return _payloads.gpu_facts(current, with_provenance)


def _meets(value: float, target: float, at_most: bool = False) -> str:
    ok = value <= target if at_most else value >= target
    return f"target {'<=' if at_most else '>='} {target:g}: {'met' if ok else 'MISSED'}"


def _opt(value: float | None, spec: str) -> str:
    """`value` formatted by `spec` ('10.1f'), or a dash right-aligned to the same width when there is none."""
    if value is None:
        return "-".rjust(int(spec.split(".")[0]))
    return format(value, spec)


def shape_label(shape: dict) -> str:
    return f"{shape['M']}x{shape['N']}x{shape['K']}"


# ----------------------------------------------------------------------------------------------
# Two measured facts the predictions stand on: the device copy's time against bytes, and rung 06's time per
# k-step of one tile. Both are other ladders' records, not this lesson's.
# ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CopyModel:
    """The device copy's cold-L2 time against the bytes it moves (read + written), from the copy ladder's sweep
    records: the fastest a kernel that must move those bytes can be, timed as every record here is timed (events
    around one launch, the same fixed cost included)."""

    points: tuple[tuple[int, float], ...]  # (bytes moved, median us), increasing bytes
    where: str

    @property
    def floor_us(self) -> float:
        """The time of the smallest copy: what one timed launch costs before it moves any bytes worth counting."""
        return self.points[0][1]

    @property
    def peak_gbs(self) -> float:
        return max(b / (us * 1e3) for b, us in self.points)

    def time_us(self, nbytes: float) -> float:
        """Log-log interpolation between the two sweep sizes around `nbytes` (linear beyond the largest)."""
        pts = self.points
        if nbytes <= pts[0][0]:
            return pts[0][1]
        for (b0, t0), (b1, t1) in zip(pts, pts[1:], strict=False):
            if nbytes <= b1:
                f = math.log(nbytes / b0) / math.log(b1 / b0)
                return math.exp(math.log(t0) + f * math.log(t1 / t0))
        b, t = pts[-1]
        return t * nbytes / b

    def gbs(self, nbytes: float) -> float:
        return nbytes / (self.time_us(nbytes) * 1e3)


def copy_model(rs: RecordSet | None = None) -> CopyModel | None:
    """CopyModel from the copy records' cold sweep of the ceiling (None without them)."""
    rs = rs if rs is not None else replayed_records("copy")
    if rs is None:
        return None
    recs = sorted(rs.where(kind="sweep", l2="cold", rung=COPY), key=lambda r: r.bytes_moved)
    if len(recs) < 2:
        return None
    return CopyModel(tuple((r.bytes_moved, r.median_ms * 1e3) for r in recs),
                     f"the device copy's cold sweep, {rs.label()}")


@dataclass(frozen=True)
class TileRate:
    """Rung 06's time per k-step of one 128 x 256 tile on one SM, from its record at RATE_SHAPE: the time divided by
    the rounds of tiles (ceil(tiles / SMs)) and by the k-steps per tile. Other tiles are scaled by their area, as if
    every SM ran rung 06's FLOP rate whatever its tile: an optimistic assumption for narrower tiles."""

    us_per_kstep: float
    bm: int
    bn: int
    where: str

    def kstep_us(self, bm: int, bn: int) -> float:
        return self.us_per_kstep * (bm * bn) / (self.bm * self.bn)


def tile_rate(rs: RecordSet | None = None, sm_count: int | None = None) -> TileRate | None:
    """TileRate from gemm_tc's headline record of rung 06 at RATE_SHAPE (None without it)."""
    rs = rs if rs is not None else replayed_records("gemm_tc")
    if rs is None:
        return None
    found = [r for r in rs.where(kind="headline", rung=PLAIN_RUNG)
             if all(r.params.get(k) == v for k, v in RATE_SHAPE.items())]
    if not found:
        return None
    rec = found[0]
    sms = int(sm_count or rs.provenance.get("sm_count") or 132)
    bm, bn = 128, 256
    tiles = -(-RATE_SHAPE["M"] // bm) * -(-RATE_SHAPE["N"] // bn)
    rounds = -(-tiles // sms)
    us = rec.median_ms * 1e3 / rounds / (RATE_SHAPE["K"] // BK)
    return TileRate(us, bm, bn, f"gemm_tc {PLAIN_RUNG} at {shape_label(RATE_SHAPE)} fp16 "
                                f"({rec.value:.0f} TFLOP/s, {tiles} tiles in {rounds} rounds), {rs.label()}")


def prediction_inputs(copy: CopyModel | None, rate: TileRate | None) -> str:
    lines = []
    if copy is None:
        lines.append(missing("copy") + " The byte-bound predictions below need it.")
    else:
        lines.append(f"device copy: {copy.floor_us:.1f} us for its smallest size (the fixed cost of a timed launch), "
                     f"up to {copy.peak_gbs:.0f} GB/s at its largest; from {copy.where}")
    if rate is None:
        lines.append(missing("gemm_tc") + " The compute-bound predictions below need it.")
    else:
        lines.append(f"rung 06: {rate.us_per_kstep:.3f} us per k-step of a {rate.bm} x {rate.bn} tile on one SM; "
                     f"from {rate.where}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# 1. Split-K: predictions
# ----------------------------------------------------------------------------------------------

def split_tile(M: int, N: int) -> tuple[int, int]:
    """The tile gemm_split_k's launcher runs (every rung, rung 06 included): 128 x 128 where narrow_tiles says so,
    else 128 x 256."""
    from lab.families.gemm_split_k import narrow_tiles

    return 128, (128 if narrow_tiles(M, N) else 256)


def launcher_splits(shape: dict, sm_count: int) -> int:
    """S as the launcher picks it (lab.families.gemm_split_k.choose_splits, clamped to the k-steps)."""
    from lab.families.gemm_split_k import choose_splits

    bm, bn = split_tile(shape["M"], shape["N"])
    return max(1, min(choose_splits(shape["M"], shape["N"], shape["K"], bm, bn, sm_count), -(-shape["K"] // BK)))


def gemm_bytes(shape: dict) -> int:
    """A and B read once, C written once, 2 bytes each: the fewest DRAM bytes a fp16 GEMM moves."""
    M, N, K = shape["M"], shape["N"], shape["K"]
    return 2 * (M * K + N * K + M * N)


def slice_bytes(shape: dict, splits: int) -> int:
    """The fp32 workspace slices of modes 0 and 1: S x M x LDW floats written, then read back once."""
    ldw = -(-shape["N"] // 4) * 4
    return 2 * 4 * splits * shape["M"] * ldw


def tile_for_splits(shape: dict, splits: int, sm_count: int) -> tuple[int, int]:
    """The tile a record that ran `splits` most likely used: the current launcher's, unless only the other width's
    one-wave split (choose_splits) gives that S (records made before the launcher chose narrow tiles)."""
    from lab.families.gemm_split_k import choose_splits

    current = split_tile(shape["M"], shape["N"])
    other = (128, 384 - current[1])
    picks = {tile: choose_splits(shape["M"], shape["N"], shape["K"], *tile, sm_count) for tile in (current, other)}
    return other if picks[current] != splits and picks[other] == splits else current


def split_prediction(shape: dict, splits: int, sm_count: int, copy: CopyModel | None,
                     rate: TileRate | None, tile: tuple[int, int] | None = None) -> dict:
    """Split-K at S = `splits`: (tile, split) units over the SMs, the busiest SM's k-steps at rung 06's rate
    (compute), and the bytes at the device copy's speed, without (low) and with (high) the slices going through
    DRAM. The predicted time is the larger of compute and bytes: a range, since the slices may stay in the L2.
    `tile`: the launcher's (split_tile) unless given."""
    bm, bn = tile or split_tile(shape["M"], shape["N"])
    tiles = -(-shape["M"] // bm) * -(-shape["N"] // bn)
    k_tiles = -(-shape["K"] // BK)
    units = tiles * splits
    rounds = -(-units // sm_count)
    ksteps = rounds * -(-k_tiles // splits)
    out = {"S": splits, "tile": (bm, bn), "tiles": tiles, "k_tiles": k_tiles, "units": units,
           "busy_sms": min(units, sm_count), "ksteps": ksteps, "bytes": gemm_bytes(shape),
           "slices": slice_bytes(shape, splits), "flops": 2 * shape["M"] * shape["N"] * shape["K"]}
    out["compute_us"] = ksteps * rate.kstep_us(bm, bn) if rate else None
    if copy is not None:
        out["bytes_us"] = (copy.time_us(out["bytes"]), copy.time_us(out["bytes"] + out["slices"]))
    else:
        out["bytes_us"] = None
    if out["compute_us"] is not None and out["bytes_us"] is not None:
        fast, slow = (max(out["compute_us"], b) for b in out["bytes_us"])
        out["tflops"] = (out["flops"] / (slow * 1e6), out["flops"] / (fast * 1e6))
    else:
        out["tflops"] = None
    return out


def split_shapes(sm_count: int) -> str:
    """Why rung 06 underuses the GPU on the K-heavy shapes: its tiles against the SMs (in gemm_tc, 128 x 256; in
    gemm_split_k, the tile the launcher picks), and what the launcher's S turns them into."""
    lines = [f"{'shape':18s} {'tile':>8s} {'tiles':>6s} {'SMs busy':>9s} {'k-steps/tile':>13s} {'FLOP/byte':>10s} "
             f"{'S':>4s} {'units':>6s} {'k-steps/unit':>13s}"]
    for shape in SPLIT_SHAPES:
        s = launcher_splits(shape, sm_count)
        for bm, bn in dict.fromkeys([(128, 256), split_tile(shape["M"], shape["N"])]):
            tiles = -(-shape["M"] // bm) * -(-shape["N"] // bn)
            k_tiles = -(-shape["K"] // BK)
            intensity = 2 * shape["M"] * shape["N"] * shape["K"] / gemm_bytes(shape)
            launcher = (bm, bn) == split_tile(shape["M"], shape["N"])
            split = (f"{s:4d} {tiles * s:6d} {-(-(tiles * s) // sm_count) * -(-k_tiles // s):13d}" if launcher
                     else f"{'':4s} {'':6s} {'':13s}")
            busy = f"{min(tiles, sm_count):4d}/{sm_count:<4d}"
            lines.append(f"{shape_label(shape):18s} {bm:>4d}x{bn:<3d} {tiles:6d} {busy} {k_tiles:13d} "
                         f"{intensity:10.0f} {split}")
    lines.append(f"S = 1 (rung 06) keeps 'SMs busy' of the {sm_count} SMs working, each through every k-step of its "
                 "tile; the split-K launcher's S (on its own tile) gives every SM a unit of about k-steps / S.")
    return "\n".join(lines)


def split_prediction_table(sm_count: int, copy: CopyModel | None, rate: TileRate | None) -> str:
    """At the launcher's S and at S = 1: compute time, byte time (slices in L2 / through DRAM), and the TFLOP/s
    the larger of the two allows."""
    if copy is None or rate is None:
        return "\n".join(m for m in (copy is None and missing("copy"), rate is None and missing("gemm_tc")) if m)
    lines = [f"{'shape':18s} {'S':>4s} {'compute us':>11s} {'bytes MB':>9s} {'+slices MB':>11s} {'bytes us':>13s} "
             f"{'predicted TFLOP/s':>18s}"]
    for shape in SPLIT_SHAPES:
        for s in sorted({1, launcher_splits(shape, sm_count)}):
            p = split_prediction(shape, s, sm_count, copy, rate)
            lo, hi = p["bytes_us"]
            lines.append(f"{shape_label(shape):18s} {s:4d} {p['compute_us']:11.1f} {p['bytes'] / 1e6:9.1f} "
                         f"{p['slices'] / 1e6:11.1f} {lo:6.1f}-{hi:<6.1f} "
                         f"{p['tflops'][0]:8.0f}-{p['tflops'][1]:<8.0f}")
    return "\n".join(lines)


def split_predicted_curves(sm_count: int, copy: CopyModel | None, rate: TileRate | None,
                           factors: Iterable[int] | None = None, payload: dict | None = None) -> dict[str, list[dict]]:
    """split_prediction at every S of `factors` (default lab.studies.split_k.FACTORS) per shape, for the factor
    figure; on
    the tile the payload's workspace mode ran (tile_for_splits of its 'auto' S) where a payload is given."""
    if copy is None or rate is None:
        return {}
    if factors is None:
        from lab.studies.split_k import FACTORS as factors
    ran = {(r["M"], r["N"], r["K"]): r.get(f"{SPLIT_MODES[0]}_splits") for r in _rows(payload, "auto")}
    out = {}
    for shape in SPLIT_SHAPES:
        k_tiles = -(-shape["K"] // BK)
        s = ran.get((shape["M"], shape["N"], shape["K"]))
        tile = tile_for_splits(shape, int(s), sm_count) if s else None
        out[shape_label(shape)] = [split_prediction(shape, f, sm_count, copy, rate, tile) for f in factors
                                   if f <= k_tiles]
    return out


# ----------------------------------------------------------------------------------------------
# 1. Split-K: the records
# ----------------------------------------------------------------------------------------------

def _rows(payload: dict | None, kind: str) -> list[dict]:
    return [r for r in (payload or {}).get("rows", []) if r.get("kind") == kind]


def variants(payload: dict | None) -> list[str]:
    """The split rungs and knob variants a factor study timed (the keys of its rows' tflops), modes first."""
    keys = [k for r in _rows(payload, "factor") + _rows(payload, "auto") for k in r.get("tflops", {})]
    keys = [k for k in dict.fromkeys(keys) if k not in (CUBLAS, PLAIN_RUNG)]
    return [k for k in SPLIT_MODES if k in keys] + [k for k in keys if k not in SPLIT_MODES]


def split_auto_table(payload: dict | None, name: str = SPLIT_FACTORS) -> str:
    """Each variant at the launcher's own S beside cuBLAS and rung 06 in the same run, per shape (and padded rows
    where timed), against the target."""
    if payload is None:
        return missing(name)
    rows = _rows(payload, "auto")
    if not rows:
        return f"(no rows of kind 'auto' in {name})"
    lines = [source(payload, name)]
    for row in rows:
        t = row["tflops"]
        pad = f", rows padded by {row['pad']}" if row.get("pad") else ""
        lines.append(f"{shape_label(row)}{pad}: cuBLAS {t.get(CUBLAS, float('nan')):.0f} TFLOP/s, rung 06 (S = 1) "
                     f"{t.get(PLAIN_RUNG, float('nan')):.0f}")
        lines.append(f"  {'variant':34s} {'S':>4s} {'TFLOP/s':>8s} {'x cuBLAS':>9s} {'x rung 06':>10s}")
        for key in variants(payload):
            if key not in t:
                continue
            lines.append(f"  {key:34s} {row.get(f'{key}_splits', 0):4d} {t[key]:8.0f} "
                         f"{t[key] / t[CUBLAS]:9.3f} {t[key] / t[PLAIN_RUNG]:10.1f}")
    return "\n".join(lines)


def split_targets(payload: dict | None, name: str = SPLIT_FACTORS) -> str:
    """The lesson's split-K target at each shape (unpadded rows): the fastest reduction mode, and the fastest variant
    of any kind, against cuBLAS in the same run."""
    if payload is None:
        return missing(name)
    lines = []
    for row in (r for r in _rows(payload, "auto") if not r.get("pad")):
        t = row["tflops"]
        modes = [k for k in SPLIT_MODES if k in t]
        if not modes or CUBLAS not in t:
            continue
        best_mode = max(modes, key=t.get)
        best = max(variants(payload), key=lambda k: t.get(k, 0.0))
        x = t[best_mode] / t[CUBLAS]
        lines.append(f"{shape_label(row)}: fastest mode {best_mode} {t[best_mode]:.0f} TFLOP/s = {x:.3f}x cuBLAS, "
                     f"{_meets(x, TARGETS['split_x_cublas'])}; fastest variant {best} {t[best] / t[CUBLAS]:.3f}x")
    return "\n".join(lines) or f"(no unpadded 'auto' rows with cuBLAS in {name})"


def best_factors(payload: dict | None, name: str = SPLIT_FACTORS) -> str:
    """Per shape and variant: the S that ran fastest in the factor sweep, against the launcher's own S."""
    if payload is None:
        return missing(name)
    rows = _rows(payload, "factor")
    if not rows:
        return f"(no factor rows in {name})"
    auto = {(r["M"], r["N"], r["K"]): r for r in _rows(payload, "auto") if not r.get("pad")}
    lines = [f"{'shape':18s} {'variant':34s} {'best S':>7s} {'TFLOP/s':>8s} {'launcher S':>11s} {'TFLOP/s':>8s}"]
    for key3 in dict.fromkeys((r["M"], r["N"], r["K"]) for r in rows):
        mine = [r for r in rows if (r["M"], r["N"], r["K"]) == key3]
        a = auto.get(key3, {})
        for v in variants(payload):
            timed = [r for r in mine if v in r["tflops"]]
            if not timed:
                continue
            best = max(timed, key=lambda r: r["tflops"][v])
            own = a.get("tflops", {}).get(v)
            lines.append(f"{'x'.join(map(str, key3)):18s} {v:34s} {best['splits']:7d} {best['tflops'][v]:8.0f} "
                         f"{a.get(f'{v}_splits', 0):11d} {_opt(own, '8.0f')}")
    return "\n".join(lines)


def determinism_table(payload: dict | None, name: str = SPLIT_FACTORS) -> str:
    """Each mode run many times at its own S on the same inputs: how many output elements changed bits against
    the first run, and by how many units in the last place at most."""
    if payload is None:
        return missing(name)
    rows = payload.get("determinism") or []
    if not rows:
        return f"(no determinism rows in {name})"
    lines = [f"{'shape':18s} {'mode':22s} {'S':>4s} {'runs':>5s} {'runs that differ':>17s} "
             f"{'elements differing per run':>27s} {'max ULPs':>9s}"]
    for d in rows:
        per = d.get("differing_per_run") or [0]
        spread = f"{min(per)}-{max(per)} of {d['elements']}"
        lines.append(f"{shape_label(d):18s} {d['rung']:22s} {d['splits']:4d} {d['runs']:5d} "
                     f"{d['runs_with_differences']:17d} {spread:>27s} {d['max_ulps']:9d}")
    same = [d["rung"] for d in rows if d["runs_with_differences"] == 0]
    moved = [d["rung"] for d in rows if d["runs_with_differences"]]
    lines.append(f"the same bits on every run: {', '.join(dict.fromkeys(same)) or 'none'}; "
                 f"bits that change from run to run: {', '.join(dict.fromkeys(moved)) or 'none'}")
    return "\n".join(lines)


# --- Nsight Compute: the split kernel and the reduction kernel apart ------------------------------------------

SPLIT_KERNEL, REDUCE_KERNEL = "gemm_tc_split_k", "gemm_tc_split_k_reduce"
_NCU_METRICS = {"us": "gpu__time_duration.sum", "read": "dram__bytes_read.sum", "write": "dram__bytes_write.sum",
                "l2_hit_pct": "lts__t_sector_hit_rate.pct"}


def _ncu_kernels(rows: Iterable[str]) -> list[dict]:
    """The stored CSV rows (one metric each, kept without ncu's header line: read with its column names) as one
    dict per profiled kernel, in profiling order: durations in microseconds, bytes, the L2 hit rate in percent."""
    kernels = []
    for launch in nsight_compute.parse(rows, columns=nsight_compute.COLUMNS):
        counters = launch.named(_NCU_METRICS)
        if "us" in counters:
            counters["us"] /= 1e3  # from nanoseconds, ncu's base unit
        if counters:
            kernels.append({"name": launch.kernel, "grid": launch.columns.get("Grid Size"), **counters})
    return kernels


def ncu_launches(payload: dict | None) -> list[dict] | None:
    """split_k_ncu.json's kernels grouped into launches (a split kernel, then the reduction kernel in mode 0),
    and each launch named by shape and mode from the script's order: per shape, each mode twice. The second
    launch of each pair is kept. None when the rows do not fit that order."""
    if payload is None:
        return None
    launches: list[list[dict]] = []
    for k in _ncu_kernels(payload.get("rows", [])):
        if k["name"] == REDUCE_KERNEL and launches:
            launches[-1].append(k)
        else:
            launches.append([k])
    shapes = payload.get("shapes") or list(SPLIT_SHAPES)
    if len(launches) != 2 * len(SPLIT_MODES) * len(shapes):
        return None
    out = []
    for i, shape in enumerate(shapes):
        for j, mode in enumerate(SPLIT_MODES):
            split, *reduce = launches[(i * len(SPLIT_MODES) + j) * 2 + 1]
            red = reduce[0] if reduce else {}
            out.append({**{k: shape[k] for k in ("M", "N", "K")}, "mode": mode, "split_us": split.get("us", 0.0),
                        "split_read": split.get("read", 0.0), "split_write": split.get("write", 0.0),
                        "reduce_us": red.get("us", 0.0), "reduce_read": red.get("read", 0.0),
                        "reduce_write": red.get("write", 0.0), "split_l2_hit_pct": split.get("l2_hit_pct")})
    return out


def _recorded_splits(shape: dict, mode: str, commit: str, factors: dict | None, bench: RecordSet | None,
                     sm_count: int) -> tuple[int, str]:
    """The S a mode ran at `shape` in a run of `commit`: from the gemm_split_k records or the factor study of the
    same commit, else the current launcher's (marked with '*')."""
    key = (shape["M"], shape["N"], shape["K"])
    if bench is not None and str(bench.provenance.get("commit")) == commit:
        for r in bench.records:
            if r.rung == mode and (r.params.get("M"), r.params.get("N"), r.params.get("K")) == key \
                    and r.params.get("dtype", "float16") == "float16" and "splits" in r.extra:
                return int(r.extra["splits"]), ""
    if factors is not None and str(_provenance(factors).get("commit")) == commit:
        for r in _rows(factors, "auto"):
            if (r["M"], r["N"], r["K"]) == key and not r.get("pad") and f"{mode}_splits" in r:
                return int(r[f"{mode}_splits"]), ""
    return launcher_splits(shape, sm_count), "*"


def ncu_table(payload: dict | None, factors: dict | None, bench: RecordSet | None, sm_count: int,
              name: str = SPLIT_NCU) -> str:
    """Per shape and mode: the split kernel's and the reduction kernel's durations and DRAM bytes, against the
    bytes the shape must read (A and B) and the slices its S writes; cuBLAS's timed GEMM beside them where the
    factor study ran the same shape on the same device."""
    if payload is None:
        return missing(name)
    launches = ncu_launches(payload)
    if not launches:
        return f"{source(payload, name)}\n(its rows do not follow the script's order of launches: nothing to split)"
    same_device = factors is not None and _provenance(factors).get("device") == _provenance(payload).get("device")
    cublas = {(r["M"], r["N"], r["K"]): r["cublas_ms"] * 1e3 for r in _rows(factors, "auto") if not r.get("pad")}
    commit = str(_provenance(payload).get("commit"))
    lines = [source(payload, name), "Nsight Compute flushes the caches before each kernel it profiles (its default), "
             "so the reduction kernel's slices come from DRAM here.",
             f"  {'shape':18s} {'mode':22s} {'split us':>9s} {'reduce us':>10s} {'total us':>9s} {'cuBLAS us':>10s} "
             f"{'split reads MB':>15s} {'A+B MB':>7s} {'reduce reads MB':>16s} {'S':>4s} {'slices MB':>10s}"]
    guessed = False
    for row in launches:
        shape = {k: row[k] for k in ("M", "N", "K")}
        s, mark = _recorded_splits(shape, row["mode"], commit, factors, bench, sm_count)
        guessed |= bool(mark)
        cb = cublas.get((row["M"], row["N"], row["K"])) if same_device else None
        lines.append(f"  {shape_label(row):18s} {row['mode']:22s} {row['split_us']:9.1f} {row['reduce_us']:10.1f} "
                     f"{row['split_us'] + row['reduce_us']:9.1f} {_opt(cb, '10.1f')} "
                     f"{row['split_read'] / 1e6:15.1f} {gemm_bytes(shape) / 1e6:7.1f} "
                     f"{row['reduce_read'] / 1e6:16.1f} {s:>3d}{mark:1s} {slice_bytes(shape, s) / 2e6:10.1f}")
    lines.append("('slices MB': S x M x N fp32, written once by the split kernel and read once by the reduction"
                 + ("; S marked '*' is the current launcher's, no record of the profiled commit names it)" if guessed
                    else "; S as the records of the profiled commit name it)"))
    return "\n".join(lines)


def split_time_shares(payload: dict | None, name: str = SPLIT_NCU) -> str:
    """The workspace mode's time split: the split kernel's share (the mainloop and the slice stores) against the
    reduction kernel's, and each kernel's DRAM rate."""
    launches = ncu_launches(payload)
    if payload is None:
        return missing(name)
    if not launches:
        return "(no launches to split)"
    lines = []
    for row in (r for r in launches if r["mode"] == SPLIT_MODES[0]):
        total = row["split_us"] + row["reduce_us"]
        rate = (row["split_read"] + row["split_write"]) / (row["split_us"] * 1e3)
        lines.append(f"{shape_label(row)}: the split kernel takes {row['split_us'] / total:.0%} of the workspace "
                     f"mode's {total:.1f} us and moves {rate:.0f} GB/s through DRAM; the reduction kernel "
                     f"{row['reduce_us'] / total:.0%}")
    return "\n".join(lines)


def split_bench_table(rs: RecordSet | None, name: str = SPLIT_FAMILY) -> str:
    """`lab bench gemm_split_k` (headline): each rung at each shape and type, against cuBLAS (the ceiling)."""
    if rs is None:
        return missing(name)
    lines = [source(rs, name)]
    heads = [r for r in rs.records if r.kind == "headline"]
    for params in _problems(heads):
        mine = [r for r in heads if r.params == params]
        ceiling = next((r for r in mine if r.rung == r.ceiling), None)
        label = f"{shape_label(params)} {params.get('dtype', '')}"
        parts = [f"{r.rung} {r.value:.0f} ({r.ratio:.2f}x, S={r.extra.get('splits', 1)})"
                 for r in mine if r.rung != r.ceiling]
        lines.append(f"  {label:28s} cuBLAS {ceiling.value if ceiling else float('nan'):.0f} TFLOP/s; "
                     + "; ".join(parts))
    return "\n".join(lines)


def _problems(recs: list[Record]) -> list[dict]:
    return list({json.dumps(r.params, sort_keys=True): r.params for r in recs}.values())


# ----------------------------------------------------------------------------------------------
# 2. Decode
# ----------------------------------------------------------------------------------------------

def w_bytes(n: int, k: int) -> int:
    return 2 * n * k


def decode_shapes(sm_count: int, tokens: Iterable[int] = (1, 16, 128)) -> str:
    """Why a square-tile GEMM underuses the GPU on decode: rung 06's 128 x 256 tiles against the SMs, the share of
    each tile's rows that hold a token, and the FLOPs per byte of W."""
    lines = [f"{'N = K':>6s} {'M':>4s} {'W bytes':>9s} {'rung 06 tiles':>14s} {'SMs busy':>9s} {'rows used':>10s} "
             f"{'FLOP / W byte':>14s}"]
    for n in DECODE_SIDES:
        for m in tokens:
            tiles = -(-m // 128) * -(-n // 256)
            lines.append(f"{n:6d} {m:4d} {format_bytes(w_bytes(n, n)):>9s} {tiles:14d} "
                         f"{min(tiles, sm_count):4d}/{sm_count:<4d} {m / (128 * -(-m // 128)):10.3f} "
                         f"{2 * m * n * n / w_bytes(n, n):14.0f}")
    return "\n".join(lines)


@functools.lru_cache(maxsize=64)
def _resident(spec, arch: int) -> int:
    """Blocks of `spec` one SM holds (lab.core.occupancy on the NVRTC compile report: registers and static shared
    memory), for planning with no GPU to ask."""
    from lab.core.build import compile_report
    from lab.core.occupancy import occupancy

    report = compile_report(spec, arch, 0)
    occ = occupancy(arch, dict(spec.knobs)["THREADS"], report.registers, report.smem_static_bytes)
    return max(1, occ.blocks_per_sm)


def decode_plan(sm_count: int, arch: int, copy: CopyModel | None, sides: Iterable[int] = DECODE_SIDES,
                tokens: Iterable[int] = DECODE_TOKENS) -> str:
    """The decode launcher's plan (lab.families.decode.launch_plan) per size and M bucket: blocks, warps per block,
    blocks per SM (occupancy of the NVRTC build for `arch`), and the bytes of W each SM has in flight (CHUNKS x RT
    KB per warp, rung 01's header), against what Little's law asks at the copy's peak and ASSUMED_DRAM_LATENCY_US."""
    fam = ladder(DECODE_FAMILY)
    if fam is None:
        return "decode: not in this checkout (lab/families/decode.py), so there is no plan to show."
    rung = fam.rungs[0]
    need = copy.peak_gbs * 1e3 * ASSUMED_DRAM_LATENCY_US / sm_count if copy else None
    lines = [f"{'N = K':>6s} {'M':>4s} {'MT':>3s} {'RT':>3s} {'CHUNKS':>6s} {'blocks':>7s} {'warps/block':>12s} "
             f"{'blocks/SM':>10s} {'waves':>6s} {'W in flight/SM':>15s}"]
    for n in sides:
        for m in tokens:
            step = fam.launch_plan(rung, m, n, n, "float16", 8, sm_count, lambda s: _resident(s, arch))[0]
            k = step.knobs
            per_sm = _resident(step.spec, arch)
            waves = step.grid / (sm_count * per_sm)
            resident = min(per_sm, -(-step.grid // sm_count))
            flight = resident * k["WARPS"] * k["CHUNKS"] * k["RT"] * 1024
            lines.append(f"{n:6d} {m:4d} {k['MT']:3d} {k['RT']:3d} {k['CHUNKS']:6d} {step.grid:7d} {k['WARPS']:12d} "
                         f"{per_sm:10d} {waves:6.2f} {format_bytes(flight):>15s}")
    if need is not None:
        lines.append(f"Little's law: {copy.peak_gbs:.0f} GB/s (the copy's peak) x {ASSUMED_DRAM_LATENCY_US:g} us "
                     f"(assumed) over {sm_count} SMs = {format_bytes(need)} in flight per SM to stream at full speed.")
    return "\n".join(lines)


def decode_prediction(copy: CopyModel | None, sides: Iterable[int] = DECODE_SIDES,
                      tokens: Iterable[int] = (1, 16)) -> str:
    """The fastest a decode step can be: its minimum bytes (W, X and Y once) at the device copy's speed for the
    same bytes, and the share of that time the copy's fixed cost takes."""
    if copy is None:
        return missing("copy")
    fam = ladder(DECODE_FAMILY)
    lines = [f"{'N = K':>6s} {'M':>4s} {'bytes':>9s} {'copy us':>8s} {'copy GB/s':>10s} {'fixed share':>12s}"]
    for n in sides:
        for m in tokens:
            params = {"M": m, "N": n, "K": n}
            b = fam.min_dram_bytes(params) if fam else w_bytes(n, n)
            t = copy.time_us(b)
            lines.append(f"{n:6d} {m:4d} {format_bytes(b):>9s} {t:8.1f} {b / (t * 1e3):10.0f} "
                         f"{copy.floor_us / t:12.0%}")
    lines.append(f"(fixed share: the copy's smallest time, {copy.floor_us:.1f} us, over its time for these bytes)")
    return "\n".join(lines)


def _decode_rows(rs: RecordSet) -> list[dict]:
    """One row per headline problem: every kernel's record (rung keys), cuBLAS's and the copy's, and the fastest
    kernel (what a dispatch over the ladder would run), whose figures the targets are judged on."""
    rows = []
    heads = [r for r in rs.records if r.kind == "headline"]
    for params in _problems(heads):
        mine = {r.rung: r for r in heads if r.params == params}
        kernels = {k: r for k, r in mine.items() if k[:2].isdigit()}
        if not kernels:
            continue
        best = min(kernels, key=lambda k: kernels[k].median_ms)
        cublas = mine.get(DECODE_CUBLAS)
        rows.append({"params": params, "kernels": kernels, "best": best, "rung": kernels[best], "cublas": cublas,
                     "copy": mine.get(COPY), "x_copy": kernels[best].ratio,
                     "x_cublas": cublas.median_ms / kernels[best].median_ms if cublas else None})
    return sorted(rows, key=lambda r: (r["params"].get("dtype", ""), r["params"]["N"], r["params"]["M"]))


def _w_gbs(rec: Record) -> float:
    return w_bytes(rec.params["N"], rec.params["K"]) / (rec.median_ms * 1e6)


def decode_table(rs: RecordSet | None, name: str = DECODE_FAMILY) -> str:
    """GB/s of W for every decode rung and cuBLAS at every headline M, size and type, the device copy's GB/s for
    the same bytes, and each rung's ratios to both; '*' marks the fastest rung of a problem."""
    if rs is None:
        return missing(name)
    rows = _decode_rows(rs)
    if not rows:
        return f"{source(rs, name)}\n(no headline records of a decode rung)"
    lines = [source(rs, name), f"  {'dtype':9s} {'N = K':>6s} {'M':>4s} {'rung':17s} {'us':>7s} {'W GB/s':>7s} "
             f"{'x copy':>7s} {'x cuBLAS':>9s} {'cuBLAS W GB/s':>14s} {'copy GB/s':>10s}"]
    for r in rows:
        p, cb = r["params"], r["cublas"]
        for key, rec in r["kernels"].items():
            mark = "*" if key == r["best"] else " "
            lines.append(f"  {p.get('dtype', ''):9s} {p['N']:6d} {p['M']:4d} {key + mark:17s} "
                         f"{rec.median_ms * 1e3:7.1f} {_w_gbs(rec):7.0f} {rec.ratio:7.3f} "
                         f"{_opt(cb and cb.median_ms / rec.median_ms, '9.3f')} {_opt(cb and _w_gbs(cb), '14.0f')} "
                         f"{rec.ceiling_value:10.0f}")
    lines.append("('x copy': the record's GB/s of the minimum bytes over the device copy's for the same bytes, timed "
                 "in the same run; 'x cuBLAS': cuBLAS's time over the rung's; '*': the fastest rung of the problem)")
    return "\n".join(lines)


def decode_targets(rs: RecordSet | None, name: str = DECODE_FAMILY) -> str:
    """The lesson's decode targets at N = K = TARGETS['decode_side'], M <= TARGETS['decode_max_tokens']: the lowest
    ratio to the device copy and to cuBLAS of the fastest rung at each M, per type."""
    if rs is None:
        return missing(name)
    side, most = TARGETS["decode_side"], TARGETS["decode_max_tokens"]
    rows = [r for r in _decode_rows(rs) if r["params"]["N"] == side and r["params"]["M"] <= most]
    if not rows:
        return f"(no headline records at N = K = {side} with M <= {most} in {name})"
    lines = []
    for dtype in dict.fromkeys(r["params"].get("dtype", "") for r in rows):
        mine = [r for r in rows if r["params"].get("dtype", "") == dtype]
        low = min(mine, key=lambda r: r["x_copy"])
        line = (f"{dtype} at N = K = {side}, M <= {most}: lowest {low['x_copy']:.3f}x of the device copy (M = "
                f"{low['params']['M']}, {low['best']}), {_meets(low['x_copy'], TARGETS['decode_x_copy'])}")
        against = [r for r in mine if r["x_cublas"] is not None]
        if against:
            lowc = min(against, key=lambda r: r["x_cublas"])
            line += (f"; lowest {lowc['x_cublas']:.3f}x cuBLAS (M = {lowc['params']['M']}), "
                     f"{_meets(lowc['x_cublas'], TARGETS['decode_x_cublas'])}")
        lines.append(line)
    return "\n".join(lines)


def decode_limits(rs: RecordSet | None, copy: CopyModel | None, side: int = 4096, name: str = DECODE_FAMILY) -> str:
    """What limits the small weight: at N = K = `side`, M <= 16, the fastest rung's time beside cuBLAS's, the copy's
    of the same bytes and the copy's fixed cost (its smallest time), and the rate at which the rung reads W once
    that fixed cost is taken out: the part no kernel can shrink made visible."""
    if rs is None:
        return missing(name)
    if copy is None:
        return missing("copy")
    rows = [r for r in _decode_rows(rs) if r["params"]["N"] == side and r["params"]["M"] <= 16]
    if not rows:
        return f"(no headline records at N = K = {side} in {name})"
    lines = [f"the copy's fixed cost: {copy.floor_us:.1f} us (its smallest size, {format_bytes(copy.points[0][0])})",
             f"  {'dtype':9s} {'M':>4s} {'rung':15s} {'us':>6s} {'cuBLAS us':>10s} {'copy us':>8s} "
             f"{'fixed / rung':>13s} {'W GB/s after the fixed cost':>28s}"]
    for r in rows:
        us = r["rung"].median_ms * 1e3
        rest = w_bytes(side, side) / max(us - copy.floor_us, 1e-3) / 1e3
        lines.append(f"  {r['params'].get('dtype', ''):9s} {r['params']['M']:4d} {r['best']:15s} {us:6.1f} "
                     f"{_opt(r['cublas'] and r['cublas'].median_ms * 1e3, '10.1f')} "
                     f"{_opt(r['copy'] and r['copy'].median_ms * 1e3, '8.1f')} {copy.floor_us / us:13.0%} {rest:28.0f}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# 3. Grouped GEMM
# ----------------------------------------------------------------------------------------------

def case_groups(case: str) -> list[tuple[int, int, int]]:
    from lab.families.grouped_gemm import case_groups as groups

    return groups(case)


def grouped_shape(case: str, sm_count: int, bm: int = 128, bn: int = 256) -> dict:
    """A case's groups against the tiles: tile rows (each group's last one padded to bm), the share of computed
    rows that hold a token, tiles, waves and rounds over the SMs; and the loop of launches it replaces (one call
    per non-empty group, its tiles against the SMs if cuBLAS used the same tile)."""
    groups = case_groups(case)
    live = [g for g in groups if g[0] > 0]
    tile_rows = sum(-(-M // bm) for M, _, _ in live)
    tiles = sum(-(-M // bm) * -(-N // bn) for M, N, _ in live)
    per_call = [-(-M // bm) * -(-N // bn) for M, N, _ in live]
    return {"case": case, "groups": len(groups), "empty": len(groups) - len(live), "tokens": sum(g[0] for g in groups),
            "largest": max(g[0] for g in groups), "tile_rows": tile_rows,
            "useful": sum(g[0] for g in live) / (tile_rows * bm), "tiles": tiles, "waves": tiles / sm_count,
            "rounds": -(-tiles // sm_count), "k_tiles": max(-(-K // BK) for _, _, K in live), "calls": len(live),
            "calls_under_a_wave": sum(1 for t in per_call if t < sm_count), "median_call_tiles":
            statistics.median(per_call), "flops": sum(2 * M * N * K for M, N, K in live)}


def grouped_shapes(sm_count: int, rate: TileRate | None) -> str:
    """Every case's tiles and padding, and the TFLOP/s rung 06's per-tile rate predicts for the grouped kernel
    (rounds x k-steps x the time of one k-step: padding and the last round's idle SMs included)."""
    lines = [f"{'case':8s} {'groups':>6s} {'empty':>6s} {'tokens':>7s} {'largest':>8s} {'tile rows':>10s} "
             f"{'useful':>7s} {'tiles':>6s} {'waves':>6s} {'calls':>6s} {'calls < 1 wave':>15s} {'predicted':>10s}"]
    for case in GROUPED_CASES:
        g = grouped_shape(case, sm_count)
        pred = ""
        if rate is not None:
            us = g["rounds"] * g["k_tiles"] * rate.kstep_us(128, 256)
            pred = f"{g['flops'] / (us * 1e6):.0f}"
        lines.append(f"{case:8s} {g['groups']:6d} {g['empty']:6d} {g['tokens']:7d} {g['largest']:8d} "
                     f"{g['tile_rows']:10d} {g['useful']:7.2f} {g['tiles']:6d} {g['waves']:6.1f} {g['calls']:6d} "
                     f"{g['calls_under_a_wave']:15d} {pred:>10s}")
    lines.append("('useful': tokens over the rows the tiles compute; 'calls < 1 wave': calls of the loop with fewer "
                 f"128 x 256 tiles than {sm_count} SMs; 'predicted': TFLOP/s"
                 + (" from rung 06's rate)" if rate else ", unknown without the gemm_tc records)"))
    return "\n".join(lines)


def _grouped_rows(rs: RecordSet) -> list[dict]:
    rows = []
    heads = [r for r in rs.records if r.kind == "headline"]
    for params in _problems(heads):
        mine = {r.rung: r for r in heads if r.params == params}
        rung, loop, batched = mine.get(GROUPED_RUNG), mine.get(LOOP), mine.get(BATCHED)
        if rung is None:
            continue
        rows.append({"params": params, "rung": rung, "loop": loop, "batched": batched,
                     "x_loop": loop.median_ms / rung.median_ms if loop else None,
                     "x_batched_time": rung.median_ms / batched.median_ms if batched else None})
    return rows


def grouped_table(rs: RecordSet | None, name: str = GROUPED_FAMILY) -> str:
    """Per headline case and type: the grouped kernel's, the loop's and (uniform) cuBLAS batched's TFLOP/s, the
    speed-up over the loop and the time against the batched call."""
    if rs is None:
        return missing(name)
    rows = _grouped_rows(rs)
    lines = [source(rs, name), f"  {'case':8s} {'dtype':9s} {'groups':>6s} {'grouped':>8s} {'loop':>7s} "
             f"{'batched':>8s} {'x loop':>7s} {'time / batched':>15s}"]
    for r in rows:
        p = r["params"]
        b, xb = r["batched"], r["x_batched_time"]
        lines.append(f"  {p.get('case', '?'):8s} {p.get('dtype', ''):9s} {r['rung'].extra.get('groups', ''):>6} "
                     f"{r['rung'].value:8.0f} {_opt(r['loop'] and r['loop'].value, '7.0f')} "
                     f"{_opt(b and b.value, '8.0f')} {_opt(r['x_loop'], '7.2f')} "
                     f"{_opt(xb, '15.3f')}")
    lines.append("(TFLOP/s of the useful FLOPs, sum of 2 M_g N_g K_g; cold L2)")
    return "\n".join(lines)


def grouped_targets(rs: RecordSet | None, name: str = GROUPED_FAMILY) -> str:
    """The lesson's grouped targets: the speed-up over the loop on the case of many small problems (TARGETS
    ['grouped_small_case'], when it has at least TARGETS['grouped_min_groups'] groups), and the time against cuBLAS
    batched wherever it was timed (the uniform case)."""
    if rs is None:
        return missing(name)
    lines = []
    for r in _grouped_rows(rs):
        p = r["params"]
        groups = int(r["rung"].extra.get("groups") or 0)
        label = f"{p.get('case', '?')} {p.get('dtype', '')}"
        if (r["x_loop"] is not None and p.get("case") == TARGETS["grouped_small_case"]
                and groups >= TARGETS["grouped_min_groups"]):
            lines.append(f"{label}: {r['x_loop']:.2f}x the loop's speed ({groups} groups), "
                         f"{_meets(r['x_loop'], TARGETS['grouped_x_loop'])}")
        if r["x_batched_time"] is not None:
            lines.append(f"{label}: {r['x_batched_time']:.3f}x cuBLAS batched's time, "
                         f"{_meets(r['x_batched_time'], TARGETS['grouped_batched_time'], at_most=True)}")
    return "\n".join(lines) or f"(no headline case in {name} that a target speaks of)"


def table_cost_table(payload: dict | None, rs: RecordSet | None, name: str = TABLE_COST) -> str:
    """The host cost of the table per case beside the grouped kernel's own time on the same case (fp16, when the
    grouped records were made on the same device): what re-routing every step costs if the maps are rebuilt on the
    host."""
    if payload is None:
        return missing(name)
    kernel_ms = {}
    if rs is not None and rs.provenance.get("device") == _provenance(payload).get("device"):
        kernel_ms = {r["params"].get("case"): r["rung"].median_ms for r in _grouped_rows(rs)
                     if r["params"].get("dtype") == "float16"}
    lines = [source(payload, name), f"  {'case':8s} {'groups':>6s} {'maps':>5s} {'table':>9s} {'host ms':>8s} "
             f"{'us / map':>9s} {'kernel ms':>10s} {'host / kernel':>14s}"]
    for row in payload.get("rows", []):
        k = kernel_ms.get(row["case"])
        lines.append(f"  {row['case']:8s} {row['groups']:6d} {row['maps']:5d} {format_bytes(row['table_bytes']):>9s} "
                     f"{row['median_ms']:8.2f} {row['per_map_us']:9.1f} {_opt(k, '10.3f')} "
                     f"{_opt(k and row['median_ms'] / k, '14.1f')}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# Reading the records against the predictions: sentences chosen by the numbers, never typed
# ----------------------------------------------------------------------------------------------

def sm_count_of(item: dict | RecordSet | None, gpu: Gpu) -> int:
    """The SM count a payload or RecordSet was measured with (its own field, else its provenance's), else `gpu`'s:
    predictions set beside replayed records use the records' GPU."""
    if item is None:
        return gpu.sm_count
    own = None if isinstance(item, RecordSet) else item.get("sm_count")
    return int(own or _provenance(item).get("sm_count") or gpu.sm_count)


def split_reading(factors: dict | None, ncu: dict | None, copy: CopyModel | None, rate: TileRate | None,
                  sm_count: int) -> str:
    """Per shape: the fastest mode against cuBLAS and against its predicted range (at the S it ran); where Nsight
    Compute profiled the same shape, the split kernel's time against the copy's time for A and B's bytes, and the
    reduction kernel's share."""
    if factors is None:
        return missing(SPLIT_FACTORS)
    launches = {(r["M"], r["N"], r["K"], r["mode"]): r for r in ncu_launches(ncu) or []}
    lines = []
    for row in (r for r in _rows(factors, "auto") if not r.get("pad")):
        t = row["tflops"]
        modes = [k for k in SPLIT_MODES if k in t]
        if not modes or CUBLAS not in t:
            continue
        shape = {k: row[k] for k in ("M", "N", "K")}
        best = max(modes, key=t.get)
        x = t[best] / t[CUBLAS]
        line = (f"{shape_label(shape)}: {best} {t[best]:.0f} TFLOP/s, {x:.2f}x cuBLAS "
                f"({'at or above' if x >= TARGETS['split_x_cublas'] else 'below'} the target)")
        splits = int(row.get(f"{best}_splits") or launcher_splits(shape, sm_count))
        tile = tile_for_splits(shape, splits, sm_count)
        p = split_prediction(shape, splits, sm_count, copy, rate, tile)
        if p["tflops"]:
            lo, hi = p["tflops"]
            where = "inside" if lo <= t[best] <= hi else "below" if t[best] < lo else "above"
            line += (f"; predicted {lo:.0f}-{hi:.0f} at S = {splits} ({tile[0]} x {tile[1]} tiles): {where} the "
                     "prediction")
        lines.append(line)
        ran = launches.get((shape["M"], shape["N"], shape["K"], SPLIT_MODES[0]))
        if ran and copy:
            floor = copy.time_us(gemm_bytes(shape))
            lines.append(f"  Nsight Compute: the workspace mode's split kernel {ran['split_us']:.1f} us, "
                         f"{ran['split_us'] / floor:.2f}x the copy's {floor:.1f} us for A and B's bytes; the "
                         f"reduction kernel adds {ran['reduce_us']:.1f} us "
                         f"({ran['reduce_us'] / (ran['split_us'] + ran['reduce_us']):.0%} of the two)")
    return "\n".join(lines) or f"(no unpadded 'auto' rows with cuBLAS in {SPLIT_FACTORS})"


def decode_reading(rs: RecordSet | None, copy: CopyModel | None, name: str = DECODE_FAMILY) -> str:
    """Per type and size: the fastest rung's range of ratios to the device copy and to cuBLAS for M <= 16 and for
    M > 16 (and which rungs those were); the copy's fixed cost as a share of the fastest time at M = 1."""
    if rs is None:
        return missing(name)
    rows = _decode_rows(rs)
    lines = []
    for dtype, n in dict.fromkeys((r["params"].get("dtype", ""), r["params"]["N"]) for r in rows):
        mine = [r for r in rows if r["params"].get("dtype", "") == dtype and r["params"]["N"] == n]
        parts = []
        for label, group in (("M <= 16", [r for r in mine if r["params"]["M"] <= 16]),
                             ("M > 16", [r for r in mine if r["params"]["M"] > 16])):
            if group:
                xs = [r["x_copy"] for r in group]
                part = f"{label}: {min(xs):.2f}-{max(xs):.2f}x of the copy"
                cb = [r["x_cublas"] for r in group if r["x_cublas"] is not None]
                if cb:
                    part += f" and {min(cb):.2f}-{max(cb):.2f}x cuBLAS's speed"
                parts.append(part + f" ({', '.join(dict.fromkeys(r['best'] for r in group))})")
        one = next((r for r in mine if r["params"]["M"] == 1), None)
        if one and copy:
            parts.append(f"the fixed cost is {copy.floor_us / (one['rung'].median_ms * 1e3):.0%} of M = 1's time")
        lines.append(f"{dtype} N = K = {n}: " + "; ".join(parts))
    return "\n".join(lines) or f"(no headline records of a decode rung in {name})"


def grouped_reading(rs: RecordSet | None, rate: TileRate | None, sm_count: int, name: str = GROUPED_FAMILY) -> str:
    """Per case: the grouped kernel's TFLOP/s against what rung 06's rate predicts for its tiles and rounds, and
    its speed over the loop."""
    if rs is None:
        return missing(name)
    lines = []
    for r in _grouped_rows(rs):
        p = r["params"]
        case = p.get("case")
        line = f"{case} {p.get('dtype', '')}: {r['rung'].value:.0f} TFLOP/s"
        if case in GROUPED_CASES and rate is not None:
            g = grouped_shape(case, sm_count)
            predicted = g["flops"] / (g["rounds"] * g["k_tiles"] * rate.kstep_us(128, 256) * 1e6)
            line += f", {r['rung'].value / predicted:.2f} of the {predicted:.0f} predicted"
        if r["x_loop"] is not None:
            line += f"; {r['x_loop']:.1f}x the loop"
        if r["x_batched_time"] is not None:
            line += f"; {r['x_batched_time']:.2f}x cuBLAS batched's time"
        lines.append(line)
    return "\n".join(lines) or f"(no headline records of {GROUPED_RUNG} in {name})"


def show(fn: Callable, item: dict | RecordSet | None, name: str, **kwargs) -> None:
    """lab.lessons.plots.<fn>(item, ...) shown inline, or the sentence saying the records are missing."""
    from lab.lessons.views import figure

    if item is None:
        print(missing(name))
        return
    figure(fn(item, **kwargs), f"{name} holds no rows for {fn.__name__}")


def show_kernel_times(ncu: dict | None, factors: dict | None) -> None:
    """lab.lessons.plots.split_kernel_times on the Nsight Compute launches, cuBLAS's time from the factor study where
    it was
    made on the same device."""
    from lab.lessons import plots
    from lab.lessons.views import figure

    if ncu is None:
        print(missing(SPLIT_NCU))
        return
    cublas = {}
    if factors is not None and _provenance(factors).get("device") == _provenance(ncu).get("device"):
        cublas = {shape_label(r): r["cublas_ms"] * 1e3 for r in _rows(factors, "auto") if not r.get("pad")}
    tag = "REPLAYED from" if ncu.get("replayed") else "measured on"
    figure(plots.split_kernel_times(ncu_launches(ncu) or [], cublas, f"{tag} {describe_provenance(ncu['provenance'])}"),
           f"{SPLIT_NCU}'s rows do not follow the script's order of launches")


# ----------------------------------------------------------------------------------------------
# The kernels' own predictions (their headers), and the notebook's LIVE plan
# ----------------------------------------------------------------------------------------------

def header_prediction(name: str, key: str) -> str:
    """The rung header's 'Prediction:' text (lab.lessons.predictions.prediction), or why there is none."""
    fam = ladder(name)
    if fam is None:
        return f"{name}: not in this checkout, so its header cannot be read."
    from lab.lessons.predictions import prediction

    return f"{fam.rung(key).spec.source}: {prediction(fam, key)}"


def live_plan_text() -> str:
    return "\n".join([
        "LIVE plan (`lab study splitk`, `lab bench FAMILY` and scripts/split_k_ncu.py record the full studies):",
        f"  split-K: {shape_label(LIVE_SPLIT_SHAPE)} only; cuBLAS, rung 06 and the three modes at the launcher's S, "
        f"then the modes at S in {', '.join(map(str, LIVE_FACTORS))}; each mode run {LIVE_DETERMINISM_RUNS} times "
        "for its bits; every mode checked on odd shapes first",
        "  decode: checked on a spread of its check cases, then fp16 at "
        + ", ".join(f"M={p['M']} N=K={p['N']}" for p in LIVE_DECODE),
        "  grouped: checked on a spread of its check cases, then fp16 " + ", ".join(p["case"] for p in LIVE_GROUPED)
        + "; the host cost of each case's table",
        "  Nsight Compute: NOT measured live; replayed only",
        f"  at least {LIVE_MIN_TIME_MS:g} ms of timing per target, cold L2",
    ])


def live_refusal(current: Mode, name: str) -> str | None:
    """Why family `name` is not measured live here (None when it is; REPLAY measures nothing)."""
    if not current.live:
        return None
    fam = ladder(name)
    if fam is None:
        return f"{name} is not in this checkout"
    from lab.core import device
    from lab.lessons.mode import runs_on

    arch = device.current().arch
    if any(runs_on(r, arch) for r in fam.rungs):
        return None  # lab.measure.bench and the checks skip, and name, the rungs this GPU cannot run
    spec = fam.rungs[0].spec
    return f"this GPU is sm_{arch} and {name}'s rungs need sm_{spec.min_arch}{spec.arch_suffix}"


def live_note(item: dict | RecordSet | None, current: Mode, name: str) -> str:
    if item is not None:
        return f"LIVE: {source(item, name)}"
    if not current.live:
        return "(REPLAY: nothing is measured here; the reference GPU's records follow.)"
    return f"(LIVE: {name} not measured here: {live_refusal(current, name) or 'see above'})"


def _timed(what: str, fn: Callable[[], object]):
    start = time.perf_counter()
    out = fn()
    print(f"LIVE: {what} checked and measured in {time.perf_counter() - start:.0f} s (compiling included)")
    return out


def live_split_k(current: Mode) -> dict | None:
    """LIVE (Hopper): the factor study cut down to LIVE_SPLIT_SHAPE and LIVE_FACTORS, in split_k_factors.json's
    layout so the same tables and figure read it."""
    if not current.live or live_refusal(current, SPLIT_FAMILY):
        return None

    def run() -> dict:
        import cupy as cp

        from lab.core import device
        from lab.families.gemm_split_k import run_to_run_bits
        from lab.studies.scheduling import checked_run, event_timer
        from lab.studies.split_k import CHECKS

        fam = ladder(SPLIT_FAMILY)
        rungs = {key: fam.rung(key) for key in SPLIT_MODES}
        for rung in rungs.values():
            for case in CHECKS:
                checked_run(fam, rung, case | {"layout": "TN", "dtype": "float16"})
        timed = event_timer(LIVE_MIN_TIME_MS)
        problem = fam.make_problem(**LIVE_SPLIT_SHAPE, layout="TN", dtype="float16")
        out = cp.empty(problem.out_shape, problem.dtype)
        flops = problem.flops

        def tflops(ms: float) -> float:
            return flops / (ms * 1e-3) / 1e12

        auto = {**LIVE_SPLIT_SHAPE, "kind": "auto", "pad": 0,
                "cublas_ms": timed(lambda: fam.launch_ceiling(problem, out)).median_ms,
                f"{PLAIN_RUNG}_ms": timed(lambda: fam.launch(fam.rung(PLAIN_RUNG), problem, out)).median_ms}
        for key, rung in rungs.items():
            auto[f"{key}_ms"] = timed(lambda rung=rung: fam.launch(rung, problem, out)).median_ms
            auto[f"{key}_splits"] = fam.splits_for(rung, problem)
        auto["tflops"] = {k.removesuffix("_ms"): tflops(v) for k, v in auto.items() if k.endswith("_ms")}
        rows = [auto]
        for s in LIVE_FACTORS:
            problem.params["splits"] = s
            row = {**LIVE_SPLIT_SHAPE, "kind": "factor", "splits": s}
            for key, rung in rungs.items():
                row[f"{key}_ms"] = timed(lambda rung=rung: fam.launch(rung, problem, out)).median_ms
            row["tflops"] = {k.removesuffix("_ms"): tflops(v) for k, v in row.items() if k.endswith("_ms")}
            rows.append(row)
        problem.params["splits"] = 0
        bits = [{**LIVE_SPLIT_SHAPE} | run_to_run_bits(fam, rung, problem, LIVE_DETERMINISM_RUNS)
                for rung in rungs.values()]
        return {"provenance": records.provenance(), "l2": "cold", "dtype": "float16", "layout": "TN",
                "sm_count": device.current().sm_count, "checked": list(CHECKS), "rows": rows, "determinism": bits}

    return _timed("split-K", run)


def _with_headlines(fam: Family, params: Iterable[dict]) -> Family:
    """The family with its headline problems replaced by `params` (this instance only): lab.measure.bench times exactly
    the live plan's problems, each beside the ceiling and baselines in the same run."""
    chosen = [dict(p) for p in params]
    fam.headline_params = lambda: [dict(p) for p in chosen]
    return fam


def live_bench(current: Mode, name: str, params: Iterable[dict]) -> RecordSet | None:
    """LIVE: the family checked on a spread of its check cases (a failure stops the notebook), then `lab bench`'s
    headline measurement on `params` only."""
    if not current.live or live_refusal(current, name):
        return None
    from lab.lessons.demos import check_ladder, few_cases
    from lab.measure import bench

    def run() -> RecordSet:
        fam = ladder(name)
        results = check_ladder(fam, few_cases(fam, 6))
        print(f"LIVE: {name}: " + ", ".join(f"{k} passed {len(v)} cases" for k, v in results.items()))
        return bench.run(_with_headlines(fam, params), bench.BenchPlan(kinds=("headline",),
                                                                        min_time_ms=LIVE_MIN_TIME_MS))

    return _timed(name, run)


def live_table_costs(current: Mode) -> dict | None:
    if not current.live or live_refusal(current, GROUPED_FAMILY):
        return None
    from lab.studies import grouped_table_cost

    return _timed("table costs", lambda: grouped_table_cost.measure(repeats=3))
