"""CPU: the `lab` command answers mistakes with one sentence and exit status 2, never a traceback."""

import re

import pytest
from rich.console import Console

from lab import cli
from lab.core import build, device


@pytest.fixture(autouse=True)
def plain_console(monkeypatch):
    """The CLI's console, writing plain text to the (captured) stdout without hard line wraps."""
    monkeypatch.setattr(
        cli, "console", Console(soft_wrap=True, width=200, color_system=None, highlight=False)
    )


@pytest.fixture
def no_gpu(monkeypatch):
    """Behave as on a machine without a GPU, even where one is present."""
    monkeypatch.setattr(device, "_probe", lambda: "no GPU here (simulated by the test)")


def _one_line_error(capsys, *fragments: str) -> str:
    out, err = capsys.readouterr()
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line, got:\n{out}"
    assert lines[0].startswith("error: "), lines[0]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    assert "Traceback" not in out + err
    return lines[0]


@pytest.mark.parametrize("command", ["inspect", "verify", "bench", "profile"])
def test_unknown_family(command, capsys, no_gpu):
    assert cli.main([command, "nope"]) == 2
    _one_line_error(capsys, "Unknown family 'nope'", "copy", "transpose")


def test_unknown_rung(capsys):
    assert cli.main(["inspect", "copy/99"]) == 2
    _one_line_error(capsys, "copy has no rung '99'", "01_naive")


def test_unknown_rung_in_verify(capsys, no_gpu):
    assert cli.main(["verify", "transpose", "--rung", "17"]) == 2
    _one_line_error(capsys, "transpose has no rung '17'")


@pytest.mark.parametrize("arch", ["foo", "sm_x", "9O"])
def test_malformed_arch_is_an_argparse_error(arch, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["inspect", "copy/01", "--arch", arch])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "is not an arch" in err and "Traceback" not in err


def test_arch_too_old_for_every_rung(capsys):
    assert cli.main(["inspect", "copy", "--arch", "35"]) == 2
    _one_line_error(capsys, "sm_35", "sm_75")


def test_arch_nvrtc_cannot_build(capsys):
    assert cli.main(["inspect", "copy/01", "--arch", "91"]) == 2
    _one_line_error(capsys, "cannot build for sm_91")


@pytest.mark.parametrize("knob", ["UNROLL", "UNROLL=", "UNROLL=four", "=4"])
def test_bad_knob(knob, capsys):
    assert cli.main(["inspect", "copy/04", "--knob", knob]) == 2
    _one_line_error(capsys, "--knob takes NAME=INTEGER", repr(knob))


def test_unknown_kinds(capsys, no_gpu):
    assert cli.main(["bench", "copy", "--kinds", "headline,bogus"]) == 2
    _one_line_error(capsys, "--kinds", "bogus")


@pytest.mark.parametrize(
    "argv",
    [
        ["verify", "copy"],
        ["verify", "transpose", "--rung", "02"],
        ["bench", "copy"],
        ["bench", "copy", "--kinds", "headline", "--quick"],
        ["study", "streamk"],
    ],
)
def test_gpu_commands_without_a_gpu_say_so(argv, capsys, no_gpu):
    assert cli.main(argv) == 2
    line = _one_line_error(capsys, "needs a CUDA GPU", "simulated by the test")
    assert "lab inspect" in line  # says what does work here


def test_inspect_prints_the_compile_table(capsys):
    assert cli.main(["inspect", "copy/03", "--arch", "80", "90"]) == 0
    out = capsys.readouterr().out
    assert "Compile report" in out
    rows = [line for line in out.splitlines() if "copy/03_vectorized.cu" in line]
    assert len(rows) == 2, out
    assert "sm_80" in rows[0] and "sm_90" in rows[1]
    for row in rows:
        if build.find_nvdisasm() is None:
            assert "(no nvdisasm)" in row
        else:
            assert re.search(r"LDG\.128x\d+", row) and re.search(r"STG\.128x\d+", row), row


