"""Notebook 05, part 2: decode (the decode family: a handful of tokens against a large weight). Why a square-tile
GEMM leaves the GPU idle on it, the launcher's plan against Little's law, the copy of the same bytes as the
yardstick, and the records' tables, targets and reading."""

from __future__ import annotations

import functools
from collections.abc import Iterable

from lab.lessons.underfill.facts import CopyModel
from lab.lessons.underfill.records import (
    ASSUMED_DRAM_LATENCY_US,
    COPY,
    DECODE_CUBLAS,
    DECODE_FAMILY,
    DECODE_RUNG,
    DECODE_SIDES,
    DECODE_TOKENS,
    TARGETS,
    dash_or,
    ladder,
    meets,
    missing,
    problems_of,
    source,
)
from lab.measure.records import Record, RecordSet, format_bytes

# ----------------------------------------------------------------------------------------------
# 2. Decode
# ----------------------------------------------------------------------------------------------

def w_bytes(n: int, k: int) -> int:
    return 2 * n * k


def decode_shapes(sm_count: int, tokens: Iterable[int] = (1, 16, 128)) -> str:
    """Why a square-tile GEMM underuses the GPU on decode: rung 06's 128 x 256 tiles against the SMs, the share of
    each tile's rows that hold a token, and the FLOPs per byte of W."""
    lines = [f"{'N = K':>6s} {'M':>4s} {'W bytes':>9s} {'rung 06 tiles':>14s} {'SMs busy':>9s} {'rows used':>10s} "
             f"{'FLOP / W byte':>14s}"]
    for n in DECODE_SIDES:
        for m in tokens:
            tiles = -(-m // 128) * -(-n // 256)
            lines.append(f"{n:6d} {m:4d} {format_bytes(w_bytes(n, n)):>9s} {tiles:14d} "
                         f"{min(tiles, sm_count):4d}/{sm_count:<4d} {m / (128 * -(-m // 128)):10.3f} "
                         f"{2 * m * n * n / w_bytes(n, n):14.0f}")
    return "\n".join(lines)


@functools.lru_cache(maxsize=64)
def resident_blocks(spec, arch: int) -> int:
    """Blocks of `spec` one SM holds (lab.core.occupancy on the NVRTC compile report: registers and static shared
    memory), for planning with no GPU to ask."""
    from lab.core.build import compile_report
    from lab.core.occupancy import occupancy

    report = compile_report(spec, arch, 0)
    occ = occupancy(arch, dict(spec.knobs)["THREADS"], report.registers, report.smem_static_bytes)
    return max(1, occ.blocks_per_sm)


def decode_plan(sm_count: int, arch: int, copy: CopyModel | None, sides: Iterable[int] = DECODE_SIDES,
                tokens: Iterable[int] = DECODE_TOKENS) -> str:
    """The decode launcher's plan (lab.families.decode.launch_plan) per size and M bucket: blocks, warps per block,
    blocks per SM (occupancy of the NVRTC build for `arch`), and the bytes of W each SM has in flight (CHUNKS x RT
    KB per warp, rung 01's header), against what Little's law asks at the copy's peak and ASSUMED_DRAM_LATENCY_US."""
    fam = ladder(DECODE_FAMILY)
    if fam is None:
        return "decode: not in this checkout (lab/families/decode.py), so there is no plan to show."
    rung = fam.rungs[0]
    need = copy.peak_gbs * 1e3 * ASSUMED_DRAM_LATENCY_US / sm_count if copy else None
    lines = [f"{'N = K':>6s} {'M':>4s} {'MT':>3s} {'RT':>3s} {'CHUNKS':>6s} {'blocks':>7s} {'warps/block':>12s} "
             f"{'blocks/SM':>10s} {'waves':>6s} {'W in flight/SM':>15s}"]
    for n in sides:
        for m in tokens:
            step = fam.launch_plan(rung, m, n, n, "float16", 8, sm_count, lambda s: resident_blocks(s, arch))[0]
            k = step.knobs
            per_sm = resident_blocks(step.spec, arch)
            waves = step.grid / (sm_count * per_sm)
            resident = min(per_sm, -(-step.grid // sm_count))
            flight = resident * k["WARPS"] * k["CHUNKS"] * k["RT"] * 1024
            lines.append(f"{n:6d} {m:4d} {k['MT']:3d} {k['RT']:3d} {k['CHUNKS']:6d} {step.grid:7d} {k['WARPS']:12d} "
                         f"{per_sm:10d} {waves:6.2f} {format_bytes(flight):>15s}")
    if need is not None:
        lines.append(f"Little's law: {copy.peak_gbs:.0f} GB/s (the copy's peak) x {ASSUMED_DRAM_LATENCY_US:g} us "
                     f"(assumed) over {sm_count} SMs = {format_bytes(need)} in flight per SM to stream at full speed.")
    return "\n".join(lines)


def decode_prediction(copy: CopyModel | None, sides: Iterable[int] = DECODE_SIDES,
                      tokens: Iterable[int] = (1, 16)) -> str:
    """The fastest a decode step can be: its minimum bytes (W, X and Y once) at the device copy's speed for the
    same bytes, and the share of that time the copy's fixed cost takes."""
    if copy is None:
        return missing("copy")
    fam = ladder(DECODE_FAMILY)
    lines = [f"{'N = K':>6s} {'M':>4s} {'bytes':>9s} {'copy us':>8s} {'copy GB/s':>10s} {'fixed share':>12s}"]
    for n in sides:
        for m in tokens:
            params = {"M": m, "N": n, "K": n}
            b = fam.min_dram_bytes(params) if fam else w_bytes(n, n)
            t = copy.time_us(b)
            lines.append(f"{n:6d} {m:4d} {format_bytes(b):>9s} {t:8.1f} {b / (t * 1e3):10.0f} "
                         f"{copy.floor_us / t:12.0%}")
    lines.append(f"(fixed share: the copy's smallest time, {copy.floor_us:.1f} us, over its time for these bytes)")
    return "\n".join(lines)


def _decode_rows(rs: RecordSet) -> list[dict]:
    """One row per headline problem: every kernel's record (rung keys), cuBLAS's and the copy's, and the fastest
    kernel (what a dispatch over the ladder would run), whose figures the targets are judged on."""
    rows = []
    heads = [r for r in rs.records if r.kind == "headline"]
    for params in problems_of(heads):
        mine = {r.rung: r for r in heads if r.params == params}
        kernels = {k: r for k, r in mine.items() if k[:2].isdigit()}
        if not kernels:
            continue
        best = min(kernels, key=lambda k: kernels[k].median_ms)
        cublas = mine.get(DECODE_CUBLAS)
        rows.append({"params": params, "kernels": kernels, "best": best, "rung": kernels[best], "cublas": cublas,
                     "copy": mine.get(COPY), "x_copy": kernels[best].ratio,
                     "x_cublas": cublas.median_ms / kernels[best].median_ms if cublas else None})
    return sorted(rows, key=lambda r: (r["params"].get("dtype", ""), r["params"]["N"], r["params"]["M"]))


def _w_gbs(rec: Record) -> float:
    return w_bytes(rec.params["N"], rec.params["K"]) / (rec.median_ms * 1e6)


def decode_table(rs: RecordSet | None, name: str = DECODE_FAMILY) -> str:
    """GB/s of W for every decode rung and cuBLAS at every headline M, size and type, the device copy's GB/s for
    the same bytes, and each rung's ratios to both; '*' marks the fastest rung of a problem."""
    if rs is None:
        return missing(name)
    rows = _decode_rows(rs)
    if not rows:
        return f"{source(rs, name)}\n(no headline records of a decode rung)"
    lines = [source(rs, name), f"  {'dtype':9s} {'N = K':>6s} {'M':>4s} {'rung':17s} {'us':>7s} {'W GB/s':>7s} "
             f"{'x copy':>7s} {'x cuBLAS':>9s} {'cuBLAS W GB/s':>14s} {'copy GB/s':>10s}"]
    for r in rows:
        p, cb = r["params"], r["cublas"]
        for key, rec in r["kernels"].items():
            mark = "*" if key == r["best"] else " "
            lines.append(f"  {p.get('dtype', ''):9s} {p['N']:6d} {p['M']:4d} {key + mark:17s} "
                         f"{rec.median_ms * 1e3:7.1f} {_w_gbs(rec):7.0f} {rec.ratio:7.3f} "
                         f"{dash_or(cb and cb.median_ms / rec.median_ms, '9.3f')} "
                         f"{dash_or(cb and _w_gbs(cb), '14.0f')} "
                         f"{rec.ceiling_value:10.0f}")
    lines.append("('x copy': the record's GB/s of the minimum bytes over the device copy's for the same bytes, timed "
                 "in the same run; 'x cuBLAS': cuBLAS's time over the rung's; '*': the fastest rung of the problem)")
    return "\n".join(lines)


def decode_targets(rs: RecordSet | None, name: str = DECODE_FAMILY) -> str:
    """The lesson's decode targets at N = K = TARGETS['decode_side'], M <= TARGETS['decode_max_tokens']: the lowest
    ratio to the device copy and to cuBLAS of the fastest rung at each M, per type."""
    if rs is None:
        return missing(name)
    side, most = TARGETS["decode_side"], TARGETS["decode_max_tokens"]
    rows = [r for r in _decode_rows(rs) if r["params"]["N"] == side and r["params"]["M"] <= most]
    if not rows:
        return f"(no headline records at N = K = {side} with M <= {most} in {name})"
    lines = []
    for dtype in dict.fromkeys(r["params"].get("dtype", "") for r in rows):
        mine = [r for r in rows if r["params"].get("dtype", "") == dtype]
        low = min(mine, key=lambda r: r["x_copy"])
        line = (f"{dtype} at N = K = {side}, M <= {most}: lowest {low['x_copy']:.3f}x of the device copy (M = "
                f"{low['params']['M']}, {low['best']}), {meets(low['x_copy'], TARGETS['decode_x_copy'])}")
        against = [r for r in mine if r["x_cublas"] is not None]
        if against:
            lowc = min(against, key=lambda r: r["x_cublas"])
            line += (f"; lowest {lowc['x_cublas']:.3f}x cuBLAS (M = {lowc['params']['M']}), "
                     f"{meets(lowc['x_cublas'], TARGETS['decode_x_cublas'])}")
        lines.append(line)
    return "\n".join(lines)


def decode_limits(rs: RecordSet | None, copy: CopyModel | None, side: int = 4096, name: str = DECODE_FAMILY) -> str:
    """What limits the small weight: at N = K = `side`, M <= 16, the fastest rung's time beside cuBLAS's, the copy's
    of the same bytes and the copy's fixed cost (its smallest time), and the rate at which the rung reads W once
    that fixed cost is taken out: the part no kernel can shrink made visible."""
    if rs is None:
        return missing(name)
    if copy is None:
        return missing("copy")
    rows = [r for r in _decode_rows(rs) if r["params"]["N"] == side and r["params"]["M"] <= 16]
    if not rows:
        return f"(no headline records at N = K = {side} in {name})"
    lines = [f"the copy's fixed cost: {copy.floor_us:.1f} us (its smallest size, {format_bytes(copy.points[0][0])})",
             f"  {'dtype':9s} {'M':>4s} {'rung':15s} {'us':>6s} {'cuBLAS us':>10s} {'copy us':>8s} "
             f"{'fixed / rung':>13s} {'W GB/s after the fixed cost':>28s}"]
    for r in rows:
        us = r["rung"].median_ms * 1e3
        rest = w_bytes(side, side) / max(us - copy.floor_us, 1e-3) / 1e3
        lines.append(f"  {r['params'].get('dtype', ''):9s} {r['params']['M']:4d} {r['best']:15s} {us:6.1f} "
                     f"{dash_or(r['cublas'] and r['cublas'].median_ms * 1e3, '10.1f')} "
                     f"{dash_or(r['copy'] and r['copy'].median_ms * 1e3, '8.1f')} {copy.floor_us / us:13.0%} "
                     f"{rest:28.0f}")
    return "\n".join(lines)


def decode_reading(rs: RecordSet | None, copy: CopyModel | None, name: str = DECODE_FAMILY) -> str:
    """Per type and size: the fastest rung's range of ratios to the device copy and to cuBLAS for M <= 16 and for
    M > 16 (and which rungs those were); the copy's fixed cost as a share of the fastest time at M = 1."""
    if rs is None:
        return missing(name)
    rows = _decode_rows(rs)
    lines = []
    for dtype, n in dict.fromkeys((r["params"].get("dtype", ""), r["params"]["N"]) for r in rows):
        mine = [r for r in rows if r["params"].get("dtype", "") == dtype and r["params"]["N"] == n]
        parts = []
        for label, group in (("M <= 16", [r for r in mine if r["params"]["M"] <= 16]),
                             ("M > 16", [r for r in mine if r["params"]["M"] > 16])):
            if group:
                xs = [r["x_copy"] for r in group]
                part = f"{label}: {min(xs):.2f}-{max(xs):.2f}x of the copy"
                cb = [r["x_cublas"] for r in group if r["x_cublas"] is not None]
                if cb:
                    part += f" and {min(cb):.2f}-{max(cb):.2f}x cuBLAS's speed"
                parts.append(part + f" ({', '.join(dict.fromkeys(r['best'] for r in group))})")
        one = next((r for r in mine if r["params"]["M"] == 1), None)
        if one and copy:
            parts.append(f"the fixed cost is {copy.floor_us / (one['rung'].median_ms * 1e3):.0%} of M = 1's time")
        lines.append(f"{dtype} N = K = {n}: " + "; ".join(parts))
    return "\n".join(lines) or f"(no headline records of a decode rung in {name})"


def replayed_decode_timing(rs: RecordSet | None, M: int = 1, N: int = 8192, dtype: str = "float16",
                           name: str = DECODE_FAMILY) -> str:
    """The records' one problem: rung 01, the device copy of the same bytes (the ceiling) and cuBLAS, same run."""
    if rs is None:
        return missing(name)
    mine = {r.rung: r for r in rs.records if r.kind == "headline" and r.params.get("M") == M
            and r.params.get("N") == N and r.params.get("K") == N and r.params.get("dtype") == dtype}
    rung, copy, cublas = mine.get(DECODE_RUNG), mine.get(COPY), mine.get(DECODE_CUBLAS)
    if rung is None or copy is None:
        return f"(no headline record of {DECODE_RUNG} and the copy at M = {M}, N = K = {N}, {dtype} in {name})"
    line = (f"{source(rs, name)}\nM = {M}, N = K = {N}, {dtype}, cold L2: {DECODE_RUNG} {rung.median_ms * 1e3:.1f} us "
            f"= {rung.value:.0f} GB/s; the device copy of the same bytes {copy.median_ms * 1e3:.1f} us = "
            f"{copy.value:.0f} GB/s; rung / copy = {rung.value / copy.value:.3f}")
    if cublas is not None:
        line += (f"; cuBLAS {cublas.median_ms * 1e3:.1f} us, its time / the rung's = "
                 f"{cublas.median_ms / rung.median_ms:.2f}")
    return line
