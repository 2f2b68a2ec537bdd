"""Notebook 09 (attention): what it repeats. The count of FLOPs and bytes, the online-softmax recurrence in NumPy, the
ladder's sources and tiles, and the reference GPU's records read by kind, each figure or table saying which record it
needs when that record is absent.

Records: `lab bench attention --json` writes every kind (headline, sweep, tail) to results/h200/attention.json;
`--kinds K` runs write one kind, kept as attention_K.json. A kind is read from its own file when that file holds it,
else from attention.json. Every number printed here is computed from those records, from the family's own arithmetic
(lab/families/attention.py) or from the rungs' sources and compile reports; none is typed in.
"""

from __future__ import annotations

import inspect
import statistics
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from lab.core.errors import LabError
from lab.lessons.common import Markdown, describe_provenance, md, mode_box, run_stamp, shown_path
from lab.measure import records
from lab.measure.records import Record, RecordSet, describe_params, format_value

if TYPE_CHECKING:
    from lab.core.ladder import Family, Rung
    from lab.lessons.mode import Mode

FAMILY = "attention"
KINDS = ("headline", "sweep", "tail")
BASELINE = "torch_sdpa"
# The live demonstration: an odd length (no tile boundary falls on the sequence's end), GQA 4:1, causal.
LIVE_PROBLEM = {"B": 1, "H": 8, "H_kv": 2, "S_q": 1000, "S_k": 1000, "D": 128, "dtype": "float16", "causal": 1}
COUNT_LENGTH = 4096  # the sequence length of the motivating count (the headline problems')


def family() -> Family:
    from lab.families import get_family

    return get_family(FAMILY)


# ----------------------------------------------------------------------------------------------
# Where each kind of record comes from
# ----------------------------------------------------------------------------------------------

def kind_file(kind: str | None = None):
    """results/h200/attention.json (every kind), or attention_<kind>.json (one `--kinds` run)."""
    return records.reference_dir() / (f"{FAMILY}.json" if kind is None else f"{FAMILY}_{kind}.json")


def recorded_by(kind: str) -> str:
    where = shown_path(kind_file(kind))
    return f"lab bench {FAMILY} --kinds {kind} --json {where}"


def missing(kind: str) -> str:
    """The sentence a cell prints instead of a table or figure when no record holds `kind`."""
    return (f"NO RECORDS for {FAMILY} {kind}: neither {shown_path(kind_file())} nor {shown_path(kind_file(kind))} "
            f"holds {kind} records, so this cell draws nothing. On a GPU, `{recorded_by(kind)}` records them "
            f"(`lab bench {FAMILY} --json {shown_path(kind_file())}` records every kind).")


def _load(path) -> RecordSet | None:
    try:
        return records.load(path)
    except LabError:
        return None


def replayed(kind: str) -> RecordSet | None:
    """The reference GPU's `kind` records (replayed), from attention_<kind>.json or else attention.json; None when
    neither holds any."""
    for path in (kind_file(kind), kind_file()):
        rs = _load(path)
        if rs is not None:
            mine = [r for r in rs.records if r.kind == kind and r.family == FAMILY]
            if mine:
                return RecordSet(rs.provenance | {"file": shown_path(path)}, mine, replayed=True)
    return None


def replayed_all() -> dict[str, RecordSet | None]:
    return {kind: replayed(kind) for kind in KINDS}


def banner(current: Mode, sets: dict[str, RecordSet | None]) -> str:
    """A loud box: LIVE (one problem checked and timed in this run) or REPLAY; then each kind of record with where it
    comes from, or NO RECORDED RESULTS and the command that records it."""
    live = []
    if current.live:
        live = [f"One problem checked and timed: {run_stamp()}.",
                "Beside it, the reference GPU's records are REPLAYED, and labelled so:"]
    body = []
    for kind in KINDS:
        rs = sets.get(kind)
        if rs is None:
            body += [f"{FAMILY} {kind}: NO RECORDED RESULTS in {shown_path(kind_file())} or "
                     f"{shown_path(kind_file(kind))};", f"  its cells say so and draw nothing. `{recorded_by(kind)}`."]
        else:
            body.append(f"{FAMILY} {kind}: REPLAYED from {describe_provenance(rs.provenance)} "
                        f"({rs.provenance['file']}).")
    body.append("Sources, compile reports and the NumPy demonstrations ARE computed here (NVRTC needs no GPU).")
    return mode_box(current.live, current.reason, live, body)


# ----------------------------------------------------------------------------------------------
# The count: FLOPs against bytes, with and without the score matrix in memory
# ----------------------------------------------------------------------------------------------

def count(S: int, D: int, item: int = 2, score_item: int = 4) -> dict:
    """One head at S_q = S_k = S, not causal: FLOPs (4 S^2 D: 2 D a score, 2 D its share of P V), the bytes of Q, K,
    V read once and O written once, and the bytes of a materialized S = Q K^T (written, read back for the softmax,
    P written and read for P V: four passes over an S x S matrix of `score_item` bytes)."""
    flops = 4 * S * S * D
    qkvo = 4 * S * D * item
    scores = 4 * S * S * score_item
    return {"S": S, "D": D, "flops": flops, "qkvo_bytes": qkvo, "score_bytes": scores,
            "flash_intensity": flops / qkvo, "naive_intensity": flops / (qkvo + scores)}


