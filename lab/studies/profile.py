"""Nsight Compute, when present: hardware counters for one launch of one rung.

`ncu` must wrap a process, so the helper re-runs this module as a small target program that
launches the rung once (after a warm-up launch that ncu skips); lab.tools.ncu builds the command and reads ncu's CSV
output. Counters read with `--clock-control none`: the lab never changes the GPU's clocks.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from lab.core.errors import LabError
from lab.measure.records import write_json
from lab.tools import ncu
from lab.tools.ncu import find_ncu  # also lab.studies.profile.find_ncu: the name the CLI, the tour and the doctor call

METRICS = {
    "l2_hit_rate_pct": "lts__t_sector_hit_rate.pct",
    "dram_read_bytes": "dram__bytes_read.sum",
    "dram_write_bytes": "dram__bytes_write.sum",
    "smem_bank_conflicts_ld": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "smem_bank_conflicts_st": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "smem_wavefronts_ld": "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    # ldmatrix (SASS LDSM) is counted apart from plain shared loads: the tensor-core ladder's reads.
    "smem_bank_conflicts_ldsm": "sm__sass_l1tex_data_bank_conflicts_pipe_lsu_mem_shared_op_ldsm.sum",
    "smem_wavefronts_ldsm": "sm__sass_l1tex_data_pipe_lsu_wavefronts_mem_shared_op_ldsm.sum",
}


def parse_ncu_csv(text: str) -> dict[str, float]:
    """ncu --csv output -> {lab name (METRICS): value in base units}, over every launch it reports."""
    launches = ncu.parse(text)
    if not launches:
        raise LabError(f"ncu printed no metrics; its output ended with:\n{text[-800:]}")
    out: dict[str, float] = {}
    for launch in launches:
        out.update(launch.named(METRICS))
    return out


def kernel_counters(family: str, rung: str, params: dict, timeout_s: int = 300) -> dict[str, float]:
    """Counters for one launch of `rung` on `params`; LabError when ncu is absent or fails."""
    from lab.families import get_family

    binary = find_ncu()
    if binary is None:
        raise ncu.missing("skip the profile step")
    entry = get_family(family).rung(rung).spec.entry
    target = [sys.executable, "-m", "lab.studies.profile", family, rung, json.dumps(params)]
    cmd = ncu.command(target, METRICS.values(), binary=binary, kernel_name=entry, launch_skip=1, launch_count=1)
    return parse_ncu_csv(ncu.run(cmd, timeout_s))


def profile_plan(fam, params: dict | None = None, arch: int | None = None) -> dict:
    """What `lab profile` runs for a family: the problem (`params`, else the family's first headline size),
    the rungs ncu reads on a GPU of `arch`, and the rungs that GPU cannot run, with the reason."""
    from lab.core.build import arch_refusal

    refusals = {r.key: arch_refusal(r.spec, arch) if arch is not None else None for r in fam.rungs}
    return {"params": params or fam.headline_params()[0],
            "rungs": [r for r in fam.rungs if not refusals[r.key]],
            "skipped": [{"rung": key, "reason": why} for key, why in refusals.items() if why]}


def ladder_counters(family: str, params: dict | None = None, on_error=None) -> dict | None:
    """Counters for one launch of every rung of a family, as a payload with provenance.

    None when ncu is absent or no rung could be read; `on_error(rung_key, LabError)` hears failures and
    the rungs this GPU cannot run (listed under "skipped" in the payload too).
    """
    from lab.core import device
    from lab.families import get_family
    from lab.measure.records import provenance

    fam = get_family(family)
    if find_ncu() is None:
        return None
    plan = profile_plan(fam, params, device.current().arch)
    rows = []
    for skipped in plan["skipped"]:
        if on_error:
            on_error(skipped["rung"], LabError(f"skipped: {skipped['reason']}"))
    for rung in plan["rungs"]:
        try:
            rows.append({"rung": rung.key, **kernel_counters(fam.name, rung.key, plan["params"])})
        except LabError as exc:
            if on_error:
                on_error(rung.key, exc)
    if not rows:
        return None
    payload = {"provenance": provenance(), "params": plan["params"], "rows": rows, "replayed": False}
    return payload | ({"skipped": plan["skipped"]} if plan["skipped"] else {})


def save(path: Path | str, payload: dict) -> Path:
    """Write a profile payload (what ladder_counters returns) as JSON: results/h200/<family>_profile.json
    is one, replayed by the notebooks and the tour where no GPU (or no ncu) is present."""
    path = Path(path)
    write_json(path, payload)
    return path


def dram_rows(payload: dict, minimum: int | None) -> list[dict]:
    """Per rung: DRAM bytes read, written, their sum, and the sum over the problem's minimum (or None)."""
    rows = []
    for r in payload["rows"]:
        read, write = r.get("dram_read_bytes"), r.get("dram_write_bytes")
        if read is None or write is None:
            continue
        total = read + write
        rows.append({"rung": r["rung"], "read": read, "write": write, "total": total,
                     "over_minimum": total / minimum if minimum else None})
    return rows


def reference_profile(family: str) -> dict | None:
    """The reference GPU's profile payload (results/h200/<family>_profile.json), or None."""
    from lab.measure.records import reference_dir

    try:
        payload = json.loads((reference_dir() / f"{family}_profile.json").read_text())
    except (OSError, json.JSONDecodeError):
        return None
    if not isinstance(payload, dict) or not isinstance(payload.get("rows"), list):
        return None
    payload["replayed"] = True
    return payload


def _target(family: str, rung: str, params_json: str) -> None:
    """The program ncu profiles: two launches of the rung (the first is skipped as warm-up)."""
    import cupy as cp

    from lab.families import get_family

    fam = get_family(family)
    problem = fam.make_problem(seed=3, **json.loads(params_json))
    out = cp.empty(problem.out_shape, dtype=problem.dtype)
    for _ in range(2):
        fam.launch(fam.rung(rung), problem, out)
    cp.cuda.get_current_stream().synchronize()


if __name__ == "__main__":
    _target(*sys.argv[1:4])
