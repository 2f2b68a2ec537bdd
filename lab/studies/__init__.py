"""Measurements that write records: each study runs (most of them on a GPU) and leaves one JSON record with its
provenance, which the lessons read.

STUDIES is the one list of them: `lab study` lists it, and `lab study NAME --out DIR [options]` runs one entry. An
entry names the module that measures, the one-line description of what it measures, the record it writes under the
output folder, whether it needs a GPU, and the options its module's `run` takes. Every such module exposes

    run(out_dir: Path, **options) -> Path     (the record file it wrote)

Where a module holds several studies (lab.studies.scheduling, ops_study, ops_sweep), the entry also fixes the
keyword that picks one (`study=...`). The modules are imported only when a study runs, so listing them needs
neither CuPy nor a GPU.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from lab.core.errors import LabError


@dataclass(frozen=True)
class Option:
    """One keyword of a study's `run`, as `lab study NAME` takes it: `name` is the keyword (the flag is --name with
    '-' for '_'); a bool defaulting to False is the flag --name, one defaulting to True the flag --no-name."""

    name: str
    type: type = str
    default: object = None
    help: str = ""
    many: bool = False  # one or more values (a tuple)
    choices: tuple = ()
    at_least: int | None = None  # the smallest value an int takes

    @property
    def flag(self) -> str:
        dashed = self.name.replace("_", "-")
        return f"--no-{dashed}" if self.type is bool and self.default is True else f"--{dashed}"


@dataclass(frozen=True)
class Study:
    name: str
    module: str  # "lab.studies.l2": its run(out_dir, **fixed, **options) -> Path measures and writes
    what: str  # what it measures, in one line
    record: str  # the file it writes under out_dir
    needs_gpu: bool = True
    options: tuple[Option, ...] = ()
    fixed: dict = field(default_factory=dict)  # keywords the entry always passes (which study of the module)

    def load(self) -> ModuleType:
        return importlib.import_module(self.module)

    def run(self, out_dir: Path | str, **options) -> Path:
        """Measure, write the record under out_dir and return its path (the module's run, with this entry's
        keywords)."""
        return self.load().run(Path(out_dir), **self.fixed, **options)


_QUICK = Option("quick", bool, False, "fewer sizes and shorter timings (a smoke run)")


def _scheduling(name: str, what: str, options: tuple[Option, ...] = ()) -> Study:
    from_files = {"orders": "schedule_orders.json", "counters": "schedule_orders_ncu.json",
                  "fp32": "schedule_orders_fp32.json", "streamk": "schedule_stream_k.json",
                  "items": "small_items.json"}  # lab.studies.scheduling.STUDY_FILES (a test holds them equal)
    return Study(name, "lab.studies.scheduling", what, from_files[name], options=options, fixed={"study": name})


def _ops(name: str, study: str, what: str, record: str) -> Study:
    return Study(name, "lab.studies.ops_study", what, record, fixed={"study": study})


STUDIES: dict[str, Study] = {s.name: s for s in (
    Study("l2", "lab.studies.l2", "copy bandwidth against working set around the L2; launch cost", "l2.json",
          options=(_QUICK,)),
    Study("probes", "lab.studies.anomalies", "why copy runs slower warm than cold, and its tail's zigzag",
          "l2_probes.json", options=(Option("experiments", str, ("warm_cold", "tail_order"), "which experiments",
                                            many=True, choices=("warm_cold", "tail_order")),)),
    Study("transpose-variants", "lab.studies.alignment", "transpose rungs under knob variants, misaligned shapes",
          "transpose_variants.json"),
    _scheduling("orders", "gemm_tc rung 06's tile orders timed against cuBLAS"),
    _scheduling("counters", "the same tile orders: L2 hit rate and DRAM bytes (ncu)"),
    _scheduling("fp32", "tile orders on FP32 rung 08, timed and read by ncu"),
    _scheduling("streamk", "stream-K (gemm_tc rung 07) against the wave sawtooth"),
    _scheduling("items", "small work items: launches, a graph, batched, a queue", options=(
        Option("quick", bool, False, "fewer lengths and items (a smoke run)"),
        Option("n_items", int, None, "items per length (default: the study's)", at_least=1),
        Option("blocks_per_sm", int, None, "blocks of the persistent kernel per SM (default: as many as fit)",
               at_least=1))),
    Study("splitk", "lab.studies.split_k", "split-K: TFLOP/s against the split factor; atomic bits",
          "split_k_factors.json"),
    Study("splitk-rounds", "lab.studies.split_k_rounds", "split-K's workspace and cluster modes against torch.mm "
          "and cuBLASLt, in rounds", "split_k_rounds.json",
          options=(Option("rounds", int, 3, "interleaved rounds", at_least=1),)),
    Study("splitk-plans", "lab.studies.split_k_plans", "split-K's cluster mode, every plan that runs in one wave, "
          "beside the workspace mode and the library", "split_k_plans.json",
          options=(Option("rounds", int, 3, "interleaved rounds", at_least=1),)),
    Study("streamk-clusters", "lab.studies.stream_k_cluster_study", "stream-K over clusters (gemm_tc rung 12) "
          "beside rung 10's tiles and the library", "stream_k_cluster_study.json",
          options=(Option("rounds", int, 3, "interleaved rounds", at_least=1),
                   Option("quick", bool, False, "one shape (a smoke run)"))),
    Study("fused-epilogue", "lab.studies.fused_epilogue_study", "GEMM + bias + GELU fused on rungs 06 and 10 "
          "against torch's F.gelu(F.linear(...))", "fused_epilogue_study.json",
          options=(Option("rounds", int, 3, "interleaved rounds", at_least=1),
                   Option("quick", bool, False, "one case (a smoke run)"))),
    Study("grouped-table-cost", "lab.studies.grouped_table_cost", "host time to build grouped GEMM's problem table",
          "grouped_table_cost.json", options=(Option("repeats", int, 5, "builds timed per case", at_least=1),)),
    Study("checklist", "lab.studies.checklist", "the optimization checklist on GEMM + bias + GELU", "checklist.json",
          options=(Option("sizes", int, (4096, 8192), "M = N = K of each timed problem", many=True, at_least=1),
                   Option("ncu", bool, True, "skip Nsight Compute (no DRAM bytes)"),
                   Option("replay", str, "kernel", "Nsight Compute's replay: per kernel with caches flushed before "
                          "each, or the whole call as one range", choices=("kernel", "range")),
                   Option("min_time_ms", float, 50.0, "minimum measured time per timing"))),
    Study("compile", "lab.studies.compile_study", "compile time and cache size as variants multiply",
          "compile_variants.json", needs_gpu=False, options=(Option("quick", bool, False, "a tiny grid (seconds)"),)),
    Study("ops-sweep", "lab.studies.ops_sweep", "lab.ops's paths, the library, PyTorch; the table from them",
          "ops_sweep.json", fixed={"study": "sweep"},
          options=(Option("rounds", int, 3, "interleaved rounds per sample", at_least=1),
                   Option("classes", str, None, "only these shape classes (default: all)", many=True),
                   Option("write_table", Path, None, "also write the chosen table to this file"))),
    Study("ops-host-cost", "lab.studies.ops_sweep", "host time per call: lab.ops against PyTorch",
          "ops_host_cost.json", fixed={"study": "host-cost"}),
    _ops("ops-tune", "tune", "autotune of every bucket of the serving trace", "ops_tune.json"),
    _ops("ops-trace", "trace", "the serving trace: lab.ops against cuBLAS and fixed kernels", "ops_trace.json"),
    _ops("ops-trace-gemms", "trace-gemms", "the serving trace's GEMMs alone against cuBLAS", "ops_trace_gemms.json"),
    _ops("ops-overhead", "overhead", "host time per lab.ops call against a raw replay", "ops_overhead.json"),
    _ops("ops-latency", "latency", "first-request latency: cold, warm, with a warm-up manifest", "ops_latency.json"),
    Study("ops-compare", "lab.studies.ops_compare", "lab.ops against PyTorch on a serving trace, eager and graphed",
          "ops_vs_torch_<model>_<dtype>.json",
          options=(Option("model", str, "llama3_8b", "the model's layer", choices=("llama3_8b", "qwen25_7b")),
                   Option("dtype", str, "float16", "the type", choices=("float16", "bfloat16")),
                   Option("steps", int, 240, "steps of the serving trace (one layer each)", at_least=1),
                   Option("rounds", int, 3, "interleaved rounds of the four methods", at_least=1),
                   Option("seed", int, 0, "the trace's seed"))),
    Study("cluster-rows", "lab.studies.cluster_rows_study", "long rows over a thread-block cluster against the rung "
          "before, PyTorch and the copy", "cluster_rows_study.json",
          options=(Option("rounds", int, 3, "interleaved rounds", at_least=1),
                   Option("quick", bool, False, "n = 32768 only"))),
    Study("rowops", "lab.studies.rowops_study", "row ops timed several ways, in rounds, beside PyTorch",
          "rowops_study.json", options=(Option("rounds", int, 3, "interleaved rounds", at_least=1),
                                        Option("quick", bool, False, "half the cases"))),
)}


def get(name: str) -> Study:
    """The study of that name, or one sentence naming the ones there are."""
    try:
        return STUDIES[name]
    except KeyError:
        raise LabError(f"no study {name}; the studies are {', '.join(STUDIES)}.") from None
