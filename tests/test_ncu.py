"""CPU: lab.tools.ncu, the one Nsight Compute module: its CSV reader (by column name, units to base units), its command,
running it, and the sentence for an absent ncu. Then its callers on the same text, and the split-K record read."""

import json
import math
import random
import stat
from pathlib import Path

import pytest

from lab.core.errors import LabError
from lab.lessons import underfill
from lab.studies import checklist, scheduling
from lab.tools import ncu

# What `ncu --csv --metrics ...` prints around two launches each of two kernels: its own ==PROF== lines and the
# target's output before the header, every field quoted (the kernel's signature and the launch sizes hold commas).
GEMM = "void gemm_tile<128, 256>(const __half *, const __half *, __half *, int, int, int)"
NCU_TEXT = """\
==WARNING== Note: Running with unmodified GPU clocks. If not controlled otherwise, profiling results may be \
inconsistent.
==PROF== Connected to process 4242 (/usr/bin/python3.12)
==PROF== Profiling "gemm_tile" - 0: 0%....50%....100% - 9 passes
==PROF== Profiling "bias_gelu" - 1: 0%....50%....100% - 9 passes
target: 2 calls done
==PROF== Profiling "gemm_tile" - 2: 0%....50%....100% - 9 passes
==PROF== Profiling "bias_gelu" - 3: 0%....50%....100% - 9 passes
==PROF== Disconnected from process 4242
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device",\
"CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","4242","python3.12","127.0.0.1","{gemm}","1","7","(256, 1, 1)","(32, 16, 1)","0","9.0",\
"Command line profiler metrics","dram__bytes_read.sum","Mbyte","67.11"
"0","4242","python3.12","127.0.0.1","{gemm}","1","7","(256, 1, 1)","(32, 16, 1)","0","9.0",\
"Command line profiler metrics","gpu__time_duration.sum","usecond","812.38"
"0","4242","python3.12","127.0.0.1","{gemm}","1","7","(256, 1, 1)","(32, 16, 1)","0","9.0",\
"Command line profiler metrics","lts__t_sector_hit_rate.pct","%","81.5"
"1","4242","python3.12","127.0.0.1","bias_gelu","1","7","(128, 1, 1)","(4096, 1, 1)","0","9.0",\
"Command line profiler metrics","dram__bytes_read.sum","Kbyte","33,554.43"
"1","4242","python3.12","127.0.0.1","bias_gelu","1","7","(128, 1, 1)","(4096, 1, 1)","0","9.0",\
"Command line profiler metrics","gpu__time_duration.sum","nsecond","21,504"
"1","4242","python3.12","127.0.0.1","bias_gelu","1","7","(128, 1, 1)","(4096, 1, 1)","0","9.0",\
"Command line profiler metrics","lts__t_sector_hit_rate.pct","%","0.02"
"2","4242","python3.12","127.0.0.1","{gemm}","1","7","(256, 1, 1)","(32, 16, 1)","0","9.0",\
"Command line profiler metrics","dram__bytes_read.sum","Gbyte","0.07"
"2","4242","python3.12","127.0.0.1","{gemm}","1","7","(256, 1, 1)","(32, 16, 1)","0","9.0",\
"Command line profiler metrics","gpu__time_duration.sum","msecond","0.81"
"2","4242","python3.12","127.0.0.1","{gemm}","1","7","(256, 1, 1)","(32, 16, 1)","0","9.0",\
"Command line profiler metrics","lts__t_sector_hit_rate.pct","%","80.25"
"3","4242","python3.12","127.0.0.1","bias_gelu","1","7","(128, 1, 1)","(4096, 1, 1)","0","9.0",\
"Command line profiler metrics","dram__bytes_read.sum","byte","33,554,432"
"3","4242","python3.12","127.0.0.1","bias_gelu","1","7","(128, 1, 1)","(4096, 1, 1)","0","9.0",\
"Command line profiler metrics","gpu__time_duration.sum","us","21.5"
"3","4242","python3.12","127.0.0.1","bias_gelu","1","7","(128, 1, 1)","(4096, 1, 1)","0","9.0",\
"Command line profiler metrics","lts__t_sector_hit_rate.pct","%",""
""".replace("{gemm}", GEMM)

