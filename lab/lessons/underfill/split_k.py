"""Notebook 05, part 1: split-K (gemm_tc rung 08, the gemm_split_k family) on long K and few output tiles. The
predictions (tiles, units, rounds, slices: arithmetic on the shapes and the launcher), the factor study's tables,
Nsight Compute's split of the time between the split kernel and the reduction, and the reading of the records
against the prediction."""

from __future__ import annotations

from collections.abc import Iterable

from lab.lessons.common import describe_provenance
from lab.lessons.underfill.facts import CopyModel, TileRate
from lab.lessons.underfill.records import (
    BK,
    CUBLAS,
    PLAIN_RUNG,
    SPLIT_FACTORS,
    SPLIT_FAMILY,
    SPLIT_MODES,
    SPLIT_NCU,
    SPLIT_SHAPES,
    TARGETS,
    dash_or,
    meets,
    missing,
    problems_of,
    provenance_of,
    shape_label,
    source,
)
from lab.measure.records import RecordSet
from lab.tools import ncu as nsight_compute

# ----------------------------------------------------------------------------------------------
# 1. Split-K: predictions
# ----------------------------------------------------------------------------------------------

def split_tile(M: int, N: int) -> tuple[int, int]:
    """The tile gemm_split_k's launcher runs (every rung, rung 06 included): 128 x 128 where narrow_tiles says so,
    else 128 x 256."""
    from lab.families.gemm_split_k import narrow_tiles

    return 128, (128 if narrow_tiles(M, N) else 256)