def ridge(rs: RecordSet | None) -> dict | None:
    """The FLOPs a byte must carry before the GPU's arithmetic, not its memory, sets the time, from records only: the
    baseline's best TFLOP/s in the attention records (a floor under the tensor-core peak) over the device copy's
    GB/s (results/h200/copy.json) on the same GPU. None when either record is missing."""
    from lab.lessons.views import copy_ceiling

    if rs is None:
        return None
    base = [r for r in rs.records if r.rung == BASELINE]
    copy = copy_ceiling(rs.provenance.get("device"))
    if not base or copy is None:
        return None
    best = max(base, key=lambda r: r.value)
    return {"tflops": best.value, "at": describe_params(best.params), "gbs": copy[0], "copy_from": copy[1],
            "flop_per_byte": best.value * 1e12 / (copy[0] * 1e9)}


def count_text(rs: RecordSet | None, S: int = COUNT_LENGTH, D: int = 128) -> str:
    c = count(S, D)
    lines = [f"one head, S_q = S_k = {S}, D = {D}, fp16 in and out, fp32 scores:",
             f"  FLOPs                     4 S^2 D = {c['flops'] / 1e9:.1f} GFLOP",
             f"  Q, K, V read, O written   4 S D x 2 B = {c['qkvo_bytes'] / 2**20:.1f} MiB",
             f"  S = Q K^T materialized    S^2 x 4 B = {c['score_bytes'] / 4 / 2**20:.0f} MiB, moved 4 times "
             f"(S written and read, P written and read) = {c['score_bytes'] / 2**20:.0f} MiB, "
             f"{c['score_bytes'] / c['qkvo_bytes']:.0f} times Q, K, V and O",
             f"  -> with S in memory: {c['naive_intensity']:.0f} FLOP per byte; with S kept on chip (flash): "
             f"{c['flash_intensity']:.0f} FLOP per byte"]
    point = ridge(rs)
    if point is None:
        lines.append("  the GPU's balance point needs the attention headline records and results/h200/copy.json: "
                     "absent here, so only the two intensities are shown.")
        return "\n".join(lines)
    lines += [f"  the GPU: at least {point['tflops']:.0f} TFLOP/s (the baseline's best, {point['at']}) over "
              f"{point['gbs']:.0f} GB/s (device copy) = at least {point['flop_per_byte']:.0f} FLOP per byte "
              f"({rs.label()})",
              f"  -> with S in memory the bytes set the time ({c['naive_intensity']:.0f} < "
              f"{point['flop_per_byte']:.0f}); kept on chip the arithmetic does "
              f"({c['flash_intensity']:.0f} > {point['flop_per_byte']:.0f})"]
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# The recurrence, in NumPy
# ----------------------------------------------------------------------------------------------

def online_attention(s: np.ndarray, v: np.ndarray, block: int) -> tuple[np.ndarray, list[float]]:
    """One query row's output from its scores `s` (n,) and values `v` (n, D), walking the keys in tiles of `block`:
    a running max m, a running sum l and an accumulator o, both rescaled by exp(m_old - m_new) when the max moves.
    Returns o / l and the rescale factor of each tile. A row with no visible key (every s = -inf) keeps m = -inf,
    shifts by 0 instead (exp(-inf - -inf) would be NaN) and outputs 0."""
    m, l_sum, o = -np.inf, 0.0, np.zeros(v.shape[1])
    factors = []
    for start in range(0, len(s), block):
        tile, vt = s[start:start + block], v[start:start + block]
        m_new = max(m, float(tile.max()))
        shift = 0.0 if m_new == -np.inf else m_new            # a row that has seen only -inf: shift by 0
        factor = 1.0 if m == m_new else float(np.exp(m - shift))
        p = np.exp(tile - shift)                               # exp(-inf) = 0 for the masked keys
        l_sum = l_sum * factor + p.sum()
        o = o * factor + p @ vt
        m = m_new
        factors.append(factor)
    return (o / l_sum if l_sum > 0 else np.zeros_like(o)), factors


def softmax_attention(s: np.ndarray, v: np.ndarray) -> np.ndarray:
    """The definition: softmax(s) v, the whole row at once (NaN for a row with no visible key)."""
    with np.errstate(invalid="ignore"):
        e = np.exp(s - s.max())
        return (e / e.sum()) @ v


def show_function(fn: Callable) -> Markdown:
    return md(f"`{fn.__module__}.{fn.__name__}`\n\n```python\n{inspect.getsource(fn).rstrip()}\n```")


