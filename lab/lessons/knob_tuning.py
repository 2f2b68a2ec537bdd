"""Knob-tuning records (results/h200/gemm_tuning.json, written round by round by scripts/gemm_sweep.py):
each round's provenance, cuBLAS timed at its start and end, and per knob setting its compile report,
checks, TFLOP/s and ratio to cuBLAS. Read here so lessons and notes quote them instead of typing them."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from lab.core.errors import LabError

TUNING_FILE = "gemm_tuning.json"
DERIVED_KNOBS = {"THREADS"}  # follows from the tile and warp-tile shapes


@dataclass(frozen=True)
class Setting:
    round: int
    commit: str
    rung: str
    knobs: dict
    registers: int | None
    spills: bool
    tflops: dict  # size (str) -> TFLOP/s
    ratio: dict  # size (str) -> over cuBLAS in the same round

    def differs_only_in(self, other: Setting, knob: str) -> bool:
        keys = (set(self.knobs) | set(other.knobs)) - DERIVED_KNOBS - {knob}
        return (self.rung == other.rung and self.round == other.round
                and all(self.knobs.get(k) == other.knobs.get(k) for k in keys))


def tuning_path() -> Path:
    from lab.measure.records import reference_dir

    return reference_dir() / TUNING_FILE


def load(path: Path | None = None) -> dict | None:
    """The tuning file as written, or None when it is absent (a machine that never tuned)."""
    path = path or tuning_path()
    try:
        payload = json.loads(Path(path).read_text())
    except FileNotFoundError:
        return None
    except json.JSONDecodeError as exc:
        raise LabError(f"{path} is not a valid tuning file ({exc}).") from None
    if not isinstance(payload.get("rounds"), list):
        raise LabError(f"{path} has no list of rounds; it is not a scripts/gemm_sweep.py result.")
    return payload


def settings(payload: dict) -> list[Setting]:
    """Every measured setting of every round, in the order they ran (failed builds or checks left out)."""
    out = []
    for rnd in payload["rounds"]:
        for row in rnd["rows"]:
            if "tflops" not in row:
                continue
            comp = row.get("compile") or {}
            out.append(Setting(rnd["round"], rnd["provenance"].get("commit", "?"), row["rung"], row["knobs"],
                               comp.get("registers"), bool(comp.get("spills")), row["tflops"], row["ratio"]))
    return out


def knob_groups(payload: dict, rung: str, knob: str) -> list[list[Setting]]:
    """Groups of settings of `rung` measured in the same round that differ in `knob` alone, each sorted by
    the knob's value: the record of what that knob does with everything else held still."""
    mine = [s for s in settings(payload) if s.rung == rung and knob in s.knobs]
    groups: list[list[Setting]] = []
    for s in mine:
        group = next((g for g in groups if g[0].differs_only_in(s, knob)), None)
        if group is None:
            groups.append([s])
        elif all(x.knobs[knob] != s.knobs[knob] for x in group):
            group.append(s)
    return [sorted(g, key=lambda s: s.knobs[knob]) for g in groups if len(g) > 1]


def _shape(knobs: dict, skip: str) -> str:
    return " ".join(f"{k}={v}" for k, v in knobs.items() if k not in DERIVED_KNOBS | {skip})


def knob_effect(payload: dict | None, rung: str, knob: str, defaults: dict | None = None,
                like: list[dict] | None = None) -> str:
    """What changing one knob did, group by group (same round, every other knob equal), as the ratio to
    cuBLAS at each size; the group holding the family's own default knobs is marked. `like`: only the
    groups whose other knobs agree with one of these knob sets (on the knobs both name)."""
    if payload is None:
        return f"(no tuning records at {tuning_path()}: nothing measured about {knob})"
    groups = knob_groups(payload, rung, knob)
    if like:
        ignored = DERIVED_KNOBS | {knob, "VEC"}
        groups = [g for g in groups if any(all(g[0].knobs.get(k) == v for k, v in d.items() if k not in ignored)
                                           for d in like)]
    if not groups:
        return f"{rung}: the tuning records hold no settings that differ in {knob} alone"
    lines = [f"{rung}: settings that differ only in {knob} (same round, cuBLAS timed in that round), x cuBLAS:"]
    for group in groups:
        mark = ""
        if defaults and any(_matches(s.knobs, defaults) for s in group):
            mark = "   <- the family's default knobs"
        lines.append(f"  round {group[0].round}, {_shape(group[0].knobs, knob)}{mark}")
        for s in group:
            at = ", ".join(f"{n}^3 {r:.3f}" for n, r in s.ratio.items())
            lines.append(f"    {knob}={s.knobs[knob]}: {at}")
    return "\n".join(lines)


def _matches(knobs: dict, defaults: dict) -> bool:
    keys = (set(knobs) | set(defaults)) - DERIVED_KNOBS - {"VEC"}
    return all(knobs.get(k) == defaults.get(k) for k in keys)


def best_per_round(payload: dict, rung: str, size: str) -> list[Setting]:
    """Each round's fastest setting of `rung` at one size (by ratio to that round's cuBLAS)."""
    out = []
    for rnd in sorted({s.round for s in settings(payload)}):
        mine = [s for s in settings(payload) if s.round == rnd and s.rung == rung and size in s.ratio]
        if mine:
            out.append(max(mine, key=lambda s: s.ratio[size]))
    return out
