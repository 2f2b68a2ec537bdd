"""A rung's source as a lesson shows it: its header, its knobs, the diff from the previous rung, and
what the compile reports say changed (registers, shared memory, the SASS instruction mix)."""

from __future__ import annotations

import difflib

from lab.core.build import read_source
from lab.core.ladder import Family, Rung
from lab.lessons.common import Markdown, family_of, md


def rung_pair(family: str | Family, key: str) -> tuple[Rung, ...]:
    """(previous rung, this rung), or (this rung,) for the first rung of a ladder."""
    fam = family_of(family)
    rung = fam.rung(key)
    index = fam.rungs.index(rung)
    return (fam.rungs[index - 1], rung) if index else (rung,)


def rung_header(family: str | Family, key: str) -> str:
    """The rung's opening comment (what changed, why, prediction, requirements, knobs), as text."""
    lines = []
    for line in read_source(family_of(family).rung(key).spec).splitlines():
        if not line.startswith("//"):
            break
        lines.append(line[2:].removeprefix(" "))
    return "\n".join(lines).strip()


def knobs_line(family: str | Family, key: str) -> str:
    """The knobs this rung is built and launched with (the ladder's defaults, from lab/families/)."""
    rung = family_of(family).rung(key)
    knobs = ", ".join(f"{k}={v}" for k, v in rung.spec.knobs) or "none"
    return f"{rung.spec.source} as the ladder builds it: entry {rung.spec.entry}, knobs {knobs}"


def rung_diff(family: str | Family, key: str, context: int = 3) -> str:
    """Unified diff of the previous rung's source against this one's ('' for a ladder's first rung)."""
    pair = rung_pair(family, key)
    if len(pair) == 1:
        return ""
    before, after = (read_source(r.spec).splitlines(keepends=True) for r in pair)
    return "".join(difflib.unified_diff(before, after, fromfile=pair[0].spec.source,
                                        tofile=pair[1].spec.source, n=context))


def mostly_rewritten(family: str | Family, key: str, share: float = 0.5) -> bool:
    """Whether the rung changes more than `share` of the previous rung's lines: then its whole source reads
    better than a diff (a Hopper rung after an mma.sync one). False for a ladder's first rung."""
    pair = rung_pair(family, key)
    if len(pair) == 1:
        return False
    before = read_source(pair[0].spec).splitlines()
    changed = sum(1 for line in rung_diff(family, key, 0).splitlines()
                  if line.startswith("-") and not line.startswith("---"))
    return changed > share * len(before)


def show_source(family: str | Family, key: str) -> Markdown:
    rung = family_of(family).rung(key)
    return md(f"`kernels/{rung.spec.source}`\n\n```cuda\n{read_source(rung.spec).rstrip()}\n```")


def show_diff(family: str | Family, key: str, context: int = 3) -> Markdown:
    diff = rung_diff(family, key, context)
    if not diff:
        first = family_of(family).rung(key).spec.source
        return md(f"`{first}` is the first rung: there is nothing to diff against.")
    return md(f"```diff\n{diff.rstrip()}\n```")


def compile_pair(family: str | Family, key: str, arch: int) -> list:
    """Compile reports of the previous rung and this one (just this one for a ladder's first rung), each
    as the family launches it (a rung with a VEC knob in its 16-byte variant when the family has one: the
    family's own VEC default, else VEC=4), with the dynamic shared memory its launch asks for, and for the
    arch it needs where `arch` cannot run it (lab.core.build.report_arch)."""
    from lab.core.build import compile_report, report_arch

    fam = family_of(family)
    vec_rungs = getattr(fam, "VEC_RUNGS", ())
    reports = []
    for r in rung_pair(fam, key):
        spec = r.spec.with_knobs(VEC=4) if r.key in vec_rungs and "VEC" not in dict(r.spec.knobs) else r.spec
        reports.append(compile_report(spec, report_arch(r.spec, arch), fam.dynamic_smem_bytes(r)))
    return reports