def test_inspect_applies_knobs(capsys):
    from lab.families import get_family

    tile = dict(get_family("transpose").rung("03").spec.knobs)["TILE"]
    other = 16 if tile != 16 else 8

    def smem_column(argv):
        assert cli.main(argv) == 0
        row = next(line for line in capsys.readouterr().out.splitlines() if "transpose/03_padded.cu" in line)
        return int(row.split("│")[4])  # kernel | arch | regs | smem B | ...

    # The padded tile is TILE x (TILE + 1) floats: the smem column follows the knob.
    assert smem_column(["inspect", "transpose/03", "--arch", "90"]) == tile * (tile + 1) * 4
    assert (
        smem_column(["inspect", "transpose/03", "--arch", "90", "--knob", f"TILE={other}"])
        == other * (other + 1) * 4
    )


@pytest.mark.parametrize("argv", [[], ["frobnicate"], ["inspect", "--bogus-flag"], ["bench"]])
def test_argparse_errors_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    assert info.value.code == 2
    assert "usage: lab" in capsys.readouterr().err


def test_tour_with_an_unknown_family(tmp_path, capsys, no_gpu):
    assert cli.main(["tour", "--family", "nope", "--out", str(tmp_path / "report")]) == 2
    _one_line_error(capsys, "Unknown family 'nope'")


def test_doctor_lists_what_is_here(capsys, no_gpu):
    assert cli.main(["doctor"]) == 0
    out = capsys.readouterr().out
    for item in ("NVIDIA driver", "CuPy", "NVRTC", "nvdisasm", "GPU", "Nsight Compute"):
        assert item in out, out
    assert "simulated by the test" in out


def test_profile_params_must_be_a_json_object(capsys, no_gpu):
    assert cli.main(["profile", "gemm_fp32", "--params", "M=4096"]) == 2
    _one_line_error(capsys, "--params takes a JSON object")


def test_profile_without_a_gpu_is_one_sentence(capsys, no_gpu):
    assert cli.main(["profile", "gemm_fp32", "--json", "/nonexistent/p.json"]) == 2
    _one_line_error(capsys, "This needs a CUDA GPU")


# ----------------------------------------------------------------------------------------------
# The student's side: knobs, families, a student's file, dynamic shared memory
# ----------------------------------------------------------------------------------------------

def test_an_unknown_knob_is_refused_naming_the_real_ones(capsys):
    assert cli.main(["inspect", "copy/04", "--knob", "NOSUCH=3"]) == 2
    _one_line_error(capsys, "copy/04_unrolled has no knob NOSUCH", "STREAMING", "UNROLL")


def test_a_knob_no_selected_rung_has_is_refused(capsys):
    assert cli.main(["inspect", "copy", "--knob", "TILE=16"]) == 2
    _one_line_error(capsys, "No selected kernel has a knob TILE", "UNROLL")


def test_the_family_argument_lists_the_families(capsys):
    from lab.families import families

    for command in ("verify", "bench", "profile"):
        with pytest.raises(SystemExit):
            cli.main([command, "--help"])
        out = capsys.readouterr().out
        assert all(name in out for name in families()), out


def test_inspect_shows_the_dynamic_shared_memory_of_rung_08(capsys):
    from lab.families import get_family

    fam = get_family("gemm_fp32")
    dynamic = fam.dynamic_smem_bytes(fam.rung("08"))
    assert dynamic > 0 and fam.dynamic_smem_bytes(fam.rung("05")) == 0
    assert get_family("copy").dynamic_smem_bytes(get_family("copy").rung("03")) == 0  # the default
    assert cli.main(["inspect", "gemm_fp32/08"]) == 0
    assert f"+ {dynamic} dynamic" in capsys.readouterr().out


