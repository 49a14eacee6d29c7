"""The 30 s beacon flood of issue 19: 15,000 made-up node ids a second through the tower of
a running cluster (tower, store, producer, consumer; a second producer starts mid-flood).

    .venv/bin/python scripts/beacon_flood.py [--seconds 30] [--rate 15000]

Prints what the consumer got during the flood, the mid-flood producer's acked records and
each node's RSS before, at peak and after; exits 1 if a node died, the late producer did not
get its records stored, or a node's memory did not come back within 20 %.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from tests.integration.cluster.cluster_procs import Processes
from tests.integration.hardening.beacon_flood import run_flood


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--rate", type=float, default=15_000.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dafka-flood-") as tmp:
        procs = Processes(Path(tmp))
        try:
            result = run_flood(procs, Path(tmp), seconds=args.seconds, rate=args.rate)
        finally:
            procs.close()
    print(result.describe())
    ok = not result.down and result.late_producer_acked == 100 and result.returned()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
