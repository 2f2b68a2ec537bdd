"""The compile cache's "version explosion", measured: how compile time and cache size grow as kernel variants
multiply (tiles x stages x epilogues x dtypes x archs, head dims x causal). Compile-only: NVRTC on the host
CPU, no GPU involved.

The rungs that carry the axes (lab.studies.compile_grids builds their variants):
- gemm_tc rung 06_persistent (sm_90a only): tiles x stages x epilogues x dtypes, the variants a Hopper library would
  ship;
- gemm_tc rung 03_swizzled_multistage (portable, sm_80 on, no fused epilogue): tiles x stages x dtypes x archs, the
  arch axis that rung 06 cannot have;
- what lab.ops.attention adds: attention rungs 05_pingpong (sm_90a; head dims 64, 128 and 256) and
  03_flash_pipelined (every arch; 64 and 128) per head dim, causal flag and type, and attention_decode's split-KV
  rung (its stages sized for each arch).

Every variant is the family's rung spec with knobs (gemm_tc's built as lab.families.gemm_epilogue builds them, the
attention families' by their own `variant_for` at the arch's shared-memory limit), checked against the knobs its
source takes and against the arch's shared-memory limit for one block; one that does not fit is skipped and reported.

Each variant is built through lab.core.build's own cache-filling path (`cached_cubin`) in a fresh, empty cache
directory (LAB_CACHE_DIR), so the time of a row is what a cache miss costs lab.ops: the key (hashing the source and
every header), the NVRTC compile, and writing the cubin and its metadata. Then each is looked up again on the full
cache, which is what a cache hit costs. The growth series are sums of these measured rows over nested subsets of
the grid (one axis multiplied more at each step), never extrapolated.

    lab study compile --out results/cpu [--quick]
    python -m lab.studies.compile_study results/cpu/compile_variants.json [--quick]   (the same, to a file named)
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import math
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict
from pathlib import Path

from lab.core import build
from lab.core.errors import LabError
from lab.measure.bounds import BFLOAT16
from lab.measure.records import read_json, write_json
from lab.studies.compile_grids import AttentionAxes, Axes, GemmAxes, Variant, describe_axes, study_grid

SCHEMA = 2  # 2: rows, growth steps and axes name their family; axes are {"family", "rung", "axes": {axis: values}}
STUDY = "compile_variants"
RECORD = f"{STUDY}.json"
HIT_REPEATS = 3  # cache hits are ~1 ms, so one lookup is noisy: the median of a few
WARM_UP = build.KernelSpec("common/repack_rows.cu", "lab_repack_rows", min_arch=80)  # small, untimed in the rows

PERSISTENT_AXES = GemmAxes("06_persistent", tiles=((128, 128), (128, 256)), stages=(3, 4),
                           epilogues=("none", "bias", "bias+relu", "bias+gelu_tanh", "bias+silu+residual",
                                      "bias+gelu_tanh->int8"),
                           dtypes=("float16", BFLOAT16), archs=(90,))
PORTABLE_AXES = GemmAxes("03_swizzled_multistage", tiles=((128, 128), (128, 256)), stages=(3, 4), epilogues=(),
                         dtypes=("float16", BFLOAT16), archs=(80, 86, 89, 90))
# What lab.ops.attention can ask the cache for (lab/ops/attn.py), per specialized head dim, causal flag and type: the
# ping-pong wgmma rung (05) for prefills on sm_90, the cp.async rung (prefills before
# sm_90; on sm_90 when the wgmma rung refuses), on every arch they run on, and the split-KV decode rung (lab.ops passes
# it contiguous caches only, so no paged variants). An autotune may reach others (rungs 02 and 04): not counted.
ATTENTION_HOPPER_AXES = AttentionAxes("attention", "05_pingpong", head_dims=(64, 128, 256), causal=(0, 1),
                                      dtypes=("float16", BFLOAT16), archs=(90,))
ATTENTION_PORTABLE_AXES = AttentionAxes("attention", "03_flash_pipelined", head_dims=(64, 128), causal=(0, 1),
                                        dtypes=("float16", BFLOAT16), archs=(80, 86, 89, 90))
DECODE_AXES = AttentionAxes("attention_decode", "02_split_kv", head_dims=(64, 128), causal=(0, 1),
                            dtypes=("float16", BFLOAT16), archs=(80, 86, 89, 90))
GEMM_STUDY_AXES = (PERSISTENT_AXES, PORTABLE_AXES)
ATTENTION_STUDY_AXES = (ATTENTION_HOPPER_AXES, ATTENTION_PORTABLE_AXES, DECODE_AXES)
STUDY_AXES = GEMM_STUDY_AXES + ATTENTION_STUDY_AXES
# The tests' grid: a few seconds of compiling.
QUICK_AXES = (
    GemmAxes("03_swizzled_multistage", tiles=((128, 128),), stages=(3, 4), epilogues=(), dtypes=("float16",),
             archs=(80,)),
    GemmAxes("06_persistent", tiles=((128, 128),), stages=(4,), epilogues=("none", "bias+gelu_tanh"),
             dtypes=("float16",), archs=(90,)),
    AttentionAxes("attention_decode", "02_split_kv", head_dims=(64,), causal=(0,), dtypes=("float16",), archs=(90,),
                  paged=(0, 1)),
)


# --- measuring ------------------------------------------------------------------------------------------------------

@contextlib.contextmanager
def cache_dir_set_to(path: Path) -> Iterator[Path]:
    """LAB_CACHE_DIR pointed at `path` for the duration (lab.core.build reads it at each call), then restored."""
    old = os.environ.get("LAB_CACHE_DIR")
    os.environ["LAB_CACHE_DIR"] = str(path)
    try:
        yield path
    finally:
        if old is None:
            os.environ.pop("LAB_CACHE_DIR", None)
        else:
            os.environ["LAB_CACHE_DIR"] = old


def _files(directory: Path) -> dict[str, os.stat_result]:
    return {p.name: p.stat() for p in directory.iterdir() if p.is_file()}


def _disk_bytes(st: os.stat_result) -> int:
    """What a file takes on disk: whole filesystem blocks (a 200-byte .json costs a 4 KiB block)."""
    return st.st_blocks * 512


def _cache_totals(directory: Path) -> tuple[int, int]:
    stats = _files(directory).values()
    return sum(s.st_size for s in stats), sum(_disk_bytes(s) for s in stats)


def warm_up() -> float:
    """One untimed-in-the-rows compile of a small kernel, so the rows do not carry NVRTC's first-call setup;
    returns its seconds (what the first compile in a process adds)."""
    start = time.perf_counter()
    build.compile_cubin(WARM_UP, 80)
    return time.perf_counter() - start


def _miss(variant: Variant, directory: Path) -> dict:
    before = _files(directory)
    start = time.perf_counter()
    cubin_path, _ = build.cached_cubin(variant.spec, variant.arch)
    seconds = time.perf_counter() - start
    after = _files(directory)
    new = sorted(set(after) - set(before))
    if new != sorted([cubin_path.name, cubin_path.with_suffix(".json").name]):
        raise LabError(f"{variant.label}: the cache gained {new or 'nothing'} instead of one cubin and its .json; "
                       "two variants share a cache key, or lab/core/build.py's cache layout changed.")
    cubin, meta = after[cubin_path.name], after[cubin_path.with_suffix(".json").name]
    size, disk = _cache_totals(directory)
    return {"compile_s": seconds, "cubin_bytes": cubin.st_size, "meta_bytes": meta.st_size,
            "entry_bytes": cubin.st_size + meta.st_size, "entry_disk_bytes": _disk_bytes(cubin) + _disk_bytes(meta),
            "cache_bytes_after": size, "cache_disk_bytes_after": disk, "key": cubin_path.stem}


def _hit(variant: Variant, directory: Path, repeats: int = HIT_REPEATS) -> float:
    """Median seconds of looking `variant` up in a cache that holds it; an error if the lookup rebuilt it."""
    before = _files(directory)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        build.cached_cubin(variant.spec, variant.arch)
        times.append(time.perf_counter() - start)
    after = _files(directory)
    if {k: v.st_mtime_ns for k, v in after.items()} != {k: v.st_mtime_ns for k, v in before.items()}:
        raise LabError(f"{variant.label}: looking it up again rewrote the cache, so it was not a hit; "
                       "lab/core/build.py's cache layout changed: update lab/studies/compile_study.py.")
    return statistics.median(times)


def measure(variants: Sequence[Variant], cache_root: Path | str | None = None,
            progress: Callable[[str], None] | None = None, keep: bool = False) -> dict:
    """Build every variant, one after the other, into a fresh empty cache directory made under `cache_root`
    (the system's temporary directory when None), then look each up again. Returns {"rows": one per variant in
    build order, "warm_up_s", "cache_dir"}; the directory is removed afterwards unless `keep`."""
    say = progress or (lambda _msg: None)
    directory = Path(tempfile.mkdtemp(prefix="lab-compile-study-", dir=cache_root))
    rows = []
    try:
        with cache_dir_set_to(directory):
            first_s = warm_up()
            for i, variant in enumerate(variants):
                row = {"order": i, "family": variant.family, "rung": variant.rung, "arch": variant.arch,
                       "target": variant.target,
                       "axes": dict(variant.axes), "knobs": dict(variant.spec.knobs),
                       "smem_bytes": variant.smem_bytes} | _miss(variant, directory)
                rows.append(row)
                say(f"[{i + 1}/{len(variants)}] {variant.label}: {row['compile_s']:.2f} s, "
                    f"{row['cubin_bytes']} B cubin")
            for variant, row in zip(variants, rows, strict=True):
                row["hit_s"] = _hit(variant, directory)
    finally:
        if not keep:
            shutil.rmtree(directory, ignore_errors=True)
    return {"rows": rows, "warm_up_s": first_s, "cache_dir": str(directory)}


# --- growth ---------------------------------------------------------------------------------------------------------

def growth_series(axes: Axes, rows: Sequence[dict]) -> list[dict]:
    """Nested subsets of one rung's measured rows: every axis at its first value (one variant), then the axes
    with more than one value multiplied in, one more at each step (the axes' order). Each step's seconds and bytes are
    sums of measured rows; `product` is what the axes multiply to, `variants` what was built (less skips)."""
    mine = [r for r in rows if (r["family"], r["rung"]) == (axes.family, axes.rung)]
    multiplied = [a for a in axes.order if len(axes.values(a)) > 1]
    steps = []
    for i in range(len(multiplied) + 1):
        full = set(multiplied[:i])
        allowed = {a: axes.values(a) if a in full else axes.values(a)[:1] for a in axes.order}
        chosen = [r for r in mine if all(r["axes"][a] in allowed[a] for a in axes.order)]
        steps.append({
            "family": axes.family, "series": axes.rung, "step": f"x {multiplied[i - 1]}" if i else "1 variant",
            "axis": multiplied[i - 1] if i else None, "factor": len(axes.values(multiplied[i - 1])) if i else 1,
            "product": math.prod(len(v) for v in allowed.values()), "variants": len(chosen),
            "compile_s": sum(r["compile_s"] for r in chosen), "cache_bytes": sum(r["entry_bytes"] for r in chosen),
            "cache_disk_bytes": sum(r["entry_disk_bytes"] for r in chosen),
        })
    return steps


def summarize(rows: Sequence[dict]) -> dict:
    seconds = [r["compile_s"] for r in rows]
    last = rows[-1] if rows else {}
    return {
        "variants": len(rows), "total_compile_s": sum(seconds),
        "median_compile_s": statistics.median(seconds) if seconds else 0.0,
        "min_compile_s": min(seconds, default=0.0), "max_compile_s": max(seconds, default=0.0),
        "cache_bytes": last.get("cache_bytes_after", 0), "cache_mb": last.get("cache_bytes_after", 0) / 1e6,
        "cache_disk_bytes": last.get("cache_disk_bytes_after", 0),
        "median_cubin_bytes": statistics.median([r["cubin_bytes"] for r in rows]) if rows else 0,
        "median_hit_s": statistics.median([r["hit_s"] for r in rows]) if rows else 0.0,
    }


# --- provenance and the record --------------------------------------------------------------------------------------

def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def cpu_provenance() -> dict:
    """Where and when: this host's CPU (compile time is host CPU time; no GPU is involved), NVRTC, the commit."""
    from lab import __version__
    from lab.measure.records import git_commit

    cpu = cpu_model()
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "device": f"{cpu} (host CPU)", "arch": "compile only, no GPU", "gpu": None,
        "note": "NVRTC compiles on the host CPU, one variant at a time in one process; no GPU was used or needed.",
        "cpu": cpu, "nproc": os.cpu_count(), "cpus_usable": usable, "machine": platform.machine(),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "nvrtc": ".".join(map(str, build.nvrtc_version())), "lab": __version__, "commit": git_commit(),
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), "host": platform.node(),
        "python": platform.python_version(),
    }


