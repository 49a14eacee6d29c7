"""Long-running version of the storage crash test: SIGKILL a writer for as long as you like.

Each round starts ``tests/integration/storage/storage_crash_writer.py`` on one data
directory, kills it with SIGKILL at a random moment, reopens the storage and checks that
every record the writer reported durable is there, intact and in order, and that nothing is
served past a gap. Rounds cycle through the fsync policies.

Run: ``.venv/bin/python scripts/storage_crash_stress.py --seconds 600 [--seed N] [--dir PATH]``.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.integration.storage.test_storage_crash import check, run_round  # noqa: E402

POLICIES = ["batch", "records:64", "ms:2", "os"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="how long to run")
    parser.add_argument("--seed", type=int, default=None, help="seed (default: random)")
    parser.add_argument("--dir", help="parent of the scratch directories")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    print(f"seed {seed}")
    deadline = time.monotonic() + args.seconds
    rounds = reports = 0
    work = Path(tempfile.mkdtemp(prefix="dafka-storage-stress-", dir=args.dir))
    try:
        durable: dict[str, dict[tuple[str, str], int]] = {p: {} for p in POLICIES}
        while time.monotonic() < deadline:
            policy = POLICIES[rounds % len(POLICIES)]
            root = work / policy.replace(":", "-")
            reports += run_round(root, policy, rng.randrange(1 << 30), rng, durable[policy])
            check(root, policy, durable[policy])
            rounds += 1
            if rounds % 20 == 0:
                print(f"{rounds} rounds, {reports} durable reports, all held")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"done: {rounds} rounds, {reports} durable reports, every one held after SIGKILL")


if __name__ == "__main__":
    main()
