"""Packed (varlen) attention against padding: a prefill batch of prompts of different lengths, timed in interleaved
rounds beside what a caller would otherwise run.

For each batch every method runs once a round, in an order rotated from round to round, on cold L2; the figure is
TFLOP/s of each sequence's own visible (query, key) pairs (the varlen family's `flops`: padding is not work, so a
padded method's figure is its useful rate) and the ratio of each method's time to the packed kernel's in the same
round. The methods:

    lab_varlen              lab.families.attention_varlen: attention rung 05 built with VARLEN = 1 on the packed batch
    lab_dense_padded        attention rung 05 (the dense family's build) on the batch padded to its longest sequence
    sdpa_padded             torch.nn.functional.scaled_dot_product_attention on the padded batch (is_causal), PyTorch's
                            own backend choice; sdpa_cudnn_padded and sdpa_flash_padded forced to one backend
    torch_varlen            torch.nn.attention.varlen.varlen_attn on the packed batch (FlashAttention-2's varlen
                            kernel), where the installed PyTorch has it

Padding and, where a call does not take grouped-query heads, repeating K and V per query head are done once, before
the timing, and the padded outputs are not unpacked: the padded methods are timed at their best, as a caller who
keeps the batch padded would run them. SDPA and varlen_attn get enable_gqa where they take it (the records of
40aa909 and ae3f4d2 gave the forced backends and varlen_attn K and V repeated instead; `gqa` in each record says
which). The batches: lab.families.attention_varlen.serving_lengths (log-uniform over 1 .. 8192, the first 8192) and,
as the case where padding wastes least, lengths uniform over 4096 .. 8192. The packed kernel passes a check on a
small odd batch (check_case) before it is timed. Nothing here asserts a speed.

    python -m lab.studies.varlen_attention_study OUT_DIR [--rounds 3] [--quick]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
from pathlib import Path

import numpy as np

from lab.core.ladder import Problem
from lab.families import get_family
from lab.families.attention_varlen import AttentionVarlenFamily, padded_work_share, serving_lengths
from lab.measure.records import newest_study_record, provenance, write_json

FILENAME = "varlen_attention_study.json"
ROW_KEYS = {"batch", "method", "TFLOP/s", "time_x_lab_varlen"}
LONGEST = 8192
HEADS = {"H": 32, "H_kv": 8, "D": 128}


def near_full_lengths(B: int, longest: int = LONGEST, seed: int = 7) -> list[int]:
    """B lengths uniform over longest / 2 .. longest, the first `longest`: little padding to save."""
    lengths = np.random.default_rng(seed).integers(longest // 2, longest + 1, size=B)
    lengths[0] = longest
    return [int(n) for n in lengths]


BATCHES = [{"mix": "serving", "B": b, "dtype": "float16"} for b in (8, 16, 32)]
BATCHES += [{"mix": "serving", "B": 16, "dtype": "bfloat16"}, {"mix": "near_full", "B": 8, "dtype": "float16"}]
QUICK_BATCHES = BATCHES[1:2]


def lengths_of(batch: dict) -> list[int]:
    return (serving_lengths if batch["mix"] == "serving" else near_full_lengths)(batch["B"], LONGEST)


def _torch_methods(fam: AttentionVarlenFamily, problem) -> tuple[dict, list[dict]]:
    """name -> launch(i) for the PyTorch methods that take this batch, the rows of those that refuse it, and how each
    got the grouped-query heads (enable_gqa, or K and V repeated)."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    p = problem.params
    group = p["H"] // p["H_kv"]
    padded = fam.padded(problem)
    q, k, v = (fam._torch(padded[n], p["dtype"]) for n in ("Q", "K", "V"))
    k_rep, v_rep = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scale = 1.0 / p["D"] ** 0.5
    methods, refused = {}, []

    def sdpa(backend, gqa: bool):
        def launch(i: int) -> None:
            with sdpa_kernel(backend) if backend is not None else contextlib.nullcontext():
                if gqa:
                    F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale, enable_gqa=True)
                else:
                    F.scaled_dot_product_attention(q, k_rep, v_rep, is_causal=True, scale=scale)
        return launch

    # Each SDPA method with enable_gqa first, K and V repeated where the backend refuses it.
    candidates = {"sdpa_padded": [("enable_gqa", sdpa(None, True))]}
    for name, backend in (("sdpa_cudnn_padded", SDPBackend.CUDNN_ATTENTION),
                          ("sdpa_flash_padded", SDPBackend.FLASH_ATTENTION)):
        candidates[name] = [("enable_gqa", sdpa(backend, True)), ("repeated", sdpa(backend, False))]
    try:
        from torch.nn.attention.varlen import varlen_attn
    except ImportError as exc:
        refused.append({"method": "torch_varlen", "reason": f"not in this PyTorch ({exc})"})
    else:
        import inspect

        qp, kp, vp = (fam._torch(problem.inputs[n][0], p["dtype"]) for n in ("Q", "K", "V"))
        cu_q = torch.from_dlpack(problem.inputs["cu_seqlens_q"][0])
        cu_k = torch.from_dlpack(problem.inputs["cu_seqlens_k"][0])
        takes = inspect.signature(varlen_attn).parameters
        extra = {"is_causal": True} if "is_causal" in takes else {"window_size": (-1, 0)}
        how = "enable_gqa" if "enable_gqa" in takes else "repeated"
        if how == "enable_gqa":
            extra["enable_gqa"] = True
        else:
            kp, vp = kp.repeat_interleave(group, dim=1), vp.repeat_interleave(group, dim=1)
        candidates["torch_varlen"] = [(how, lambda i: varlen_attn(qp, kp, vp, cu_q, cu_k, p["S_q"], p["S_k"], **extra))]
    gqa = {}
    for name, tries in candidates.items():
        reasons = []
        for how, launch in tries:
            try:
                launch(0)
                torch.cuda.synchronize()
            except (RuntimeError, TypeError, ValueError) as exc:
                reasons.append(f"{how}: {str(exc).splitlines()[0][:160]}")
            else:
                methods[name], gqa[name] = launch, how
                break
        if name not in methods:
            refused.append({"method": name, "reason": "; ".join(reasons)})
    return methods, refused, gqa


