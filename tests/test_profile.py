"""CPU: Nsight Compute CSV parsing, and kernel_counters' behaviour when ncu is absent or fails."""

import json
import math
import stat

import pytest

from lab.core.errors import LabError
from lab.studies import profile

# What `ncu --csv --metrics ... python -m lab.studies.profile ...` prints: the profiler's own ==PROF== lines,
# then one CSV row per metric (thousands separators and all).
NCU_OUTPUT = """\
==PROF== Connected to process 41233 (/usr/bin/python3.11)
==PROF== Profiling "transpose_padded" - 0: 0%....50%....100% - 9 passes
==PROF== Disconnected from process 41233
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",\
"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","41233","python3.11","127.0.0.1","transpose_padded","1","7","(32, 8, 1)","(256, 256, 1)","0","9.0",\
"Command line profiler metrics","dram__bytes_read.sum","Mbyte","268.44"
"0","41233","python3.11","127.0.0.1","transpose_padded","1","7","(32, 8, 1)","(256, 256, 1)","0","9.0",\
"Command line profiler metrics","dram__bytes_write.sum","Kbyte","512.50"
"0","41233","python3.11","127.0.0.1","transpose_padded","1","7","(32, 8, 1)","(256, 256, 1)","0","9.0",\
"Command line profiler metrics","l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum","","1,015,808"
"0","41233","python3.11","127.0.0.1","transpose_padded","1","7","(32, 8, 1)","(256, 256, 1)","0","9.0",\
"Command line profiler metrics","l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum","","0"
"0","41233","python3.11","127.0.0.1","transpose_padded","1","7","(32, 8, 1)","(256, 256, 1)","0","9.0",\
"Command line profiler metrics","l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum","","2,097,152"
"0","41233","python3.11","127.0.0.1","transpose_padded","1","7","(32, 8, 1)","(256, 256, 1)","0","9.0",\
"Command line profiler metrics","lts__t_sector_hit_rate.pct","%","49.87"
"0","41233","python3.11","127.0.0.1","transpose_padded","1","7","(32, 8, 1)","(256, 256, 1)","0","9.0",\
"Command line profiler metrics","gpu__time_duration.sum","usecond","81.25"
"""

EXPECTED = {
    "dram_read_bytes": 268.44e6,
    "dram_write_bytes": 512.5e3,
    "smem_bank_conflicts_ld": 1_015_808,
    "smem_bank_conflicts_st": 0,
    "smem_wavefronts_ld": 2_097_152,
    "l2_hit_rate_pct": 49.87,
}


def test_parse_ncu_csv_maps_names_and_units():
    got = profile.parse_ncu_csv(NCU_OUTPUT)
    assert set(got) == set(EXPECTED), "unknown metrics (gpu__time_duration) are left out, known ones all read"
    for name, value in EXPECTED.items():
        assert got[name] == pytest.approx(value), name


@pytest.mark.parametrize("unit,scale", [("byte", 1), ("Kbyte", 1e3), ("Mbyte", 1e6), ("Gbyte", 1e9)])
def test_parse_ncu_csv_byte_units(unit, scale):
    text = f'"ID","Metric Name","Metric Unit","Metric Value"\n"0","dram__bytes_read.sum","{unit}","1.5"\n'
    assert profile.parse_ncu_csv(text)["dram_read_bytes"] == pytest.approx(1.5 * scale)


def test_parse_ncu_csv_empty_value_is_nan():
    text = '"ID","Metric Name","Metric Unit","Metric Value"\n"0","lts__t_sector_hit_rate.pct","%",""\n'
    assert math.isnan(profile.parse_ncu_csv(text)["l2_hit_rate_pct"])


@pytest.mark.parametrize(
    "text", ["", "==PROF== Connected to process 1\n==ERROR== The application returned an error\n"]
)
def test_no_csv_is_a_lab_error(text):
    with pytest.raises(LabError, match="ncu printed no metrics"):
        profile.parse_ncu_csv(text)


def test_metric_names_are_unique():
    assert len(set(profile.METRICS.values())) == len(profile.METRICS)


def test_kernel_counters_without_ncu_is_a_lab_error(monkeypatch):
    monkeypatch.setattr(profile, "find_ncu", lambda: None)
    with pytest.raises(LabError, match=r"Nsight Compute \(ncu\) is not installed"):
        profile.kernel_counters("transpose", "03", {"rows": 64, "cols": 64})


def _fake_ncu(tmp_path, body: str):
    script = tmp_path / "ncu"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def test_kernel_counters_runs_ncu_and_parses_its_output(tmp_path, monkeypatch):
    (tmp_path / "out.txt").write_text(NCU_OUTPUT)
    ncu = _fake_ncu(tmp_path, f'printf "%s\\n" "$@" > "{tmp_path}/argv.txt"\ncat "{tmp_path}/out.txt"\n')
    monkeypatch.setattr(profile, "find_ncu", lambda: str(ncu))
    got = profile.kernel_counters("transpose", "03", {"rows": 64, "cols": 64})
    assert got == pytest.approx(EXPECTED)
    argv = (tmp_path / "argv.txt").read_text().splitlines()
    assert argv[argv.index("--clock-control") + 1] == "none"  # the lab never locks the GPU's clocks
    assert argv[argv.index("--kernel-name") + 1] == "transpose_padded"
    assert set(argv[argv.index("--metrics") + 1].split(",")) == set(profile.METRICS.values())
    assert argv[-4:] == ["lab.studies.profile", "transpose", "03", json.dumps({"rows": 64, "cols": 64})]


