"""Build a rung: load its .cu from kernels/, apply knobs, compile with NVRTC, load through CuPy.

Why our own NVRTC call rather than `cupy.RawModule(code=...)`:
- CuPy's cache key hashes the source string and options only, so editing a header under
  kernels/common/ would silently reuse a stale binary. Our key hashes every included header.
- The same compile gives the compile report (ptxas's registers/shared memory/spills, and the SASS
  instruction mix) for the exact binary that runs, and it works with no GPU present for any arch.
- `sm_90a` (wgmma, setmaxnreg) needs an arch string CuPy does not choose by itself.
The cubin is then loaded with `cupy.RawModule(path=...)`, so launching stays plain CuPy.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from lab.core import nvrtc, source_guard
from lab.core.errors import CompileError, LabError

REPO_ROOT = Path(__file__).resolve().parents[2]
KERNELS_DIR = REPO_ROOT / "kernels"
COMMON_DIR = KERNELS_DIR / "common"
ARCHS = (75, 80, 86, 89, 90)  # the archs every rung is checked against in CI
_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.MULTILINE)
# The header a KernelSpec's `plugin` replaces: a rung that includes it (gemm_tc 06 with EPI_PLUGIN=1) runs code
# from another file (an exercise's solution, a student's file) with no change to its own source.
PLUGIN_HEADER = "lab_epilogue_plugin.cuh"


@dataclass(frozen=True)
class KernelSpec:
    """One compiled entry point: a source file, the function in it, and the knobs it is built with."""

    source: str  # path relative to kernels/, e.g. "copy/03_vectorized.cu", or absolute (a student's file)
    entry: str  # extern "C" name, or a C++ name expression for a template instance
    knobs: tuple[tuple[str, int], ...] = ()  # passed as -D NAME=VALUE
    min_arch: int = 75
    arch_suffix: str = ""  # "a" for sm_90a-only instructions
    # A file NVRTC is given as PLUGIN_HEADER in place of kernels/common/'s: relative to kernels/, or absolute (a
    # student's file); "" for the lab's own header.
    plugin: str = ""
    # The lab headers (bare names) this build may include; None for all of kernels/common. An exercise gives its
    # submissions only the headers its reference rung includes, less any that hold an exercise's answer.
    headers: tuple[str, ...] | None = None
    # How messages name the file the student wrote (the plugin where there is one, else the source: their path as
    # they typed it); not part of the kernel's identity.
    label: str = field(default="", compare=False)

    def with_knobs(self, **knobs: int) -> KernelSpec:
        merged = dict(self.knobs) | knobs
        return dataclasses.replace(self, knobs=tuple(sorted(merged.items())))

    @property
    def shown(self) -> str:
        """The file's name in messages: the label, else the path under kernels/ (a student's file: its name)."""
        return (self.label if not self.plugin else "") or _shown_path(self.source)

    @property
    def path(self) -> Path:
        return _kernel_path(self.source)

    @property
    def plugin_shown(self) -> str:
        """The plugin's name in messages, as `shown` names the source."""
        return self.label or _shown_path(self.plugin)

    @property
    def plugin_path(self) -> Path | None:
        return _kernel_path(self.plugin) if self.plugin else None


def _kernel_path(name: str) -> Path:
    return Path(name) if Path(name).is_absolute() else KERNELS_DIR / name


def _shown_path(name: str) -> str:
    return Path(name).name if Path(name).is_absolute() else name


def read_source(spec: KernelSpec) -> str:
    if not spec.path.is_file():
        raise LabError(f"Kernel source {spec.source!r} does not exist under {KERNELS_DIR}; check the rung's path.")
    return decode_source(spec.path.read_bytes(), spec.shown)[0]


def read_plugin(spec: KernelSpec) -> str | None:
    """The text of the spec's plugin (read as read_source reads a source), or None where it has none."""
    path = spec.plugin_path
    if path is None:
        return None
    if not path.is_file():
        raise LabError(f"Plugin header {spec.plugin!r} does not exist under {KERNELS_DIR}; check the rung's path.")
    text = decode_source(path.read_bytes(), spec.plugin_shown)[0]
    source_guard.check_plugin_macros(text, spec.plugin_shown, _host_macros(spec))
    return text