def _batch_methods(fam: AttentionVarlenFamily, dense, rung, batch: dict) -> tuple[dict, list, int, dict]:
    """name -> launch(i) for one batch (the packed kernel, the dense rung on the padded batch, PyTorch's), the rows of
    the methods that refuse it, the batch's FLOPs and a row that describes it."""
    import cupy as cp

    lengths = lengths_of(batch)
    problem = fam.make_problem(seed=5, seq_lens=lengths, dtype=batch["dtype"], causal=1, **HEADS)
    p = problem.params
    out = cp.empty(problem.out_shape, problem.dtype)
    padded = fam.padded(problem)
    dense_out = cp.empty((p["B"], p["H"], p["S_q"], p["D"]), problem.dtype)
    dense_params = {k: p[k] for k in ("B", "H", "H_kv", "S_q", "S_k", "D", "dtype", "causal")}
    dense_problem = Problem("padded", {n: [padded[n]] for n in ("Q", "K", "V")}, dense_out.shape, 0,
                            params=dense_params, dtype=problem.dtype)
    methods = {"lab_varlen": lambda i: fam.launch(rung, problem, out),
               "lab_dense_padded": lambda i: dense.launch(dense.rung("05"), dense_problem, dense_out)}
    torch_methods, refused, gqa = _torch_methods(fam, problem)
    about = {"batch": batch, "seq_lens": lengths, "tokens": sum(lengths),
             "real_share_of_padded_work": padded_work_share(lengths, lengths, 1), "gqa": gqa}
    return methods | torch_methods, refused, problem.flops, about