def launcher_splits(shape: dict, sm_count: int) -> int:
    """S as the launcher picks it (lab.families.gemm_split_k.choose_splits, clamped to the k-steps)."""
    from lab.families.gemm_split_k import choose_splits

    bm, bn = split_tile(shape["M"], shape["N"])
    return max(1, min(choose_splits(shape["M"], shape["N"], shape["K"], bm, bn, sm_count), -(-shape["K"] // BK)))


def gemm_bytes(shape: dict) -> int:
    """A and B read once, C written once, 2 bytes each: the fewest DRAM bytes a fp16 GEMM moves."""
    M, N, K = shape["M"], shape["N"], shape["K"]
    return 2 * (M * K + N * K + M * N)


def slice_bytes(shape: dict, splits: int) -> int:
    """The fp32 workspace slices of modes 0 and 1: S x M x LDW floats written, then read back once."""
    ldw = -(-shape["N"] // 4) * 4
    return 2 * 4 * splits * shape["M"] * ldw


def tile_for_splits(shape: dict, splits: int, sm_count: int) -> tuple[int, int]:
    """The tile a record that ran `splits` most likely used: the current launcher's, unless only the other width's
    one-wave split (choose_splits) gives that S (records made before the launcher chose narrow tiles)."""
    from lab.families.gemm_split_k import choose_splits

    current = split_tile(shape["M"], shape["N"])
    other = (128, 384 - current[1])
    picks = {tile: choose_splits(shape["M"], shape["N"], shape["K"], *tile, sm_count) for tile in (current, other)}
    return other if picks[current] != splits and picks[other] == splits else current


def split_prediction(shape: dict, splits: int, sm_count: int, copy: CopyModel | None,
                     rate: TileRate | None, tile: tuple[int, int] | None = None) -> dict:
    """Split-K at S = `splits`: (tile, split) units over the SMs, the busiest SM's k-steps at rung 06's rate
    (compute), and the bytes at the device copy's speed, without (low) and with (high) the slices going through
    DRAM. The predicted time is the larger of compute and bytes: a range, since the slices may stay in the L2.
    `tile`: the launcher's (split_tile) unless given."""
    bm, bn = tile or split_tile(shape["M"], shape["N"])
    tiles = -(-shape["M"] // bm) * -(-shape["N"] // bn)
    k_tiles = -(-shape["K"] // BK)
    units = tiles * splits
    rounds = -(-units // sm_count)
    ksteps = rounds * -(-k_tiles // splits)
    out = {"S": splits, "tile": (bm, bn), "tiles": tiles, "k_tiles": k_tiles, "units": units,
           "busy_sms": min(units, sm_count), "ksteps": ksteps, "bytes": gemm_bytes(shape),
           "slices": slice_bytes(shape, splits), "flops": 2 * shape["M"] * shape["N"] * shape["K"]}
    out["compute_us"] = ksteps * rate.kstep_us(bm, bn) if rate else None
    if copy is not None:
        out["bytes_us"] = (copy.time_us(out["bytes"]), copy.time_us(out["bytes"] + out["slices"]))
    else:
        out["bytes_us"] = None
    if out["compute_us"] is not None and out["bytes_us"] is not None:
        fast, slow = (max(out["compute_us"], b) for b in out["bytes_us"])
        out["tflops"] = (out["flops"] / (slow * 1e6), out["flops"] / (fast * 1e6))
    else:
        out["tflops"] = None
    return out


def split_shapes(sm_count: int) -> str:
    """Why rung 06 underuses the GPU on the K-heavy shapes: its tiles against the SMs (in gemm_tc, 128 x 256; in
    gemm_split_k, the tile the launcher picks), and what the launcher's S turns them into."""
    lines = [f"{'shape':18s} {'tile':>8s} {'tiles':>6s} {'SMs busy':>9s} {'k-steps/tile':>13s} {'FLOP/byte':>10s} "
             f"{'S':>4s} {'units':>6s} {'k-steps/unit':>13s}"]
    for shape in SPLIT_SHAPES:
        s = launcher_splits(shape, sm_count)
        for bm, bn in dict.fromkeys([(128, 256), split_tile(shape["M"], shape["N"])]):
            tiles = -(-shape["M"] // bm) * -(-shape["N"] // bn)
            k_tiles = -(-shape["K"] // BK)
            intensity = 2 * shape["M"] * shape["N"] * shape["K"] / gemm_bytes(shape)
            launcher = (bm, bn) == split_tile(shape["M"], shape["N"])
            split = (f"{s:4d} {tiles * s:6d} {-(-(tiles * s) // sm_count) * -(-k_tiles // s):13d}" if launcher
                     else f"{'':4s} {'':6s} {'':13s}")
            busy = f"{min(tiles, sm_count):4d}/{sm_count:<4d}"
            lines.append(f"{shape_label(shape):18s} {bm:>4d}x{bn:<3d} {tiles:6d} {busy} {k_tiles:13d} "
                         f"{intensity:10.0f} {split}")
    lines.append(f"S = 1 (rung 06) keeps 'SMs busy' of the {sm_count} SMs working, each through every k-step of its "
                 "tile; the split-K launcher's S (on its own tile) gives every SM a unit of about k-steps / S.")
    return "\n".join(lines)


def split_prediction_table(sm_count: int, copy: CopyModel | None, rate: TileRate | None) -> str:
    """At the launcher's S and at S = 1: compute time, byte time (slices in L2 / through DRAM), and the TFLOP/s
    the larger of the two allows."""
    if copy is None or rate is None:
        return "\n".join(m for m in (copy is None and missing("copy"), rate is None and missing("gemm_tc")) if m)
    lines = [f"{'shape':18s} {'S':>4s} {'compute us':>11s} {'bytes MB':>9s} {'+slices MB':>11s} {'bytes us':>13s} "
             f"{'predicted TFLOP/s':>18s}"]
    for shape in SPLIT_SHAPES:
        for s in sorted({1, launcher_splits(shape, sm_count)}):
            p = split_prediction(shape, s, sm_count, copy, rate)
            lo, hi = p["bytes_us"]
            lines.append(f"{shape_label(shape):18s} {s:4d} {p['compute_us']:11.1f} {p['bytes'] / 1e6:9.1f} "
                         f"{p['slices'] / 1e6:11.1f} {lo:6.1f}-{hi:<6.1f} "
                         f"{p['tflops'][0]:8.0f}-{p['tflops'][1]:<8.0f}")
    return "\n".join(lines)


def split_predicted_curves(sm_count: int, copy: CopyModel | None, rate: TileRate | None,
                           factors: Iterable[int] | None = None, payload: dict | None = None) -> dict[str, list[dict]]:
    """split_prediction at every S of `factors` (default lab.studies.split_k.FACTORS) per shape, for the factor
    figure; on
    the tile the payload's workspace mode ran (tile_for_splits of its 'auto' S) where a payload is given."""
    if copy is None or rate is None:
        return {}
    if factors is None:
        from lab.studies.split_k import FACTORS as factors
    ran = {(r["M"], r["N"], r["K"]): r.get(f"{SPLIT_MODES[0]}_splits") for r in _rows(payload, "auto")}
    out = {}
    for shape in SPLIT_SHAPES:
        k_tiles = -(-shape["K"] // BK)
        s = ran.get((shape["M"], shape["N"], shape["K"]))
        tile = tile_for_splits(shape, int(s), sm_count) if s else None
        out[shape_label(shape)] = [split_prediction(shape, f, sm_count, copy, rate, tile) for f in factors
                                   if f <= k_tiles]
    return out


# ----------------------------------------------------------------------------------------------
# 1. Split-K: the records
# ----------------------------------------------------------------------------------------------

def _rows(payload: dict | None, kind: str) -> list[dict]:
    return [r for r in (payload or {}).get("rows", []) if r.get("kind") == kind]


def variants(payload: dict | None) -> list[str]:
    """The split rungs and knob variants a factor study timed (the keys of its rows' tflops), modes first."""
    keys = [k for r in _rows(payload, "factor") + _rows(payload, "auto") for k in r.get("tflops", {})]
    keys = [k for k in dict.fromkeys(keys) if k not in (CUBLAS, PLAIN_RUNG)]
    return [k for k in SPLIT_MODES if k in keys] + [k for k in keys if k not in SPLIT_MODES]


def split_auto_table(payload: dict | None, name: str = SPLIT_FACTORS) -> str:
    """Each variant at the launcher's own S beside cuBLAS and rung 06 in the same run, per shape (and padded rows
    where timed), against the target."""
    if payload is None:
        return missing(name)
    rows = _rows(payload, "auto")
    if not rows:
        return f"(no rows of kind 'auto' in {name})"
    lines = [source(payload, name)]
    for row in rows:
        t = row["tflops"]
        pad = f", rows padded by {row['pad']}" if row.get("pad") else ""
        lines.append(f"{shape_label(row)}{pad}: cuBLAS {t.get(CUBLAS, float('nan')):.0f} TFLOP/s, rung 06 (S = 1) "
                     f"{t.get(PLAIN_RUNG, float('nan')):.0f}")
        lines.append(f"  {'variant':34s} {'S':>4s} {'TFLOP/s':>8s} {'x cuBLAS':>9s} {'x rung 06':>10s}")
        for key in variants(payload):
            if key not in t:
                continue
            lines.append(f"  {key:34s} {row.get(f'{key}_splits', 0):4d} {t[key]:8.0f} "
                         f"{t[key] / t[CUBLAS]:9.3f} {t[key] / t[PLAIN_RUNG]:10.1f}")
    return "\n".join(lines)


def split_targets(payload: dict | None, name: str = SPLIT_FACTORS) -> str:
    """The lesson's split-K target at each shape (unpadded rows): the fastest reduction mode, and the fastest variant
    of any kind, against cuBLAS in the same run."""
    if payload is None:
        return missing(name)
    lines = []
    for row in (r for r in _rows(payload, "auto") if not r.get("pad")):
        t = row["tflops"]
        modes = [k for k in SPLIT_MODES if k in t]
        if not modes or CUBLAS not in t:
            continue
        best_mode = max(modes, key=t.get)
        best = max(variants(payload), key=lambda k: t.get(k, 0.0))
        x = t[best_mode] / t[CUBLAS]
        lines.append(f"{shape_label(row)}: fastest mode {best_mode} {t[best_mode]:.0f} TFLOP/s = {x:.3f}x cuBLAS, "
                     f"{meets(x, TARGETS['split_x_cublas'])}; fastest variant {best} {t[best] / t[CUBLAS]:.3f}x")
    return "\n".join(lines) or f"(no unpadded 'auto' rows with cuBLAS in {name})"


def best_factors(payload: dict | None, name: str = SPLIT_FACTORS) -> str:
    """Per shape and variant: the S that ran fastest in the factor sweep, against the launcher's own S."""
    if payload is None:
        return missing(name)
    rows = _rows(payload, "factor")
    if not rows:
        return f"(no factor rows in {name})"
    auto = {(r["M"], r["N"], r["K"]): r for r in _rows(payload, "auto") if not r.get("pad")}
    lines = [f"{'shape':18s} {'variant':34s} {'best S':>7s} {'TFLOP/s':>8s} {'launcher S':>11s} {'TFLOP/s':>8s}"]
    for key3 in dict.fromkeys((r["M"], r["N"], r["K"]) for r in rows):
        mine = [r for r in rows if (r["M"], r["N"], r["K"]) == key3]
        a = auto.get(key3, {})
        for v in variants(payload):
            timed = [r for r in mine if v in r["tflops"]]
            if not timed:
                continue
            best = max(timed, key=lambda r: r["tflops"][v])
            own = a.get("tflops", {}).get(v)
            lines.append(f"{'x'.join(map(str, key3)):18s} {v:34s} {best['splits']:7d} {best['tflops'][v]:8.0f} "
                         f"{a.get(f'{v}_splits', 0):11d} {dash_or(own, '8.0f')}")
    return "\n".join(lines)


def determinism_table(payload: dict | None, name: str = SPLIT_FACTORS) -> str:
    """Each mode run many times at its own S on the same inputs: how many output elements changed bits against
    the first run, and by how many units in the last place at most."""
    if payload is None:
        return missing(name)
    rows = payload.get("determinism") or []
    if not rows:
        return f"(no determinism rows in {name})"
    lines = [f"{'shape':18s} {'mode':22s} {'S':>4s} {'runs':>5s} {'runs that differ':>17s} "
             f"{'elements differing per run':>27s} {'max ULPs':>9s}"]
    for d in rows:
        per = d.get("differing_per_run") or [0]
        spread = f"{min(per)}-{max(per)} of {d['elements']}"
        lines.append(f"{shape_label(d):18s} {d['rung']:22s} {d['splits']:4d} {d['runs']:5d} "
                     f"{d['runs_with_differences']:17d} {spread:>27s} {d['max_ulps']:9d}")
    same = [d["rung"] for d in rows if d["runs_with_differences"] == 0]
    moved = [d["rung"] for d in rows if d["runs_with_differences"]]
    lines.append(f"the same bits on every run: {', '.join(dict.fromkeys(same)) or 'none'}; "
                 f"bits that change from run to run: {', '.join(dict.fromkeys(moved)) or 'none'}")
    return "\n".join(lines)


# --- Nsight Compute: the split kernel and the reduction kernel apart ------------------------------------------

SPLIT_KERNEL, REDUCE_KERNEL = "gemm_tc_split_k", "gemm_tc_split_k_reduce"
_NCU_METRICS = {"us": "gpu__time_duration.sum", "read": "dram__bytes_read.sum", "write": "dram__bytes_write.sum",
                "l2_hit_pct": "lts__t_sector_hit_rate.pct"}


def ncu_kernels(rows: Iterable[str]) -> list[dict]:
    """The stored CSV rows (one metric each, kept without ncu's header line: read with its column names) as one
    dict per profiled kernel, in profiling order: durations in microseconds, bytes, the L2 hit rate in percent."""
    kernels = []
    for launch in nsight_compute.parse(rows, columns=nsight_compute.COLUMNS):
        counters = launch.named(_NCU_METRICS)
        if "us" in counters:
            counters["us"] /= 1e3  # from nanoseconds, ncu's base unit
        if counters:
            kernels.append({"name": launch.kernel, "grid": launch.columns.get("Grid Size"), **counters})
    return kernels


def ncu_launches(payload: dict | None) -> list[dict] | None:
    """split_k_ncu.json's kernels grouped into launches (a split kernel, then the reduction kernel in mode 0),
    and each launch named by shape and mode from the script's order: per shape, each mode twice. The second
    launch of each pair is kept. None when the rows do not fit that order."""
    if payload is None:
        return None
    launches: list[list[dict]] = []
    for k in ncu_kernels(payload.get("rows", [])):
        if k["name"] == REDUCE_KERNEL and launches:
            launches[-1].append(k)
        else:
            launches.append([k])
    shapes = payload.get("shapes") or list(SPLIT_SHAPES)
    if len(launches) != 2 * len(SPLIT_MODES) * len(shapes):
        return None
    out = []
    for i, shape in enumerate(shapes):
        for j, mode in enumerate(SPLIT_MODES):
            split, *reduce = launches[(i * len(SPLIT_MODES) + j) * 2 + 1]
            red = reduce[0] if reduce else {}
            out.append({**{k: shape[k] for k in ("M", "N", "K")}, "mode": mode, "split_us": split.get("us", 0.0),
                        "split_read": split.get("read", 0.0), "split_write": split.get("write", 0.0),
                        "reduce_us": red.get("us", 0.0), "reduce_read": red.get("read", 0.0),
                        "reduce_write": red.get("write", 0.0), "split_l2_hit_pct": split.get("l2_hit_pct")})
    return out


def _recorded_splits(shape: dict, mode: str, commit: str, factors: dict | None, bench: RecordSet | None,
                     sm_count: int) -> tuple[int, str]:
    """The S a mode ran at `shape` in a run of `commit`: from the gemm_split_k records or the factor study of the
    same commit, else the current launcher's (marked with '*')."""
    key = (shape["M"], shape["N"], shape["K"])
    if bench is not None and str(bench.provenance.get("commit")) == commit:
        for r in bench.records:
            if r.rung == mode and (r.params.get("M"), r.params.get("N"), r.params.get("K")) == key \
                    and r.params.get("dtype", "float16") == "float16" and "splits" in r.extra:
                return int(r.extra["splits"]), ""
    if factors is not None and str(provenance_of(factors).get("commit")) == commit:
        for r in _rows(factors, "auto"):
            if (r["M"], r["N"], r["K"]) == key and not r.get("pad") and f"{mode}_splits" in r:
                return int(r[f"{mode}_splits"]), ""
    return launcher_splits(shape, sm_count), "*"


def ncu_table(payload: dict | None, factors: dict | None, bench: RecordSet | None, sm_count: int,
              name: str = SPLIT_NCU) -> str:
    """Per shape and mode: the split kernel's and the reduction kernel's durations and DRAM bytes, against the
    bytes the shape must read (A and B) and the slices its S writes; cuBLAS's timed GEMM beside them where the
    factor study ran the same shape on the same device."""
    if payload is None:
        return missing(name)
    launches = ncu_launches(payload)
    if not launches:
        return f"{source(payload, name)}\n(its rows do not follow the script's order of launches: nothing to split)"
    same_device = factors is not None and provenance_of(factors).get("device") == provenance_of(payload).get("device")
    cublas = {(r["M"], r["N"], r["K"]): r["cublas_ms"] * 1e3 for r in _rows(factors, "auto") if not r.get("pad")}
    commit = str(provenance_of(payload).get("commit"))
    lines = [source(payload, name), "Nsight Compute flushes the caches before each kernel it profiles (its default), "
             "so the reduction kernel's slices come from DRAM here.",
             f"  {'shape':18s} {'mode':22s} {'split us':>9s} {'reduce us':>10s} {'total us':>9s} {'cuBLAS us':>10s} "
             f"{'split reads MB':>15s} {'A+B MB':>7s} {'reduce reads MB':>16s} {'S':>4s} {'slices MB':>10s}"]
    guessed = False
    for row in launches:
        shape = {k: row[k] for k in ("M", "N", "K")}
        s, mark = _recorded_splits(shape, row["mode"], commit, factors, bench, sm_count)
        guessed |= bool(mark)
        cb = cublas.get((row["M"], row["N"], row["K"])) if same_device else None
        lines.append(f"  {shape_label(row):18s} {row['mode']:22s} {row['split_us']:9.1f} {row['reduce_us']:10.1f} "
                     f"{row['split_us'] + row['reduce_us']:9.1f} {dash_or(cb, '10.1f')} "
                     f"{row['split_read'] / 1e6:15.1f} {gemm_bytes(shape) / 1e6:7.1f} "
                     f"{row['reduce_read'] / 1e6:16.1f} {s:>3d}{mark:1s} {slice_bytes(shape, s) / 2e6:10.1f}")
    lines.append("('slices MB': S x M x N fp32, written once by the split kernel and read once by the reduction"
                 + ("; S marked '*' is the current launcher's, no record of the profiled commit names it)" if guessed
                    else "; S as the records of the profiled commit name it)"))
    return "\n".join(lines)


def split_time_shares(payload: dict | None, name: str = SPLIT_NCU) -> str:
    """The workspace mode's time split: the split kernel's share (the mainloop and the slice stores) against the
    reduction kernel's, and each kernel's DRAM rate."""
    launches = ncu_launches(payload)
    if payload is None:
        return missing(name)
    if not launches:
        return "(no launches to split)"
    lines = []
    for row in (r for r in launches if r["mode"] == SPLIT_MODES[0]):
        total = row["split_us"] + row["reduce_us"]
        rate = (row["split_read"] + row["split_write"]) / (row["split_us"] * 1e3)
        lines.append(f"{shape_label(row)}: the split kernel takes {row['split_us'] / total:.0%} of the workspace "
                     f"mode's {total:.1f} us and moves {rate:.0f} GB/s through DRAM; the reduction kernel "
                     f"{row['reduce_us'] / total:.0%}")
    return "\n".join(lines)


def split_bench_table(rs: RecordSet | None, name: str = SPLIT_FAMILY) -> str:
    """`lab bench gemm_split_k` (headline): each rung at each shape and type, against cuBLAS (the library
    baseline, timed in the same run)."""
    if rs is None:
        return missing(name)
    lines = [source(rs, name)]
    heads = [r for r in rs.records if r.kind == "headline"]
    for params in problems_of(heads):
        mine = [r for r in heads if r.params == params]
        ceiling = next((r for r in mine if r.rung == r.ceiling), None)
        label = f"{shape_label(params)} {params.get('dtype', '')}"
        parts = [f"{r.rung} {r.value:.0f} ({r.ratio:.2f}x, S={r.extra.get('splits', 1)})"
                 for r in mine if r.rung != r.ceiling]
        lines.append(f"  {label:28s} cuBLAS {ceiling.value if ceiling else float('nan'):.0f} TFLOP/s; "
                     + "; ".join(parts))
    return "\n".join(lines)


def split_reading(factors: dict | None, ncu: dict | None, copy: CopyModel | None, rate: TileRate | None,
                  sm_count: int) -> str:
    """Per shape: the fastest mode against cuBLAS and against its predicted range (at the S it ran); where Nsight
    Compute profiled the same shape, the split kernel's time against the copy's time for A and B's bytes, and the
    reduction kernel's share."""
    if factors is None:
        return missing(SPLIT_FACTORS)
    launches = {(r["M"], r["N"], r["K"], r["mode"]): r for r in ncu_launches(ncu) or []}
    lines = []
    for row in (r for r in _rows(factors, "auto") if not r.get("pad")):
        t = row["tflops"]
        modes = [k for k in SPLIT_MODES if k in t]
        if not modes or CUBLAS not in t:
            continue
        shape = {k: row[k] for k in ("M", "N", "K")}
        best = max(modes, key=t.get)
        x = t[best] / t[CUBLAS]
        line = (f"{shape_label(shape)}: {best} {t[best]:.0f} TFLOP/s, {x:.2f}x cuBLAS "
                f"({'at or above' if x >= TARGETS['split_x_cublas'] else 'below'} the lesson's target)")
        splits = int(row.get(f"{best}_splits") or launcher_splits(shape, sm_count))
        tile = tile_for_splits(shape, splits, sm_count)
        p = split_prediction(shape, splits, sm_count, copy, rate, tile)
        if p["tflops"]:
            lo, hi = p["tflops"]
            where = "inside" if lo <= t[best] <= hi else "below" if t[best] < lo else "above"
            line += (f"; predicted {lo:.0f}-{hi:.0f} at S = {splits} ({tile[0]} x {tile[1]} tiles): {where} the "
                     "prediction")
        lines.append(line)
        ran = launches.get((shape["M"], shape["N"], shape["K"], SPLIT_MODES[0]))
        if ran and copy:
            floor = copy.time_us(gemm_bytes(shape))
            lines.append(f"  Nsight Compute: the workspace mode's split kernel {ran['split_us']:.1f} us, "
                         f"{ran['split_us'] / floor:.2f}x the copy's {floor:.1f} us for A and B's bytes; the "
                         f"reduction kernel adds {ran['reduce_us']:.1f} us "
                         f"({ran['reduce_us'] / (ran['split_us'] + ran['reduce_us']):.0%} of the two)")
    return "\n".join(lines) or f"(no unpadded 'auto' rows with cuBLAS in {SPLIT_FACTORS})"


def show_kernel_times(ncu: dict | None, factors: dict | None) -> None:
    """lab.lessons.plots.split_kernel_times on the Nsight Compute launches, cuBLAS's time from the factor study where
    it was
    made on the same device."""
    from lab.lessons import plots
    from lab.lessons.views import figure

    if ncu is None:
        print(missing(SPLIT_NCU))
        return
    cublas = {}
    if factors is not None and provenance_of(factors).get("device") == provenance_of(ncu).get("device"):
        cublas = {shape_label(r): r["cublas_ms"] * 1e3 for r in _rows(factors, "auto") if not r.get("pad")}
    tag = "REPLAYED from" if ncu.get("replayed") else "measured on"
    title = f"{tag} {describe_provenance(ncu['provenance'])}"
    figure(plots.split_kernel_times(ncu_launches(ncu) or [], cublas, title),
           f"{SPLIT_NCU}'s rows do not follow the script's order of launches")


def replayed_split_timing(payload: dict | None, shape: dict = SPLIT_SHAPES[0], rung: str = SPLIT_MODES[0],
                          name: str = SPLIT_FACTORS) -> str:
    """The factor study's one timing of `rung` at its launcher's S against cuBLAS in the same run, at `shape`."""
    if payload is None:
        return missing(name)
    row = next((r for r in _rows(payload, "auto") if not r.get("pad") and shape_label(r) == shape_label(shape)
                and f"{rung}_ms" in r and "cublas_ms" in r), None)
    if row is None:
        return f"(no unpadded 'auto' row of {rung} at {shape_label(shape)} in {name})"
    flops = 2 * shape["M"] * shape["N"] * shape["K"]
    ours, lib = row[f"{rung}_ms"], row["cublas_ms"]
    return (f"{source(payload, name)}\n{shape_label(shape)} fp16, cold L2: {rung} (S = {row.get(f'{rung}_splits')}) "
            f"{ours * 1e3:.1f} us = {flops / ours / 1e9:.0f} TFLOP/s; cuBLAS {lib * 1e3:.1f} us = "
            f"{flops / lib / 1e9:.0f} TFLOP/s; cuBLAS's time / the rung's = {lib / ours:.2f}")


def cluster_rounds_text() -> str:
    """Split-K's cluster mode beside its workspace mode and the library, in interleaved rounds
    (lab.studies.split_k_rounds), from the committed record (results/h200, else results/h100: its GPU named), or a
    sentence saying there is none."""
    from lab.studies.report import split_k_rounds_lines
    from lab.studies.split_k_rounds import STUDY_FILE

    lines = split_k_rounds_lines()
    if not lines:
        return f"no record of the split-K rounds study ({STUDY_FILE}): `lab study splitk-rounds --out DIR` on a GPU."
    return "\n".join(line for line in lines if line)


def cluster_plans_text() -> str:
    """Split-K's cluster mode, every plan that runs in one wave (lab.studies.split_k_plans), from the committed record
    (results/h200, else results/h100: its GPU named), or a sentence saying there is none."""
    from lab.studies.split_k_plans import STUDY_FILE, committed_record, plan_table

    found = committed_record()
    if found is None:
        return f"no record of the split-K plans study ({STUDY_FILE}) yet: `lab study splitk-plans --out DIR` on a GPU."
    record, path = found
    head = (f"{path.name}: {describe_provenance(record['provenance'])}; {record.get('rounds', '?')} interleaved "
            "rounds, cold L2")
    return "\n".join([head] + plan_table(record))