def _host_macros(spec: KernelSpec) -> set[str]:
    """The names a plugin must leave alone: the spec's knobs, and every macro its source and the lab's headers
    define (the plugin header they replace excepted)."""
    names = {name for name, _ in spec.knobs}
    names |= source_guard.defined_macros(read_source(spec))
    for header in sorted(COMMON_DIR.glob("*.cuh")):
        if header.name != PLUGIN_HEADER:
            names |= source_guard.defined_macros(header.read_text())
    return names


def decode_source(data: bytes, shown: str) -> tuple[str, str | None]:
    """The source's text and a note when it is not UTF-8. A Latin-1 comment from a Windows editor is not a
    reason to lose a grade: such a file is read as Latin-1 (every byte is a character there), and the note
    says so. A NUL byte (a UTF-16 file) would cut the source short inside NVRTC, so it is refused."""
    nul = data.find(b"\0")
    if nul >= 0:
        raise CompileError(f"{shown} contains a NUL byte (byte {nul}): it is not a text file, or it was saved as "
                           "UTF-16; save it as UTF-8 text.")
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        return data.decode("latin-1"), (f"{shown} is not UTF-8 (byte {exc.start}); it was read as Latin-1. Save it "
                                         "as UTF-8 to be sure the compiler sees what you wrote.")


def lab_headers() -> dict[str, str]:
    """The lab's headers (kernels/common/*.cuh) by bare name: the only files a kernel may include. NVRTC
    gets them in memory, with no include path, so it has no directory to look for anything else in."""
    return {p.name: p.read_text() for p in sorted(COMMON_DIR.glob("*.cuh"))}


def compile_headers(spec: KernelSpec) -> dict[str, str]:
    """The headers NVRTC is given for `spec`: the lab's (those the spec allows), with the spec's plugin (if any) as
    PLUGIN_HEADER."""
    headers = lab_headers()
    if spec.headers is not None:
        headers = {name: text for name, text in headers.items() if name in spec.headers}
    plugin = read_plugin(spec)
    if plugin is not None:
        headers[PLUGIN_HEADER] = plugin
    return headers


def included_headers(source: str, search_dirs: tuple[Path, ...] | None = None) -> list[Path]:
    """Every quoted #include the source pulls in, recursively, in first-seen order."""
    search_dirs = (COMMON_DIR,) if search_dirs is None else search_dirs  # read at call time, not import time
    seen: list[Path] = []
    pending = [source]
    while pending:
        text = pending.pop()
        for name in _INCLUDE.findall(text):
            for d in search_dirs:
                candidate = (d / name).resolve()
                if candidate.is_file():
                    if candidate not in seen:
                        seen.append(candidate)
                        pending.append(candidate.read_text())
                    break
            else:
                raise LabError(f'#include "{name}" was not found in {", ".join(map(str, search_dirs))}.')
    return seen


_KNOB = re.compile(r"^\s*#\s*ifndef\s+([A-Z_][A-Z0-9_]*)\s*\n\s*#\s*define\s+\1\b", re.MULTILINE)


def knob_names(spec: KernelSpec) -> list[str]:
    """The knobs a rung takes: its source's `#ifndef NAME / #define NAME default` pairs and the knobs its
    family builds it with."""
    return sorted(set(_KNOB.findall(read_source(spec))) | {k for k, _ in spec.knobs})


def nvrtc_version() -> tuple[int, int]:
    return nvrtc.version()


def arch_string(arch: int, suffix: str = "") -> str:
    return f"sm_{arch}{suffix}"


def arch_refusal(spec: KernelSpec, arch: int) -> str | None:
    """Why `spec` cannot run on a GPU of `arch` (one sentence), or None when it can. Drivers that walk a
    ladder (sanitizer, profiler) list such rungs as skipped instead of failing on them."""
    if arch < spec.min_arch:
        return f"needs {arch_string(spec.min_arch, spec.arch_suffix)} or newer; this GPU is sm_{arch}"
    # Arch-specific ("a") instructions of sm_90 and later (wgmma, setmaxnreg) exist on that arch alone:
    # an sm_90a kernel does not build for sm_100a.
    if spec.arch_suffix and spec.min_arch >= 90 and arch != spec.min_arch:
        return (f"uses {arch_string(spec.min_arch, spec.arch_suffix)}-only instructions, which sm_{arch} "
                "does not have")
    return None


def report_arch(spec: KernelSpec, arch: int) -> int:
    """The arch to compile `spec` for when showing it on a GPU of `arch`: that arch where the kernel runs
    there, else the one it needs (an sm_90a rung is shown compiled for sm_90a, compile-only, on any GPU)."""
    return arch if arch_refusal(spec, arch) is None else spec.min_arch


