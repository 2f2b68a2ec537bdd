"""The kernel variants the compile study builds: each rung's axes, the knobs one point of them gives, and the points
that cannot build (an arch the rung cannot use, shared memory past the arch's per-block limit).

Two kinds of axes:
- GemmAxes (gemm_tc): tiles x stages x epilogues x dtypes x layouts x archs, the knobs built here as the family and
  lab.families.gemm_epilogue build them;
- AttentionAxes (attention, attention_decode): head dims x causal x dtypes x paged x archs, the knobs built by the
  family itself (`variant_for`), so a variant is the very cubin lab.ops.attention would ask the cache for on that
  arch.

Every axes object has `family`, `rung`, `order` (the axes in the order the growth series multiplies them, archs
last), `values(axis)`, `check()` and `build(point, arch) -> (spec, dynamic shared memory bytes)`.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

from lab.core import build, nvrtc, occupancy
from lab.core.errors import LabError
from lab.families.epilogue import OUTS, Epilogue
from lab.measure.bounds import BFLOAT16

RESERVED_SMEM_PER_BLOCK = 1024  # from sm_80 on, each block's 1 KB system reservation (lab/core/occupancy.py)
ATTENTION_SMEM_MARGIN = 2048  # the attention families keep this much of the opt-in limit free (their _smem_optin)
PAGE_SIZE = 64  # keys a page, for the paged-cache variants (the knob is PAGED; the size is a run-time argument)


def smem_limit_per_block(arch: int) -> int:
    """The most dynamic shared memory one block can opt in to: the SM's, less the block's system reservation
    (227 KB on sm_90, 163 KB on sm_80, 99 KB on sm_86 and sm_89)."""
    if arch not in occupancy.LIMITS:
        raise LabError(f"No shared-memory limit is known for sm_{arch}; use one of "
                       f"{', '.join(f'sm_{a}' for a in occupancy.LIMITS)}.")
    return occupancy.LIMITS[arch][3] - RESERVED_SMEM_PER_BLOCK


# --- gemm_tc --------------------------------------------------------------------------------------------------------

GEMM_ORDER = ("tiles", "stages", "epilogues", "dtypes", "layouts", "archs")


@dataclass(frozen=True)
class GemmAxes:
    """One gemm_tc rung's axes. `epilogues` empty: the rung has no epilogue knobs (rung 03), so no epilogue axis;
    an epilogue is named as Epilogue.name writes it ("bias+gelu_tanh", "none", "bias+gelu_tanh->int8",
    "row_scale+silu->e4m3/row")."""

    rung: str
    tiles: tuple[tuple[int, int], ...]
    stages: tuple[int, ...]
    epilogues: tuple[str, ...]
    dtypes: tuple[str, ...]
    archs: tuple[int, ...]
    layouts: tuple[str, ...] = ("TN",)
    family: str = field(default="gemm_tc", init=False)
    order = GEMM_ORDER

    def values(self, axis: str) -> list:
        """The axis's values as the rows record them (a tile as '128x256'); the epilogue axis of a rung with
        none is ['none']."""
        if axis == "tiles":
            return [f"{bm}x{bn}" for bm, bn in self.tiles]
        if axis == "epilogues":
            return list(self.epilogues) or ["none"]
        return list(getattr(self, axis))

    def check(self) -> None:
        from lab.families.gemm_tc import DTYPES, LAYOUTS

        bad = [d for d in self.dtypes if d not in DTYPES] + [lay for lay in self.layouts if lay not in LAYOUTS]
        if bad:
            raise LabError(f"{bad[0]!r} is not a gemm_tc dtype ({', '.join(DTYPES)}) or layout "
                           f"({', '.join(LAYOUTS)}).")

    def base_spec(self) -> build.KernelSpec:
        return family_rung(self.family, self.rung).spec

    def smem_limit(self, arch: int) -> int:
        return smem_limit_per_block(arch)

    def build(self, point: dict, arch: int) -> tuple[build.KernelSpec, int]:
        from lab.core.ladder import Rung
        from lab.families.gemm_tc import dynamic_smem_bytes

        spec = self.base_spec()
        bm, bn = (int(x) for x in point["tiles"].split("x"))
        knobs = {"BM": bm, "BN": bn, "STAGES": point["stages"], "BF16": int(point["dtypes"] == BFLOAT16),
                 "TN": int(point["layouts"] == "TN")}
        if self.epilogues:  # as GemmTcEpilogueFamily.extra_knobs: the chain's -D knobs, all zero for "none"
            knobs |= epilogue_from_name(point["epilogues"]).knobs()
        knobs["THREADS"] = gemm_threads(self.rung, dict(spec.knobs) | knobs)
        _refuse_unknown_knobs(self, spec, knobs)
        vspec = spec.with_knobs(**knobs)
        return vspec, dynamic_smem_bytes(Rung(self.family, self.rung, vspec, ""))


def epilogue_from_name(name: str) -> Epilogue:
    """The Epilogue that Epilogue.name would print as `name`: 'ops', 'ops->out' or 'ops->out/row'."""
    ops, _, out = name.partition("->")
    out, _, per_row = out.partition("/")
    if out and out not in OUTS:
        raise LabError(f"Unknown epilogue output {out!r} in {name!r}; use one of {', '.join(OUTS)}.")
    return Epilogue.parse(ops, out or "same", per_row == "row")


def gemm_threads(rung: str, knobs: dict) -> int:
    """THREADS as each gemm_tc rung's static_assert demands it for a tile (their headers' Launch lines)."""
    if rung == "06_persistent":
        return 128 * (1 + knobs["BM"] // 64)  # a producer warpgroup and one consumer warpgroup per 64 rows
    if rung == "03_swizzled_multistage":
        return 32 * (knobs["BM"] // knobs["WM"]) * (knobs["BN"] // knobs["WN"])  # a warp per WM x WN warp tile
    raise LabError(f"The compile study knows the launch shape of gemm_tc rungs 03 and 06 only, not {rung!r}.")


# --- attention ------------------------------------------------------------------------------------------------------

ATTENTION_ORDER = ("head_dims", "causal", "dtypes", "paged", "archs")
ATTENTION_FAMILIES = ("attention", "attention_decode")


@dataclass(frozen=True)
class AttentionAxes:
    """One attention or attention_decode rung's axes. `paged` (1: a block table) exists for attention_decode's
    split-KV rung only; elsewhere it stays (0,)."""

    family: str
    rung: str
    head_dims: tuple[int, ...]
    causal: tuple[int, ...]
    dtypes: tuple[str, ...]
    archs: tuple[int, ...]
    paged: tuple[int, ...] = (0,)
    order = ATTENTION_ORDER

    def values(self, axis: str) -> list:
        return list(getattr(self, axis))

    def check(self) -> None:
        from lab.families.attention import DTYPES, MMA_HEAD_DIMS, WIDE_HEAD_DIM, WIDE_RUNGS

        if self.family not in ATTENTION_FAMILIES:
            raise LabError(f"AttentionAxes takes the families {', '.join(ATTENTION_FAMILIES)}; got {self.family!r}.")
        dims = MMA_HEAD_DIMS + ((WIDE_HEAD_DIM,) if self.family == "attention" and self.rung in WIDE_RUNGS else ())
        bad = ([d for d in self.dtypes if d not in DTYPES] + [d for d in self.head_dims if d not in dims]
               + [c for c in self.causal + self.paged if c not in (0, 1)])
        if bad:
            raise LabError(f"{bad[0]!r} is not an attention dtype ({', '.join(DTYPES)}), a head dim {self.rung} "
                           f"specializes ({', '.join(map(str, dims))}) or a 0/1 flag (causal, paged).")
        if any(self.paged) and "PAGED" not in dict(self.base_spec().knobs):
            raise LabError(f"{self.family} {self.rung} has no paged cache (no PAGED knob): keep paged=(0,).")

    def base_spec(self) -> build.KernelSpec:
        return family_rung(self.family, self.rung).spec

    def smem_limit(self, arch: int) -> int:
        """What the attention families let a block use: the opt-in limit less their margin (their refusal)."""
        return smem_limit_per_block(arch) - ATTENTION_SMEM_MARGIN

    def build(self, point: dict, arch: int) -> tuple[build.KernelSpec, int]:
        fam = _attention_family_at(self.family, arch)
        rung = family_rung(self.family, self.rung)
        params = {"B": 1, "H": 1, "H_kv": 1, "S_q": 1, "S_k": 1, "D": point["head_dims"], "dtype": point["dtypes"],
                  "causal": point["causal"], "page_size": PAGE_SIZE if point["paged"] else 0}
        built = fam.variant_for(rung, params)
        return built.spec, fam.launch_smem(built, params)


def _attention_family_at(name: str, arch: int):
    """The family, with the shared-memory opt-in limit a GPU of `arch` reports (the decode rung lowers its stages
    to fit it, so the variant depends on the arch)."""
    from lab.families.attention import AttentionFamily
    from lab.families.attention_decode import AttentionDecodeFamily

    limit = AttentionAxes(name, "", (), (), (), ()).smem_limit(arch)
    base = AttentionDecodeFamily if name == "attention_decode" else AttentionFamily

    class AtArch(base):
        def _smem_optin(self) -> int:
            return limit

    return AtArch()


# --- the grid -------------------------------------------------------------------------------------------------------

Axes = GemmAxes | AttentionAxes


@dataclass(frozen=True)
class Variant:
    """One entry of the cache: a rung's spec with its knobs, and the arch it is built for."""

    family: str
    rung: str
    spec: build.KernelSpec
    arch: int
    axes: tuple[tuple[str, object], ...]  # (axis, value) in the axes' order, values as Axes.values writes them
    smem_bytes: int

    def axis(self, name: str):
        return dict(self.axes)[name]

    @property
    def target(self) -> str:
        return build.arch_string(self.arch, self.spec.arch_suffix if self.arch >= 90 else "")

    @property
    def label(self) -> str:
        values = " ".join(str(v) for axis, v in self.axes if axis != "archs")
        return f"{self.family} {self.rung} {values} {self.target}"


