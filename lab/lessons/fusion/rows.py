"""Notebook 07's row ladders (softmax, RMSNorm, LayerNorm): their rungs and headers, each rung's fraction of the device
copy per headline row length, the lessons' target for them, the rungs' predictions read as ranges over row lengths
and held against the records, and the tails."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lab.lessons.common import Markdown, md
from lab.lessons.fusion.records import (
    COMPOSED,
    TARGETS,
    against_range,
    header_fields,
    ladder,
    meets,
    missing,
    not_in_catalogue,
    problems_of,
    record_at,
    status,
)
from lab.measure.records import RecordSet, format_value

if TYPE_CHECKING:
    from lab.core.ladder import Family


# ----------------------------------------------------------------------------------------------
# Notebook 07: the row ladders' sources
# ----------------------------------------------------------------------------------------------

def rung_list(name: str) -> str:
    fam = ladder(name)
    if fam is None:
        return not_in_catalogue(name)
    lines = [f"{name}: {fam.title}; ceiling {fam.ceiling_name}, baselines {', '.join(fam.baselines()) or 'none'}"]
    lines += [f"  {r.key:22s} kernels/{r.spec.source:28s} {r.title}" for r in fam.rungs]
    return "\n".join(lines)


def rung_headers(name: str) -> Markdown:
    """Every rung's header (what changed, why, the prediction, requirements, knobs), one block each."""
    from lab.lessons.sources import rung_header

    fam = ladder(name)
    if fam is None:
        return md(not_in_catalogue(name))
    seen, parts = set(), []
    for r in fam.rungs:
        if r.spec.source in seen:
            continue
        seen.add(r.spec.source)
        parts.append(f"**{r.key}** (`kernels/{r.spec.source}`): {r.title}\n\n```text\n{rung_header(fam, r.key)}\n```")
    return md("\n\n".join(parts))


def shared_sources(a: str, b: str) -> str:
    """Whether two ladders' rungs are built from the same source files (one template, two entries)."""
    fa, fb = ladder(a), ladder(b)
    if fa is None or fb is None:
        return not_in_catalogue(a if fa is None else b)
    pairs = list(zip(fa.rungs, fb.rungs, strict=False))
    same = [ra.key for ra, rb in pairs if ra.spec.source == rb.spec.source]
    if len(same) == len(fa.rungs) == len(fb.rungs):
        entries = ", ".join(f"{ra.spec.entry} / {rb.spec.entry}" for ra, rb in pairs)
        return (f"{a} and {b} build every rung from the same files (entries {entries}): the headers above are "
                f"{b}'s too.")
    return f"{a} and {b} share the sources of rungs {', '.join(same) or 'none'}."


# ----------------------------------------------------------------------------------------------
# Notebook 07: bandwidth per rung against the device copy and the composed baseline
# ----------------------------------------------------------------------------------------------

def _row_label(params: dict) -> str:
    extra = "" if params.get("mask", "none") == "none" else f" {params['mask']}"
    return f"n={params['n']} {params.get('dtype', '')}{extra} ({params['rows']} rows)"


def _targets_in(rs: RecordSet, fam: Family) -> list[str]:
    rungs = [r.key for r in fam.rungs]
    present = list(dict.fromkeys(r.rung for r in rs.records if r.rung != r.ceiling))
    return [k for k in rungs if k in present] + [k for k in present if k not in rungs]


def bandwidth_table(rs: RecordSet | None, name: str) -> Markdown:
    """Per headline problem: the device copy's GB/s, then each rung's and the composed baseline's fraction of it
    (same run), and the path the last rung's launcher took."""
    fam = ladder(name)
    if fam is None or rs is None:
        return md(status(rs, name))
    heads = sorted(problems_of(rs), key=lambda p: (p.get("dtype", ""), p["n"]))
    if not heads:
        return md(f"(no headline records in {name}: {rs.label()})")
    targets = _targets_in(rs, fam)
    last = fam.rungs[-1].key
    lines = [f"{name}, headline problems, fraction of {rs.records[0].ceiling} in the same run ({rs.label()})", "",
             "| problem | copy GB/s | " + " | ".join(targets) + f" | {last} path |",
             "|---|---:|" + "---:|" * len(targets) + "---|"]
    for params in heads:
        ceiling = next((r for r in rs.where(kind="headline", params=params) if r.rung == r.ceiling), None)
        cells = []
        for t in targets:
            rec = record_at(rs, "headline", t, params)
            cells.append("-" if rec is None else f"{rec.ratio:.3f}")
        last_rec = record_at(rs, "headline", last, params)
        path = last_rec.extra.get("path", "-") if last_rec is not None else "-"
        copy = "-" if ceiling is None else format_value(ceiling.value, "GB/s")
        lines.append(f"| {_row_label(params)} | {copy} | " + " | ".join(cells) + f" | {path} |")
    return md("\n".join(lines))