def compile_options(spec: KernelSpec, arch: int, verbose_ptxas: bool = True) -> list[str]:
    opts = [
        f"--gpu-architecture={arch_string(arch, spec.arch_suffix if arch >= 90 else '')}",
        "--std=c++17",
        "--no-source-include",  # no directory at all is searched: the headers come in memory (lab_headers)
        "--device-int128",
    ]
    opts += [f"-D{k}={v}" for k, v in spec.knobs]
    if verbose_ptxas:
        opts.append("--ptxas-options=-v")
    return opts


def cache_key(spec: KernelSpec, arch: int) -> str:
    h = hashlib.sha256()
    h.update(read_source(spec).encode())
    for name, text in compile_headers(spec).items():  # every header NVRTC is given, whether included or not
        h.update(name.encode())
        h.update(text.encode())
    h.update(repr((spec.entry, spec.knobs, compile_options(spec, arch), nvrtc_version())).encode())
    return h.hexdigest()[:24]


def cache_dir() -> Path:
    root = Path(os.environ.get("LAB_CACHE_DIR", Path.home() / ".cache" / "cupy-kernel-lab"))
    root.mkdir(parents=True, exist_ok=True)
    return root


# ----------------------------------------------------------------------------------------------
# Compiling (no GPU needed)
# ----------------------------------------------------------------------------------------------

@dataclass
class CompiledKernel:
    spec: KernelSpec
    arch: int
    cubin: bytes
    lowered_name: str
    log: str


_LOG_LINE = re.compile(
    r"^(?P<file>[^\s(]+)\((?P<line>\d+)\): (?P<kind>(?:catastrophic )?error|warning)[^:]*: (?P<msg>.*)$")


def format_compile_log(log: str, source: str, filename: str, max_errors: int = 5, label: str | None = None,
                       others: dict[str, tuple[str, str]] | None = None) -> str:
    """Turn NVRTC's log into 'file:line: message' followed by the offending line and its neighbours;
    `label` names the source in the messages (default: `filename`, the name NVRTC was given). `others` maps
    more files NVRTC was given (a plugin header) to (their name in messages, their text), shown the same way."""
    files = {Path(filename).name: (label or filename, source.splitlines())}
    files |= {Path(name).name: (shown_as, text.splitlines()) for name, (shown_as, text) in (others or {}).items()}
    out: list[str] = []
    shown = 0
    own = any((m := _LOG_LINE.match(raw.strip())) and Path(m["file"]).name in files for raw in log.splitlines())
    for raw in log.splitlines():
        m = _LOG_LINE.match(raw.strip())
        if not m or not m["kind"].endswith("error") or (own and m["file"] == "__nv_name_map"):
            continue  # the name lookup fails whenever the source does: show the source's errors
        shown += 1
        if shown > max_errors:
            out.append("  ... more errors follow; fix these first.")
            break
        n = int(m["line"])
        where, lines = files.get(Path(m["file"]).name, (m["file"], None))
        out.append(f"{where}:{n}: error: {m['msg']}")
        if lines is not None:
            for i in range(max(1, n - 1), min(len(lines), n + 1) + 1):
                marker = ">>" if i == n else "  "
                out.append(f"  {marker} {i:4d} | {lines[i - 1]}")
    if not out:  # a link-level or option error with no line number: show the log as it is
        out = [ln for ln in log.strip().splitlines() if ln.strip()][:20]
    return "\n".join(out)


