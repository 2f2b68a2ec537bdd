"""LIVE (a GPU here): the short plan notebooks 06 and 07 check and measure in this run, shown before the replayed
records; in REPLAY nothing here measures anything."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from lab.lessons.fusion.records import EPILOGUE_FAMILIES, ladder, not_in_catalogue
from lab.measure.records import RecordSet

if TYPE_CHECKING:
    from lab.lessons.mode import Mode


# ----------------------------------------------------------------------------------------------
# LIVE: a short plan, measured in this run
# ----------------------------------------------------------------------------------------------

def live_plan(name: str):
    """The lab.measure.bench plan a LIVE notebook runs for family `name`: the epilogue GEMMs at their first headline
    problem only (quick: 4096^3, shorter timings); the row ladders at every headline row length and every tail
    length, with a shorter minimum time."""
    from lab.measure.bench import BenchPlan

    if name in EPILOGUE_FAMILIES:
        return BenchPlan(kinds=("headline",), quick=True)
    return BenchPlan(kinds=("headline", "tail"), min_time_ms=5.0)


def live_plan_text(names: Iterable[str]) -> str:
    lines = ["LIVE plan (`lab bench FAMILY` runs the full plan; `lab study checklist` the checklist):"]
    for name in names:
        fam = ladder(name)
        if fam is None:
            lines.append(f"  {not_in_catalogue(name)}")
            continue
        plan = live_plan(name)
        heads = fam.headline_params()[: 1 if plan.quick else None]
        tails = fam.tail_params() if "tail" in plan.kinds else []
        what = f"{len(heads)} headline problem(s)" + (f" and {len(tails)} tail lengths" if tails else "")
        lines.append(f"  {name}: checked on a spread of its check cases, then {what}, "
                     f"at least {plan.min_time_ms / (3 if plan.quick else 1):.1f} ms of timing per rung and baseline")
    if any(n in EPILOGUE_FAMILIES for n in names):
        lines.append("  checklist: NOT measured live (it needs Nsight Compute and Triton); replayed only")
    return "\n".join(lines)


def live_refusal(current: Mode, name: str) -> str | None:
    """Why family `name` is not measured live here (None when it is, and in REPLAY nothing is)."""
    if not current.live:
        return None
    fam = ladder(name)
    if fam is None:
        return not_in_catalogue(name)
    from lab.core import device
    from lab.lessons.mode import runs_on

    arch = device.current().arch
    blocked = [r.key for r in fam.rungs if not runs_on(r, arch)]
    if name in EPILOGUE_FAMILIES and blocked:  # the ceiling is the rung itself: nothing to time without it
        return f"this GPU is sm_{arch} and {name}'s rung {blocked[0]} cannot run on it; the replayed records follow"
    return None


def live_records(current: Mode, name: str) -> RecordSet | None:
    """LIVE: the family checked (a failure stops the notebook: correct before timed), then measured with
    live_plan(name). None in REPLAY, or where live_refusal says why not."""
    if not current.live or live_refusal(current, name):
        return None
    from lab.lessons.demos import check_ladder, few_cases
    from lab.measure import bench

    fam = ladder(name)
    start = time.perf_counter()
    results = check_ladder(fam, few_cases(fam))
    print(f"LIVE: {name}: " + ", ".join(f"{k} passed {len(v)} cases" for k, v in results.items()))
    rs = bench.run(fam, live_plan(name))
    print(f"LIVE: {name} checked and measured in {time.perf_counter() - start:.0f} s (compiling included)")
    return rs


def live_note(rs: RecordSet | None, current: Mode, name: str) -> str:
    """What the live cell did: measured (its label), skipped on this GPU (why), or nothing (REPLAY)."""
    if rs is not None:
        return f"LIVE: {name}: {len(rs.records)} records, {rs.label()}."
    if not current.live:
        return "(REPLAY: nothing is measured here; the reference GPU's records follow.)"
    return f"(LIVE: {name} not measured here: {live_refusal(current, name) or 'see above'})"