def copy_targets(rs: RecordSet | None, name: str) -> str:
    """The memory-bound ladders' target against the records: the ladder's last rung at >= TARGETS["copy_fraction"]
    of the device copy at every headline row length n >= TARGETS["copy_min_n"]; the composed baseline beside it."""
    fam = ladder(name)
    if fam is None or rs is None:
        return status(rs, name)
    last = fam.rungs[-1].key
    floor, min_n = TARGETS["copy_fraction"], TARGETS["copy_min_n"]
    mine = sorted((r for r in rs.where(kind="headline", rung=last) if r.params["n"] >= min_n),
                  key=lambda r: (r.params.get("dtype", ""), r.params["n"]))
    if not mine:
        return f"{name}: no headline records of {last} at n >= {min_n}: the target cannot be judged here."
    lines = [f"{name}, {last} at n >= {min_n} ({rs.label()}):"]
    for r in mine:
        base = record_at(rs, "headline", COMPOSED, r.params)
        vs = "" if base is None or not base.value else f"; {r.value / base.value:.2f}x the {COMPOSED} baseline"
        lines.append(f"  {_row_label(r.params)}: {r.ratio:.3f} of the device copy -> {meets(r.ratio, floor)}{vs}")
    met = sum(r.ratio >= floor for r in mine)
    worst = min(mine, key=lambda r: r.ratio)
    lines.append(f"  met at {met} of {len(mine)} problems; the lowest {worst.ratio:.3f} at {_row_label(worst.params)}")
    return "\n".join(lines)


# --- the rungs' predictions, as ranges over row lengths -------------------------------------------------------

@dataclass(frozen=True)
class RowClaim:
    """A range a row ladder's prediction states ('0.9-0.97x of the device copy for n >= 1024'), the row lengths
    it names, and what it is a fraction of: the ceiling, or another rung ('02')."""

    text: str
    lo: float
    hi: float
    against: str  # "ceiling" or a rung number
    where: str  # the row lengths, as the header names them ('' when it names none)
    ns: tuple[tuple[float, float], ...]  # closed intervals of n the claim is about (empty: every n)

    def about(self, n: int) -> bool:
        return not self.ns or any(lo <= n <= hi for lo, hi in self.ns)


_RANGE = re.compile(r"(?P<plus>\+)?(?P<lo>\d+(?:\.\d+)?)\s*-\s*(?P<hi>\d+(?:\.\d+)?)\s*(?P<unit>x|%)")
_RUNG_AFTER = re.compile(r"^\s*(?:x\s*)?(?:over\s+)?(?:of\s+)?rung\s+(\d+)")
_N_BETWEEN = re.compile(r"(\d+)\s*<=\s*n\s*<=\s*(\d+)")
_N_AT_LEAST = re.compile(r"n\s*>=\s*(\d+)")
_N_PAST = re.compile(r"(?:past|longer than|beyond)\s+(\d+)")
_N_LIST = re.compile(r"\bn\s*=\s*(\d+(?:\s*-\s*\d+)?(?:\s*(?:,|and)\s*\d+(?:\s*-\s*\d+)?)*)")
_CLAUSE_END = re.compile(r";|\.(?:\s|$)")  # a ';' or a sentence's end: prose about another range follows


def _n_phrases(text: str) -> list[tuple[re.Match, list[tuple[float, float]]]]:
    """Every phrase naming row lengths in `text`, with the intervals of n it names, in order of position."""
    found = [(m, [(float(m[1]), float(m[2]))]) for m in _N_BETWEEN.finditer(text)]
    inside = [m.span() for m, _ in found]
    found += [(m, [(float(m[1]), float("inf"))]) for m in _N_AT_LEAST.finditer(text)
              if not any(a <= m.start() < b for a, b in inside)]
    found += [(m, [(float(m[1]) + 1, float("inf"))]) for m in _N_PAST.finditer(text)]
    for m in _N_LIST.finditer(text):
        parts = [[float(x) for x in re.split(r"\s*-\s*", part) if x] for part in re.split(r"\s*(?:,|and)\s*", m[1])]
        found.append((m, [(ends[0], ends[-1]) for ends in parts if ends]))
    return sorted(found, key=lambda f: f[0].start())


def _n_intervals(text: str) -> tuple[tuple[tuple[float, float], ...], str]:
    """The row lengths a piece of prose names ('n = 1024-4096', 'n = 128 and 512', 'n >= 1024', '1024 <= n <=
    8192', 'past 65536'), as intervals, and the phrases found."""
    phrases = _n_phrases(text)
    return tuple(i for _, found in phrases for i in found), "; ".join(m[0].strip() for m, _ in phrases)