def compile_cubin(spec: KernelSpec, arch: int, source: str | None = None) -> CompiledKernel:
    """Compile one entry point to a cubin for `arch` with NVRTC. Works with no GPU present."""
    source = read_source(spec) if source is None else source
    if arch < spec.min_arch:
        raise LabError(f"{spec.source} needs {arch_string(spec.min_arch, spec.arch_suffix)} or newer; sm_{arch} was "
                       "asked for.")
    supported = nvrtc.supported_archs()
    if arch not in supported:
        raise LabError(
            f"This NVRTC ({'.'.join(map(str, nvrtc_version()))}) cannot build for sm_{arch}; it supports "
            f"{', '.join(f'sm_{a}' for a in sorted(supported))}. Install the CUDA wheels that match your driver."
        )
    filename = spec.path.name
    shown = spec.shown  # a student's file: the name they gave, never a temporary path
    headers = compile_headers(spec)
    source_guard.check_includes(source, shown, set(headers))
    # A plugin is checked as a source is: it too may name only the lab's headers.
    others = {PLUGIN_HEADER: (spec.plugin_shown, headers[PLUGIN_HEADER])} if spec.plugin else {}
    for plugin_shown, text in others.values():
        source_guard.check_includes(text, plugin_shown, set(headers))
    result = nvrtc.compile_to_cubin(source, filename, compile_options(spec, arch), [spec.entry], headers)
    foreign = source_guard.foreign_files_in_log(result.log, {filename, *headers})
    if foreign:  # the checks above should make this impossible; if not, the log must not be shown
        raise CompileError(
            f"{shown} made the compiler read {foreign[0]}, which is neither {shown} nor one of the lab's headers; "
            "the compiler's messages are not shown. Include only the lab's headers.")
    own_names = "|".join(re.escape(n) for n in (filename, *others))
    own_errors = re.search(rf"^(?:{own_names})\(\d+\): (?:catastrophic )?error", result.log, re.MULTILINE)
    if not result.ok and "__nv_name_map" in result.log and not own_errors:
        raise CompileError(
            f"{shown} has no kernel named {spec.entry!r}: check the __global__ function's name and that "
            'it is extern "C" (or a valid template instance).', result.log)
    if not result.ok and "error" not in result.log.replace("ptxas info", ""):
        # Some NVRTC builds drop ptxas's error from the log when -v is on: ask again without it.
        result = nvrtc.compile_to_cubin(source, filename, compile_options(spec, arch, verbose_ptxas=False),
                                        [spec.entry], headers)
    if not result.ok:
        what = f"{shown} with {spec.plugin_shown}" if spec.plugin else shown
        raise CompileError(
            f"{what} failed to compile for sm_{arch}:\n"
            f"{format_compile_log(result.log, source, filename, label=shown, others=others)}",
            result.log,
        )
    lowered = (result.lowered_names or {}).get(spec.entry)
    if lowered is None:
        raise CompileError(
            f"{shown} compiled, but it has no kernel named {spec.entry!r}: check the __global__ "
            'function\'s name and that it is extern "C" (or a valid template instance).'
        )
    return CompiledKernel(spec, arch, result.cubin, lowered, result.log)


# ----------------------------------------------------------------------------------------------
# Compile report (registers, shared memory, spills, instruction mix)
# ----------------------------------------------------------------------------------------------

# SASS opcodes worth pointing out in a lesson: wide loads, async copies, tensor cores, barriers.
NOTABLE_OPS = ("LDG", "STG", "LDS", "STS", "LDGSTS", "LDSM", "HMMA", "HGMMA", "FFMA", "BAR", "SHFL",
               "LDL", "STL", "ATOMG", "RED", "REDG",
               # Hopper: TMA loads and tensor-map fences, mbarrier operations, setmaxnreg
               "UTMALDG", "UTMACCTL", "SYNCS", "USETMAXREG")

_PTXAS_FUNC = re.compile(r"Compiling entry function '(?P<name>[^']+)'")
_PTXAS_FRAME = re.compile(
    r"(?P<stack>\d+) bytes stack frame, (?P<st>\d+) bytes spill stores, (?P<ld>\d+) bytes spill loads")
_PTXAS_USED = re.compile(r"Used (?P<regs>\d+) registers(?:.*?(?P<smem>\d+) bytes smem)?")


@dataclass
class CompileReport:
    source: str
    entry: str
    arch: str
    knobs: dict
    registers: int
    smem_static_bytes: int
    stack_frame_bytes: int
    spill_store_bytes: int
    spill_load_bytes: int
    instructions: dict = field(default_factory=dict)  # opcode (with width suffix) -> count
    sass_available: bool = False
    smem_dynamic_bytes: int = 0  # what the launch asks for at these knobs (the family's figure; ptxas cannot know)

    @property
    def spills(self) -> bool:
        return self.spill_store_bytes > 0 or self.spill_load_bytes > 0

    def as_dict(self) -> dict:
        return asdict(self)