READ, TIME, L2 = "dram__bytes_read.sum", "gpu__time_duration.sum", "lts__t_sector_hit_rate.pct"
# Per launch: (kernel, grid, bytes read, nanoseconds, L2 hit %).
EXPECTED = [(GEMM, "(32, 16, 1)", 67.11e6, 812_380.0, 81.5),
            ("bias_gelu", "(4096, 1, 1)", 33_554.43e3, 21_504.0, 0.02),
            (GEMM, "(32, 16, 1)", 0.07e9, 810_000.0, 80.25),
            ("bias_gelu", "(4096, 1, 1)", 33_554_432.0, 21_500.0, None)]


def _table(launches):
    return [(la.id, la.kernel, la.columns.get("Grid Size"), la.metrics) for la in launches]


def test_parse_reads_each_launch_by_id_in_base_units():
    launches = ncu.parse(NCU_TEXT)
    assert [la.id for la in launches] == [0, 1, 2, 3]
    for la, (kernel, grid, read, ns, l2) in zip(launches, EXPECTED, strict=True):
        assert la.kernel == kernel and la.columns["Grid Size"] == grid and la.columns["Block Size"].startswith("(")
        assert set(la.metrics) == {READ, TIME, L2}
        assert la.metrics[READ] == pytest.approx(read) and la.metrics[TIME] == pytest.approx(ns)
        assert math.isnan(la.metrics[L2]) if l2 is None else la.metrics[L2] == pytest.approx(l2)
    assert launches[0].named({"read": READ, "absent": "sm__cycles_elapsed.avg"}) == {"read": launches[0].metrics[READ]}


def _shuffled(text: str, seed: int) -> str:
    """The same CSV with its columns in another order (header and rows alike); the lines before it kept."""
    import csv
    import io

    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('"ID"'))
    rows = list(csv.reader(lines[start:]))
    order = list(range(len(rows[0])))
    random.Random(seed).shuffle(order)
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows([r[i] for i in order] for r in rows)
    return "\n".join(lines[:start]) + "\n" + out.getvalue()


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_column_order_does_not_matter(seed):
    shuffled = _shuffled(NCU_TEXT, seed)
    assert shuffled != NCU_TEXT
    got, want = _table(ncu.parse(shuffled)), _table(ncu.parse(NCU_TEXT))
    assert [g[:3] for g in got] == [w[:3] for w in want]
    for g, w in zip(got, want, strict=True):
        assert g[3].keys() == w[3].keys()
        assert all(g[3][k] == w[3][k] or (math.isnan(g[3][k]) and math.isnan(w[3][k])) for k in w[3])


@pytest.mark.parametrize("unit,text,base", [
    ("byte", "1,015,808", 1_015_808), ("Kbyte", "512.5", 512.5e3), ("Mbyte", "268.44", 268.44e6),
    ("Gbyte", "1.5", 1.5e9), ("KB", "2", 2e3), ("MB", "2", 2e6), ("GB", "2", 2e9),
    ("nsecond", "26,400", 26_400), ("ns", "8,288", 8_288), ("usecond", "81.25", 81_250), ("us", "1.5", 1_500),
    ("msecond", "2.68", 2.68e6), ("ms", "2.68", 2.68e6), ("second", "1", 1e9),
    ("byte/second", "5", 5), ("Gbyte/second", "147.92", 147.92e9), ("Tbyte/s", "4.2", 4.2e12),
    ("Ghz", "1.98", 1.98e9), ("cycle/nsecond", "1.98", 1.98e9), ("Kbyte/block", "67.58", 67.58e3),
    ("%", "49.87", 49.87), ("", "7", 7), ("inst", "1,024", 1024), ("cycle", "3", 3),
])
def test_units_become_base_units(unit, text, base):
    assert ncu.value(text, unit) == pytest.approx(base)


@pytest.mark.parametrize("text", ["", "n/a", "  "])
def test_a_value_ncu_did_not_give_is_nan(text):
    assert math.isnan(ncu.value(text, "byte"))


