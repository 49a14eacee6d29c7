"""Deleting a topic's data on every store (Admin.delete_topic, ``dafka topics delete``), with
real store processes: one store is down during the delete and applies it when it comes
back, a producer keeps writing through it and loses nothing it was told was stored."""

from __future__ import annotations

import json
import re
import subprocess
import threading
from pathlib import Path
from typing import Any

from dafka import Admin, Consumer, Producer
from tests.integration.cluster.cluster_procs import DAFKA, DEADLINE, Processes, wait_until
from tests.integration.loopback import loopback_client
from tests.unit.cli.test_cli_describe_table import assert_aligned

TOPIC = "doomed"
_APPLIED = re.compile(r"deleted doomed/dw\.0 up to (\d+)")


def fields(towers: str) -> dict[str, Any]:
    return loopback_client(towers, DEADLINE)  # beacon_timeout 0.8: the default 4 beacons


def read_range(towers: str, first: int, end: int, idle: float = 3.0) -> tuple[list[bytes], int]:
    """Messages of RECORDs ``[first, end)`` of the partition, and RECORDs no store had."""
    key = (TOPIC, "dw.0")
    with Consumer(
        assign={key: first},
        end_offsets={key: end},
        fail_on_data_loss=False,
        **fields(towers),
    ) as consumer:
        values = [v for c in consumer.read_to_end(idle_timeout=idle) for v in c.values]
        return values, consumer.poll_statistics().records_lost


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*DAFKA, "topics", *args], capture_output=True, text=True, timeout=120, check=False
    )


def test_delete_with_a_store_down_and_a_producer_writing(procs: Processes, tmp_path: Path) -> None:
    tower = procs.tower()
    towers = tower.spec
    store_a = procs.store(tmp_path / "a", [tower], name="store-a")
    store_b = procs.store(tmp_path / "b", [tower], name="store-b")
    with Producer(TOPIC, name="dw", partitions=1, linger_ms=0, **fields(towers)) as producer:
        for i in range(300):
            producer.send(b"old-%d" % i)
            if i % 50 == 49:
                assert producer.flush(DEADLINE) == 0  # several RECORDs
        assert producer.flush(DEADLINE) == 0
        before = Admin(**fields(towers)).describe(TOPIC)
        assert before.partitions["dw.0"].lag == 0  # both stores hold everything

        store_b.proc.stop()  # down during the delete

        # a producer still writing through the delete
        stop = threading.Event()
        sent: list[bytes] = []

        def write() -> None:
            i = 0
            while not stop.is_set():
                value = b"new-%d" % i
                producer.send(value)
                sent.append(value)
                i += 1
                stop.wait(0.002)

        writer = threading.Thread(target=write)
        writer.start()
        try:
            wait_until(lambda: len(sent) > 100, "the writer going")
            # the CLI refuses without its confirmation flag
            refused = run_cli("delete", TOPIC, "--tower", towers, "--beacon-interval", "0.2")
            assert refused.returncode == 2, refused.stderr
            assert "--yes" in refused.stderr
            deleted = run_cli(
                "delete", TOPIC, "--yes", "--tower", towers, "--beacon-interval", "0.2"
            )
            assert deleted.returncode == 0, deleted.stderr
            assert "deleted doomed: 1 partition(s)" in deleted.stdout
            cut = int(store_a.proc.wait_log(_APPLIED).group(1))
            wait_until(lambda: len(sent) > 300 + 100, "writing after the delete")
        finally:
            stop.set()
            writer.join()
        assert producer.flush(DEADLINE) == 0  # nothing sent was lost, none left hanging
    after = Admin(**fields(towers)).describe(TOPIC).partitions["dw.0"].head
    assert after > cut

    # the live store: nothing up to the cut, everything after it
    gone, lost = read_range(towers, 0, cut + 1)
    assert (gone, lost) == ([], cut + 1)
    kept, lost = read_range(towers, cut + 1, after + 1, idle=DEADLINE)
    assert lost == 0
    old_kept = [v for v in kept if v.startswith(b"old-")]
    new_kept = [v for v in kept if v.startswith(b"new-")]
    assert new_kept == sent[len(sent) - len(new_kept) :]  # the writer's tail, in order
    assert old_kept == []  # every old record was at or below the cut

    # the store that was down applies the tombstone when it comes back...
    store_b2 = procs.store(tmp_path / "b", [tower], name="store-b")
    assert int(store_b2.proc.wait_log(_APPLIED).group(1)) == cut
    wait_until(
        lambda: Admin(**fields(towers)).describe(TOPIC, wait=3).partitions["dw.0"].lag == 0,
        "the restarted store catching up after the cut",
    )
    store_a.proc.stop()  # ...and alone serves nothing at or below the cut
    gone, lost = read_range(towers, 0, cut + 1)
    assert (gone, lost) == ([], cut + 1)
    kept_b, lost = read_range(towers, cut + 1, after + 1, idle=DEADLINE)
    assert (kept_b, lost) == (kept, 0)

    described = run_cli("describe", TOPIC, "--json", "--tower", towers, "--beacon-interval", "0.2")
    assert described.returncode == 0, described.stderr
    found = json.loads(described.stdout)
    assert [p["partition"] for p in found["partitions"]] == ["dw.0"]
    assert found["partitions"][0]["head"] == after
    table = run_cli("describe", TOPIC, "--tower", towers, "--beacon-interval", "0.2")
    assert table.returncode == 0, table.stderr
    assert_aligned(table.stdout.splitlines()[1:])  # the partitions' table, under its headers
    unknown = run_cli(
        "delete", "nothing-here", "--yes", "--tower", towers, "--beacon-interval", "0.2"
    )
    assert unknown.returncode == 1
    assert "nothing deleted" in unknown.stderr
