"""Rung headers against the knobs their family runs: so a header's stated defaults cannot drift.

A rung's header (the leading `//` comment of its .cu file) ends with a "Knobs:" clause naming each knob
with its default, as `NAME (VALUE)` (also `NAME (default VALUE)` or `NAME (VALUE = formula)`). The family
passes its knobs as -D defines; the source's `#ifndef NAME / #define NAME VALUE` fallbacks serve a
standalone compile. All three must agree:
- every knob the family passes is stated in the header, with the value the family passes;
- every `#define` fallback of such a knob has that value too;
- a knob the header states but the family does not pass keeps the header's value as its fallback.
Generic over families: `knob_mismatches(family)` works for any lab.core.ladder.Family.
"""

from __future__ import annotations

import re

from lab.core.build import KERNELS_DIR
from lab.core.ladder import Family, Rung

_KNOB = re.compile(r"\b([A-Z][A-Z0-9_]*)\s*\((?:default\s+)?(-?\d+)\b[^)]*\)")
_DEFINE = re.compile(r"#ifndef\s+([A-Z][A-Z0-9_]*)\s*\n\s*#define\s+\1\s+(-?\d+)\b")


def header(source: str) -> str:
    """The leading `//` comment block of a source file, without the slashes."""
    lines = []
    for line in source.splitlines():
        if not line.startswith("//"):
            break
        lines.append(line[2:].strip())
    return "\n".join(lines)


def stated_knobs(source: str) -> dict[str, int]:
    """NAME -> default as the header's "Knobs:" clause states them (empty when it has none)."""
    text = header(source)
    at = text.find("Knobs")
    return {name: int(value) for name, value in _KNOB.findall(text[at:])} if at >= 0 else {}


def define_defaults(source: str) -> dict[str, int]:
    """NAME -> VALUE of every `#ifndef NAME` / `#define NAME VALUE` fallback in the source."""
    return {name: int(value) for name, value in _DEFINE.findall(source)}


def rung_mismatches(rung: Rung) -> list[str]:
    source = (KERNELS_DIR / rung.spec.source).read_text()
    stated, defines, runs = stated_knobs(source), define_defaults(source), dict(rung.spec.knobs)
    where = f"{rung.family}/{rung.key}"
    problems = []
    for name, value in runs.items():
        if name not in stated:
            problems.append(f"{where}: the header does not state knob {name} (the family runs {value})")
        elif stated[name] != value:
            problems.append(f"{where}: the header says {name} ({stated[name]}), the family runs {value}")
        if name in defines and defines[name] != value:
            problems.append(f"{where}: #define {name} {defines[name]}, the family runs {value}")
    for name, value in stated.items():
        if name not in runs and name in defines and defines[name] != value:
            problems.append(f"{where}: the header says {name} ({value}), its #define says {defines[name]}")
    return problems


def knob_mismatches(family: Family) -> list[str]:
    """Every disagreement between a family's knobs and its rungs' headers and #define fallbacks."""
    return [p for rung in family.rungs for p in rung_mismatches(rung)]
