"""Decisions and prepared launches: the part of lab.ops that runs on every call.

A call is reduced to a key (shapes, strides, types, alignment, epilogue) and the key to a Decision: the path and
its configuration, from the autotune cache where it holds the shape's bucket, else from the first rule of the
dispatch table that matches and whose path serves the shape, else cuBLAS. Decisions are kept per key, so a shape
is decided once per process.

The first call of a decision on given addresses runs the path's launcher (the family's host work: the build, the
grid, the tensor maps) while lab.core.build.recording() captures its kernel launches; later calls on the same
addresses replay them, which costs a dictionary lookup and the launches themselves. Arrays the caller owns are
kept in a recording as bare addresses (the recording never keeps the caller's memory alive); the lab's own
scratch and workspaces stay referenced. Recordings are kept for the most recent MAX_RECORDINGS addresses.

Limits: a runtime is for one thread, and its recordings hold the split-K and stream-K workspaces (and persistent
attention's work counter) of the stream they were made on; work issued on several streams at once wants a runtime
per stream (Runtime(table, store)).
"""

from __future__ import annotations

import warnings
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from lab.core.errors import LabError
from lab.ops import counters, rules
from lab.ops.paths import PATHS, Call, apply_epilogue
from lab.ops.shapes import GemmShape, bucket, family

MAX_RECORDINGS = 4096


@dataclass
class Replay:
    """One recorded call: its launches (the library's call and the epilogue's pass too), the decision it was made
    under, and whether its path fused the whole epilogue."""

    launches: list
    decision: object
    fused: bool = True
    exact: bool = True  # the epilogue read the fp32 product (lab.ops.paths.Path.exact_epilogue)
    path_key: str = ""  # "matmul:<path>", the counter a replay adds to
    calls: int = 0  # replays on lab.ops's fast path not yet folded into the counters


@dataclass(frozen=True)
class Decision:
    path: str
    config: tuple[tuple[str, int], ...]
    source: str  # "tuned", "rule N", "fallback: ..."

    @property
    def settings(self) -> dict:
        return dict(self.config)


