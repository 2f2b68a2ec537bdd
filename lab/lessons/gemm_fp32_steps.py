"""The steps notebook 02 writes out in cells for rung 03 (one launch through the family on an odd shape, the float64
check against the family's error bound, one timing against the library baseline in the same run), as functions for
the rungs that repeat them; and the replayed bound margins those checks are held against where no GPU is present.

Each function does what the written-out cells do and nothing more, so a rung that calls them shows the same steps."""

from __future__ import annotations

import json

import numpy as np

from lab.core.ladder import Family, Problem
from lab.lessons.common import family_of, shown_path
from lab.measure.check import to_numpy

ODD_SHAPE = {"M": 1000, "N": 1003, "K": 517}  # no side a multiple of any tile, of four, or of two (but M)
BOUNDS_SUFFIX = "_bounds.json"  # `lab verify FAMILY --seeds S --json results/<gpu>/FAMILY_bounds.json`


def _xp(fam: Family):
    if fam.array_module is not None:
        return fam.array_module
    import cupy

    return cupy


def _synchronize(fam: Family) -> None:
    if fam.array_module is None:
        import cupy

        cupy.cuda.get_current_stream().synchronize()


def launch_once(family: str | Family, key: str, seed: int = 0, **shape) -> tuple[Problem, object]:
    """A fresh problem of `shape`, an output filled with NaN (C's own values first where beta reads them), one
    launch of the rung through the family, and a synchronize, so a fault surfaces here: (problem, output)."""
    fam = family_of(family)
    xp = _xp(fam)
    rung = fam.rung(key)
    problem = fam.make_problem(seed=seed, **shape)
    out = xp.full(problem.out_shape, xp.nan, dtype=problem.dtype)
    if problem.out_init is not None:
        out[...] = problem.out_init
    fam.launch(rung, problem, out)
    _synchronize(fam)
    return problem, out


def float64_check(family: str | Family, problem: Problem, out) -> str:
    """The output against the family's float64 reference: elements left NaN, the largest |error|, and the largest
    |error| / bound (each element's own bound, fam.error_bound; at most 1 passes), over the elements the kernel
    must write."""
    fam = family_of(family)
    ref = fam.reference(problem)
    bound = np.broadcast_to(fam.error_bound(problem, ref), ref.shape)
    got = to_numpy(fam.output_values(out)).astype(np.float64)
    must = to_numpy(problem.write_mask) if problem.write_mask is not None else np.ones(ref.shape, bool)
    got, ref, bound = got[must], ref[must], bound[must]
    unwritten = int(np.count_nonzero(np.isnan(got) & ~np.isnan(ref)))
    err = np.abs(got - ref)
    share = np.divide(err, bound, out=np.where(err > 0, np.inf, 0.0), where=bound > 0)
    if np.isnan(share).all():
        return f"{problem.label}: all {got.size} elements left NaN -> FAILED"
    worst = int(np.nanargmax(share))
    verdict = "PASSED" if unwritten == 0 and share[worst] <= 1 else "FAILED"
    return (f"{problem.label}: {got.size} elements, {unwritten} left NaN; largest |error| {np.nanmax(err):.3g}; "
            f"largest |error| / bound {share[worst]:.3g} (its bound {bound[worst]:.3g}; at most 1 passes) -> "
            f"{verdict}")


def time_against_baseline(family: str | Family, key: str, problem: Problem, out, flusher=None) -> str:
    """lab.measure.timing.measure on the rung and on fam.launch_ceiling (the library baseline), on the same problem,
    cold L2, one after the other in this run: both medians, the rung's throughput, and baseline time / rung time."""
    from lab.measure import timing

    fam = family_of(family)
    rung = fam.rung(key)
    flusher = flusher if flusher is not None else timing.L2Flusher()
    mine = timing.measure(lambda i: fam.launch(rung, problem, out, i), l2="cold", flusher=flusher)
    base = timing.measure(lambda i: fam.launch_ceiling(problem, out, i), l2="cold", flusher=flusher)
    return (f"{rung.key} on {problem.label}, cold L2: median {mine.median_ms:.4f} ms "
            f"({fam.throughput(problem, mine.median_ms):.2f} {fam.metric}, {mine.reps} reps); "
            f"{fam.ceiling_title}: {base.median_ms:.4f} ms ({fam.throughput(problem, base.median_ms):.2f} "
            f"{fam.metric}) -> {base.median_ms / mine.median_ms:.3f}x {fam.ceiling_title}")


def bounds_path(family: str | Family):
    from lab.measure.records import reference_dir

    return reference_dir() / f"{family_of(family).name}{BOUNDS_SUFFIX}"


def bound_margin(family: str | Family, key: str) -> str:
    """The replayed bound margins of one rung (lab.measure.verify.bound_margins over every check case and several
    seeds, recorded by `lab verify FAMILY --seeds S --json ...`): checks, failures, and how close the worst element
    came to its bound."""
    fam = family_of(family)
    path = bounds_path(fam)
    rung = fam.rung(key).key
    try:
        payload = json.loads(path.read_text())
    except (OSError, ValueError):
        return (f"(no recorded bound margins at {shown_path(path)}: on a GPU, `lab verify {fam.name} --seeds 5 "
                f"--json {shown_path(path)}` records them)")
    row = next((r for r in payload.get("rungs", []) if r.get("rung") == rung), None)
    p = payload.get("provenance", {})
    where = f"{p.get('device', '?')} ({p.get('arch', '?')}) on {str(p.get('date', '?'))[:10]}"
    if row is None:
        return f"({shown_path(path)} holds no bound margins for {rung})"
    seeds = len(payload.get("seeds", [])) or "?"
    failed = row.get("failed") or []
    return (f"replayed from {shown_path(path)} ({where}): {rung} ran {row['checks']} checks (every check case, "
            f"{seeds} seeds), {len(failed)} failed; the worst element came to {row['worst_ratio']:.3g} of its "
            f"bound ({row['worst_case']}); worst normwise error {row['worst_normwise']:.3g}")
