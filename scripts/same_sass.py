"""Show that a source change left the machine code alone: dump the SASS of every rung of some families, over the
type and shape knobs each rung takes, then dump again after the change and compare. NVRTC and nvdisasm only: no
GPU needed. A refactor that moves code into kernels/common/ (or renames, or reorders helpers) should leave every
function's instructions as they were; a difference names the variant to look at.

    python scripts/same_sass.py dump /tmp/before softmax rmsnorm --arch 90   # before the change
    python scripts/same_sass.py dump /tmp/after softmax rmsnorm --arch 90    # after it
    python scripts/same_sass.py compare /tmp/before /tmp/after

Only the instructions are compared (nvdisasm -c, no line information), so comments, names of inlined helpers and
line numbers may change freely. A source with several entries (RMSNorm's and LayerNorm's in one file) is compared
function by function, its branch labels renumbered within each, so a change to one entry names that entry alone.
"""

from __future__ import annotations

import argparse
import itertools
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lab.core import build  # noqa: E402
from lab.core.errors import LabError  # noqa: E402
from lab.families import get_family  # noqa: E402

# The knobs a variant may turn, and the values dumped when a rung's spec has the knob.
TOGGLES = {"HALF": (0, 1), "BF16": (0, 1), "CAUSAL": (0, 1), "HEAD_DIM": (64, 128), "PAGED": (0, 1),
           "LAYERNORM": (0, 1), "CLUSTER": (1, 2, 4)}
_OFFSET = re.compile(r"^\s*/\*[0-9a-f]+\*/\s*")
_FUNCTION = re.compile(r"^\.text\.(\S+):$")
_LABEL = re.compile(r"\.L_x_\d+")
HEADER = "== function "


def variants(family: str, arch: int):
    """(name, spec) for every rung of `family` that builds for `arch`, over the TOGGLES its knobs include."""
    for rung in get_family(family).rungs:
        if build.arch_refusal(rung.spec, arch):
            continue
        knobs = dict(rung.spec.knobs)
        turned = [k for k in TOGGLES if k in knobs]
        for values in itertools.product(*(TOGGLES[k] for k in turned)):
            setting = dict(zip(turned, values, strict=True))
            name = "_".join([family, rung.key] + [f"{k}{v}" for k, v in setting.items()])
            yield name, rung.spec.with_knobs(**setting) if setting else rung.spec


def sass(spec: build.KernelSpec, arch: int) -> str:
    """The cubin's instructions, one per line, without offsets or line information, under a header line per
    function; branch labels are numbered within their function (nvdisasm numbers them across the cubin)."""
    tool = build.find_nvdisasm()
    if tool is None:
        raise LabError("nvdisasm is not installed: `pip install nvidia-cuda-nvdisasm`.")
    compiled = build.compile_cubin(spec, arch)
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(compiled.cubin)
        f.flush()
        out = subprocess.run([tool, "-c", f.name], capture_output=True, text=True, check=True).stdout
    lines: list[str] = []
    labels: dict[str, str] = {}
    for line in out.splitlines():
        head = _FUNCTION.match(line.strip())
        if head:
            lines.append(HEADER + head.group(1))
            labels = {}
        elif line.strip().startswith("/*"):
            text = _OFFSET.sub("", line).split(" /*")[0].rstrip()
            lines.append(_LABEL.sub(lambda m, seen=labels: seen.setdefault(m.group(0), f".L{len(seen)}"), text))
    return "\n".join(lines)


def functions(text: str) -> dict[str, str]:
    """A dump's instructions by function ("" for lines before any header)."""
    out: dict[str, list[str]] = {}
    name = ""
    for line in text.splitlines():
        if line.startswith(HEADER):
            name = line[len(HEADER):]
        else:
            out.setdefault(name, []).append(line)
    return {k: "\n".join(v) for k, v in out.items()}


def dump(out: Path, families: list[str], arch: int) -> int:
    out.mkdir(parents=True, exist_ok=True)
    count = 0
    for family in families:
        for name, spec in variants(family, arch):
            (out / f"{name}.sass").write_text(sass(spec, arch))
            count += 1
    print(f"{count} variants dumped to {out}")
    return 0


def compare(before: Path, after: Path) -> int:
    names = sorted({p.name for p in before.glob("*.sass")} | {p.name for p in after.glob("*.sass")})
    differ = 0
    for n in names:
        if not (before / n).exists() or not (after / n).exists():
            print(f"differs: {n} (in one dump only)")
            differ += 1
            continue
        old, new = functions((before / n).read_text()), functions((after / n).read_text())
        changed = [f for f in sorted(old.keys() | new.keys()) if old.get(f) != new.get(f)]
        if changed:
            named = [f for f in changed if f]
            print(f"differs: {n}" + (f" ({', '.join(named)})" if named else ""))
            differ += 1
    print(f"{len(names) - differ} of {len(names)} variants have the same instructions")
    return 1 if differ else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("dump", help="write each variant's SASS to a folder")
    d.add_argument("out", type=Path)
    d.add_argument("families", nargs="+")
    d.add_argument("--arch", type=int, default=90)
    c = sub.add_parser("compare", help="compare two dumps")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    args = parser.parse_args(argv)
    try:
        if args.command == "dump":
            return dump(args.out, args.families, args.arch)
        return compare(args.before, args.after)
    except LabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