def test_kernel_counters_reports_an_ncu_failure(tmp_path, monkeypatch):
    ncu = _fake_ncu(tmp_path, 'echo "==ERROR== ERR_NVGPUCTRPERM: no permission" >&2\nexit 1\n')
    monkeypatch.setattr(profile, "find_ncu", lambda: str(ncu))
    with pytest.raises(LabError, match=r"ncu failed \(exit 1\).*ERR_NVGPUCTRPERM"):
        profile.kernel_counters("copy", "01", {"n": 1024})


def test_find_ncu_uses_the_path(tmp_path, monkeypatch):
    ncu = _fake_ncu(tmp_path, "exit 0\n")
    monkeypatch.setenv("PATH", str(tmp_path))
    assert profile.find_ncu() == str(ncu)


# --- what `lab profile` runs, and the table it prints ----------------------------------------------

def test_profile_plan_for_gemm_tc_on_the_h200():
    from lab.families import get_family

    fam = get_family("gemm_tc")
    plan = profile.profile_plan(fam, arch=90)
    assert plan["params"] == {"M": 4096, "N": 4096, "K": 4096, "layout": "TN", "dtype": "float16"}
    assert [r.key for r in plan["rungs"]] == [r.key for r in fam.rungs] and plan["skipped"] == []
    assert profile.profile_plan(fam, {"M": 512, "N": 512, "K": 512}, 90)["params"] == {"M": 512, "N": 512, "K": 512}


def test_profile_plan_skips_what_the_gpu_cannot_run():
    from lab.families import get_family

    fam = get_family("gemm_tc")
    plan = profile.profile_plan(fam, arch=80)
    assert [r.key for r in plan["rungs"]] == [r.key for r in fam.rungs if r.spec.min_arch <= 80]
    assert [s["rung"] for s in plan["skipped"]] == [r.key for r in fam.rungs if r.spec.min_arch > 80]
    assert all(s["reason"].startswith("needs sm_") for s in plan["skipped"])
    assert profile.profile_plan(fam)["skipped"] == [], "no arch given: nothing is refused"


def test_ladder_counters_reads_every_runnable_rung_of_gemm_tc(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from lab.core import device
    from lab.families import get_family
    from lab.measure import records

    fam = get_family("gemm_tc")
    (tmp_path / "out.txt").write_text(NCU_OUTPUT)
    ncu = _fake_ncu(tmp_path, f'printf "%s\\n" "$@" >> "{tmp_path}/argv.txt"\ncat "{tmp_path}/out.txt"\n')
    monkeypatch.setattr(profile, "find_ncu", lambda: str(ncu))
    monkeypatch.setattr(device, "current", lambda: SimpleNamespace(arch=80))
    monkeypatch.setattr(records, "provenance", lambda: {"device": "fake"})
    heard = []
    payload = profile.ladder_counters("gemm_tc", on_error=lambda key, exc: heard.append((key, str(exc))))
    runnable = [r for r in fam.rungs if r.spec.min_arch <= 80]
    assert [r["rung"] for r in payload["rows"]] == [r.key for r in runnable]
    assert payload["rows"][0]["smem_bank_conflicts_ld"] == EXPECTED["smem_bank_conflicts_ld"]
    assert payload["params"] == fam.headline_params()[0] and payload["provenance"] == {"device": "fake"}
    skipped = [r.key for r in fam.rungs if r.spec.min_arch > 80]
    assert [s["rung"] for s in payload.get("skipped", [])] == skipped
    assert [key for key, _ in heard] == skipped and all("skipped: needs sm_" in msg for _, msg in heard)
    argv = (tmp_path / "argv.txt").read_text().splitlines()
    names = [argv[i + 1] for i, a in enumerate(argv) if a == "--kernel-name"]
    assert names == [r.spec.entry for r in runnable]
    assert argv.count(json.dumps(fam.headline_params()[0])) == len(runnable)


def test_the_profile_table_shows_the_conflicts_share_of_load_wavefronts():
    from lab.studies import report

    rows = [{"rung": "02_ldmatrix_smem", "smem_bank_conflicts_ld": 1_048_576, "smem_wavefronts_ld": 4_194_304},
            {"rung": "03_swizzled_multistage", "smem_bank_conflicts_ld": 0, "smem_wavefronts_ld": 2_097_152},
            {"rung": "old_file", "smem_bank_conflicts_ld": 12}]
    assert [report.conflict_share(r) for r in rows] == ["25.0%", "0.0%", "-"]
    table = report.profile_markdown({"rows": rows}).splitlines()
    assert "of ld wavefronts" in table[0] and table[0].count("|") == table[1].count("|") == table[2].count("|")
    assert "| 02_ldmatrix_smem | 1048576 | 25.0% |" in table[2]