def test_inspect_a_student_file_for_an_exercise(tmp_path, monkeypatch, capsys):
    from lab.grading.exercises import load

    (tmp_path / "mine.cu").write_text(load("01").reference_source())
    monkeypatch.chdir(tmp_path)
    assert cli.main(["inspect", "mine.cu", "--exercise", "01"]) == 0
    out = capsys.readouterr().out
    assert "mine.cu" in out and "sm_90" in out and str(tmp_path) not in out.replace("\n", "")
    if build.find_nvdisasm() is not None:
        assert "16-byte global loads/stores: LDG.128 x" in out


def test_check_names_the_file_it_was_given(tmp_path, monkeypatch, capsys, no_gpu):
    from lab.grading.exercises import load

    (tmp_path / "path").mkdir()
    (tmp_path / "path" / "bad.cu").write_text(load("01").starter_text().replace("{", "{ int x = ;", 1))
    monkeypatch.chdir(tmp_path)
    assert cli.main(["check", "01", "path/bad.cu"]) == 2
    out = capsys.readouterr().out
    assert re.search(r"^path/bad\.cu:\d+: error", out, re.MULTILINE) and "kernel.cu" not in out, out
    (tmp_path / "path" / "empty.cu").write_text("\n")
    assert cli.main(["check", "01", "path/empty.cu"]) == 2
    _one_line_error(capsys, "path/empty.cu is empty")


def test_check_says_where_it_looked_for_a_relative_path(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["check", "01", "sub/kernel.cu"]) == 2
    _one_line_error(capsys, "No kernel file at sub/kernel.cu", str(tmp_path / "sub" / "kernel.cu"),
                    "read from the current folder")


def test_check_of_the_untouched_starter_without_a_gpu_grades_nothing(tmp_path, capsys, no_gpu):
    from lab.grading.exercises import load

    starter = tmp_path / "kernel.cu"
    starter.write_text(load("01").starter_text())
    assert cli.main(["check", "01", str(starter)]) == cli.NOT_GRADED != 0
    out = capsys.readouterr().out
    assert "is the starter as released" in out and "Nothing was graded" in out
    if build.find_nvdisasm() is not None:
        assert "16-byte global loads/stores: none" in out  # the TODO body has no float4 copy yet


def test_check_reads_a_latin1_kernel_with_a_note(tmp_path, capsys, no_gpu):
    from lab.grading.exercises import load

    kernel = tmp_path / "kernel.cu"
    kernel.write_bytes(b"// caf\xe9\n" + load("01").reference_source().encode())
    assert cli.main(["check", "01", str(kernel)]) == cli.NOT_GRADED
    out = capsys.readouterr().out
    assert "is not UTF-8 (byte 6)" in out and "Traceback" not in out
    kernel.write_bytes("// utf-16\n".encode("utf-16"))
    assert cli.main(["check", "01", str(kernel)]) == 2
    _one_line_error(capsys, "contains a NUL byte")


def test_an_unknown_study_is_named_with_the_ones_there_are(capsys, tmp_path):
    from lab.studies import STUDIES

    assert cli.main(["study", "waves", "--out", str(tmp_path)]) == 2
    line = _one_line_error(capsys, "no study waves", "orders", "counters", "fp32", "streamk", "items", "splitk",
                           "checklist")
    assert line.endswith(f"the studies are {', '.join(STUDIES)}.")


# --- the studies' registry (lab.studies.STUDIES) behind `lab study` ------------------------------------------------

def _studies():
    from lab.studies import STUDIES

    return list(STUDIES.values())