def test_rows_without_their_header_need_the_column_names():
    rows = [line for line in NCU_TEXT.splitlines() if line.startswith('"') and not line.startswith('"ID"')]
    assert ncu.parse(rows) == [] and ncu.parse("==PROF== Connected to process 1\n==ERROR== no kernels\n") == []
    assert _table(ncu.parse(rows, columns=ncu.COLUMNS))[:3] == _table(ncu.parse(NCU_TEXT))[:3]
    header = [line for line in NCU_TEXT.splitlines() if line.startswith('"ID"')]
    reordered = _shuffled("\n".join(header + rows) + "\n", 5)
    assert _table(ncu.parse(reordered.splitlines(), columns=ncu.COLUMNS))[:1] == _table(ncu.parse(NCU_TEXT))[:1], \
        "a header in the rows wins over the names given"


# --- the command, running it, and an absent ncu --------------------------------------------------------------

def _after(argv, flag):
    return argv[argv.index(flag) + 1]


def test_command_leaves_the_clocks_alone_and_prints_csv():
    target = ["python3", "-m", "lab.studies.profile", "transpose", "03", '{"rows": 64}']
    argv = ncu.command(target, [READ, L2], binary="/x/ncu", kernel_name="transpose_padded", launch_skip=1,
                       launch_count=1)
    assert argv[0] == "/x/ncu" and argv[-len(target):] == target
    assert _after(argv, "--clock-control") == "none" and _after(argv, "--cache-control") == "all" and "--csv" in argv
    assert _after(argv, "--metrics") == f"{READ},{L2}"
    assert _after(argv, "--kernel-name") == "transpose_padded"
    assert _after(argv, "--launch-skip") == "1" and _after(argv, "--launch-count") == "1"
    assert "--replay-mode" not in argv and "--nvtx" not in argv


def test_command_options_of_every_caller():
    argv = ncu.command(["t"], [READ], binary="ncu", kernel_regex="gemm_tc_split", nvtx_include="call/", replay="range")
    assert _after(argv, "--kernel-name") == "regex:gemm_tc_split" and "--launch-skip" not in argv
    assert "--nvtx" in argv and _after(argv, "--nvtx-include") == "call/" and _after(argv, "--replay-mode") == "range"
    assert _after(ncu.command(["t"], [READ], binary="ncu", clock_control="base"), "--clock-control") == "base"
    with pytest.raises(ValueError):
        ncu.command(["t"], [READ], binary="ncu", kernel_name="a", kernel_regex="b")
    with pytest.raises(ValueError):
        ncu.command(["t"], [READ], binary="ncu", replay="sometimes")


def test_an_absent_ncu_is_one_sentence(monkeypatch, tmp_path):
    monkeypatch.setattr(ncu.shutil, "which", lambda name: None)
    monkeypatch.setattr(ncu, "Path", lambda p: tmp_path / "no_ncu_here")
    assert ncu.find_ncu() is None
    with pytest.raises(LabError) as caught:
        ncu.command(["t"], [READ])
    text = str(caught.value)
    assert text.startswith("Nsight Compute (ncu) is not installed here") and "CUDA toolkit" in text
    assert text.endswith(".") and text.count(". ") == 0 and "\n" not in text
    assert str(ncu.missing("skip the profile step")).endswith("hardware counters, or skip the profile step.")


def _fake_ncu(tmp_path, body: str) -> str:
    script = tmp_path / "ncu"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def test_run_returns_what_ncu_printed_and_says_why_it_failed(tmp_path):
    (tmp_path / "out.txt").write_text(NCU_TEXT)
    assert ncu.run([_fake_ncu(tmp_path, f'cat "{tmp_path}/out.txt"\n')], 30) == NCU_TEXT
    with pytest.raises(LabError, match=r"^ncu failed \(exit 3\): ==ERROR== ERR_NVGPUCTRPERM"):
        ncu.run([_fake_ncu(tmp_path, 'echo "==ERROR== ERR_NVGPUCTRPERM" >&2\nexit 3\n')], 30)
    with pytest.raises(LabError, match=r"^ncu took longer than 0.5 s"):
        ncu.run([_fake_ncu(tmp_path, "sleep 5\n")], 0.5)
    with pytest.raises(LabError, match=r"^ncu could not be started"):
        ncu.run([str(tmp_path / "absent" / "ncu")], 30)


# --- the callers, on the same text ---------------------------------------------------------------------------

