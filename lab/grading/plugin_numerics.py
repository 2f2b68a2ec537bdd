"""Exercise 08's functor on chosen values: its int8 numerics (ties to even, saturation, NaN -> 0) judged exactly.

A GEMM's outputs reach an exact tie only by chance, and the reference's error bound lets either neighbouring code
pass wherever v * q_scale sits near a rounding boundary: a wrong tie rule or a wrong NaN code would lose nothing
there. Here the functor (lab_plugin_store_pair) runs through kernels/epilogue/plugin_numerics.cu on accumulators
chosen so that GELU changes nothing in fp32: v >= 10, where tanh is exactly 1 and GELU(v) is exactly v, and
v <= -10, where GELU(v) is exactly 0. Each code is then fully determined by the quantization alone, and checked
with no bound: exact ties of both signs, non-tie fractions, scales that make ties (powers of two, so the product is
exact whatever the arrangement), saturation at 127 and -128, and NaN. No infinities: GELU of an infinity is
NaN in some arrangements of its arithmetic, and the README does not pin that down.

`check_int8_numerics(plugin_path, shown)` builds the harness with the student's file as the plugin (rung 06's
plugin-rung knobs and arch), runs it with the output poisoned and guarded, and says in one sentence what is
wrong, if anything.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from lab.core.errors import LabError

HARNESS_SOURCE = "epilogue/plugin_numerics.cu"
HARNESS_ENTRY = "lab_plugin_numerics"
THREADS = 128
# What q_out and its guards hold before the launch (as lab.measure.check poisons outputs); never an expected code.
POISON = 0x5A
GUARD_BYTES = 256  # before and after q_out: a write there is a write outside M x N


@dataclasses.dataclass(frozen=True)
class Chosen:
    """One chosen accumulator: the value v the functor gets (bias 0), the row's scale, and what it tests."""

    value: float
    q_scale: float
    kind: str  # "tie", "fraction", "saturation", "NaN", "GELU 0"

    @property
    def gelu(self) -> np.float32:
        """GELU(v) in fp32, exact for every chosen value (the lab's float64 GELU, rounded once): v or 0, or NaN."""
        from lab.families.epilogue import gelu_tanh

        with np.errstate(invalid="ignore", over="ignore"):
            return np.float32(gelu_tanh(np.float64(np.float32(self.value))))

    @property
    def code(self) -> int:
        """The int8 code the functor must store: lab.families.epilogue.quantize_int8 of GELU(v) and the scale."""
        from lab.families.epilogue import quantize_int8

        return int(quantize_int8(self.gelu, np.float32(self.q_scale)))


def _rows() -> list[tuple[Chosen, Chosen]]:
    """The chosen values in pairs (one pair per row of the harness: both columns share the row's scale)."""
    nan = float("nan")
    rows: list[tuple[Chosen, Chosen]] = []
    for q in (1.0, -1.0):
        # Ties k + 0.5: to the even code (10.5 -> 10, 11.5 -> 12; with q_scale -1, -10.5 -> -10, -11.5 -> -12).
        # k = 89 is left out: its code, 90, is the poison byte.
        ties = [k + 0.5 for k in (10, 11, 12, 13, 20, 21, 35, 42, 47, 64, 99, 100, 125, 126)]
        values = [Chosen(v, q, "tie") for v in ties]
        values += [Chosen(v, q, "fraction") for v in (10.25, 10.75, 63.4, 100.6)]
        values += [Chosen(v, q, "saturation") for v in (127.5, 128.0, 200.0, 1e30)]
        values += [Chosen(v, q, "GELU 0") for v in (-10.0, -10.5, -100.0, -1e4)]
        values += [Chosen(nan, q, "NaN"), Chosen(nan, q, "NaN")]
        rows += list(zip(values[0::2], values[1::2], strict=True))
    # Scales that make ties (powers of two: the product is exact in fp32, whatever the arrangement).
    rows += [(Chosen(21.0, 0.5, "tie"), Chosen(23.0, 0.5, "tie")),  # 10.5 -> 10, 11.5 -> 12
             (Chosen(21.0, -0.5, "tie"), Chosen(23.0, -0.5, "tie")),  # -10.5 -> -10, -11.5 -> -12
             (Chosen(10.25, 2.0, "tie"), Chosen(10.75, 2.0, "tie")),  # 20.5 -> 20, 21.5 -> 22
             (Chosen(50.0, 0.25, "tie"), Chosen(54.0, 0.25, "tie")),  # 12.5 -> 12, 13.5 -> 14
             (Chosen(100.0, 2.0, "saturation"), Chosen(64.0, 2.0, "saturation")),  # 200, 128 -> 127
             (Chosen(100.0, -2.0, "saturation"), Chosen(nan, -2.0, "NaN"))]  # -200 -> -128; NaN -> 0
    return rows


ROWS = _rows()
CHOSEN: tuple[Chosen, ...] = tuple(c for row in ROWS for c in row)


def expected_codes() -> np.ndarray:
    """The codes the functor must store, row by row (M x 2, int8)."""
    return np.array([[a.code, b.code] for a, b in ROWS], dtype=np.int8)