def recurrence_demo(n: int = 37, D: int = 8, block: int = 8, seed: int = 0) -> dict:
    """A row of `n` keys (not a multiple of `block`), scores that rise so the max moves in several tiles: the
    tiled recurrence against the definition, in float64."""
    rng = np.random.default_rng(seed)
    s = rng.standard_normal(n) * 2 + np.linspace(0, 6, n)
    v = rng.standard_normal((n, D))
    o, factors = online_attention(s, v, block)
    exact = softmax_attention(s, v)
    return {"n": n, "D": D, "block": block, "o": o, "exact": exact, "factors": factors,
            "error": float(np.max(np.abs(o - exact)))}


def recurrence_text(demo: dict) -> str:
    tiles = len(demo["factors"])
    moved = sum(f != 1.0 for f in demo["factors"][1:])
    lines = [f"one row, {demo['n']} keys in {tiles} tiles of {demo['block']}, D = {demo['D']}, float64:",
             "  rescale factor exp(m_old - m_new) per tile: "
             + ", ".join(f"{f:.3g}" for f in demo["factors"]),
             f"  the max moved in {moved} of the {tiles - 1} tiles after the first (a factor of 1: it did not)",
             f"  largest |online - softmax(s) v| = {demo['error']:.1e}"]
    return "\n".join(lines)


def empty_row_text(D: int = 4) -> str:
    """A causal row that sees no key: every score -inf. The definition gives NaN; the recurrence's convention 0."""
    s = np.full(12, -np.inf)
    v = np.ones((12, D))
    o, _ = online_attention(s, v, 8)
    naive = softmax_attention(s, v)
    return (f"a row with no visible key (12 scores, all -inf): softmax(s) v = {np.array2string(naive)}, the "
            f"recurrence's output = {np.array2string(o)}")


# ----------------------------------------------------------------------------------------------
# The rungs: list, headers, predictions, tiles in flight
# ----------------------------------------------------------------------------------------------

def rung_list() -> str:
    fam = family()
    lines = [f"{fam.name}: {fam.title}", f"  baseline: {fam.ceiling_title}"]
    lines += [f"  {r.key:22s} kernels/{r.spec.source:32s} {r.title}" for r in fam.rungs]
    return "\n".join(lines)


def rung_keys() -> list[str]:
    return [r.key for r in family().rungs]


def tiled_rungs() -> list[Rung]:
    """The rungs that walk K and V in tiles (every rung with a BLOCK_N knob), in ladder order."""
    return [r for r in family().rungs if "BLOCK_N" in dict(r.spec.knobs)]


def predictions_text() -> str:
    from lab.lessons.predictions import prediction

    return "\n\n".join(f"{key}: {prediction(FAMILY, key)}" for key in rung_keys())


def predicted_problem(key: str) -> tuple[dict, str]:
    """The headline problem a rung's prediction names in its "(where)" ("H200, B=2 H=16 S=4096 D=128 fp16, not
    causal"), as record params (S for S_q and S_k; causal 0 unless it says causal without "not"), and the where."""
    import re

    from lab.lessons.predictions import prediction

    text = prediction(FAMILY, key)
    where = text[1:text.index(")")] if text.startswith("(") else ""
    found = dict(re.findall(r"\b(B|H|S|D)=(\d+)", where))
    params = {k: int(v) for k, v in found.items() if k in ("B", "H", "D")}
    if "S" in found:
        params |= {"S_q": int(found["S"]), "S_k": int(found["S"])}
    dtype = re.search(r"\b(fp16|bf16)\b", where)
    if dtype:
        params["dtype"] = {"fp16": "float16", "bf16": "bfloat16"}[dtype[1]]
    params["causal"] = int("causal" in where and "not causal" not in where)
    return params, where


def prediction_check(rs: RecordSet | None, key: str) -> str:
    """Each numeric range of rung `key`'s prediction (lab.lessons.predictions.claims: TFLOP/s, "x over rung NN",
    "x of the ceiling") against the record of the problem the prediction names: inside, below or above."""
    from lab.lessons.predictions import claims, prediction

    if rs is None:
        return missing("headline")
    params, where = predicted_problem(key)
    found = claims(prediction(FAMILY, key))
    if not found:
        return f"{key}: the prediction states no numeric range to check; compare it by eye."
    mine = [r for r in rs.records if r.rung == key and all(r.params.get(k) == v for k, v in params.items())]
    if not mine:
        return f"{key}: no record of the problem its prediction names ({where or 'none named'}) in {rs.label()}"
    lines = [f"{key}, predicted for {where}; measured at {problem_label(mine[0].params)} ({rs.label()}):"]
    device = str(rs.provenance.get("device", ""))
    if "H200" in where and "H200" not in device:
        lines.append(f"  (the prediction is for an H200; these records were made on {device})")
    rec = mine[0]
    for c in found:
        if c.against == "":
            value, shown = rec.value, f"{format_value(rec.value, rec.metric)} {rec.metric}"
        elif c.against == "ceiling":
            value, shown = rec.ratio, f"{rec.ratio:.3g} of {rec.ceiling}"
        else:
            other = next((r for r in rs.records if r.rung.startswith(c.against) and r.params == rec.params), None)
            if other is None or not other.value:
                lines.append(f"  {c.text}: no record of rung {c.against} at this problem to compare with")
                continue
            value, shown = rec.value / other.value, f"{rec.value / other.value:.3g} times rung {other.rung}"
        verdict = ("inside the range" if c.lo <= value <= c.hi else
                   "BELOW the range" if value < c.lo else "ABOVE the range")
        lines.append(f"  predicted {c.text}: measured {shown} -> {verdict}")
    return "\n".join(lines)