def instruction_delta(reports: list) -> str:
    """How registers, shared memory, spills and the notable SASS opcodes changed between two reports."""
    if len(reports) < 2:
        only = reports[0]
        mix = ", ".join(f"{k} x{v}" for k, v in only.instructions.items()) or "(no nvdisasm: no mix)"
        return f"{only.source}: {only.registers} registers, {only.smem_static_bytes} B static smem; {mix}"
    a, b = reports[-2], reports[-1]
    lines = [f"{a.source} -> {b.source} ({b.arch}):",
             f"  registers {a.registers} -> {b.registers}; static smem {a.smem_static_bytes} -> "
             f"{b.smem_static_bytes} B; spills {a.spill_store_bytes + a.spill_load_bytes} -> "
             f"{b.spill_store_bytes + b.spill_load_bytes} B"]
    if not (a.sass_available and b.sass_available):
        lines.append("  (nvdisasm is not installed: no instruction mix; `pip install nvidia-cuda-nvdisasm`)")
        return "\n".join(lines)
    for op in sorted(set(a.instructions) | set(b.instructions)):
        x, y = a.instructions.get(op, 0), b.instructions.get(op, 0)
        if x != y:
            lines.append(f"  {op:10s} {x:3d} -> {y:3d}")
    if len(lines) == 2:
        lines.append("  the notable SASS opcodes are the same")
    return "\n".join(lines)


def _width(op: str) -> int:
    """32-bit words moved by one load instruction: LDS.128 -> 4, LDS.64 -> 2, LDS -> 1."""
    suffix = op.split(".")[-1]
    return {"128": 4, "64": 2, "U16": 1, "U8": 1}.get(suffix, 1) if "." in op else 1


def operand_mix(reports: list) -> str:
    """FFMA against the loads that feed them, from each compile report's SASS (static counts: the
    instructions in the binary, which for fully unrolled inner loops is the per-iteration mix)."""
    lines = []
    for r in reports:
        if not r.sass_available:
            lines.append(f"{r.source}: (nvdisasm is not installed: no instruction mix)")
            continue
        mix = r.instructions
        ffma = mix.get("FFMA", 0)
        lds = {k: v for k, v in mix.items() if k.split(".")[0] in ("LDS", "LDSM")}
        ldg = {k: v for k, v in mix.items() if k.split(".")[0] == "LDG"}
        async_copies = sum(v for k, v in mix.items() if k.split(".")[0] == "LDGSTS")
        line = f"{r.source}: FFMA x{ffma}"
        if lds:
            n, words = sum(lds.values()), sum(v * _width(k) for k, v in lds.items())
            line += (f"; shared loads {n} ({words} floats): {ffma / n:.1f} FFMA per LDS instruction, "
                     f"{ffma / words:.1f} per float read from shared memory")
        elif ldg:
            n, words = sum(ldg.values()), sum(v * _width(k) for k, v in ldg.items())
            line += f"; no shared loads: {ffma / n:.2f} FFMA per global load (LDG x{n}, {words} floats)"
        if async_copies:
            line += f"; async global->shared copies (LDGSTS) x{async_copies}"
        lines.append(line)
    return "\n".join(lines)


def mma_mix(reports: list) -> str:
    """Tensor-core instructions against what feeds them, from each compile report's SASS (static counts):
    mma.sync (HMMA) per ldmatrix (LDSM), cp.async (LDGSTS) and TMA (UTMALDG) copies, warpgroup MMA
    (HGMMA, which reads its operands from shared memory itself), mbarrier operations (SYNCS) and
    setmaxnreg (USETMAXREG)."""
    lines = []
    for r in reports:
        if not r.sass_available:
            lines.append(f"{r.source}: (nvdisasm is not installed: no instruction mix)")
            continue
        def count(base: str, mix: dict = r.instructions) -> int:  # every width of one opcode: HGMMA.64, ...
            return sum(v for k, v in mix.items() if k.split(".")[0] == base)

        hmma, hgmma, ldsm = count("HMMA"), count("HGMMA"), count("LDSM")
        parts = []
        if hmma:
            parts.append(f"mma.sync (HMMA) x{hmma}")
            parts.append(f"{hmma / ldsm:.1f} HMMA per ldmatrix (LDSM x{ldsm})" if ldsm else
                         f"no ldmatrix: fragments from global memory (LDG x{count('LDG')})")
        if hgmma:
            parts.append(f"wgmma (HGMMA) x{hgmma}, operands read from shared memory by the tensor cores")
        for base, what in (("LDGSTS", "cp.async copies (LDGSTS)"), ("UTMALDG", "TMA copies (UTMALDG)"),
                           ("SYNCS", "mbarrier operations (SYNCS)"), ("USETMAXREG", "setmaxnreg (USETMAXREG)")):
            if count(base):
                parts.append(f"{what} x{count(base)}")
        lines.append(f"{r.source}: " + ("; ".join(parts) if parts else "no tensor-core instructions"))
    return "\n".join(lines)