def _owned_after(text: str) -> str:
    """The prose after a range that is about it: up to the clause's end, and up to the first comma after the
    first row lengths it names ('... at n = 1024-4096, ~0.35-0.5x at ...')."""
    text = _CLAUSE_END.split(text)[0]
    phrases = _n_phrases(text)
    if phrases:
        comma = text.find(",", phrases[0][0].end())
        if comma >= 0:
            return text[:comma]
    return text


def row_claims(text: str) -> list[RowClaim]:
    """The ranges in a row ladder's prediction with the row lengths each is about: those named after it in its
    clause, else those that open its clause before it ('n = 128 and 512 lower (~0.6-0.8x'), else the previous
    range's ('0.75-0.9x of the device copy for 1024 <= n <= 8192 (1.3-2x rung 01)'). '+5-30% over rung 02' is
    1.05-1.30x of rung 02."""
    ranges = list(_RANGE.finditer(text))
    claims: list[RowClaim] = []
    for i, m in enumerate(ranges):
        stop = ranges[i + 1].start() if i + 1 < len(ranges) else len(text)
        ns, where = _n_intervals(_owned_after(text[m.end():stop]))
        if not ns:
            gap = _CLAUSE_END.split(text[ranges[i - 1].end() if i else 0:m.start()])
            ns, where = _n_intervals(gap[-1] if len(gap) > 1 or not i else "")
        if not ns and claims:
            ns, where = claims[-1].ns, claims[-1].where
        lo, hi = float(m["lo"]), float(m["hi"])
        if m["unit"] == "%":
            lo, hi = (1 + lo / 100, 1 + hi / 100) if m["plus"] else (lo / 100, hi / 100)
        rung = _RUNG_AFTER.match(text[m.end():])
        shown = m[0] + (f" of rung {int(rung[1]):02d}" if rung else " of the copy")
        claims.append(RowClaim(shown, lo, hi, f"{int(rung[1]):02d}" if rung else "ceiling", where, ns))
    return claims


def prediction_text(name: str, key: str) -> str:
    """The rung header's "Prediction" field as written (its parenthesis included), else lab.lessons' reading."""
    from lab.lessons.predictions import prediction

    found = [f for f in header_fields(name, key) if f.startswith("Prediction")]
    return " ".join(found) if found else prediction(name, key)


def row_prediction_check(rs: RecordSet | None, name: str, key: str) -> str:
    """Each range of the rung's prediction against the headline records at the row lengths it names (both types
    where the records hold both): inside, below or above, with the measured fraction."""
    fam = ladder(name)
    if fam is None:
        return not_in_catalogue(name)
    rung = fam.rung(key)
    text = prediction_text(name, rung.key)
    lines = [f"{rung.key}: {text}"]
    if rs is None:
        return "\n".join(lines + [missing(name)])
    claims = row_claims(text)
    if not claims:
        return "\n".join(lines + ["  (no numeric range in the prediction: compare it with the table by eye)"])
    mine = sorted(rs.where(kind="headline", rung=rung.key), key=lambda r: (r.params["n"], r.params.get("dtype", "")))
    for c in claims:
        hits = [r for r in mine if c.about(r.params["n"])]
        shown = f"{c.text} ({c.where or 'no row length named: every headline n'})"
        if not hits:
            lines.append(f"  {shown}: no headline record at those row lengths")
            continue
        for r in hits:
            if c.against == "ceiling":
                value, unit = r.ratio, "of the copy"
            else:
                other = record_at(rs, "headline", fam.rung(c.against).key, r.params)
                if other is None or not other.value:
                    lines.append(f"  {shown} at {_row_label(r.params)}: no record of rung {c.against}")
                    continue
                value, unit = r.value / other.value, f"x rung {c.against}"
            lines.append(f"  {shown} at {_row_label(r.params)}: measured {value:.3f} {unit} -> "
                         f"{against_range(value, c.lo, c.hi)}")
    return "\n".join(lines)


def ladder_predictions(rs: RecordSet | None, name: str) -> str:
    """row_prediction_check for every rung of the ladder, one block each."""
    fam = ladder(name)
    if fam is None:
        return not_in_catalogue(name)
    return "\n\n".join(row_prediction_check(rs, name, r.key) for r in fam.rungs)


def tail_summary(rs: RecordSet | None, name: str, modulus: int = 8) -> str:
    """The tail records by n mod `modulus` (a vector's elements: the sawtooth's period) and the launch paths."""
    from lab.lessons.views import launch_paths, tail_residues

    if ladder(name) is None or rs is None:
        return status(rs, name)
    return tail_residues(rs, name, modulus) + "\n" + launch_paths(rs, name, "tail")