def study(rounds: int = 3, batches=BATCHES, min_time_ms: float = 20.0) -> dict:
    import cupy as cp

    from lab.measure import timing
    from lab.measure.verify import check_case

    fam = AttentionVarlenFamily()
    dense = get_family("attention")
    rung = fam.rungs[0]
    check = check_case(fam, rung, {"H": 4, "H_kv": 2, "seq_lens": [333, 1, 0, 129], "seq_lens_k": [517, 1, 3, 129],
                                   "D": 128, "dtype": "float16", "causal": 1}, seed=11)
    flusher = timing.L2Flusher()
    rows, refused = [], []
    batch_rows = []
    for batch in batches:
        if not check.passed:
            break
        methods, why, flops, about = _batch_methods(fam, dense, rung, batch)
        refused += [r | {"batch": batch} for r in why]
        batch_rows.append(about)
        names = list(methods)
        for r in range(rounds):
            for name in names[r % len(names):] + names[:r % len(names)]:
                t = timing.measure(methods[name], l2="cold", flusher=flusher, min_time_ms=min_time_ms)
                rows.append({"batch": batch, "method": name, "round": r, "median_ms": t.median_ms,
                             "p10_ms": t.p10_ms, "p90_ms": t.p90_ms, "TFLOP/s": flops / t.median_ms / 1e9})
        del methods  # the batch's arrays go with their launches
        cp.get_default_memory_pool().free_all_blocks()
        try:
            import torch

            torch.cuda.empty_cache()
        except ImportError:
            pass
    try:
        import torch

        torch_version = torch.__version__
    except ImportError:
        torch_version = None
    return {"provenance": provenance() | {"torch": torch_version}, "about": __doc__.split("\n\n")[0],
            "rounds": rounds, "heads": HEADS,
            "check": {"passed": check.passed, "case": check.case, "reasons": check.reasons}, "batches": batch_rows,
            "rows": rows, "summary": summarize(rows), "refused": refused}


def summarize(rows: list[dict]) -> list[dict]:
    """Per batch and method: the median TFLOP/s over rounds, its spread (max / min - 1), and the median over rounds of
    the same-round ratio of the method's time to the packed kernel's (lab_varlen's speedup over it)."""
    key = lambda r: tuple(sorted(r["batch"].items()))  # noqa: E731
    by_round = {(key(r), r["method"], r["round"]): r for r in rows}
    out = []
    for batch_key, method in dict.fromkeys((key(r), r["method"]) for r in rows):
        mine = [r for r in rows if key(r) == batch_key and r["method"] == method]
        rates = [r["TFLOP/s"] for r in mine]
        ratios = [r["median_ms"] / by_round[(batch_key, "lab_varlen", r["round"])]["median_ms"] for r in mine
                  if (batch_key, "lab_varlen", r["round"]) in by_round]
        out.append({"batch": dict(batch_key), "method": method, "TFLOP/s": statistics.median(rates),
                    "spread": max(rates) / min(rates) - 1,
                    "time_x_lab_varlen": statistics.median(ratios) if ratios else None,
                    "time_x_lab_varlen_min": min(ratios) if ratios else None})
    return out


def newest_record() -> tuple[dict, Path] | None:
    """The newest committed record (results/h200, else an H100's in results/h100), with its path."""
    return newest_study_record(FILENAME, ROW_KEYS)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one batch, for a smoke run")
    args = parser.parse_args(argv)
    record = study(args.rounds, QUICK_BATCHES if args.quick else BATCHES)
    path = write_json(Path(args.out_dir) / FILENAME, record)
    if not record["check"]["passed"]:
        print("the packed kernel failed its check; nothing timed:", record["check"]["reasons"])
    for b in record["batches"]:
        print(f"{b['batch']}: {b['tokens']} tokens, real work {b['real_share_of_padded_work']:.3f} of padded")
    for s in record["summary"]:
        ratio = s["time_x_lab_varlen"]
        print(f"{s['batch']['mix']:>9} B={s['batch']['B']:<3} {s['batch']['dtype']:<9} {s['method']:<18} "
              f"{s['TFLOP/s']:7.1f} TFLOP/s  spread {s['spread']:.3f}  time x lab_varlen "
              f"{'-' if ratio is None else f'{ratio:.2f}'}")
    for f in record["refused"]:
        print("not timed:", f)
    print(f"written: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