class Runtime:
    """One dispatch state: a table, an optional autotune store, the decisions and recordings made so far."""

    def __init__(self, table: rules.Table | None = None, store=None, autotune: bool = False):
        self.table = table or rules.DEFAULT
        self.store = store  # lab.ops.store.TuneStore, or None: the table alone decides
        self.autotune = autotune  # tune a bucket the store does not hold, on its first call
        self.decisions: dict = {}
        self.recordings: OrderedDict = OrderedDict()
        self.fast: dict = {}  # lab.ops.api's flat fast-path key -> a replay in `recordings`
        self.last_decision: Decision | None = None  # the decision of the last call run (the checks read it)
        self.last_fused = True  # whether that call's path applied its whole epilogue itself
        self.last_exact = True  # whether its epilogue read the fp32 product (which error bound holds)
        counters.track(self)
        self._arch = None
        self._env = None

    # --- deciding -------------------------------------------------------------------------------
    @property
    def arch(self) -> int:
        if self._arch is None:
            from lab.core import device

            self._arch = device.current().arch
        return self._arch

    @property
    def env(self) -> str:
        if self._env is None:
            from lab.ops.tune import environment_key

            self._env = environment_key()
        return self._env

    def decide(self, shape: GemmShape) -> Decision:
        """The path for `shape`: tuned, else the table's, else cuBLAS."""
        if self.store is not None:
            entry = self.store.get(self.env, bucket(shape))
            if entry is None and self.autotune:
                from lab.ops.tune import tune_shape

                entry = tune_shape(self, shape)
            if entry is not None and PATHS.get(entry.get("path")) is not None:
                if PATHS[entry["path"]].refusal(shape, self.arch) is None:
                    return Decision(entry["path"], tuple(sorted(entry.get("config", {}).items())), "tuned")
        return self.rule_decision(shape)

    def rule_decision(self, shape: GemmShape) -> Decision:
        for i, rule in enumerate(self.table.rules, 1):
            if rule.matches(shape) and PATHS[rule.path].refusal(shape, self.arch) is None:
                return Decision(rule.path, rule.config, f"rule {i}")
        return Decision("cublas", (), "fallback: no rule serves the shape")

    # --- running ----------------------------------------------------------------------------------
    def run(self, key, call: Call, replay_key) -> None:
        """Run one validated matmul call: `key` identifies its shape (decided once), `replay_key` its shape and
        addresses (recorded once; lab.ops.api's fast path replays it without coming here)."""
        decision = self.decisions.get(key)
        if decision is None:
            counters.COUNTS["decision_misses"] += 1
            counters.FAMILIES[family(call.shape)] += 1
            decision = self.decide(call.shape)
            if decision.source.startswith("fallback"):
                counters.FALLBACKS[decision.source[10:]] += 1
            self.decisions[key] = decision
        counters.PATHS["matmul:" + decision.path] += 1
        self.last_decision = decision
        self.last_fused = self.last_exact = True
        replay = self.recordings.get(replay_key)
        if replay is None:
            self._record(key, decision, call, replay_key)
            return
        counters.COUNTS["replays"] += 1
        for raw, grid, block, args, smem in replay.launches:
            raw(grid, block, args, shared_mem=smem)
        self.last_fused, self.last_exact = replay.fused, replay.exact

    def _record(self, key, decision: Decision, call: Call, replay_key) -> Replay | None:
        """Run the path once under lab.core.build.recording() and keep what it launched (the caller's arrays as bare
        addresses, so a recording never keeps them alive)."""
        from lab.core.build import recording

        counters.COUNTS["recordings"] += 1
        owned = [x for x in (call.a, call.b, call.out, call.bias, call.residual) if x is not None]
        spans = [(x.data.ptr, x.data.ptr + max(x.nbytes, 1)) for x in owned]
        try:
            with recording() as launches:
                PATHS[decision.path].launch(call, decision.settings)
                fused = PATHS[decision.path].fuses(call)
                exact = PATHS[decision.path].exact_epilogue(call)
                if not fused:
                    apply_epilogue(call)
        except LabError as exc:  # the path cannot run here after all (a build the GPU refuses): cuBLAS serves
            reason = f"{decision.path} failed: {exc}"
            if counters.FALLBACKS[reason] == 0:
                warnings.warn(f"lab.ops: {reason} Falling back to cuBLAS for this shape.", stacklevel=5)
            counters.FALLBACKS[reason] += 1
            self.decisions[key] = Decision("cublas", (), f"fallback: {reason}")
            PATHS["cublas"].launch(call, {})
            self.last_exact = PATHS["cublas"].exact_epilogue(call)
            if not PATHS["cublas"].fuses(call):
                self.last_fused = False
                apply_epilogue(call)
            return None
        self.last_fused, self.last_exact = fused, exact
        replay = Replay([(raw, grid, block, tuple(as_address(arg, spans) for arg in args), smem)
                         for raw, grid, block, args, smem in launches], decision, fused, exact,
                        "matmul:" + decision.path)
        self.recordings[replay_key] = replay
        if len(self.recordings) > MAX_RECORDINGS:
            dropped = self.recordings.popitem(last=False)[1]
            if isinstance(dropped, Replay):
                counters.fold_replay(dropped)
            self.fast.clear()  # it may point at the dropped replay
        return replay

    def remember_fast(self, fkey, replay_key) -> None:
        """Let lab.ops.api's fast path find the replay recorded under `replay_key` by its flat key (bounded like the
        recordings: past MAX_RECORDINGS the fast keys are dropped and rebuilt by later calls)."""
        replay = self.recordings.get(replay_key)
        if isinstance(replay, Replay):
            if len(self.fast) >= MAX_RECORDINGS:
                self.fast.clear()
            self.fast[fkey] = replay

    def forget(self) -> None:
        """Drop every decision and recording (after the table or the store changed)."""
        for replay in self.recordings.values():
            if isinstance(replay, Replay):
                counters.fold_replay(replay)
        self.decisions.clear()
        self.recordings.clear()
        self.fast.clear()


def as_address(arg, spans):
    """A caller's array (or a view into one) as its bare address; anything else as it is."""
    data = getattr(arg, "data", None)
    ptr = getattr(data, "ptr", None)
    if ptr is not None and any(lo <= ptr < hi for lo, hi in spans):
        return np.uint64(ptr)
    return arg