@pytest.mark.parametrize("study", _studies(), ids=lambda s: s.name)
def test_every_registered_study_has_a_run_that_takes_its_options(study):
    import inspect

    run = getattr(study.load(), "run", None)
    assert callable(run), f"{study.module} has no run(out_dir, **options)"
    params = inspect.signature(run).parameters
    assert list(params)[0] == "out_dir" and "progress" in params
    takes_any = any(p.kind is p.VAR_KEYWORD for p in params.values())
    for key in [*study.fixed, *(o.name for o in study.options)]:
        assert key in params or takes_any, f"{study.module}.run takes no {key}"
    for opt in study.options:  # the CLI's default is the module's own, where run spells it out
        if opt.name in params and params[opt.name].default is not inspect.Parameter.empty:
            assert tuple(params[opt.name].default) == opt.default if opt.many else \
                params[opt.name].default == opt.default, (study.name, opt.name)


def test_the_registry_names_the_records_the_modules_write():
    from lab.studies import (
        STUDIES,
        alignment,
        anomalies,
        checklist,
        compile_study,
        grouped_table_cost,
        l2,
        ops_compare,
        ops_sweep,
        rowops_study,
        scheduling,
        split_k,
    )

    written = {"l2": l2.REFERENCE_FILE, "probes": anomalies.REFERENCE_FILE,
               "transpose-variants": alignment.REFERENCE_FILE, "splitk": split_k.STUDY_FILE,
               "checklist": checklist.STUDY_FILE, "compile": compile_study.RECORD, "ops-sweep": ops_sweep.RECORD,
               "rowops": rowops_study.FILENAME, "grouped-table-cost": grouped_table_cost.RECORD,
               **scheduling.STUDY_FILES}
    for name, record in written.items():
        assert STUDIES[name].record == record, name
    assert {s.fixed["study"] for s in STUDIES.values() if s.module == "lab.studies.scheduling"} == \
        set(scheduling.STUDY_FILES)
    options = {o.name: o for o in STUDIES["ops-compare"].options}
    assert set(options["model"].choices) == set(ops_compare.MODELS)
    assert options["dtype"].choices == ops_compare.DTYPES
    assert tuple(next(o for o in STUDIES["checklist"].options if o.name == "sizes").default) == \
        checklist.DEFAULT_SIZES
    assert [s.name for s in STUDIES.values() if not s.needs_gpu] == ["compile"]


def test_study_with_no_name_lists_every_study_and_its_record(capsys, no_gpu):
    assert cli.main(["study"]) == 0
    out = capsys.readouterr().out
    rows = {line.split("│")[1].strip(): line for line in out.splitlines() if line.count("│") >= 3}
    for study in _studies():
        assert study.name in rows, study.name
        assert study.record in rows[study.name]
    assert "[options]" in out  # rich read no markup into the title


@pytest.mark.parametrize("study", [s for s in _studies() if s.needs_gpu], ids=lambda s: s.name)
def test_a_gpu_study_without_a_gpu_says_it_needs_one(study, capsys, no_gpu, tmp_path, monkeypatch):
    monkeypatch.setattr(study.load(), "run", lambda *a, **k: pytest.fail("nothing is measured without a GPU"))
    assert cli.main(["study", study.name, "--out", str(tmp_path)]) == 2
    line = _one_line_error(capsys, "needs a CUDA GPU", "simulated by the test")
    assert "lab inspect" in line
    assert not any(tmp_path.iterdir())


def test_study_options_reach_run_and_the_record_is_named(capsys, tmp_path, monkeypatch):
    """`lab study NAME --out DIR [options]`: the options parsed by the study's own parser, passed to its run with the
    entry's fixed keywords and a progress callback; the path run returns is printed."""
    from lab.studies import compile_study, ops_sweep

    seen = {}

    def fake(out_dir, **kwargs):
        seen.update(kwargs, out_dir=out_dir)
        kwargs["progress"]("a [bracketed] line")
        return out_dir / "record.json"

    monkeypatch.setattr(compile_study, "run", fake)
    assert cli.main(["study", "compile", "--out", str(tmp_path), "--quick"]) == 0
    assert seen["out_dir"] == tmp_path and seen["quick"] is True and callable(seen["progress"])
    out = capsys.readouterr().out
    assert "a [bracketed] line" in out and f"written: {tmp_path / 'record.json'}" in out

    seen.clear()
    monkeypatch.setattr(device, "current", lambda: None)  # as if there were a GPU: only the plumbing is tested
    monkeypatch.setattr(ops_sweep, "run", fake)
    assert cli.main(["study", "--out", str(tmp_path), "ops-sweep", "--rounds", "2", "--classes", "decode", "tiny"]) == 0
    assert seen["study"] == "sweep" and seen["rounds"] == 2 and seen["classes"] == ("decode", "tiny")
    assert seen["write_table"] is None and seen["out_dir"] == tmp_path


