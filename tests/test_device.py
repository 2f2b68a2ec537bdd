"""CPU: the FP32 peak from SM count, the per-arch lanes table and a sane clock."""

import pytest

from lab.core import device


def test_h200_peak_from_the_datasheet_clock_when_the_attribute_is_nonsense():
    peak = device.fp32_peak(90, 132, clock_khz=19)  # what CUDA 13 reads back on the H200
    assert peak.clock_mhz == 1980 and peak.lanes_per_sm == 128
    assert peak.tflops == pytest.approx(66.9, abs=0.05)  # the datasheet's 67 TFLOP/s FP32 (SXM)
    assert "datasheet" in peak.clock_source and "19 kHz" in peak.clock_source
    assert "66.9 TFLOP/s" in str(peak)


def test_a_sane_driver_clock_is_used_as_it_reads():
    peak = device.fp32_peak("sm_86", 84, clock_khz=1_860_000)
    assert peak.clock_mhz == 1860 and peak.clock_source == "the driver's SM clock attribute"
    assert peak.tflops == pytest.approx(84 * 128 * 2 * 1.86e9 / 1e12)


@pytest.mark.parametrize("arch,lanes", [(70, 64), (75, 64), (80, 64), (86, 128), (89, 128), ("sm_90a", 128)])
def test_lanes_per_sm_by_arch(arch, lanes):
    assert device.fp32_peak(arch, 1, clock_khz=1_000_000).lanes_per_sm == lanes


def test_unknown_clock_or_arch_gives_no_peak_and_says_why():
    no_clock = device.fp32_peak(80, 108, clock_khz=0)
    assert no_clock.tflops is None and "SM clock" in str(no_clock)
    no_lanes = device.fp32_peak(53, 2, clock_khz=1_000_000)
    assert no_lanes.tflops is None and "FP32 lanes" in str(no_lanes)


def test_arch_number_reads_the_spellings_records_use():
    assert [device.arch_number(a) for a in (90, "90", "sm_90", "sm_90a")] == [90] * 4
    with pytest.raises(ValueError):
        device.arch_number("hopper")