def predictions_check(rs: RecordSet | None) -> str:
    return "\n".join(prediction_check(rs, key) for key in rung_keys()) if rs is not None else missing("headline")


def tile_budget(rung: Rung, D: int = 128, dtype: str = "float16", arch: int | None = None) -> dict:
    """One block's tiles at head dimension D, from the rung's knobs (BLOCK_M query rows, BLOCK_N keys a tile, PAD
    halves a row, STAGES K/V tiles in flight: 1 where the rung has no such knob), next to the compile report's
    shared memory and registers and the occupancy they allow on `arch`; and the FLOPs each K/V tile feeds."""
    from lab.core import device
    from lab.core.build import compile_report, report_arch
    from lab.core.occupancy import LIMITS, occupancy

    fam = family()
    knobs = dict(rung.spec.knobs)
    arch = arch or device.REFERENCE_ARCH
    params = dict(LIVE_PROBLEM, D=D, dtype=dtype, causal=0)
    built = fam.variant(rung, _StubProblem(params))
    pad = knobs.get("PAD", 0)
    block_m, block_n, stages = fam.rows_per_block(rung), knobs["BLOCK_N"], knobs.get("STAGES", 1)
    q_tile, kv_stage = block_m * (D + pad) * 2, 2 * block_n * (D + pad) * 2
    dynamic = fam.launch_smem(rung, params)
    report = compile_report(built.spec, report_arch(built.spec, arch), dynamic)
    smem = report.smem_static_bytes + dynamic
    return {"rung": rung.key, "D": D, "pad": pad, "block_m": block_m, "block_n": block_n, "stages": stages,
            "q_tile": q_tile, "kv_stage": kv_stage, "tiles_bytes": q_tile + stages * kv_stage, "smem": smem,
            "registers": report.registers, "spills": report.spill_store_bytes + report.spill_load_bytes,
            "threads": knobs["THREADS"], "arch": report.arch,
            "occupancy": (occupancy(arch, knobs["THREADS"], report.registers, smem) if arch in LIMITS else
                          f"no occupancy limits for sm_{arch} in lab/core/occupancy.py"),
            "tile_flops": 4 * block_m * block_n * D, "tile_bytes": 2 * block_n * D * 2,
            "scores_per_warp": 16 * block_n}


class _StubProblem:
    """The little of a Problem that Family.variant reads (its params), so a build needs no input arrays."""

    def __init__(self, params: dict):
        self.params = params


def tiles_text(budgets: list[dict]) -> str:
    lines = []
    for b in budgets:
        extra = b["smem"] - b["tiles_bytes"]
        shared = (f"{-extra} B less than the tiles' sum: a tile is laid over one that is done (Q's, once its "
                  "fragments are in registers)" if extra < 0 else
                  f"every tile in a buffer of its own, and {extra} B more (alignment, barriers)" if extra > 0 else
                  "every tile in a buffer of its own")
        row = f"({b['D']} + {b['pad']} pad)" if b["pad"] else f"{b['D']}"
        lines += [f"rung {b['rung']} at D = {b['D']} ({b['arch']}, {b['threads']} threads a block):",
                  f"  Q tile {b['block_m']} rows x {row} x 2 B = {b['q_tile']} B; a K tile and a V tile of "
                  f"{b['block_n']} rows = {b['kv_stage']} B a stage, {b['stages']} stage(s) in flight",
                  f"  the compile report: {b['smem']} B of shared memory a block ({shared}); {b['registers']} "
                  f"registers a thread, {b['spills']} B spilled",
                  f"  -> {b['occupancy']}",
                  f"  each K/V tile ({b['tile_bytes']} B from the L2 or DRAM) feeds {b['tile_flops'] / 1e6:.2f} MFLOP: "
                  f"{b['tile_flops'] / b['tile_bytes']:.0f} FLOP per byte copied (the block's query rows); each warp "
                  f"holds {b['scores_per_warp']} scores in registers at a time, never in memory"]
    return "\n".join(lines)


def live_rung(current: Mode) -> Rung:
    """The rung section 5 launches: the one lab.ops.attention sends an aligned D = 128 call to (the first of
    lab.ops.attn.FLASH_ORDER, fastest first as measured) among the rungs this GPU runs (LIVE) or the reference GPU
    runs (REPLAY); the last tiled rung where none of them runs."""
    from lab.core import device
    from lab.lessons.mode import runs_on
    from lab.ops.attn import FLASH_ORDER

    arch = device.current().arch if current.live else device.REFERENCE_ARCH
    by_key = {r.key: r for r in tiled_rungs()}
    for key in FLASH_ORDER:
        if key in by_key and runs_on(by_key[key], arch):
            return by_key[key]
    return tiled_rungs()[-1]


