"""The FP32 GEMM ladder in one table, from the H200 records and compile reports: per rung, TFLOP/s at
4096^3 and 8192^3, the ratio to cuBLAS (same run) and to the FP32 peak, registers, shared memory,
theoretical occupancy, and DRAM traffic over the minimum (Nsight Compute). Compile-only, no GPU.

    LAB_NVRTC_LIBRARY=/path/to/libnvrtc.so.13 python scripts/gemm_ladder_table.py results/h200/gemm_ladder.md

Set LAB_NVRTC_LIBRARY to the NVRTC the records were measured with (their provenance says which):
register counts differ between NVRTC versions.
"""

from __future__ import annotations

import sys

from lab.core import device
from lab.core.build import compile_report, nvrtc_version
from lab.core.occupancy import occupancy
from lab.families import get_family
from lab.families.gemm import _knobs, dynamic_smem_bytes
from lab.measure.records import load
from lab.studies import profile

ARCH = device.REFERENCE_ARCH  # the records' GPU
SIZES = (4096, 8192)


def main(out: str) -> None:
    fam = get_family("gemm_fp32")
    rs = load("results/h200/gemm_fp32.json")
    prof = {r["rung"]: r for r in profile.reference_profile("gemm_fp32")["rows"]}
    prov = rs.provenance
    peak = device.fp32_peak(prov["arch"], prov["sm_count"]).tflops
    head = {(r.rung, r.params["M"]): r for r in rs.records if r.kind == "headline"}
    minimum = fam.min_dram_bytes({"M": 4096, "N": 4096, "K": 4096})
    nvrtc = ".".join(map(str, nvrtc_version()))
    lines = [f"FP32 GEMM ladder on the {prov['device']} (records: results/h200/gemm_fp32.json, commit "
             f"{prov['commit'][:7]}, {prov['date'][:10]}, NVRTC {prov['nvrtc']}; compile reports for sm_{ARCH} "
             f"by NVRTC {nvrtc}; FP32 peak {peak:.1f} TFLOP/s; occupancy from lab.core.occupancy; DRAM from "
             "results/h200/gemm_fp32_profile.json at 4096^3).", "",
             "| rung | TFLOP/s 4096^3 | x cuBLAS | x peak | TFLOP/s 8192^3 | x cuBLAS | x peak | registers | "
             "smem B | occupancy (blocks / warps per SM, limit) | DRAM / min |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|"]
    for name in ["cublas_sgemm"] + [r.key for r in fam.rungs]:
        cells = []
        for n in SIZES:
            rec = head[(name, n)]
            cells += [f"{rec.value:.1f}", f"{rec.value / rec.ceiling_value:.3f}", f"{rec.value / peak:.3f}"]
        if name == "cublas_sgemm":
            lines.append(f"| {name} | " + " | ".join(cells) + " | | | | |")
            continue
        rung = fam.rung(name)
        rep = compile_report(rung.spec.with_knobs(VEC=4) if name in fam.VEC_RUNGS else rung.spec, ARCH)
        smem = rep.smem_static_bytes + dynamic_smem_bytes(rung)
        occ = occupancy(ARCH, _knobs(rung)["THREADS"], rep.registers, smem)
        p = prof.get(name, {})
        dram = (p.get("dram_read_bytes", 0) + p.get("dram_write_bytes", 0)) / minimum if p else float("nan")
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {rep.registers} | {smem} | {occ.blocks_per_sm} / "
                     f"{occ.warps_per_sm}, {occ.limited_by} | {dram:.2f}x |")
    text = "\n".join(lines) + "\n"
    print(text)
    if out:
        open(out, "w").write(text)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "")
