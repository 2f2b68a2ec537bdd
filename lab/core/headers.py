"""Rung headers against the knobs their family runs: so a header's stated defaults cannot drift.

A rung's header (the leading `//` comment of its .cu file) ends with a "Knobs:" clause naming each knob
with its default, as `NAME (VALUE)` (also `NAME (default VALUE)` or `NAME (VALUE = formula)`). The family
passes its knobs as -D defines; the `#ifndef NAME / #define NAME VALUE` fallbacks serve a standalone compile,
whether they stand in the source or in a lab header it includes (kernels/common/lab_hopper_knobs.cuh holds
those the Hopper GEMM rungs share; `fallbacks` follows the includes). All three must agree:
- every knob the family passes is stated in the header, with the value the family passes;
- every `#define` fallback of such a knob has that value too;
- a knob the header states but the family does not pass keeps the header's value as its fallback.
Generic over families: `knob_mismatches(family)` works for any lab.core.ladder.Family.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lab.core.build import COMMON_DIR, KERNELS_DIR
from lab.core.ladder import Family, Rung

_KNOB = re.compile(r"\b([A-Z][A-Z0-9_]*)\s*\((?:default\s+)?(-?\d+)\b[^)]*\)")
_DEFINE = re.compile(r"#ifndef\s+([A-Z][A-Z0-9_]*)\s*\n\s*#define\s+\1\s+(-?\d+)\b")
# In the order the preprocessor meets them: a quoted include, an #ifndef fallback, or any other #define (after
# which a fallback for the same name is not taken).
_DIRECTIVE = re.compile(
    r'^[ \t]*#[ \t]*include[ \t]*"(?P<include>[^"]+)"'
    r"|(?P<fallback>#ifndef\s+(?P<name>[A-Z][A-Z0-9_]*)\s*\n\s*#define\s+(?P=name)\s+(?P<value>-?\d+)\b)"
    r"|^[ \t]*#[ \t]*define[ \t]+(?P<defined>[A-Za-z_][A-Za-z0-9_]*)",
    re.MULTILINE)


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
    """NAME -> VALUE of every `#ifndef NAME` / `#define NAME VALUE` fallback in the text itself (no includes)."""
    return {name: int(value) for name, value in _DEFINE.findall(source)}


@dataclass(frozen=True)
class Fallback:
    """A knob's `#ifndef` fallback as a standalone compile takes it: its value, and where it stands ("" for the
    rung's own source, else the included lab header's file name)."""

    value: int
    origin: str = ""

    def define(self, name: str) -> str:
        return f"#define {name} {self.value}" if not self.origin else f"#define {name} {self.value} in {self.origin}"


def fallbacks(source: str) -> dict[str, Fallback]:
    """NAME -> the `#ifndef NAME / #define NAME VALUE` fallback a standalone compile of `source` takes: the
    source's own and those of the lab headers (kernels/common) it includes, recursively and each once (`#pragma
    once`), in the order the preprocessor meets them. The first definition of a name wins, as #ifndef has it: a
    header's fallback for a name the source or an earlier header already defined (as a fallback or plainly, as
    grouped rung 01 defines TN) is not taken. Includes are followed whatever #if stands around them."""
    found: dict[str, Fallback] = {}
    defined: set[str] = set()
    included: set[str] = set()

    def walk(text: str, origin: str) -> None:
        for m in _DIRECTIVE.finditer(text):
            if m["include"] is not None:
                path = COMMON_DIR / m["include"]
                if m["include"] not in included and path.is_file():
                    included.add(m["include"])
                    walk(path.read_text(), m["include"])
            elif m["fallback"] is not None:
                if m["name"] not in defined:
                    found[m["name"]] = Fallback(int(m["value"]), origin)
                defined.add(m["name"])
            else:
                defined.add(m["defined"])

    walk(source, "")
    return found


def rung_mismatches(rung: Rung) -> list[str]:
    source = (KERNELS_DIR / rung.spec.source).read_text()
    stated, defines, runs = stated_knobs(source), fallbacks(source), dict(rung.spec.knobs)
    where = f"{rung.family}/{rung.key}"
    problems = []
    for name, value in runs.items():
        if name not in stated:
            problems.append(f"{where}: the header does not state knob {name} (the family runs {value})")
        elif stated[name] != value:
            problems.append(f"{where}: the header says {name} ({stated[name]}), the family runs {value}")
        if name in defines and defines[name].value != value:
            problems.append(f"{where}: {defines[name].define(name)}, the family runs {value}")
    for name, value in stated.items():
        if name not in runs and name in defines and defines[name].value != value:
            fallback = defines[name]
            its = "its #define" if not fallback.origin else f"the #define in {fallback.origin}"
            problems.append(f"{where}: the header says {name} ({value}), {its} says {fallback.value}")
    return problems


def knob_mismatches(family: Family) -> list[str]:
    """Every disagreement between a family's knobs and its rungs' headers and #define fallbacks."""
    return [p for rung in family.rungs for p in rung_mismatches(rung)]
