"""Long rows over a thread-block cluster, from the cluster-rows study's record (lab.studies.cluster_rows_study ->
results/h200/cluster_rows_study.json): per operation, type and row length, the rung before (one block a row), the
cluster rung, its knob probes and PyTorch, each as a fraction of the device copy timed in the same round. Everything
here is read from the record; a record that lacks a method says so with a dash."""

from __future__ import annotations

from lab.lessons.fusion.records import TARGETS

STUDY = "cluster_rows_study.json"


def load() -> dict | None:
    """The study's record (the reference GPU's, else an H100's: cluster_rows_study.record_path), its path kept in
    the payload for the replay line; None when there is none or it cannot be read."""
    import json

    from lab.studies.cluster_rows_study import record_path

    path = record_path()
    try:
        payload = json.loads(path.read_text()) if path is not None else None
    except (OSError, json.JSONDecodeError):
        return None
    return payload | {"_path": str(path)} if isinstance(payload, dict) else None


def replayed_from(payload: dict) -> str:
    """Where and when the record was measured, and how."""
    from pathlib import Path

    from lab.lessons.common import shown_path

    p = payload.get("provenance", {})
    where = shown_path(Path(payload["_path"])) if payload.get("_path") else f"results/h200/{STUDY}"
    return (f"REPLAYED from {where}: measured on {p.get('device', '?')} at commit {str(p.get('commit', '?'))[:7]}, "
            f"{str(p.get('date', '?'))[:10]}; {payload.get('rounds', '?')} interleaved rounds, cold L2")


def missing() -> str:
    """What a notebook says where the record is absent, and the command that records it."""
    from lab.lessons.common import shown_path
    from lab.measure.records import reference_dir

    return (f"NO RECORDS for {STUDY.removesuffix('.json')}: {shown_path(reference_dir() / STUDY)} is absent, so this "
            "section shows no measurement. On a GPU with thread-block clusters (sm_90: an H100 or H200), `python -m "
            "lab.studies.cluster_rows_study results/h200` records it.")


# What the two exchanges differ in: the fence, the L1 invalidation after an acquiring wait (the prefetches are CCTL
# too, so the invalidation is counted by its full name), the cluster barrier, the mbarrier operations.
SASS_OPS = ("MEMBAR", "CCTL.IVALL", "UCGABAR_ARV", "UCGABAR_WAIT", "SYNCS")


def exchange_source() -> str:
    """The shared header's exchange: the struct's put, arrive and wait, as the kernels use them."""
    from lab.core.build import COMMON_DIR

    text = (COMMON_DIR / "lab_cluster_reduce.cuh").read_text()
    start = text.index("template <int SIZE, int ROUNDS")
    end = text.index("    // Step 3")
    return "kernels/common/lab_cluster_reduce.cuh (excerpt):\n\n" + text[start:end].rstrip()


def exchange_sass(arch: int = 90) -> str:
    """How many of SASS_OPS each exchange's build of RMSNorm rung 04 (a cluster of 4, 256 threads) holds, from its
    SASS (NVRTC and nvdisasm, no GPU needed); one sentence where nvdisasm is not installed."""
    import subprocess

    from lab.core import build
    from lab.families import get_family

    tool = build.find_nvdisasm()
    if tool is None:
        return "(nvdisasm is not installed here: no SASS to count)"
    base = get_family("rmsnorm").rung("04").spec.with_knobs(CLUSTER=4, THREADS=256)
    lines = [f"{'exchange':<28}" + "".join(f"{op:>14}" for op in SASS_OPS)]
    for exchange, label in ((0, "EXCHANGE=0 cluster barrier"), (1, "EXCHANGE=1 st.async+mbarrier")):
        path, _ = build.cached_cubin(base.with_knobs(EXCHANGE=exchange), arch)
        listing = subprocess.run([tool, "-c", str(path)], capture_output=True, text=True, check=True).stdout
        ops = [line.split("*/", 1)[1].replace(";", " ").split() for line in listing.splitlines()
               if line.strip().startswith("/*") and "*/" in line]
        ops = [o[1] if o and o[0].startswith("@") and len(o) > 1 else (o[0] if o else "") for o in ops]
        lines.append(f"{label:<28}" + "".join(f"{sum(o == op or o.startswith(op + '.') for o in ops):>14}"
                                              for op in SASS_OPS))
    return "\n".join(lines) + "\n(both kernels of the source: rmsnorm_cluster and layernorm_cluster)"


def role(op: str, method: str, methods=(), commit: str = "") -> str:
    """What a method is, the same for every operation: "torch", "one block" (norms 03, softmax 04), "cluster" (norms
    04, softmax 05, as the family builds it: cluster_rows_study.cluster_method of the case's `methods` in a record
    made at `commit`) or a probe's knobs ("EXCHANGE=0"; "STATS=1" for LayerNorm's rung 04 row of a record made
    while that was its default)."""
    from lab.studies.cluster_rows_study import CLUSTER_RUNG, PREVIOUS, cluster_method, swapped

    if method == PREVIOUS[op]:
        return "one block"
    if method == cluster_method(op, methods, commit):
        return "cluster"
    swap = swapped(op, commit)
    if method == CLUSTER_RUNG[op] and swap is not None:  # the default of the record's commit, not the family's
        return swap[1]
    return method.split(" ", 1)[1] if "=" in method else method


def _commit(payload: dict) -> str:
    return str((payload.get("provenance") or {}).get("commit", ""))


