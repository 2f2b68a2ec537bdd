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
    from lab.ladder import get_family

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