def measure_grid(quick: bool = False, axes: Sequence[Axes] | None = None, cache_root: Path | str | None = None,
                 progress: Callable[[str], None] | None = None) -> dict:
    """Measure the study's grid (QUICK_AXES when `quick`, else STUDY_AXES, or `axes`): the record, with provenance,
    the axes, the skipped combinations, one row per variant, the growth series and a summary."""
    all_axes = tuple(axes or (QUICK_AXES if quick else STUDY_AXES))
    started = time.perf_counter()
    provenance = cpu_provenance()
    grid = study_grid(all_axes)
    measured = measure(grid.variants, cache_root, progress)
    rows = measured["rows"]
    provenance["load_average_after"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    record = {
        "schema": SCHEMA, "study": STUDY, "families": list(dict.fromkeys(a.family for a in all_axes)), "quick": quick,
        "provenance": provenance,
        "method": ("each variant built by lab.core.build.cached_cubin into a fresh empty LAB_CACHE_DIR (a miss: key, "
                   "NVRTC compile, cubin + .json written), timed with time.perf_counter; then looked up again on "
                   f"the full cache (a hit, median of {HIT_REPEATS}); growth steps are sums of measured rows"),
        "axes": [describe_axes(a) for a in all_axes],
        "skipped": grid.skipped,
        "warm_up": {"spec": asdict(WARM_UP), "arch": 80, "seconds": measured["warm_up_s"]},
        "rows": rows,
        "growth": [step for a in all_axes for step in growth_series(a, rows)],
        "summary": summarize(rows) | {"skipped": len(grid.skipped)},
    }
    record["summary"]["wall_s"] = time.perf_counter() - started
    return record


def run(out_dir: Path, *, quick: bool = False, file: str = RECORD, axes: Sequence[Axes] | None = None,
        cache_root: Path | str | None = None, progress: Callable[[str], None] | None = None) -> Path:
    """Measure (measure_grid) and write the record to out_dir/file; its summary goes to `progress`. Returns the
    path."""
    record = measure_grid(quick, axes, cache_root, progress)
    out = Path(out_dir) / file
    write_json(out, record)
    if progress:
        progress(describe(record))
    return out


def load(path: Path | str) -> dict:
    """A record written by run(), checked for its schema and study."""
    path = Path(path)
    record = read_json(path, f"No compile-study record at {path}; run `python -m lab.studies.compile_study {path}` "
                       "first.")
    if record.get("study") != STUDY or record.get("schema") != SCHEMA:
        raise LabError(f"{path} is not a compile-study record of schema {SCHEMA} (study {record.get('study')!r}, "
                       f"schema {record.get('schema')!r}).")
    record["replayed"] = True  # figures say REPLAYED, not measured now
    return record


def describe(record: dict) -> str:
    """The summary and the growth series as text."""
    s = record["summary"]
    lines = [f"{s['variants']} variants built ({s['skipped']} skipped), {s['total_compile_s']:.1f} s in all, "
             f"median {s['median_compile_s']:.2f} s per variant, cache {s['cache_bytes']} B "
             f"({s['cache_disk_bytes']} B on disk); a hit: median {1e3 * s['median_hit_s']:.2f} ms"]
    for g in record["growth"]:
        lines.append(f"  {g['family']:<16} {g['series']:<24} {g['step']:<12} {g['variants']:>4} variants "
                     f"{g['compile_s']:>8.1f} s {g['cache_bytes'] / 1e6:>7.2f} MB")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.studies.compile_study", description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the record to write (JSON), e.g. results/cpu/compile_variants.json")
    parser.add_argument("--quick", action="store_true", help="a tiny grid (a few seconds), as the tests run it")
    args = parser.parse_args(argv)
    try:  # run() prints the summary (describe) through progress once the record is written
        path = run(args.out.parent, quick=args.quick, file=args.out.name, progress=lambda msg: print(msg, flush=True))
    except LabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
