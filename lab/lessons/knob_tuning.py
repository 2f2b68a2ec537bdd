"""Knob-tuning records (results/h200/gemm_tuning.json, written round by round by scripts/gemm_sweep.py):
each round's provenance, cuBLAS timed at its start and end, and per knob setting its compile report,
checks, TFLOP/s and ratio to cuBLAS. Read here so lessons and notes quote them instead of typing them. Also the two
steps of the tuning loop that every candidate repeats (notebook 02 writes the loop itself out): a rung with some knobs
changed (`with_knobs`, THREADS derived again) and a setting's name (`changed_knobs`)."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

from lab.core.errors import LabError
from lab.core.ladder import Rung

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


def threads(knobs: dict) -> int:
    """THREADS for a warp-tiled setting: one warp per WM x WN warp tile of the BM x BN block tile."""
    return 32 * (knobs["BM"] // knobs["WM"]) * (knobs["BN"] // knobs["WN"])


def with_knobs(rung: Rung, **changes: int) -> Rung:
    """The rung built with some knobs changed, THREADS derived again from the tile shapes where the rung has warp
    tiles (the launcher reads THREADS from the knobs, so it must follow them)."""
    knobs = dict(rung.spec.knobs) | changes
    if {"BM", "BN", "WM", "WN"} <= knobs.keys():
        knobs["THREADS"] = threads(knobs)
    return dataclasses.replace(rung, spec=rung.spec.with_knobs(**knobs))


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


def changed_knobs(knobs: dict, defaults: dict) -> str:
    """The knobs of a setting that differ from `defaults`, as 'STAGES=3 BM=128' ('the defaults' when none do)."""
    shown = " ".join(f"{k}={v}" for k, v in knobs.items() if k not in DERIVED_KNOBS and defaults.get(k) != v)
    return shown or "the defaults"


def round_table(payload: dict | None, round_number: int, rung: str, defaults: dict, size: str = "4096") -> str:
    """One tuning round's settings of `rung` as the loop ran them: each one's registers and its ratio to cuBLAS
    (timed in that round) at every size, and the setting the loop kept, the fastest at `size`."""
    if payload is None:
        return f"(no tuning records at {tuning_path()}: no tuning round to show)"
    mine = [s for s in settings(payload) if s.round == round_number and s.rung == rung]
    if not mine:
        return f"{rung}: tuning round {round_number} holds no measured settings"
    best = max((s for s in mine if size in s.ratio), key=lambda s: s.ratio[size], default=None)
    width = max(len(changed_knobs(s.knobs, defaults)) for s in mine)
    lines = [f"round {round_number} (commit {mine[0].commit[:7]}), {rung}, x cuBLAS timed in the same round, "
             "knobs shown where they differ from the family's defaults:"]
    rnd = next(r for r in payload["rounds"] if r["round"] == round_number)
    cublas = [c[size] for c in rnd.get("cublas", []) if size in c]
    if len(cublas) >= 2:  # the same call timed at the round's start and end: how far a figure drifts in a round
        lines.append(f"  cuBLAS at {size}^3, start / end of the round: {cublas[0]:.2f} / {cublas[-1]:.2f} TFLOP/s "
                     f"(they differ by {abs(cublas[-1] / cublas[0] - 1):.2%})")
    for s in mine:
        at = ", ".join(f"{n}^3 {r:.3f}" for n, r in s.ratio.items())
        mark = f"   <- kept (fastest at {size}^3)" if s is best else ""
        lines.append(f"  {changed_knobs(s.knobs, defaults):{width}s}  {s.registers} registers  {at}{mark}")
    default = next((s for s in mine if _matches(s.knobs, defaults)), None)
    if best is not None and default is not None and best is not default:
        gain = ", ".join(f"{n}^3 {best.ratio[n] / r:.4f}x" for n, r in default.ratio.items() if n in best.ratio)
        lines.append(f"  the kept setting ({changed_knobs(best.knobs, defaults)}) over the family's defaults: {gain}")
    return "\n".join(lines)
