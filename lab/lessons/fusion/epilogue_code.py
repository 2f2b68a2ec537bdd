"""Notebook 06's chain as the sources write it: the ops of kernels/common/lab_epilogue.cuh beside
lab.families.epilogue's names, an op's or a function's code, the compile reports of one rung plain and fused, what
the checks cover, and the quantizers on their decided values. Nothing here needs records or a GPU."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from lab.core.build import REPO_ROOT
from lab.core.errors import LabError
from lab.lessons.common import Markdown, md
from lab.lessons.fusion.records import EPILOGUE_HEADER, ladder, not_in_catalogue

if TYPE_CHECKING:
    from lab.core.ladder import Family


# ----------------------------------------------------------------------------------------------
# Notebook 06: the epilogue chain in the sources
# ----------------------------------------------------------------------------------------------

def _header_text() -> str:
    return (REPO_ROOT / "kernels" / EPILOGUE_HEADER).read_text()


_DEFINE = re.compile(r"^#define LAB_EPI_(?P<name>\w+)[ \t]+(?P<code>\d+)[ \t]*(?://[ \t]*(?P<what>.*))?$", re.MULTILINE)


def header_codes() -> list[dict]:
    """Every LAB_EPI_* code of lab_epilogue.cuh: {"kind": "op" | "out", "name", "code", "what"}."""
    rows = []
    for m in _DEFINE.finditer(_header_text()):
        name = m["name"].lower()
        kind = "out" if name.startswith("out_") else "op"
        rows.append({"kind": kind, "name": name.removeprefix("out_"), "code": int(m["code"]),
                     "what": (m["what"] or "").strip()})
    return rows


def ops_table() -> Markdown:
    """The chain's ops and output types as the header defines them, beside lab.families.epilogue's names for them (the
    two
    must agree: the Python side builds the -D knobs from its own table)."""
    from lab.families import epilogue

    python = {"op": epilogue.OPS, "out": epilogue.OUTS}
    lines = ["| knob value | kind | `LAB_EPI_*` in the header | lab.families.epilogue | what the header says |",
             "|---:|---|---|---|---|"]
    for row in header_codes():
        if row["kind"] == "op" and row["name"] == "none":
            continue
        agrees = python[row["kind"]].get(row["name"]) == row["code"]
        mine = f"`{row['name']}`" if agrees else "**disagrees**"
        knob = "EPI_OP1..4" if row["kind"] == "op" else "EPI_OUT"
        lines.append(f"| {row['code']} | {knob} | `LAB_EPI_{'OUT_' if row['kind'] == 'out' else ''}"
                     f"{row['name'].upper()}` | {mine} | {row['what']} |")
    most = epilogue.MAX_OPS
    return md("\n".join(lines) + f"\n\nAt most {most} ops per chain (`EPI_OP1` .. `EPI_OP{most}`, 0 = none), "
              "applied in order to `v = alpha * acc (+ beta * C)`.")


def _block_from(lines: list[str], first: int) -> list[str]:
    """Lines from `first` through the brace that closes the first '{' at or after it (the line alone if it holds
    a whole statement and opens no brace)."""
    depth, opened, out = 0, False, []
    for line in lines[first:]:
        out.append(line)
        depth += line.count("{") - line.count("}")
        opened = opened or "{" in line
        if (opened and depth <= 0) or (not opened and line.rstrip().endswith(";")):
            break
    return out


def _dedent(lines: list[str]) -> str:
    import textwrap

    return textwrap.dedent("\n".join(lines)).strip()


def op_source(op: str) -> Markdown:
    """One op's code in lab_epilogue.cuh: its `if constexpr (OP == LAB_EPI_...)` statement."""
    lines = _header_text().splitlines()
    tag = f"OP == LAB_EPI_{op.upper()})"
    at = next((i for i, line in enumerate(lines) if tag in line), None)
    if at is None:
        return md(f"(`{EPILOGUE_HEADER}` has no op `{op}`)")
    return md(f"`kernels/{EPILOGUE_HEADER}`, op `{op}`:\n\n```cuda\n{_dedent(_block_from(lines, at))}\n```")