def runnable(rung: Rung, problem, out) -> tuple[Rung, list[str]]:
    """`rung`, or the tiled rung before it that takes the problem into `out` where it refuses (its sentence each)."""
    fam, said = family(), []
    candidates = [r for r in tiled_rungs() if r.number <= rung.number][::-1]
    for r in candidates:
        why = fam.refusal(r, problem, out)
        if why is None:
            return r, said
        said.append(why)
    raise LabError(" ".join(said) or f"no tiled attention rung takes {problem.label}.")


# ----------------------------------------------------------------------------------------------
# The records: the ladder against SDPA, head dims, decode, the sweep and the tail
# ----------------------------------------------------------------------------------------------

def is_decode(params: dict) -> bool:
    return params.get("S_q") == 1


def problem_label(params: dict) -> str:
    heads = f"H={params['H']}" + (f"/{params['H_kv']}" if params.get("H_kv", params["H"]) != params["H"] else "")
    return (f"B={params['B']} {heads} S_q={params['S_q']} S_k={params['S_k']} D={params['D']} {params['dtype']}"
            + (" causal" if params.get("causal") else ""))


def problems(rs: RecordSet) -> list[dict]:
    return list({describe_params(r.params): r.params for r in rs.records}.values())


def targets(rs: RecordSet) -> list[str]:
    """The ladder's rungs present in the records (in ladder order, then any other), the baseline last."""
    present = list(dict.fromkeys(r.rung for r in rs.records))
    order = [k for k in rung_keys() if k in present] + [k for k in present if k not in rung_keys() and k != BASELINE]
    return order + ([BASELINE] if BASELINE in present else [])


def at(rs: RecordSet, rung: str, params: dict) -> Record | None:
    found = rs.where(rung=rung, params=params)
    return found[0] if found else None


