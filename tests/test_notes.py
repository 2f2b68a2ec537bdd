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


def test_the_committed_gemm_tc_note_is_what_the_records_generate():
    path = notes.tc_note_path()
    assert (path.parent / "gemm_tc.json").is_file(), "the committed gemm_tc records are missing"
    assert path.is_file(), "results/h200/gemm_tc_notes.md is missing: run `python -m lab.lessons.notes`"
    assert path.read_text() == notes.gemm_tc_notes(), ("the note is stale or hand-edited: run "
                                                       "`python -m lab.lessons.notes`")


def test_the_gemm_tc_note_holds_what_the_hopper_rung_headers_point_to():
    """The rung headers name results/h200/gemm_tc_notes.md for their figures: each record they cite is in it."""
    from lab.core.build import KERNELS_DIR

    text = notes.gemm_tc_notes()
    for rung in ("04_tma_wgmma", "05_warp_specialized", "06_persistent", "07_stream_k"):
        assert "results/h200/gemm_tc_notes.md" in (KERNELS_DIR / "gemm_tc" / f"{rung}.cu").read_text(), rung
        assert f"| {rung} |" in text or f"{rung}:" in text, rung
    for record in ("gemm_tc.json", "gemm_tc_headline.json", "gemm_tc_knobs_05_8192", "gemm_tc_repeat_8192.json",
                   "gemm_tc_epilogue.json", "gemm_tc_epilogue_first_run.json", "schedule_stream_k.json",
                   "schedule_stream_k_first_run.json", "schedule_stream_k_serialized_9a90ba8.json",
                   "schedule_stream_k_do_while.json", "gemm_tc_repack.json"):
        assert record in text, record
    assert "DRAM traffic from rung to rung" in text  # gemm_tc_profile.json's counters
    assert text.count("## The ladder at the headline sizes") == 1 and "### layout=NN, dtype=bfloat16" in text


def test_the_module_writes_both_notes_next_to_the_records():
    written = notes.notes()
    assert list(written) == [notes.note_path(), notes.tc_note_path()]
    assert {path.parent for path in written} == {notes.records.reference_dir()}