def function_source(name: str) -> Markdown:
    """A function of lab_epilogue.cuh (with its template line), as the header writes it."""
    lines = _header_text().splitlines()
    pattern = re.compile(rf"^__device__.*\b{re.escape(name)}\(")
    at = next((i for i, line in enumerate(lines) if pattern.match(line)), None)
    if at is None:
        return md(f"(`{EPILOGUE_HEADER}` defines no function `{name}`)")
    start = at - 1 if at and lines[at - 1].startswith("template") else at
    return md(f"`kernels/{EPILOGUE_HEADER}`, `{name}`:\n\n```cuda\n"
              f"{_dedent(lines[start:at] + _block_from(lines, at))}\n```")


def header_behaviour() -> str:
    """The header's opening comment from 'Defined behaviour' on: what the tests pin down."""
    comment = []
    for line in _header_text().splitlines():
        if not line.startswith("//"):
            break
        comment.append(line[2:].removeprefix(" "))
    text = "\n".join(comment)
    at = text.find("Defined behaviour")
    return text[at:].strip() if at >= 0 else text.strip()


# --- compile reports: the same rung, plain and fused -----------------------------------------------------------

@dataclass(frozen=True)
class Build:
    label: str
    report: object  # lab.core.build.CompileReport


def _family_spec(fam: Family):
    rung = fam.rungs[0]
    spec = rung.spec
    if rung.key in getattr(fam, "VEC_RUNGS", ()):
        spec = spec.with_knobs(VEC=4)  # the 16-byte variant, as the family launches aligned problems
    if fam.name == "gemm_tc_epilogue":
        spec = spec.with_knobs(BF16=0, TN=1)  # fp16, A row-major and B as N x K: the headline problems' build
    return rung, spec


def compile_builds(name: str, arch: int, chains: Iterable[tuple[str, str, bool]]) -> list[Build]:
    """Compile reports of family `name`'s rung without an epilogue, then with each chain of `chains` ((ops, out,
    per row) as lab.families.epilogue.Epilogue.parse takes them), for `arch` (or the arch the rung needs)."""
    from lab.core.build import compile_report, report_arch
    from lab.families.epilogue import Epilogue

    fam = ladder(name)
    if fam is None:
        raise LabError(not_in_catalogue(name))
    rung, spec = _family_spec(fam)
    smem = fam.dynamic_smem_bytes(rung)
    builds = [Build("plain (no epilogue)", compile_report(spec, report_arch(spec, arch), smem))]
    for ops, out, per_row in chains:
        epi = Epilogue.parse(ops, out, per_row)
        fused = spec.with_knobs(**epi.knobs())
        builds.append(Build(f"fused: {epi.name}", compile_report(fused, report_arch(fused, arch), smem)))
    return builds


def compile_table(builds: list[Build]) -> Markdown:
    """Registers, shared memory, spills and the notable SASS opcodes of each build."""
    from lab.studies.report import smem_text

    lines = ["| build | arch | registers | smem B | spills B | notable SASS (static counts) |",
             "|---|---|---:|---:|---:|---|"]
    for b in builds:
        r = b.report
        mix = " ".join(f"{k}x{v}" for k, v in r.instructions.items()) if r.sass_available else "(no nvdisasm)"
        lines.append(f"| {b.label} | {r.arch} | {r.registers} | {smem_text(r)} | "
                     f"{r.spill_store_bytes + r.spill_load_bytes} | {mix} |")
    return md(f"`kernels/{builds[0].report.source}`, entry `{builds[0].report.entry}`\n\n" + "\n".join(lines))


def compile_delta(builds: list[Build]) -> str:
    """What each fused build changed against the plain one: registers, spills, and every notable opcode whose
    count moved (static counts: instructions in the binary, not executed per output)."""
    base = builds[0].report
    lines = []
    for b in builds[1:]:
        r = b.report
        spills = (base.spill_store_bytes + base.spill_load_bytes, r.spill_store_bytes + r.spill_load_bytes)
        lines.append(f"{b.label}: registers {base.registers} -> {r.registers}; spills {spills[0]} -> {spills[1]} B")
        if not (base.sass_available and r.sass_available):
            lines.append("  (nvdisasm is not installed: no instruction mix; `pip install nvidia-cuda-nvdisasm`)")
            continue
        moved = [(op, base.instructions.get(op, 0), r.instructions.get(op, 0))
                 for op in sorted(set(base.instructions) | set(r.instructions))]
        moved = [m for m in moved if m[1] != m[2]]
        lines += [f"  {op:10s} {x:4d} -> {y:4d}" for op, x, y in moved] or ["  the notable opcodes are the same"]
    return "\n".join(lines)