def parse_ptxas_log(log: str, lowered_name: str) -> dict | None:
    """registers / smem / stack / spills for one entry function from `ptxas -v` output."""
    blocks = re.split(r"(?=ptxas info\s*: Compiling entry function)", log)
    for block in blocks:
        m = _PTXAS_FUNC.search(block)
        if not m or m["name"] != lowered_name:
            continue
        frame = _PTXAS_FRAME.search(block)
        used = _PTXAS_USED.search(block)
        return {
            "registers": int(used["regs"]) if used else 0,
            "smem_static_bytes": int(used["smem"]) if used and used["smem"] else 0,
            "stack_frame_bytes": int(frame["stack"]) if frame else 0,
            "spill_store_bytes": int(frame["st"]) if frame else 0,
            "spill_load_bytes": int(frame["ld"]) if frame else 0,
        }
    return None  # some NVRTC builds print no ptxas report: the caller falls back to the loaded function


def find_nvdisasm() -> str | None:
    found = shutil.which("nvdisasm")
    if found:
        return found
    try:
        import nvidia

        for base in map(Path, nvidia.__path__):
            for candidate in base.glob("*/bin/nvdisasm"):
                return str(candidate)
    except ImportError:
        pass
    return None


def function_sass(cubin: bytes, lowered_name: str) -> list[str] | None:
    """One function's lines of nvdisasm's listing of `cubin`, or None when nvdisasm is not installed or fails."""
    tool = find_nvdisasm()
    if tool is None:
        return None
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        proc = subprocess.run([tool, "-c", f.name], capture_output=True, text=True)
    if proc.returncode != 0:
        return None
    return _function_sass(proc.stdout, lowered_name)