def test_a_bad_study_option_is_an_argparse_error(capsys, tmp_path):
    with pytest.raises(SystemExit) as info:
        cli.main(["study", "rowops", "--out", str(tmp_path), "--rounds", "0"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "--rounds: must be at least 1, not 0" in err and "Traceback" not in err
    with pytest.raises(SystemExit):
        cli.main(["study", "rowops", "--rows", "3"])
    assert "unrecognized arguments: --rows 3" in capsys.readouterr().err


def test_study_help_shows_its_options(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["study", "checklist", "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "--no-ncu" in out and "--replay {kernel,range}" in out and "checklist.json" in out


def test_an_error_sentence_keeps_its_brackets(capsys, monkeypatch):
    """rich reads "[cluster]" as markup: the CLI escapes error sentences so the install hint survives (seen on the
    2-GPU H200: "pip install 'cupy-kernel-lab'" with the extra's name gone)."""
    from lab import cli
    from lab.core.errors import LabError

    def fail(args):
        raise LabError("Grading on a Dask cluster needs Dask's distributed: pip install 'cupy-kernel-lab[cluster]'.")

    monkeypatch.setattr(cli, "cmd_doctor", fail)
    assert cli.main(["doctor"]) == 2
    assert "cupy-kernel-lab[cluster]" in capsys.readouterr().out


def test_inspect_of_a_file_outside_an_exercise_says_to_give_the_exercise(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kernel.cu").write_text("// a kernel\n")
    assert cli.main(["inspect", "kernel.cu"]) != 0
    err = "".join(capsys.readouterr())
    assert "--exercise NN" in err and "Unknown family" not in err and "Traceback" not in err


def test_inspect_of_a_file_in_an_exercise_folder_compiles_it_as_that_exercise(capsys):
    assert cli.main(["inspect", str(build.REPO_ROOT / "exercises" / "01_vectorized_copy" / "starter.cu")]) == 0
    assert "01_vectorized_copy" in capsys.readouterr().out


def test_leaderboard_says_what_needs_no_gpu_first(capsys):
    assert cli.main(["leaderboard", "/nonexistent", "--exercise", "09"]) != 0
    assert "ranks kernel exercises only" in "".join(capsys.readouterr())
    assert cli.main(["leaderboard", "/nonexistent", "--exercise", "01"]) != 0
    err = "".join(capsys.readouterr())
    assert "does not exist" in err and "GPU" not in err


def test_a_compile_table_tells_rows_of_one_source_apart():
    from lab.core.build import CompileReport
    from lab.studies.report import kernel_names

    def rep(entry, **knobs):
        return CompileReport("gemm_tc/06_persistent.cu", entry, "sm_90a", knobs, 0, 0, 0, 0, 0)

    names = kernel_names([rep("a", BN=256, STAGES=4), rep("a", BN=128, STAGES=4), rep("b", BN=256, STAGES=4),
                          CompileReport("copy/01_naive.cu", "c", "sm_90", {}, 0, 0, 0, 0, 0)])
    assert names == ["gemm_tc/06_persistent.cu (a, BN=256)", "gemm_tc/06_persistent.cu (a, BN=128)",
                     "gemm_tc/06_persistent.cu (b, BN=256)", "copy/01_naive.cu"]
    assert len(set(names)) == len(names)
