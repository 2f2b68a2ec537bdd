"""A rung's prediction held against the records: the header's "Prediction:" sentence, the numeric
ranges in it, and the FP32 peak a compute-bound ladder is measured against."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lab.core import device
from lab.core.ladder import Family
from lab.lessons.common import family_of
from lab.lessons.sources import rung_header
from lab.lessons.views import missing, one_record
from lab.measure.records import RecordSet, describe_params, format_value

if TYPE_CHECKING:
    from lab.lessons.mode import Mode


# A header's fields start with one of these words and a colon; the prediction runs up to the next one.
_FIELDS = (r"Requires|Tails[^:]*|Knobs|Cost|What[^:]*|Why|Measured[^:]*|Left for later[^:]*|Not more|Results"
           r"|Ideas[^:]*")
# "Prediction: ..." or "Prediction (4096^3, H200): ...": the parenthesis says where it holds.
_PREDICTION = re.compile(rf"Prediction(?:\s*\((?P<where>[^)]*)\))?:\s*(?P<text>.*?)(?=\s(?:{_FIELDS}):|$)",
                         re.DOTALL)


def prediction(family: str | Family, key: str) -> str:
    """The header's "Prediction:" sentence(s), joined onto one line (with its "(where)", if any)."""
    header = " ".join(rung_header(family, key).split())
    m = _PREDICTION.search(header)
    if not m:
        return "(this rung's header states no prediction)"
    return (f"({m['where']}) " if m["where"] else "") + m["text"].strip()


@dataclass(frozen=True)
class Claim:
    """A numeric range a prediction states: a throughput, a ratio to an earlier rung, or to the ceiling."""

    text: str
    lo: float
    hi: float
    against: str  # "" (an absolute throughput), a rung number ("05"), or "ceiling"


_NUM = r"(\d+(?:\.\d+)?)\s*[-\u2013]\s*(\d+(?:\.\d+)?)"
_CEILING = r"(?:cuBLAS|the device copy|the ceiling)"
# (pattern, against, scale): each match's two numbers, times `scale`, are the range's ends.
_CLAIMS = (
    (re.compile(_NUM + r"\s*(?:TFLOP/s|GB/s)"), lambda m: "", 1.0),
    (re.compile(_NUM + r"x\s+(?:over\s+)?rung\s+(\d+)"), lambda m: f"{int(m[3]):02d}", 1.0),
    (re.compile(_NUM + r"x\s+(?:of\s+)?" + _CEILING), lambda m: "ceiling", 1.0),
    (re.compile(_NUM + r"%\s+of\s+" + _CEILING), lambda m: "ceiling", 0.01),  # "~85-95% of the device copy"
)
_PLUS = re.compile(r"\+" + _NUM + r"%\s+over\s+rung\s+(\d+)")  # "+5-10% over rung 02": 1.05-1.10x of it
_AT_LEAST = re.compile(r"(?:ceiling|device copy|cuBLAS)\s*\(>=\s*(\d+(?:\.\d+)?)x\)")  # "ceiling (>= 0.98x)"


def claims(text: str) -> list[Claim]:
    """The numeric ranges in a prediction ("6-10x rung 01", "~3-5 TFLOP/s", "0.6-0.75x of cuBLAS",
    "~85-95% of the device copy", "+5-10% over rung 02", "the device-copy ceiling (>= 0.98x)")."""
    found = []
    for pattern, against, scale in _CLAIMS:
        found += [Claim(m[0], float(m[1]) * scale, float(m[2]) * scale, against(m)) for m in pattern.finditer(text)]
    found += [Claim(m[0], 1 + float(m[1]) / 100, 1 + float(m[2]) / 100, f"{int(m[3]):02d}")
              for m in _PLUS.finditer(text)]
    found += [Claim(m[0], float(m[1]), math.inf, "ceiling") for m in _AT_LEAST.finditer(text)]
    unique = list(dict.fromkeys(found))
    return sorted(unique, key=lambda c: text.index(c.text))


def _square(params: dict, n: int) -> bool:
    return all(params.get(k) == n for k in ("M", "N", "K")) and not params.get("beta") and not params.get("pad")


def prediction_check(rs: RecordSet | None, family: str | Family, key: str) -> str:
    """Each numeric range of the rung's prediction against the headline records it is about (the sizes
    "N^3" it names, else every headline size): inside, below or above, with the measured figure. A size
    the prediction names but the records lack is said, not skipped."""
    fam = family_of(family)
    if rs is None:
        return missing(fam.name)
    text = prediction(fam, key)
    found = claims(text)
    rung = fam.rung(key).key
    if not found:
        return f"{rung}: the prediction states no numeric range to check; compare it by eye."
    mine = rs.where(kind="headline", rung=rung)
    sides = [int(n) for n in dict.fromkeys(re.findall(r"(\d+)\^3", text))]
    lines = [f"{rung}: the prediction's ranges against the records ({rs.label()}):"]
    if sides:
        lacking = [n for n in sides if not any(_square(r.params, n) for r in mine)]
        lines += [f"  at {n}^3: the prediction names this size, but these records have no headline run there"
                  for n in lacking]
        mine = [r for n in sides for r in mine if _square(r.params, n)]
    if not mine:
        return "\n".join(lines) if sides else f"{rung}: no headline records ({rs.label()})"
    for rec in mine:
        at = describe_params(rec.params)
        if sides:  # "4096^3", plus whatever else tells the records at that size apart (layout, dtype)
            rest = describe_params({k: v for k, v in rec.params.items() if k not in ("M", "N", "K")})
            at = f"{rec.params['M']}^3" + (f" {rest}" if rest else "")
        for c in found:
            if c.against == "":
                value, unit = rec.value, f" {rec.metric}"
            elif c.against == "ceiling":
                value, unit = rec.ratio, f"x {rec.ceiling}"
            else:
                other = one_record(rs, kind="headline", rung=fam.rung(c.against).key, params=rec.params, l2=rec.l2)
                if other is None or not other.value:
                    lines.append(f"  at {at}: {c.text}: no record of rung {c.against} to compare with")
                    continue
                value, unit = rec.value / other.value, f"x rung {c.against}"
            shown = format_value(value, rec.metric) if c.against == "" else f"{value:.3f}"
            verdict = ("inside the range" if c.lo <= value <= c.hi else
                       f"BELOW the range ({value / c.lo:.3f} of its low end)" if value < c.lo else
                       f"ABOVE the range ({value / c.hi:.3f} of its high end)")
            lines.append(f"  at {at}: predicted {c.text:28s} measured {shown}{unit} -> {verdict}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# The FP32 peak of a compute-bound ladder
# ----------------------------------------------------------------------------------------------

def fp32_peak(current: Mode, rs: RecordSet | None = None) -> device.Fp32Peak | None:
    """LIVE: this GPU's FP32 peak (lab.core.device). REPLAY: the peak of the GPU the records were made on, from
    their provenance (arch, SM count) and lab.core.device's per-arch clock; None when there are no records."""
    if current.live:
        return device.current_fp32_peak()
    if rs is None:
        return None
    p = rs.provenance
    return device.fp32_peak(p.get("arch", device.REFERENCE_ARCH), int(p.get("sm_count") or 0))


def peak_status(peak: device.Fp32Peak | None, current: Mode) -> str:
    """The peak, its factors, and where its clock came from (the driver's attribute, or the datasheet)."""
    if peak is None:
        return "FP32 peak: unknown here (REPLAY with no records: no GPU to take it from)."
    where = "this GPU" if current.live else "the GPU the records were made on (from their provenance)"
    return f"{peak}\n  for {where}."