def _methods_by_case(payload: dict) -> dict[tuple, set]:
    """(op, dtype, n) -> the names of the methods the record timed on it."""
    out: dict[tuple, set] = {}
    for s in payload.get("summary", []):
        sh = s["shape"]
        out.setdefault((sh["op"], sh["dtype"], sh["n"]), set()).add(s["method"])
    return out


def _by_case(payload: dict) -> dict[tuple, dict]:
    """(op, dtype, n) -> role -> the summary entry."""
    names, commit, out = _methods_by_case(payload), _commit(payload), {}
    for s in payload.get("summary", []):
        sh = s["shape"]
        case = (sh["op"], sh["dtype"], sh["n"])
        out.setdefault(case, {})[role(sh["op"], s["method"], names[case], commit)] = s
    return out


def roles(payload: dict) -> list[str]:
    """The record's roles other than the copy, in the order they were timed: PyTorch, the rungs, the probes."""
    names, commit = _methods_by_case(payload), _commit(payload)
    found = (role(s["shape"]["op"], s["method"], names[(s["shape"]["op"], s["shape"]["dtype"], s["shape"]["n"])],
                  commit) for s in payload.get("summary", []))
    return [r for r in dict.fromkeys(found) if r != "copy"]


def _cell(entry: dict | None, key: str) -> str:
    return "-" if not entry or entry.get(key) is None else f"{entry[key]:.2f}"


def cluster_table(payload: dict | None) -> str:
    """Per case: each method's median same-round fraction of the device copy (the one-block rung is norms 03 and
    softmax 04, the cluster rung norms 04 and softmax 05); the cluster rung's speed against PyTorch's last."""
    if payload is None:
        return missing()
    names = roles(payload)
    width = max([9, *(len(r) for r in names)])
    head = "".join(f"{r:>{width + 1}}" for r in names)
    lines = [replayed_from(payload), "fraction of the device copy (same round, median over rounds); the probes "
             "are the cluster rung with one knob changed; the last column: the cluster rung's speed over PyTorch's",
             f"{'case':<26}{head}   vs torch"]
    for (op, dtype, n), entries in _by_case(payload).items():
        cells = "".join(f"{_cell(entries.get(r), 'x_copy'):>{width + 1}}" for r in names)
        lines.append(f"{op + ' ' + dtype + ' n=' + str(n):<26}{cells}   {_cell(entries.get('cluster'), 'x_torch'):>8}")
    for f in payload.get("failed", []):
        lines.append(f"not timed: {f}")
    from lab.studies.cluster_rows_study import swapped

    for op in sorted({o for (o, _, _) in _methods_by_case(payload)}):
        swap = swapped(op, _commit(payload))
        if swap is not None:
            lines.append(f"{op}: the record was made while its rung's default was {swap[1]}; its \"cluster\" column is "
                         f"the row \"{swap[0]}\" (the family's default), and its other probes are the {swap[1]} build "
                         "with that knob changed.")
    return "\n".join(lines)


def cluster_targets(payload: dict | None) -> str:
    """The cluster rung against the lessons' target fraction of the copy, case by case: which reach it."""
    if payload is None:
        return missing()
    target = TARGETS["copy_fraction"]
    met, missed = [], []
    for (op, dtype, n), entries in _by_case(payload).items():
        rung = entries.get("cluster")
        if rung is None or rung.get("x_copy") is None:
            continue
        (met if rung["x_copy"] >= target else missed).append(f"{op} {dtype} n={n} ({rung['x_copy']:.2f})")
    return (f"target: {target:.2f} of the device copy. Reached by the cluster rung on {len(met)} of "
            f"{len(met) + len(missed)} cases" + (f"; not on: {', '.join(missed)}" if missed else "") + ".")


def cluster_figure(payload: dict | None):
    """Bars per case: the rung before, the cluster rung and PyTorch as fractions of the copy, the target dashed. None
    when there is no record."""
    import matplotlib.pyplot as plt

    from lab.lessons.plots.style import figure_title, legend_outside, series_style

    if payload is None or not payload.get("summary"):
        return None
    cases = _by_case(payload)
    shown = [r for r in roles(payload) if "=" not in r]  # no knob probes
    colors = {"one block": series_style("03")["color"], "cluster": series_style("04")["color"]}
    fig, ax = plt.subplots(figsize=(11, 3.8))
    width = 0.8 / max(1, len(shown))
    for i, r in enumerate(shown):
        values = [(j, e[r]["x_copy"]) for j, e in enumerate(cases.values()) if r in e and e[r].get("x_copy")]
        if values:
            ax.bar([j + (i - (len(shown) - 1) / 2) * width for j, _ in values], [v for _, v in values], width,
                   color=colors.get(r, series_style(r)["color"]), label=r)
    ax.axhline(TARGETS["copy_fraction"], color="black", ls="--", lw=1, label=f"target {TARGETS['copy_fraction']:.2f}")
    ax.set_xticks(range(len(cases)), [f"{op} {dtype}\nn={n}" for op, dtype, n in cases], rotation=45, ha="right",
                  fontsize=7)
    ax.set_ylim(0, 1.1)
    ax.set_ylabel("fraction of the device copy")
    ax.set_title(figure_title("rows", "one block a row against a cluster a row, and PyTorch",
                              source=replayed_from(payload)), fontsize=9)
    legend_outside(ax)
    return fig
