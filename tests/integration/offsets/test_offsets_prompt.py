"""Reading committed offsets ends on the stores' "that is all" (HEADS-END), not on silence.

Before, each read asked the stores for the heads of ``__dafka_offsets`` and waited
``settle`` seconds with nothing new (0.1 s in ``Consumer.committed()``; the first read 0.3 s
of quiet, and 1 s more when no group had committed): the wire had no "that is all". With a
``CommitReader`` whose window is 5 s, the old code waited it on every read; now both reads
below return the right commits and none of the reader's asks for the heads ended on that
window (``CommitReader.refreshes_settled``: counted where the wait ends, not timed).
"""

from __future__ import annotations

from dafka import CommittedOffset, Consumer, LocalCluster, Producer
from dafka.client import ConsumerSettings
from dafka.client._offsets import CommitReader

WINDOW = 5.0


def test_committed_offsets_are_read_without_waiting_a_window(cluster: LocalCluster) -> None:
    with Producer("off-prompt", towers=cluster.towers, beacon_interval=0.2, name="op") as p:
        for i in range(20):
            p.send(b"%d" % i)
        assert p.flush(30) == 0
        keys = {("off-prompt", part): 0 for part in p.partitions}
    with Consumer(
        towers=cluster.towers,
        beacon_interval=0.2,
        assign=keys,
        group_id="g-prompt",
        enable_auto_commit=False,
        offset_reset="earliest",
    ) as consumer:
        got = 0
        while got < 20:
            got += len(consumer.poll(10))
        consumer.commit()
        expected = consumer.committed(keys)
    assert all(isinstance(c, CommittedOffset) for c in expected.values())

    settings = ConsumerSettings(towers=cluster.towers, beacon_interval=0.2)
    with CommitReader(settings, settle=WINDOW) as reader:
        first = reader.read(["g-prompt"], timeout=30)
        again = reader.read(["g-prompt"], timeout=30)
        settled = reader.refreshes_settled
    assert first["g-prompt"] == again["g-prompt"] == {k: c for k, c in expected.items() if c}
    assert settled == 0, f"{settled} asks for the heads waited the window of silence"
