"""lab.lessons.notes: the results notes are generated from the committed records, never edited by hand."""

from lab.lessons import notes


def test_the_committed_gemm_note_is_what_the_records_generate():
    path = notes.note_path()
    assert (path.parent / "gemm_fp32.json").is_file(), "the committed gemm_fp32 records are missing"
    assert path.is_file(), "results/h200/gemm_fp32_notes.md is missing: run `python -m lab.lessons.notes`"
    assert path.read_text() == notes.gemm_fp32_notes(), ("the note is stale or hand-edited: run "
                                                         "`python -m lab.lessons.notes`")


def test_ncu_sections_read_kernels_and_metrics():
    text = ("  my_kernel (16, 32, 1)x(256, 1, 1), Context 1\n"
            "    Duration                         ms         2.68\n"
            "    Executed Instructions      inst 2,428,305,408\n"
            "  other (1, 1, 1)x(128, 1, 1), Context 1\n"
            "    smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio   inst   0.11\n")
    found = notes.ncu_sections(text)
    assert [(s["kernel"], s["grid"], s["block"]) for s in found] == [("my_kernel", "16x32", 256), ("other", "1x1", 128)]
    assert found[0]["metrics"]["Duration"] == (2.68, "ms")
    assert found[0]["metrics"]["Executed Instructions"][0] == 2428305408
    assert found[1]["metrics"]["smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio"][0] == 0.11