def test_scheduling_and_checklist_read_the_same_launches():
    per_launch = scheduling.parse_ncu_launches(NCU_TEXT)
    assert [sorted(p) for p in per_launch] == [["dram_read_bytes", "l2_hit_rate_pct"]] * 4
    assert per_launch[1]["dram_read_bytes"] == pytest.approx(33_554.43e3)
    results = checklist.parse_ncu_results(NCU_TEXT)
    assert [(r["id"], r["name"]) for r in results] == [(0, GEMM), (1, "bias_gelu"), (2, GEMM), (3, "bias_gelu")]
    assert results[2] == {"id": 2, "name": GEMM, "dram_read_bytes": pytest.approx(0.07e9)}


def test_order_counters_runs_one_ncu_process(tmp_path, monkeypatch):
    from lab.measure import records

    (tmp_path / "out.txt").write_text(NCU_TEXT)
    fake = _fake_ncu(tmp_path, f'printf "%s\\n" "$@" > "{tmp_path}/argv.txt"\ncat "{tmp_path}/out.txt"\n')
    monkeypatch.setattr(ncu, "find_ncu", lambda: fake)
    monkeypatch.setattr(records, "provenance", lambda: {"device": "fake"})
    settings = (("row", 0), ("grouped", 8))
    shapes = ({"M": 256, "N": 256, "K": 256}, {"M": 512, "N": 256, "K": 256})
    got = scheduling.order_counters(shapes, settings)
    assert [(r["M"], r["order"]) for r in got["rows"]] == [(256, "row"), (256, "grouped"), (512, "row"),
                                                           (512, "grouped")]
    assert got["rows"][3]["dram_read_bytes"] == 33_554_432.0
    argv = (tmp_path / "argv.txt").read_text().splitlines()
    assert _after(argv, "--clock-control") == "none" and argv[-3:-1] == ["lab.studies.scheduling", "ncu-target"]
    with pytest.raises(LabError, match=r"reported 4 launches for 2 jobs"):
        scheduling.order_counters(shapes[:1], settings)
    monkeypatch.setattr(ncu, "find_ncu", lambda: None)
    with pytest.raises(LabError, match=r"not installed here.*schedule_orders_ncu\.json\.$"):
        scheduling.order_counters(shapes, settings)


# --- the split-K record: rows stored without ncu's header, read by column name ------------------------------

RECORD = Path(__file__).resolve().parents[1] / "results" / "h200" / "split_k_ncu.json"


def test_the_split_k_record_reads_into_its_launches():
    """The committed record's 64 rows (16 kernels), read by name; these values are the ones the positional
    reader this one replaced gave on the same record, equal to the last bit."""
    payload = json.loads(RECORD.read_text())
    kernels = underfill.ncu_kernels(payload["rows"])
    assert len(kernels) == 16 and {k["grid"] for k in kernels} == {"(132, 1, 1)", "(512, 1, 1)", "(128, 1, 1)"}
    shape_a, shape_b = {"M": 256, "N": 256, "K": 65536}, {"M": 128, "N": 128, "K": 131072}
    zero = {"reduce_us": 0.0, "reduce_read": 0.0, "reduce_write": 0.0}
    assert underfill.ncu_launches(payload) == [
        {**shape_a, "mode": "08_split_k", "split_us": 26.016, "split_read": 68176896.0, "split_write": 2260480.0,
         "reduce_us": 8.32, "reduce_read": 17309440.0, "reduce_write": 1536.0, "split_l2_hit_pct": 37.28},
        {**shape_a, "mode": "08_split_k_in_kernel", "split_us": 35.328, "split_read": 68178944.0,
         "split_write": 2390528.0, **zero, "split_l2_hit_pct": 42.49},
        {**shape_a, "mode": "08_split_k_atomic", "split_us": 50.24, "split_read": 68434176.0,
         "split_write": 2235392.0, **zero, "split_l2_hit_pct": 37.73},
        {**shape_b, "mode": "08_split_k", "split_us": 22.144, "split_read": 68169728.0, "split_write": 2392064.0,
         "reduce_us": 7.36, "reduce_read": 8658688.0, "reduce_write": 0.0, "split_l2_hit_pct": 31.1},
        {**shape_b, "mode": "08_split_k_in_kernel", "split_us": 28.512, "split_read": 68168960.0,
         "split_write": 2392832.0, **zero, "split_l2_hit_pct": 34.67},
        {**shape_b, "mode": "08_split_k_atomic", "split_us": 39.584, "split_read": 68234240.0,
         "split_write": 2173440.0, **zero, "split_l2_hit_pct": 31.58},
    ]
