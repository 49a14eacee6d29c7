"""Long-running version of the cluster's store-crash test: SIGKILL stores for as long as you like.

A tower and two ``dafka store`` processes run; each round a producer process publishes
records at a steady pace, one store (alternately) is killed with SIGKILL at a random moment
once it has ACKed something, its data directory is checked (everything it ACKed is there,
intact and in order), and it is restarted at once on the same directory. At the end both
stores must hold identical, complete logs of every round's partition.

Run: ``.venv/bin/python scripts/cluster_crash_stress.py --seconds 300 [--seed N] [--records N]``.
"""

from __future__ import annotations

import argparse
import random
import signal
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.integration.cluster.cluster_probe import (  # noqa: E402
    AckWatch,
    HeadsProbe,
    check_partition,
    read_log,
)
from tests.integration.cluster.cluster_procs import (  # noqa: E402
    Processes,
    StoreProc,
    TowerProc,
    wait_until,
)

TOPIC = "stress"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--records", type=int, default=30_000, help="per round")
    parser.add_argument("--rate", type=int, default=15_000, help="records/s")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    rng = random.Random(seed)
    print(f"seed {seed}")
    with tempfile.TemporaryDirectory(prefix="dafka-cluster-stress-") as tmp:
        root = Path(tmp)
        (root / "logs").mkdir()
        procs = Processes(root / "logs")
        try:
            run(procs, root, args, rng)
        except BaseException:
            print(procs.describe())
            raise
        finally:
            procs.close()


def run(procs: Processes, root: Path, args: argparse.Namespace, rng: random.Random) -> None:
    tower = procs.tower()
    stores = [procs.store(root / name, [tower], name=f"store-{name}") for name in ("a", "b")]
    partitions: list[str] = []
    end = time.monotonic() + args.seconds
    while time.monotonic() < end:
        partitions.append(one_round(procs, tower, stores, len(partitions), args, rng))

    probe = HeadsProbe([tower.sub_endpoint])
    try:
        expected = dict.fromkeys(partitions, args.records - 1)
        for store in stores:
            heads = probe.heads(store.reader_port, TOPIC, expected, timeout=120)
            assert heads == expected, f"{store.proc.name}: {heads}"
    finally:
        probe.close()
    for store in stores:
        assert store.proc.stop(signal.SIGTERM) == 0
    logs = [read_log(store.data_dir) for store in stores]
    assert logs[0] == logs[1], "the stores' logs differ"
    for pid in partitions:
        check_partition(logs[0][(TOPIC, pid)], args.records)
    print(f"{len(partitions)} rounds: both logs identical and complete")


def one_round(
    procs: Processes,
    tower: TowerProc,
    stores: list[StoreProc],
    round_no: int,
    args: argparse.Namespace,
    rng: random.Random,
) -> str:
    """Publish one partition while killing and restarting one store; returns the partition."""
    victim = round_no % 2
    store = stores[victim]
    watch = AckWatch(store.writer_port)
    try:
        producer = procs.client(
            "producer", "produce", [tower], TOPIC,
            "--records", str(args.records), "--rate", str(args.rate),
        )  # fmt: skip
        pid: str = producer.wait_event("ready")["id"]
        key = (TOPIC, pid)
        threshold = rng.randrange(0, args.records * 3 // 4)
        wait_until(lambda: watch.pump().get(key, -1) >= threshold, "an ACK to kill after")
        store.proc.kill()
        acked = watch.pump()[key]
    finally:
        watch.close()
    held = read_log(store.data_dir).get(key, [])
    assert len(held) >= acked + 1, f"round {round_no}: ACKed {acked}, holds {len(held)}"
    check_partition(held, len(held))
    stores[victim] = procs.store(store.data_dir, [tower], name=f"store-{'ab'[victim]}")
    assert producer.wait_exit() == 0, f"round {round_no}: the producer failed"
    print(f"round {round_no}: killed store {'ab'[victim]} after ACK {acked}, it held {len(held)}")
    return pid


if __name__ == "__main__":
    main()
