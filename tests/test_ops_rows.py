"""Which rung lab.ops runs a row operation with: the one-block rung for short rows, the cluster rung for long ones
where the GPU has thread-block clusters (sm_90 on), and the one-block rung on older GPUs whatever the length."""

import pytest

from lab.ops import api
from lab.ops.paths import family


@pytest.mark.parametrize("op", ["rmsnorm", "layernorm", "softmax"])
def test_long_rows_take_the_cluster_rung_on_hopper_and_short_ones_the_one_block_rung(op):
    short_key = api.ROW_FAMILIES[op][1]
    long_key, from_n = api.LONG_ROW_RUNGS[op]
    assert api.row_rung(op, from_n - 1, 90) == short_key
    assert api.row_rung(op, 4096, 90) == short_key
    has_long = long_key in {r.key for r in family(op).rungs}
    assert api.row_rung(op, from_n, 90) == (long_key if has_long else short_key)
    assert api.row_rung(op, 1 << 20, 80) == short_key  # sm_80 has no clusters