# --- correctness: what the checks cover, and the quantizers on special values ---------------------------------

def check_coverage(name: str) -> str:
    """The family's check cases, summarized from the cases themselves: chains, output types, shapes on tiles'
    tails, layouts and types."""
    fam = ladder(name)
    if fam is None:
        return not_in_catalogue(name)
    cases = fam.check_cases()
    chains = sorted({c.get("epilogue", "none") for c in cases})
    outs = sorted({c.get("out", "same") + ("/row" if c.get("q_per_row") else "") for c in cases})
    odd_n = sum(1 for c in cases if c["N"] % 2)
    partial = sum(1 for c in cases if c["M"] % 64 or c["N"] % 64)
    kinds = sorted({f"{c.get('dtype', 'float32')} {c.get('layout', '')}".strip() for c in cases})
    beta = sum(1 for c in cases if c.get("beta"))
    return "\n".join([
        f"{name}: {len(cases)} check cases, each on three input distributions, outputs NaN-poisoned first "
        "(lab.measure.verify.check_rung)",
        f"  chains ({len(chains)}): {', '.join(chains)}",
        f"  outputs: {', '.join(outs)}; types and layouts: {', '.join(kinds)}",
        f"  {odd_n} cases with N odd (no paired stores at the row's end), {partial} with M or N off a multiple of "
        f"64 (partial tiles), {beta} that read C (beta != 0)"])


def bounds_doc() -> str:
    """lab.families.epilogue's account of its error bounds (the module docstring from 'Bounds.')."""
    from lab.families import epilogue

    doc = epilogue.__doc__ or ""
    at = doc.find("Bounds.")
    return " ".join(doc[at:].split()) if at >= 0 else "(lab.families.epilogue states no bounds)"


# (value, what it shows): the quantizers' decided cases. The codes beside them are computed by lab.families.epilogue.
QUANTIZER_VALUES = (
    (0.5, "tie: round to even"), (1.5, "tie: round to even"), (2.5, "tie: round to even"),
    (-2.5, "tie, negative"), (127.5, "int8: rounds past 127, saturates"), (-128.5, "int8: saturates at -128"),
    (1e6, "far past both grids"), (np.inf, "+inf saturates"), (-np.inf, "-inf saturates"), (np.nan, "NaN"),
    (17.0, "e4m3: between 16 and 18, tie to the even code"), (464.0, "e4m3: past 448, saturates"),
    (2.0 ** -10, "e4m3: half the smallest subnormal, tie to 0"),
    (3 * 2.0 ** -10, "e4m3: between two subnormals, tie to even"), (-0.0, "negative zero"),
)


def quantizer_demo(scale: float = 1.0) -> Markdown:
    """The int8 and e4m3 codes lab.families.epilogue's references give for QUANTIZER_VALUES (the kernels are checked bit
    for bit against these on the GPU): ties, saturation, infinities, NaN, subnormals."""
    from lab.families.epilogue import decode_e4m3, quantize_e4m3, quantize_int8

    values = np.array([v for v, _ in QUANTIZER_VALUES], dtype=np.float32)
    q8 = quantize_int8(values, np.float32(scale))
    fp8 = quantize_e4m3(values, np.float32(scale))
    back = decode_e4m3(fp8)
    lines = [f"Quantization scale {scale:g} (the kernels multiply by it, in fp32, then convert):", "",
             "| v | int8 code | e4m3 code | e4m3 value | what it shows |", "|---:|---:|---:|---:|---|"]
    for (v, what), a, b, c in zip(QUANTIZER_VALUES, q8, fp8, back, strict=True):
        lines.append(f"| {v:g} | {int(a)} | 0x{int(b):02X} | {c:g} | {what} |")
    return md("\n".join(lines))
