"""Live-only checks (they need a GPU): the ladder's correctness checks before any timing. (The timing mistakes the
method notebook shows are written out in its cells.)"""

from __future__ import annotations

from lab.core.errors import LabError
from lab.core.ladder import Family
from lab.lessons.common import family_of


def few_cases(family: str | Family, count: int = 8) -> list[dict]:
    """`count` of the family's check cases, spread evenly from the smallest to the largest."""
    cases = family_of(family).check_cases()
    if len(cases) <= count:
        return cases
    step = (len(cases) - 1) / (count - 1)
    return [cases[round(i * step)] for i in range(count)]


def check_ladder(family: str | Family, cases: list[dict]) -> dict:
    """lab.measure.verify.check_rung for every rung; raises LabError (stopping the notebook) if any fails."""
    from lab.core import device
    from lab.core.ladder import runnable_rungs
    from lab.measure.verify import check_rung

    fam = family_of(family)
    here, skipped = runnable_rungs(fam.rungs, device.current().arch)
    for line in skipped:
        print(line)
    results = {rung.key: check_rung(fam, rung, cases) for rung in here}
    failed = [r.line() for rs in results.values() for r in rs if not r.passed]
    if failed:
        raise LabError(f"{len(failed)} check(s) failed in {fam.name}; fix them before measuring:\n" +
                       "\n".join(failed[:10]))
    return results


def check_summary(results: dict | None, family: str | Family, key: str) -> str:
    fam = family_of(family)
    if results is None:
        return (f"(not run: checks need a GPU. LIVE mode runs lab.measure.verify.check_rung on {fam.name}/"
                f"{fam.rung(key).key} here before anything is measured.)")
    mine = results.get(fam.rung(key).key)
    if mine is None:
        return (f"(not checked here: this GPU cannot run {fam.rung(key).key}; it is compile-only on this machine, "
                "see the line above its compile report)")
    lines = [r.line() for r in mine]
    passed = sum(r.passed for r in mine)
    worst = max(mine, key=lambda r: r.worst_ratio, default=None)
    margin = (" Every element within its own error bound (lab.measure.bounds): the closest came to "
              f"{worst.worst_ratio:.2g} "
              f"of it ({worst.case}); worst normwise error {max(r.max_rel_error for r in mine):.2g}."
              if worst is not None and worst.worst_ratio else " Bit-exact." if passed == len(mine) else "")
    return "\n".join(lines) + f"\n{passed}/{len(mine)} cases passed, 3 input distributions each.{margin}"
