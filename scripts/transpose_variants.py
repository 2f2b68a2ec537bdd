"""Time transpose rungs under knob variants and on misaligned shapes (cold L2), beside the device copy of the
same run, and write the records (lab.alignment): what splits rung 04's change from its knobs, and how rung 05
does on non-square tails.

    python3 scripts/transpose_variants.py OUT.json
The reference GPU's records are results/h200/transpose_variants.json.
"""

from __future__ import annotations

import sys

from lab import alignment
from lab.records import save

if __name__ == "__main__":
    rs = alignment.run()
    save(sys.argv[1], rs)
    print(alignment.table(rs))