def sass_instruction_mix(cubin: bytes, lowered_name: str) -> dict | None:
    """Counts of notable SASS opcodes in one function, or None when nvdisasm is not installed."""
    lines = function_sass(cubin, lowered_name)
    if lines is None:
        return None
    counts: Counter[str] = Counter()
    for line in lines:
        m = re.search(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?(?P<op>[A-Z0-9_.]+)", line)
        if not m:
            continue
        op = m["op"]
        base = op.split(".")[0]
        if base in NOTABLE_OPS:
            width = next((p for p in op.split(".")[1:] if p in ("64", "128", "U16", "U8")), "")
            counts[f"{base}.{width}" if width else base] += 1
    return dict(sorted(counts.items()))


def _function_sass(listing: str, lowered_name: str) -> list[str]:
    """The lines of one function's section in an nvdisasm listing."""
    out: list[str] = []
    inside = False
    for line in listing.splitlines():
        if line.lstrip().startswith(".section") and ".text." in line:
            inside = line.split(",")[0].strip().endswith(f".text.{lowered_name}")
        elif inside:
            out.append(line)
    return out


def _usage_from_loaded_function(compiled: CompiledKernel, mix: dict | None) -> dict:
    """Resource usage read from the driver after loading the cubin (needs a GPU of that arch)."""
    import cupy

    from lab.core import device

    if not device.gpu_available() or device.current().arch != compiled.arch:
        raise LabError(
            f"This NVRTC ({'.'.join(map(str, nvrtc_version()))}) printed no ptxas resource report, and "
            f"sm_{compiled.arch} "
            "is not this machine's GPU, so the report cannot be read from the driver either. Install the "
            "nvidia-cuda-nvrtc wheel (`bash run.sh test` does) and try again."
        )
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "k.cubin"
        path.write_bytes(compiled.cubin)
        fn = cupy.RawModule(path=str(path)).get_function(compiled.lowered_name)
        local = int(fn.local_size_bytes)
        spilled = bool(mix) and any(k.startswith(("STL", "LDL")) for k in mix)
        return {"registers": int(fn.num_regs), "smem_static_bytes": int(fn.shared_size_bytes),
                "stack_frame_bytes": local, "spill_store_bytes": local if spilled else 0,
                "spill_load_bytes": local if spilled else 0}


def compile_report(spec: KernelSpec, arch: int, dynamic_smem_bytes: int = 0) -> CompileReport:
    """Registers, shared memory, spills and SASS mix of one entry point; `dynamic_smem_bytes` is the
    dynamic shared memory its launch asks for (Family.dynamic_smem_bytes), shown beside the static."""
    compiled = compile_cubin(spec, arch)
    mix = sass_instruction_mix(compiled.cubin, compiled.lowered_name)
    usage = parse_ptxas_log(compiled.log, compiled.lowered_name) or _usage_from_loaded_function(compiled, mix)
    return CompileReport(
        source=spec.shown, entry=spec.entry, arch=arch_string(arch, spec.arch_suffix if arch >= 90 else ""),
        knobs=dict(spec.knobs), instructions=mix or {}, sass_available=mix is not None,
        smem_dynamic_bytes=dynamic_smem_bytes, **usage,
    )


# ----------------------------------------------------------------------------------------------
# Loading for launch (needs a GPU)
# ----------------------------------------------------------------------------------------------

def cached_cubin(spec: KernelSpec, arch: int) -> tuple[Path, str]:
    key = cache_key(spec, arch)
    cubin_path = cache_dir() / f"{key}.cubin"
    meta_path = cache_dir() / f"{key}.json"
    if cubin_path.is_file() and meta_path.is_file():
        try:
            lowered = json.loads(meta_path.read_text())["lowered_name"]
        except (OSError, ValueError, KeyError, TypeError):
            lowered = None  # a damaged entry (an older writer's half-written file): compiled again below
        if lowered:
            COMPILES["cache_hits"] += 1
            return cubin_path, lowered
    COMPILES["compiled"] += 1
    started = time.perf_counter()
    compiled = compile_cubin(spec, arch)
    COMPILES["compile_ms"] += round(1e3 * (time.perf_counter() - started), 3)
    # Both files are written whole under a name of this process and thread, then renamed into place: parallel graders
    # (processes, or threads of one) never read half of either. The metadata goes last, so a reader that finds it
    # finds the cubin too.
    unique = f".tmp{os.getpid()}.{threading.get_ident()}"
    _write_atomically(cubin_path, compiled.cubin, unique)
    meta = json.dumps({"lowered_name": compiled.lowered_name, "spec": asdict(spec)}).encode()
    _write_atomically(meta_path, meta, unique)
    return cubin_path, compiled.lowered_name


def _write_atomically(path: Path, data: bytes, suffix: str) -> None:
    tmp = path.with_suffix(path.suffix + suffix)
    tmp.write_bytes(data)
    os.replace(tmp, path)


class Kernel:
    """A compiled entry point: a `cupy.RawKernel` (its attributes read and set through this object) whose launches a
    `recording()` can capture, so lab.ops can replay a family's launch sequence without redoing its host work."""

    __slots__ = ("raw",)

    def __init__(self, raw):
        object.__setattr__(self, "raw", raw)

    def __call__(self, grid, block, args, shared_mem: int = 0) -> None:
        if _RECORDINGS:
            _RECORDINGS[-1].append((self.raw, grid, block, args, shared_mem))
        self.raw(grid, block, args, shared_mem=shared_mem)

    def __getattr__(self, name: str):
        return getattr(self.raw, name)

    def __setattr__(self, name: str, value) -> None:
        setattr(self.raw, name, value)


_RECORDINGS: list[list] = []


def record_launch(call, args: tuple = ()) -> None:
    """Let a `recording()` capture a launch that is not a kernel of ours (a library call bound to its addresses):
    `call(None, None, args, shared_mem=0)` replays it."""
    if _RECORDINGS:
        _RECORDINGS[-1].append((call, None, None, args, 0))


class recording:
    """`with recording() as launches:` collects (raw kernel, grid, block, args, shared_mem) for every launch made
    through `get_kernel`'s kernels inside the block, in order (the launches still run)."""

    def __enter__(self) -> list:
        _RECORDINGS.append([])
        return _RECORDINGS[-1]

    def __exit__(self, *exc) -> None:
        _RECORDINGS.pop()


COMPILES: Counter = Counter()  # per process: "compiled" (NVRTC ran) and "cache_hits" (a cubin on disk), for lab.ops


@functools.lru_cache(maxsize=256)
def get_kernel(spec: KernelSpec, cooperative: bool = False) -> Kernel:
    """A launchable kernel (`Kernel`, around a `cupy.RawKernel`) for the current GPU, built (or fetched from the
    cache) on first use. `cooperative`: launched with cuLaunchCooperativeKernel, which refuses a grid that cannot be
    resident all at once instead of letting a grid-wide barrier hang."""
    import cupy

    from lab.core import device

    gpu = device.current()
    why = arch_refusal(spec, gpu.arch)
    if why:
        raise LabError(f"{spec.source} cannot run here: it {why} ({gpu.name}); pick an earlier rung or run on a GPU "
                       "it was written for (`lab inspect` still compiles it).")
    archs = nvrtc.supported_archs()
    arch = gpu.arch if gpu.arch in archs else max(a for a in archs if a <= gpu.arch)
    path, lowered = cached_cubin(spec, arch)
    module = cupy.RawModule(path=str(path), enable_cooperative_groups=cooperative)
    return Kernel(module.get_function(lowered))
