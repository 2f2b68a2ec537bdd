"""CPU: the `lab` command answers mistakes with one sentence and exit status 2, never a traceback."""

import re

import pytest
from rich.console import Console

from lab import build, cli, device


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
    from lab.exercises import load

    (tmp_path / "mine.cu").write_text(load("01").reference_source())
    monkeypatch.chdir(tmp_path)
    assert cli.main(["inspect", "mine.cu", "--exercise", "01"]) == 0
    out = capsys.readouterr().out
    assert "mine.cu" in out and "sm_90" in out and str(tmp_path) not in out.replace("\n", "")
    if build.find_nvdisasm() is not None:
        assert "16-byte global loads/stores: LDG.128 x" in out


def test_check_names_the_file_it_was_given(tmp_path, monkeypatch, capsys, no_gpu):
    from lab.exercises import load

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
    from lab.exercises import load

    starter = tmp_path / "kernel.cu"
    starter.write_text(load("01").starter_text())
    assert cli.main(["check", "01", str(starter)]) == cli.NOT_GRADED != 0
    out = capsys.readouterr().out
    assert "is the starter as released" in out and "Nothing was graded" in out
    if build.find_nvdisasm() is not None:
        assert "16-byte global loads/stores: none" in out  # the TODO body has no float4 copy yet


def test_check_reads_a_latin1_kernel_with_a_note(tmp_path, capsys, no_gpu):
    from lab.exercises import load

    kernel = tmp_path / "kernel.cu"
    kernel.write_bytes(b"// caf\xe9\n" + load("01").reference_source().encode())
    assert cli.main(["check", "01", str(kernel)]) == cli.NOT_GRADED
    out = capsys.readouterr().out
    assert "is not UTF-8 (byte 6)" in out and "Traceback" not in out
    kernel.write_bytes("// utf-16\n".encode("utf-16"))
    assert cli.main(["check", "01", str(kernel)]) == 2
    _one_line_error(capsys, "contains a NUL byte")


def test_an_unknown_study_is_named_with_the_ones_there_are(capsys, tmp_path):
    assert cli.main(["study", "waves", "--out", str(tmp_path)]) == 2
    _one_line_error(capsys, "no study waves", "orders", "counters", "fp32", "streamk", "items", "splitk", "checklist")


def test_an_error_sentence_keeps_its_brackets(capsys, monkeypatch):
    """rich reads "[cluster]" as markup: the CLI escapes error sentences so the install hint survives (seen on the
    2-GPU H200: "pip install 'cupy-kernel-lab'" with the extra's name gone)."""
    from lab import cli
    from lab.errors import LabError

    def fail(args):
        raise LabError("Grading on a Dask cluster needs Dask's distributed: pip install 'cupy-kernel-lab[cluster]'.")

    monkeypatch.setattr(cli, "cmd_doctor", fail)
    assert cli.main(["doctor"]) == 2
    assert "cupy-kernel-lab[cluster]" in capsys.readouterr().out
