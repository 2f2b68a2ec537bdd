"""The attention ladder beside each of PyTorch's SDPA backends, in interleaved rounds, with rung 03's tile knobs.

For each shape (B x H x S x D, causal or not, a type) every method runs once a round, in an order rotated from round
to round, on cold L2 with rotating input sets (as `lab bench` times a headline); the figure is TFLOP/s of the
visible (query, key) pairs (the family's `flops`) and the ratio to cuDNN's and to the flash backend's time in the
same round. The methods:

    sdpa_cudnn, sdpa_flash, sdpa_efficient   torch.nn.functional.scaled_dot_product_attention forced to one backend
                                             (torch.nn.attention.sdpa_kernel), its own output (no copy into ours)
    02_flash_mma, 03_flash_pipelined, ...    the tiled rungs as the family launches them
    03 BLOCK_M=128, 05 PERSISTENT=0, ...     a rung with other knobs (THREADS follows BLOCK_M); some only at
                                             the head dims they are meant for (SOFTMAX_OVERLAP = 2 at D = 256)

Every rung setting passes a check on a small odd case (check_case: S = 333 against 517 keys, GQA, causal) before it
is timed; one that fails gets a row saying so and is not timed. A backend that refuses a shape is left out with its
reason. Nothing here asserts a speed.

    python -m lab.studies.attention_study OUT_DIR [--rounds 3] [--quick]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
from pathlib import Path

from lab.families import get_family
from lab.families.attention import head_dims, persistent_build
from lab.measure.records import (
    newest_study_record,
    provenance,
    read_study_record,
    study_record_paths,
    write_json,
)

BACKENDS = ("cudnn", "flash", "efficient")
# Other settings of a rung beside its defaults, and the head dims they are timed at (None: every one): rung 03 at 128
# query rows a block (8 warps of 16 rows); rung 05 persistent or not (PERSISTENT = 1: a block an SM looping over the
# query blocks of every head, in sections of heads whose K and V fit L2, longest first when causal; its default
# depends on the shape, lab.families.attention.persistent_default, and a setting the default build already has for a
# shape is not timed twice); rung 05 without a warpgroup's own exponentials under its P V products (SOFTMAX_OVERLAP =
# 0), and with the value its default build does not have at that head dim: its default is 1 (the exponentials under
# P V) at D = 256 and 2 (the first build: ptxas hoisted the wait above the exponentials) at D = 64 and 128, so 2 is
# timed beside it at D = 256 and 1 at D = 64 and 128. Settings timed before and settled, no longer timed here (the
# kernel headers give their figures): rung 05 as first built (PEELED = 0, 1.20-1.36x slower), with its causal blocks
# reversed (LONGEST_FIRST = 1, 1.01x), and rungs 04 and 05 with 4 K/V stages at D = 64 (level with 2);
# results/h100/attention_study_5b68074.json and, at 40aa909, results/h100/varlen_run_40aa909.log.
RUNG_SETTINGS = (("03", {"BLOCK_M": 128, "THREADS": 256}, None), ("05", {"PERSISTENT": 1}, None),
                 ("05", {"PERSISTENT": 0}, None),
                 ("05", {"SOFTMAX_OVERLAP": 0}, None), ("05", {"SOFTMAX_OVERLAP": 1}, (64, 128)),
                 ("05", {"SOFTMAX_OVERLAP": 2}, (256,)))
SHAPES = [dict(B=2, H=16, S=4096, D=d, causal=c, dtype="float16") for d in (128, 64) for c in (0, 1)]
SHAPES += [dict(B=2, H=16, S=4096, D=128, causal=0, dtype="bfloat16"), dict(B=4, H=32, S=4096, D=128, causal=0,
                                                                             dtype="float16")]
SHAPES += [dict(B=2, H=16, S=4096, D=256, causal=c, dtype="float16") for c in (0, 1)]  # rung 05's wide build
QUICK_SHAPES = SHAPES[:1]


FILENAME = "attention_study.json"


ROW_KEYS = {"shape", "method", "TFLOP/s"}


def record_paths() -> list[Path]:
    """Where a committed record may be (lab.measure.records.study_record_paths)."""
    return study_record_paths(FILENAME)


def read_record(path: Path) -> dict | None:
    """A committed record at `path` if it is one (a provenance and a summary of shape, method and TFLOP/s rows);
    None for a missing, unreadable or malformed file."""
    return read_study_record(path, ROW_KEYS)


def newest_record() -> tuple[dict, Path] | None:
    """The newest (by its provenance's date) of the committed records in record_paths(), with its path."""
    return newest_study_record(FILENAME, ROW_KEYS)


def _problem(att, shape: dict, sets: int = 1):
    return att.make_problem(seed=5, B=shape["B"], H=shape["H"], S_q=shape["S"], S_k=shape["S"], D=shape["D"],
                            dtype=shape["dtype"], causal=shape["causal"], sets=sets)


def _sdpa(att, backend: str, problem):
    """A launch(i) of SDPA forced to one backend, or the reason it refuses the problem."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    which = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION,
             "efficient": SDPBackend.EFFICIENT_ATTENTION}[backend]
    p = problem.params
    views = [[att._torch(x, p["dtype"]) for x in problem.inputs[n]] for n in ("Q", "K", "V")]

    def launch(i: int) -> None:
        q, k, v = (v_[i % len(v_)] for v_ in views)
        with sdpa_kernel(which):
            F.scaled_dot_product_attention(q, k, v, is_causal=bool(p["causal"]), scale=1.0 / p["D"] ** 0.5)

    try:
        launch(0)
        torch.cuda.synchronize()
    except RuntimeError as exc:
        return None, str(exc).splitlines()[0][:160]
    return launch, None


def rung_settings(att, shape: dict) -> dict:
    """name -> rung: the tiled rungs (02 on) as the family builds them, and the RUNG_SETTINGS meant for this shape's
    head dim that differ from what the family's own build of the rung has for the shape."""
    rungs = {r.key: r for r in att.rungs if r.number >= 2 and shape["D"] in head_dims(r)}
    for key, knobs, dims in RUNG_SETTINGS:
        if dims is not None and shape["D"] not in dims or shape["D"] not in head_dims(att.rung(key)):
            continue
        base = att.rung(key)
        built = dict(att.variant_for(base, {"dtype": "float16", "causal": 0, **shape}).spec.knobs)
        built.setdefault("PERSISTENT", persistent_build(base, {"causal": 0, **shape}))
        if all(built.get(k) == v for k, v in knobs.items()):  # the default build, timed under the rung's own name
            continue
        name = f"{key} " + " ".join(f"{k}={v}" for k, v in knobs.items() if k != "THREADS")
        rungs[name] = dataclasses.replace(base, spec=base.spec.with_knobs(**knobs))
    return rungs


def _rung_methods(att, shape: dict) -> tuple[dict, list[dict]]:
    """The rungs to time on `shape` (name -> rung) and the rows of settings that failed their check."""
    from lab.measure.verify import check_case

    rungs = rung_settings(att, shape)
    failed = []
    case = {"B": 1, "H": 4, "H_kv": 2, "S_q": 333, "S_k": 517, "D": shape["D"], "dtype": shape["dtype"],
            "causal": 1}
    for name, rung in list(rungs.items()):
        check = check_case(att, rung, case, seed=11)
        if not check.passed:
            failed.append({"shape": shape, "method": name, "failed": check.reasons})
            del rungs[name]
    return rungs, failed


def study(rounds: int = 3, shapes=SHAPES, min_time_ms: float = 20.0) -> dict:
    import cupy as cp

    from lab.measure import timing
    from lab.measure.bench import ROTATION_BUDGET

    att = get_family("attention")
    flusher = timing.L2Flusher()
    rows, failed, refused = [], [], []
    for shape in shapes:
        probe = _problem(att, shape)
        sets = int(max(1, min(4, ROTATION_BUDGET // probe.bytes_moved)))
        problem = _problem(att, shape, sets)
        del probe
        out = cp.empty(problem.out_shape, problem.dtype)
        methods = {}
        for backend in BACKENDS:
            launch, why = _sdpa(att, backend, problem)
            if launch is None:
                refused.append({"shape": shape, "method": f"sdpa_{backend}", "reason": why})
            else:
                methods[f"sdpa_{backend}"] = launch
        rungs, bad = _rung_methods(att, shape)
        failed += bad
        for name, rung in rungs.items():
            methods[name] = lambda i, rung=rung, problem=problem, out=out: att.launch(rung, problem, out, i)
        names = list(methods)
        for r in range(rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            for name in order:
                t = timing.measure(methods[name], l2="cold", flusher=flusher, min_time_ms=min_time_ms)
                rows.append({"shape": shape, "method": name, "round": r, "median_ms": t.median_ms,
                             "p10_ms": t.p10_ms, "p90_ms": t.p90_ms, "TFLOP/s": problem.flops / t.median_ms / 1e9})
        del problem, out
        cp.get_default_memory_pool().free_all_blocks()
    return {"provenance": provenance(), "about": __doc__.split("\n\n")[0], "rounds": rounds, "rows": rows,
            "summary": summarize(rows), "failed": failed, "refused": refused}


def summarize(rows: list[dict]) -> list[dict]:
    """Per shape and method: the median TFLOP/s over rounds, its spread (max / min - 1), and the median over rounds
    of the same-round ratio to cuDNN's and to the flash backend's time."""
    key = lambda r: tuple(sorted(r["shape"].items()))  # noqa: E731
    by_round = {(key(r), r["method"], r["round"]): r for r in rows}
    out = []
    for shape_key, method in dict.fromkeys((key(r), r["method"]) for r in rows):
        mine = [r for r in rows if key(r) == shape_key and r["method"] == method]
        rates = [r["TFLOP/s"] for r in mine]
        entry = {"shape": dict(shape_key), "method": method, "TFLOP/s": statistics.median(rates),
                 "spread": max(rates) / min(rates) - 1}
        for peer in ("sdpa_cudnn", "sdpa_flash"):
            ratios = [by_round[(shape_key, peer, r["round"])]["median_ms"] / r["median_ms"] for r in mine
                      if (shape_key, peer, r["round"]) in by_round]
            entry[f"x_{peer}"] = statistics.median(ratios) if ratios else None
        out.append(entry)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one shape, for a smoke run")
    parser.add_argument("--head-dim", type=int, default=0,
                        help="only the shapes of this head dim, written to attention_study_d<D>.json beside the "
                             "full study's record (which it leaves alone)")
    args = parser.parse_args(argv)
    shapes = QUICK_SHAPES if args.quick else SHAPES
    if args.head_dim:
        shapes = [s for s in SHAPES if s["D"] == args.head_dim]
    record = study(args.rounds, shapes)
    name = FILENAME.replace(".json", f"_d{args.head_dim}.json") if args.head_dim else FILENAME
    path = write_json(Path(args.out_dir) / name, record)
    for s in record["summary"]:
        sh = s["shape"]
        ratio = lambda x: "-" if x is None else f"{x:.3f}"  # noqa: E731
        print(f"B={sh['B']} H={sh['H']} S={sh['S']} D={sh['D']} {sh['dtype']} causal={sh['causal']}  "
              f"{s['method']:<26} {s['TFLOP/s']:7.1f} TFLOP/s  spread {s['spread']:.3f}  "
              f"x cuDNN {ratio(s['x_sdpa_cudnn'])}  x flash {ratio(s['x_sdpa_flash'])}")
    for f in record["failed"] + record["refused"]:
        print("not timed:", f)
    print(f"written: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