@dataclass
class Grid:
    variants: list[Variant]
    skipped: list[dict] = field(default_factory=list)  # {"family", "rung", "axes", "reason"}: points that cannot build


def family_rung(family: str, key: str):
    from lab.families import get_family

    rungs = get_family(family).rungs
    for rung in rungs:
        if rung.key == key:
            return rung
    raise LabError(f"{family} has no rung {key!r}; the rungs are {', '.join(r.key for r in rungs)}.")


def _refuse_unknown_knobs(axes: Axes, spec: build.KernelSpec, knobs: dict) -> None:
    unknown = sorted(set(knobs) - set(build.knob_names(spec)))
    if unknown:
        raise LabError(f"{axes.family} {axes.rung} takes no knob {unknown[0]}; its knobs are "
                       f"{', '.join(sorted(build.knob_names(spec)))}. Drop that axis for this rung.")


def variant_grid(axes: Axes) -> Grid:
    """The cartesian product of `axes` as Variants, archs innermost. A knob the rung's source does not take is an
    error; a point that cannot run (shared memory over the arch's per-block limit, an arch the rung cannot use or
    this NVRTC cannot build) is skipped with its reason."""
    axes.check()
    if not all(axes.values(a) for a in axes.order):
        raise LabError(f"Every axis of {axes.family} {axes.rung} needs at least one value.")
    supported = nvrtc.supported_archs()
    grid = Grid([])
    inner = [a for a in axes.order if a != "archs"]
    for values in itertools.product(*(axes.values(a) for a in inner)):
        for arch in axes.values("archs"):
            named = tuple(zip(inner, values, strict=True)) + (("archs", arch),)
            spec, smem = axes.build(dict(named), arch)
            _refuse_unknown_knobs(axes, spec, dict(spec.knobs))
            why = _refusal(spec, arch, smem, axes.smem_limit(arch), supported)
            if why:
                grid.skipped.append({"family": axes.family, "rung": axes.rung, "axes": dict(named), "reason": why})
            else:
                grid.variants.append(Variant(axes.family, axes.rung, spec, arch, named, smem))
    return grid


def _refusal(spec: build.KernelSpec, arch: int, smem: int, limit: int, supported: Sequence[int]) -> str | None:
    why = build.arch_refusal(spec, arch)
    if why:
        return why
    if arch not in supported:
        return f"this NVRTC cannot build for sm_{arch}"
    if smem > limit:
        return f"needs {smem} B of shared memory per block; sm_{arch} allows {limit} B"
    return None


def study_grid(all_axes: Sequence[Axes]) -> Grid:
    grids = [variant_grid(a) for a in all_axes]
    return Grid([v for g in grids for v in g.variants], [s for g in grids for s in g.skipped])


def describe_axes(axes: Axes) -> dict:
    """An axes object as the record keeps it: family, rung, and each axis's values in order."""
    return {"family": axes.family, "rung": axes.rung, "axes": {a: axes.values(a) for a in axes.order}}
