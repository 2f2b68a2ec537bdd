"""The gemm_tc headline benchmark (every rung and cuBLAS, fp16 and bf16, TN and NN, 4096/8192/4095/4097,
cold L2), saved as records and printed one line each. Usage: python scripts/gemm_tc_headline.py OUT_JSON"""

import sys

from lab import bench, records
from lab.families.gemm_tc import GemmTcFamily


def main(out: str) -> None:
    rs = bench.run(GemmTcFamily(), bench.BenchPlan(kinds=("headline",), min_time_ms=10))
    records.save(out, rs)
    for r in rs.records:
        p = r.params
        print(f"{r.rung:24s} {p['dtype']:8s} {p['layout']} {p['M']:5d} {r.value:7.1f} TFLOP/s {r.ratio:.3f}x "
              f"{r.extra.get('path', '')}")


if __name__ == "__main__":
    main(sys.argv[1])
