"""Notebook 08's compile cost and first request (lab.lessons.ops): the compile study (host CPU) and the first-request
latency of fresh processes with empty caches, warm caches and a warm-up manifest, held against the warm-cache target."""

from __future__ import annotations

import statistics

from lab.lessons.common import Markdown, describe_provenance, md
from lab.lessons.ops_records import COMPILE, CPU_LABEL, LATENCY, TARGETS, as_x, md_table, meets, missing

SCENARIOS = {"empty_caches": "empty compile caches", "warm_caches": "warm caches (a second process)",
             "empty_caches_with_manifest": "empty caches + warm-up manifest",
             "warm_caches_with_manifest": "warm caches + warm-up manifest (the recommended start)"}


# ----------------------------------------------------------------------------------------------
# 5. Compile time and cache growth (host CPU)
# ----------------------------------------------------------------------------------------------

def compile_summary(record: dict | None) -> str:
    """The compile study in a few lines: variants, seconds per miss (per rung and target), cache size, a hit's cost."""
    if record is None:
        return missing(COMPILE)
    s = record.get("summary", {})
    lines = [f"{CPU_LABEL.upper()}: {describe_provenance(record.get('provenance', {}))}, "
             f"{record.get('provenance', {}).get('cpus_usable', '?')} usable CPU(s).",
             f"{s.get('variants', 0)} variants built ({s.get('skipped', 0)} skipped), "
             f"{s.get('total_compile_s', 0):.1f} s of compiling in all; a miss (key + NVRTC + write): median "
             f"{s.get('median_compile_s', 0):.2f} s, from {s.get('min_compile_s', 0):.2f} to "
             f"{s.get('max_compile_s', 0):.2f} s",
             f"cache after all of them: {s.get('cache_bytes', 0) / 1e6:.2f} MB "
             f"({s.get('cache_disk_bytes', 0) / 1e6:.2f} MB on disk); a hit (the lookup): median "
             f"{1e3 * s.get('median_hit_s', 0):.2f} ms"]
    groups: dict[tuple, list] = {}
    for r in record.get("rows", []):
        groups.setdefault((family_of(r), r["rung"], r["target"]), []).append(r["compile_s"])
    for (family, rung, target), secs in groups.items():
        lines.append(f"  {family} {rung} for {target}: {len(secs)} variants, median {statistics.median(secs):.2f} s "
                     "each")
    return "\n".join(lines)


def family_of(item: dict) -> str:
    """A compile-study row's or growth step's family."""
    return item["family"]


def compile_view(record: dict | None, families: tuple[str, ...]) -> dict | None:
    """The record with only `families`' rows and growth steps (for a figure of those families alone), or None."""
    if record is None:
        return None
    return record | {"rows": [r for r in record.get("rows", []) if family_of(r) in families],
                     "growth": [g for g in record.get("growth", []) if family_of(g) in families]}


def compile_figure(record: dict | None, families: tuple[str, ...], strip: bool = False):
    """lab.lessons.plots' compile growth figure (or, with `strip`, its seconds-per-variant strips) of `families`
    alone, its title naming them; None without the record or rows."""
    from lab.lessons import plots

    view = compile_view(record, families)
    if view is None:
        return None
    fig = (plots.compile_time_per_variant if strip else plots.compile_growth)(view)
    if fig is not None:  # the plots title every compile figure "gemm_tc: ..."; name the families shown instead
        ax = fig.axes[0]
        family, _, rest = ax.get_title().partition(": ")
        ax.set_title(f"{', '.join(families)}: {rest}", fontsize=10)
    return fig


def show_compile(record: dict | None, families: tuple[str, ...], strip: bool = False) -> None:
    """compile_figure shown inline, or the sentence saying the compile record is missing."""
    from lab.lessons.views import figure

    if record is None:
        print(missing(COMPILE))
        return
    figure(compile_figure(record, families, strip), f"the compile record holds no {' or '.join(families)} rows")


def compile_share(record: dict | None, families: tuple[str, ...], arch: int = 90) -> str:
    """What `families` add to the cache of one arch, beside the other families in the record: variants, compile
    seconds and megabytes, from the measured rows (a process on that arch builds only that arch's variants)."""
    if record is None:
        return missing(COMPILE)
    rows = [r for r in record.get("rows", []) if r["arch"] == arch]
    mine = [r for r in rows if family_of(r) in families]
    if not mine:
        return f"The compile record holds no {' or '.join(families)} variants for sm_{arch}; measure it again."
    rest = [r for r in rows if r not in mine]

    def cost(group: list[dict]) -> str:
        seconds, megabytes = sum(r["compile_s"] for r in group), sum(r["entry_bytes"] for r in group) / 1e6
        return f"{len(group)} variant{'' if len(group) == 1 else 's'}, {seconds:.1f} s of compiling, {megabytes:.2f} MB"

    others = ", ".join(dict.fromkeys(family_of(r) for r in rest)) or "nothing else"
    return (f"On sm_{arch}, {' and '.join(families)}: {cost(mine)}; beside {others} in the same grid: "
            f"{cost(rest) if rest else 'none'}.")


# ----------------------------------------------------------------------------------------------
# 6. First-request latency
# ----------------------------------------------------------------------------------------------