def harness_spec(plugin_path: Path, shown: str, bf16: int = 0, headers: tuple[str, ...] | None = None):
    """The harness built with `plugin_path` as the plugin header: the knobs, arch and arch suffix of rung 06's
    plugin rung (so the plugin sees the same macros there and here), one quantization scale per row."""
    from lab.core.build import KernelSpec
    from lab.families import get_family

    family = get_family("gemm_tc_epilogue")
    rung = family.rung(family.PLUGIN_RUNG).spec
    knobs = dict(rung.knobs) | {"BF16": int(bf16), "EPI_OUT": 1, "EPI_PLUGIN": 1, "EPI_QROW": 1}
    return KernelSpec(HARNESS_SOURCE, HARNESS_ENTRY, tuple(sorted(knobs.items())), min_arch=rung.min_arch,
                      arch_suffix=rung.arch_suffix, plugin=str(Path(plugin_path).resolve()), label=shown,
                      headers=headers)


def _why_wrong(chosen: Chosen, got: int, bf16: int) -> str:
    """One sentence: what the functor stored for `chosen` and what it must store."""
    want = chosen.code
    v, q = chosen.value, chosen.q_scale
    built = " (built with BF16=1)" if bf16 else ""
    if got == POISON:
        return (f"lab_plugin_store_pair{built} left the code for acc {v:g} x q_scale {q:g} unwritten (the byte still "
                f"holds the poison 0x{POISON:02X}); every column inside N must be stored (here {want}).")
    start = f"lab_plugin_store_pair{built} gave code {got} for "
    if chosen.kind == "NaN":
        return start + f"a NaN accumulator (x q_scale {q:g}): NaN must give code 0, as cvt.rni.sat.s8.f32 does."
    scaled = float(np.float32(v) * np.float32(q))
    if chosen.kind == "GELU 0":
        return (start + f"acc {v:g} x q_scale {q:g}: GELU({v:g}) is exactly 0 in fp32 (tanh is -1), so the code "
                "is 0.")
    what = f"acc {v:g} x q_scale {q:g} (= {scaled:g}"
    if chosen.kind == "tie":
        return (start + what + ", a tie; GELU leaves it unchanged in fp32): round to nearest with ties to even "
                f"gives {want}.")
    if chosen.kind == "saturation":
        return (start + what + f", past the int8 range; GELU leaves it unchanged in fp32): it saturates to {want}.")
    return start + what + f"; GELU leaves it unchanged in fp32): round to nearest gives {want}."


def _run(spec, rows: int) -> tuple[np.ndarray, int, int]:
    """One launch of the harness: (the M x 2 codes, guard bytes changed before q_out, after it)."""
    import cupy as cp

    from lab.core.build import get_kernel
    from lab.families.epilogue import kernel_params

    acc = cp.asarray(np.array([[a.value, b.value] for a, b in ROWS], dtype=np.float32))
    q_scale = cp.asarray(np.array([a.q_scale for a, _ in ROWS], dtype=np.float32))
    bias = cp.zeros(2, dtype=cp.float32)
    size = 2 * rows
    buf = cp.full(GUARD_BYTES + size + GUARD_BYTES, POISON, dtype=cp.uint8)
    q_out = buf[GUARD_BYTES:GUARD_BYTES + size]
    params = kernel_params(bias=bias, q_scale=q_scale, q_out=q_out, ld_q=2)
    grid = ((rows + THREADS - 1) // THREADS,)
    get_kernel(spec)(grid, (THREADS,), (acc, np.int32(rows), params))
    cp.cuda.get_current_stream().synchronize()
    host = buf.get()
    before = int(np.count_nonzero(host[:GUARD_BYTES] != POISON))
    after = int(np.count_nonzero(host[GUARD_BYTES + size:] != POISON))
    return host[GUARD_BYTES:GUARD_BYTES + size].view(np.int8).reshape(rows, 2), before, after


def check_int8_numerics(plugin_path: Path, shown: str, headers: tuple[str, ...] | None = None) -> tuple[bool, str]:
    """Run the functor in `plugin_path` (named `shown` in messages) on the chosen values, built for fp16 and bf16
    (IS_BF16 0 and 1) with the lab `headers` a submission is given (None: all). (True, a summary) when every code is
    exact and nothing outside the output changed, else (False, one sentence naming the first wrong value, or the
    compile error). A CUDA error (a functor that faults) is raised: the grader records it as the check's crash."""
    want = expected_codes()
    rows = len(ROWS)
    for bf16 in (0, 1):
        try:
            got, before, after = _run(harness_spec(plugin_path, shown, bf16, headers), rows)
        except LabError as exc:
            return False, str(exc)
        if before or after:
            where = f"{before} byte(s) before it" if before else f"{after} byte(s) after it"
            return False, (f"lab_plugin_store_pair wrote outside q_out on the chosen values ({where}, with M = {rows}, "
                           "N = 2, ld_q = 2): write only the columns inside N of rows inside M.")
        wrong = np.argwhere(got != want)
        if wrong.size:
            r, c = (int(i) for i in wrong[0])
            return False, _why_wrong(ROWS[r][c], int(got[r, c]), bf16)
    return True, f"ties, saturation and NaN: all {len(CHOSEN)} chosen values exact"