def ladder_table(rs: RecordSet | None) -> Markdown:
    """Per headline prefill problem: each rung's and the baseline's TFLOP/s, and each rung's share of the baseline
    timed on the same problem in the same run."""
    if rs is None:
        return md(missing("headline"))
    heads = [p for p in problems(rs) if not is_decode(p)]
    names = targets(rs)
    lines = [f"{FAMILY} headline, TFLOP/s (share of {BASELINE}, same run); {rs.label()}", "",
             "| problem | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    for params in heads:
        cells = []
        for name in names:
            rec = at(rs, name, params)
            cells.append("-" if rec is None else f"{rec.value:.1f}" if name == BASELINE
                         else f"{rec.value:.1f} ({rec.ratio:.1%})")
        lines.append(f"| {problem_label(params)} | " + " | ".join(cells) + " |")
    return md("\n".join(lines))


def best_share(rs: RecordSet | None) -> str:
    """The best rung's share of the baseline (the rung with the highest median share over the headline prefill
    problems, which need not be the last), lowest and highest over those problems."""
    if rs is None:
        return missing("headline")
    prefill = [r for r in rs.records if r.rung != BASELINE and not is_decode(r.params)]
    if not prefill:
        return f"no prefill records of the ladder in {rs.label()}"
    by_rung: dict[str, list] = {}
    for r in prefill:
        by_rung.setdefault(r.rung, []).append(r)
    best = max(by_rung, key=lambda k: statistics.median(r.ratio for r in by_rung[k]))
    recs = by_rung[best]
    low, high = min(recs, key=lambda r: r.ratio), max(recs, key=lambda r: r.ratio)
    return (f"the best rung, {best}: from {low.ratio:.1%} of {BASELINE} ({problem_label(low.params)}) to "
            f"{high.ratio:.1%} ({problem_label(high.params)}); {rs.label()}")


def causal_text(rs: RecordSet | None) -> str:
    """Causal against full attention, per rung and D: the time ratio (the FLOPs halve, so about 0.5 is the ideal)."""
    if rs is None:
        return missing("headline")
    lines = [f"causal time / full time, same shape (about half the FLOPs); {rs.label()}"]
    for params in problems(rs):
        if is_decode(params) or params.get("causal"):
            continue
        pair = dict(params, causal=1)
        cells = []
        for name in targets(rs):
            full, causal = at(rs, name, params), at(rs, name, pair)
            if full and causal:
                cells.append(f"{name} {causal.median_ms / full.median_ms:.2f}")
        if cells:
            lines.append(f"  {problem_label(params)}: " + ", ".join(cells))
    return "\n".join(lines)


SCHEDULE_SHAPES = ((2, 16, 4096), (4, 32, 4096), (2, 16, 8192), (16, 32, 1024))  # B, H, S: causal, D = 128
SCHEDULE_SMS = 132  # the H200's (and H100's) SMs
SCHEDULE_L2_BYTES = 60 * 1024 * 1024  # the H200's L2, which sizes the persistent build's sections


def schedule_table() -> Markdown:
    """A model, not a measurement (lab.families.attention_schedule): for causal problems on 132 SMs, the busiest
    SM's key tiles when the blocks are handed out in launch order, with each head's longest first, as a fixed share
    of the persistent build's order, and from its counter; the even share is the floor."""
    from lab.families.attention import section_heads
    from lab.families.attention_schedule import compare_orders

    lines = ["A model of the causal tail, not a measurement (`lab.families.attention_schedule`: every block's work is "
             f"its key tiles, nothing else counted; {SCHEDULE_SMS} SMs, D = 128, sections sized for a "
             f"{SCHEDULE_L2_BYTES // 2**20} MB L2): the busiest SM's key tiles under each hand-out.", "",
             "| B x H x S | sections of | even share | launch order | longest first | fixed share | counter |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for B, H, S in SCHEDULE_SHAPES:
        heads = section_heads({"B": B, "H": H, "S_k": S, "D": 128}, SCHEDULE_L2_BYTES)
        r = compare_orders(B, H, S, True, SCHEDULE_SMS, heads)
        lines.append(f"| {B} x {H} x {S} | {heads} heads | {r['even_share']:.0f} | {r['launch_order']} | "
                     f"{r['longest_first']} | {r['persistent_round_robin']} | {r['persistent_counter']} |")
    return md("\n".join(lines))


def head_dim_text(rs: RecordSet | None) -> str:
    """D = 64 against D = 128 on otherwise equal prefill problems: TFLOP/s per target."""
    if rs is None:
        return missing("headline")
    lines = [f"D = 64 against D = 128, TFLOP/s; {rs.label()}"]
    for params in problems(rs):
        if is_decode(params) or params["D"] != 128:
            continue
        other = dict(params, D=64)
        cells = []
        for name in targets(rs):
            a, b = at(rs, name, other), at(rs, name, params)
            if a and b:
                cells.append(f"{name} {a.value:.1f} -> {b.value:.1f}")
        if cells:
            lines.append(f"  {problem_label(other)} -> D=128: " + ", ".join(cells))
    return "\n".join(lines) if len(lines) > 1 else f"no D = 64 / D = 128 pairs in {rs.label()}"


def decode_text(rs: RecordSet | None) -> str:
    """The decode step (S_q = 1): each target's time, its bytes over its time (the step reads all of K and V once),
    and the baseline's time over each rung's."""
    if rs is None:
        return missing("headline")
    decode = [p for p in problems(rs) if is_decode(p)]
    if not decode:
        return f"no decode (S_q = 1) records in {rs.label()}"
    lines = [f"decode steps (S_q = 1): median time, bytes moved (Q, K, V, O) / time; {rs.label()}"]
    sms = rs.provenance.get("sm_count")
    for params in decode:
        blocks = [f"{r.key} {np.prod(family().grid(r, params))}" for r in tiled_rungs()]
        rows = " or ".join(f"{family().rows_per_block(r)} ({r.key})" for r in tiled_rungs())
        lines.append(f"  {problem_label(params)}: blocks a launch {', '.join(blocks)}, on {sms} SMs; each block has "
                     f"1 busy query row of its {rows} and walks all {params['S_k']} keys alone")
        base = at(rs, BASELINE, params)
        for name in targets(rs):
            rec = at(rs, name, params)
            if rec is None:
                continue
            vs = ("" if base is None or name == BASELINE else
                  f", {base.median_ms / rec.median_ms:.2f} of {BASELINE}'s speed")
            lines.append(f"    {name:16s} {rec.median_ms:.3f} ms, {rec.bytes_moved / rec.median_ms / 1e6:.0f} GB/s"
                         + vs)
    return "\n".join(lines)


def sweep_text(rs: RecordSet | None) -> str:
    if rs is None:
        return missing("sweep")
    lines = [f"sequence-length sweep, each rung's share of {BASELINE} (same run); {rs.label()}"]
    for params in sorted(problems(rs), key=lambda p: p["S_k"]):
        cells = [f"{name} {rec.ratio:.1%}" for name in targets(rs) if name != BASELINE
                 and (rec := at(rs, name, params)) is not None]
        lines.append(f"  S={params['S_k']}: " + ", ".join(cells))
    return "\n".join(lines)


def tail_text(rs: RecordSet | None) -> str:
    if rs is None:
        return missing("tail")
    lines = [f"tail (S stepping by one), TFLOP/s of each rung; {rs.label()}"]
    for name in targets(rs):
        recs = sorted((r for r in rs.records if r.rung == name), key=lambda r: r.params["S_k"])
        if recs:
            low = min(recs, key=lambda r: r.value)
            high = max(recs, key=lambda r: r.value)
            lines.append(f"  {name}: from {low.value:.1f} (S={low.params['S_k']}) to {high.value:.1f} "
                         f"(S={high.params['S_k']})")
    return "\n".join(lines)


def gpu_sms(current: Mode, rs: RecordSet | None) -> str:
    """'132 SMs (this GPU)' in LIVE mode, the replayed records' GPU's in REPLAY, or that it is unknown here."""
    if current.live:
        from lab.core import device

        return f"{device.current().sm_count} SMs (this GPU)"
    if rs is not None and rs.provenance.get("sm_count"):
        return f"{rs.provenance['sm_count']} SMs ({rs.provenance.get('device', '?')}, the records' GPU)"
    return "an SM count unknown here (no GPU, no records)"


def show(fn: Callable, rs: RecordSet | None, kind: str) -> None:
    """A figure of lab.lessons.plots.attention shown inline, or the sentence naming the missing record."""
    from lab.lessons.views import figure

    if rs is None:
        print(missing(kind))
        return
    figure(fn(rs), f"the {kind} records hold nothing for {fn.__name__}")


# ----------------------------------------------------------------------------------------------
# SDPA is several kernels: the ladder beside each backend (lab.studies.attention_study)
# ----------------------------------------------------------------------------------------------

STUDY = "attention_study"  # results/h200/attention_study.json, `python -m lab.studies.attention_study OUT_DIR`


def study_missing() -> str:
    where = shown_path(records.reference_dir())
    return (f"NO RECORDS for {STUDY}: neither {where}/{STUDY}.json nor a {STUDY}_<commit>.json is there (or none is "
            f"readable), so this cell shows nothing. On a GPU with PyTorch, `python -m lab.studies.{STUDY} {where}` "
            "records it.")


def _read_study(path) -> dict | None:
    from lab.studies.attention_study import read_record

    record = read_record(path)
    return None if record is None else record | {"file": shown_path(path)}


def load_study() -> dict | None:
    """The newest attention_study record (its provenance and per-shape summary) of the reference GPU's folder and
    of an H100's beside it (results/h100: the study's latest run may have landed on one; the record names its GPU),
    else the most recent attention_study_<commit>.json of the reference GPU (a record kept from an earlier commit);
    None when there is none shaped like one."""
    from lab.studies.attention_study import newest_record

    current = newest_record()
    if current is not None:
        record, path = current
        return record | {"file": shown_path(path)}
    kept = [r for r in map(_read_study, sorted(records.reference_dir().glob(f"{STUDY}_*.json"))) if r is not None]
    return max(kept, key=lambda r: str(r["provenance"].get("date", "")), default=None)


def study_label(study: dict) -> str:
    return f"REPLAYED on {describe_provenance(study['provenance'])}, {study.get('file', STUDY)}"


def study_commit_note(study: dict | None) -> str:
    """Whether the study was made at this checkout's commit: a record kept from an earlier one timed the rungs as
    they were then (their knobs and sources may have changed since)."""
    if study is None:
        return study_missing()
    made = str(study["provenance"].get("commit", "?"))
    here = records.git_commit()
    if made[:12] == here[:12]:
        return f"{study.get('file', STUDY)} was made at this checkout's commit ({here[:12]})."
    return (f"{study.get('file', STUDY)} was made at commit {made[:12]}; this checkout is {here[:12]}: its rung rows "
            "are the rungs as they were then (their knobs and sources may have changed since), its SDPA rows are "
            "PyTorch's as installed then.")


def study_shape_label(shape: dict) -> str:
    return (f"B={shape['B']} H={shape['H']} S={shape['S']} D={shape['D']} {shape['dtype']}"
            + (" causal" if shape.get("causal") else ""))


def study_table(study: dict | None) -> Markdown:
    """Per shape: each method's TFLOP/s (median over rounds) and its time against cuDNN's and the flash backend's in
    the same round (above 1: faster than that backend)."""
    if study is None:
        return md(study_missing())
    lines = [f"each method's TFLOP/s; cuDNN's time / its time; the flash backend's time / its time "
             f"({study_label(study)})",
             "", "| shape | method | TFLOP/s | x cuDNN | x flash |", "|---|---|---:|---:|---:|"]
    ratio = lambda x: "-" if x is None else f"{x:.2f}"  # noqa: E731
    for s in study["summary"]:
        lines.append(f"| {study_shape_label(s['shape'])} | {s['method']} | {s['TFLOP/s']:.1f} | "
                     f"{ratio(s.get('x_sdpa_cudnn'))} | {ratio(s.get('x_sdpa_flash'))} |")
    notes = [f"{k}: {v}" for k in ("failed", "refused") for v in study.get(k) or []]
    return md("\n".join(lines + ([""] + notes if notes else [])))


def persistent_table(study: dict | None) -> Markdown:
    """Per shape of the study: rung 05 with one block a query block (PERSISTENT = 0) and one block an SM (1), median
    TFLOP/s over the rounds, the persistent build's speed over the other (a ratio of the medians), and which one the
    rung's default build was when the record was made (the other is the study's `05 PERSISTENT=...` row)."""
    if study is None:
        return md(study_missing())
    lines = [f"rung 05 one block a query block (PERSISTENT = 0) and one block an SM (1), median TFLOP/s "
             f"({study_label(study)})", "",
             "| shape | PERSISTENT = 0 | PERSISTENT = 1 | 1 over 0 | default then |", "|---|---:|---:|---:|---:|"]
    by_shape: dict[str, dict[str, float]] = {}
    for s in study["summary"]:
        by_shape.setdefault(study_shape_label(s["shape"]), {})[s["method"]] = s["TFLOP/s"]
    for label, methods in by_shape.items():
        default = methods.get("05_pingpong")
        for other, value in ((0, methods.get("05 PERSISTENT=0")), (1, methods.get("05 PERSISTENT=1"))):
            if default is None or value is None:
                continue
            speeds = {other: value, 1 - other: default}
            lines.append(f"| {label} | {speeds[0]:.0f} | {speeds[1]:.0f} | {speeds[1] / speeds[0]:.2f}x | "
                         f"{1 - other} |")
    return md("\n".join(lines))


VARLEN_STUDY = "varlen_attention_study"


def load_varlen_study() -> dict | None:
    """The newest varlen_attention_study record (results/h200, or an H100's in results/h100), or None."""
    from lab.studies.varlen_attention_study import newest_record

    found = newest_record()
    return None if found is None else found[0] | {"file": shown_path(found[1])}


def varlen_missing() -> str:
    where = shown_path(records.reference_dir())
    return (f"NO RECORDS for {VARLEN_STUDY}: no {VARLEN_STUDY}.json in {where} or beside it in results/h100, so this "
            f"cell shows nothing. On an sm_90 GPU with PyTorch, `python -m lab.studies.{VARLEN_STUDY} {where}` "
            "records it.")


def varlen_table(study: dict | None) -> Markdown:
    """Per batch: the share of the padded work that is real, then each method's useful TFLOP/s and its time over the
    packed kernel's in the same round."""
    if study is None:
        return md(varlen_missing())
    label = f"REPLAYED on {describe_provenance(study['provenance'])}, {study.get('file', VARLEN_STUDY)}"
    shares = {tuple(sorted(b["batch"].items())): b["real_share_of_padded_work"] for b in study.get("batches", [])}
    lines = [f"useful TFLOP/s (each sequence's own work over the time) and time over the packed kernel's ({label})",
             "", "| batch | real share of padded work | method | TFLOP/s | time x packed |", "|---|---:|---|---:|---:|"]
    for s in study["summary"]:
        b = s["batch"]
        share = shares.get(tuple(sorted(b.items())))
        lines.append(f"| {b['mix']} B={b['B']} {b['dtype']} | {'-' if share is None else f'{share:.3f}'} | "
                     f"{s['method']} | {s['TFLOP/s']:.1f} | {s['time_x_lab_varlen']:.2f} |")
    notes = [f"not timed: {r}" for r in study.get("refused") or []]
    return md("\n".join(lines + ([""] + notes if notes else [])))


def varlen_reading(study: dict | None) -> str:
    """Per batch, the packed kernel against the best padded method and against PyTorch's varlen function."""
    if study is None:
        return varlen_missing()
    out = ["the packed kernel against the fastest padded method and PyTorch's varlen_attn, same rounds:"]
    batches = list({tuple(sorted(s["batch"].items())): s["batch"] for s in study["summary"]}.values())
    for batch in batches:
        rows = {s["method"]: s for s in study["summary"] if s["batch"] == batch}
        padded = [s for name, s in rows.items() if name.endswith("_padded")]
        if "lab_varlen" not in rows or not padded:
            continue
        best = min(padded, key=lambda s: s["time_x_lab_varlen"])
        text = (f"  {batch['mix']} B={batch['B']} {batch['dtype']}: {rows['lab_varlen']['TFLOP/s']:.0f} useful "
                f"TFLOP/s; {best['method']} takes {best['time_x_lab_varlen']:.2f}x its time (lowest round "
                f"{best['time_x_lab_varlen_min']:.2f}x)")
        if "torch_varlen" in rows:
            text += f", varlen_attn {rows['torch_varlen']['time_x_lab_varlen']:.2f}x"
        out.append(text)
    return "\n".join(out)


def study_reading(study: dict | None) -> str:
    """Per shape, the fastest rung setting in the study and its speed against the flash backend and cuDNN."""
    if study is None:
        return study_missing()
    lines = [f"the fastest rung setting per shape, against SDPA's backends ({study_label(study)}):"]
    shapes = list({study_shape_label(s["shape"]): s["shape"] for s in study["summary"]}.items())
    for label, shape in shapes:
        mine = [s for s in study["summary"] if s["shape"] == shape and s["method"][:2].isdigit()]
        if not mine:
            continue
        best = max(mine, key=lambda s: s["TFLOP/s"])
        names = {"flash": "the flash backend's", "cudnn": "cuDNN's"}
        vs = ", ".join(f"{best[f'x_sdpa_{b}']:.2f} of {name} speed" for b, name in names.items()
                       if best.get(f"x_sdpa_{b}") is not None)
        lines.append(f"  {label}: {best['method']} at {best['TFLOP/s']:.1f} TFLOP/s, {vs}")
    return "\n".join(lines)