def latency_rows(record: dict | None) -> list[dict] | None:
    """One row per scenario of ops_latency.json (in the study's order), or None without the record. 'compiled'
    counts the whole process's NVRTC compiles; 'compiled_first' those made before the first result, the warm-up
    manifest's included, and 'compiled_in_first' those the first request itself made (the study records them)."""
    if record is None:
        return None
    rows = []
    for name, s in (record.get("scenarios") or {}).items():
        if "error" in s:
            rows.append({"scenario": name, "error": s["error"]})
            continue
        total = s.get("compiles_total") or {}
        first = s.get("compiles_by_first_request") or {}
        before = s.get("compiles_before_requests") or {}
        warm = s.get("warmup") or {}
        rows.append({"scenario": name, "first_ms": s.get("first_ms"), "p50_ms": s.get("p50_ms"),
                     "p99_ms": s.get("p99_ms"), "max_ms": s.get("max_ms"), "requests": s.get("requests"),
                     "compiled": total.get("compiled", 0), "from_disk": total.get("cache_hits", 0),
                     "compile_s": total.get("compile_ms", 0) / 1e3,
                     "compiled_first": before.get("compiled", 0) + first.get("compiled", 0),
                     "compiled_in_first": first.get("compiled", 0),
                     "warmup_s": warm.get("seconds"), "warmup_shapes": warm.get("shapes"),
                     "start_to_first_s": s.get("process_start_to_first_result_s")})
    return rows


def latency_table(record: dict | None) -> Markdown:
    rows = latency_rows(record)
    if rows is None:
        return md(missing(LATENCY))
    table = []
    for r in rows:
        if "error" in r:
            table.append([SCENARIOS.get(r["scenario"], r["scenario"]), "failed: " + r["error"].splitlines()[-1]]
                         + ["-"] * 7)
            continue
        warm = "-" if r["warmup_s"] is None else f"{r['warmup_s']:.2f} s ({r['warmup_shapes']} shapes)"
        table.append([SCENARIOS.get(r["scenario"], r["scenario"]), f"{r['first_ms']:.1f}", f"{r['p50_ms']:.2f}",
                      f"{r['p99_ms']:.2f}", r["compiled_first"], r["compiled_in_first"], r["compiled"], warm,
                      f"{r['start_to_first_s']:.2f}"])
    head = ["scenario", "first request ms", "p50 ms", "p99 ms", "compiles by the first result",
            "of them in the first request", "compiles in all", "warm-up", "process start to first result, s"]
    return md(f"{record.get('requests', '?')} requests per process (one layer each, M from the trace's shorter steps); "
              f"the manifest lists {record.get('manifest_shapes', '?')} shapes.\n\n" + md_table(head, table))


def warm_target(record: dict | None) -> dict | None:
    """The warm-cache target held against the record: a second process with a warm cache compiles nothing
    (TARGETS['warm_compiles']) and has its first result within TARGETS['warm_first_ms'], read as its first
    request's time from its first call to its result. None without the scenario."""
    warm = next((r for r in latency_rows(record) or [] if r["scenario"] == "warm_caches" and "error" not in r), None)
    if warm is None:
        return None
    compiles_ok = warm["compiled"] <= TARGETS["warm_compiles"]
    first_ok = warm["first_ms"] <= TARGETS["warm_first_ms"]
    return {"row": warm, "compiles_ok": compiles_ok, "first_ok": first_ok, "met": compiles_ok and first_ok}


def latency_target(record: dict | None) -> str:
    rows = latency_rows(record)
    if rows is None:
        return missing(LATENCY)
    target = warm_target(record)
    if target is None:
        failed = next((r for r in rows if r["scenario"] == "warm_caches"), None)
        return "warm_caches: not in the record" + (f" (failed: {failed['error'].splitlines()[-1]})" if failed else "")
    warm = target["row"]
    lines = [f"warm caches, second process: {warm['compiled']} NVRTC compiles "
             f"(target {TARGETS['warm_compiles']}: {'met' if target['compiles_ok'] else 'MISSED'}), "
             f"{warm['from_disk']} cubins loaded from the disk cache",
             f"its first request: {warm['first_ms']:.1f} ms "
             f"({meets(warm['first_ms'], TARGETS['warm_first_ms'], True, ' ms')})",
             f"the warm-cache target: {'MET' if target['met'] else 'MISSED'}",
             f"(from process start, imports and the layer's arrays included: {warm['start_to_first_s']:.2f} s)"]
    both = next((r for r in rows if r["scenario"] == "warm_caches_with_manifest" and "error" not in r), None)
    if both:
        lines.append(f"warm caches and a warm-up manifest run at start ({both['warmup_s']:.2f} s, "
                     f"{both['compiled']} compiles): the first request then takes {both['first_ms']:.1f} ms "
                     f"({meets(both['first_ms'], TARGETS['warm_first_ms'], True, ' ms')})")
    empty = next((r for r in rows if r["scenario"] == "empty_caches" and "error" not in r), None)
    if empty:
        lines.append(f"for contrast, empty caches: first request {empty['first_ms']:.0f} ms "
                     f"({as_x(empty['first_ms'] / warm['first_ms'])} the warm one), {empty['compiled']} compiles "
                     f"({empty['compile_s']:.1f} s of NVRTC)")
    return "\n".join(lines)


def first_request_profile(record: dict | None, scenario: str = "warm_caches", top: int = 8) -> str:
    """Where one scenario's first request spent its time: the study's profile of it (cumulative ms per function,
    the outermost first), the first `top` lines; or why there is none."""
    if record is None:
        return missing(LATENCY)
    s = (record.get("scenarios") or {}).get(scenario) or {}
    profile = s.get("first_request_profile") or []
    if not profile:
        return f"({scenario}: the record keeps no profile of its first request)"
    lines = [f"{SCENARIOS.get(scenario, scenario)}: the first request (M = {s.get('first_request_M', '?')}), "
             f"{s.get('first_ms', 0):.1f} ms, profiled (cumulative ms, calls):"]
    lines += [f"  {p['cumulative_ms']:8.1f} ms  x{p['calls']:<3d} {p['function']}" for p in profile[:top]]
    return "\n".join(lines)
