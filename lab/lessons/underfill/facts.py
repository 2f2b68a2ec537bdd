"""The two measured facts notebook 05's predictions stand on, both other ladders' records: the device copy's time
against the bytes it moves (CopyModel), and gemm_tc rung 06's time per k-step of one tile on one SM (TileRate)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from lab.lessons.underfill.records import BK, COPY, PLAIN_RUNG, RATE_SHAPE, missing, replayed_records, shape_label
from lab.measure.records import RecordSet

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
