"""A group member's fence of the previous owner's transaction log (issue 20; docs/groups.md,
"Fencing the previous owner's log"), in one process on a secured cluster (a tower and a
store with CURVE keys and an ACL, ``LocalCluster``):

A member of alice's sends its offsets of every input partition in a transaction and is
gone before its INTENT (its producer and consumer closed: the transaction aborted without
an INTENT, its commit record undecided). The next member to take the partitions:

* under alice's key fences her log (``logs_fenced``): the undecided transaction is aborted
  for good, and it starts at the commit before it;
* under bob's key cannot (a fencing GET-HEADS of alice's log is refused: only its own key
  may send one): after ``resume_timeout`` the take goes on unfenced, counted
  (``fences_failed``) and logged at ERROR - never waiting for good.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from dafka import Consumer, LocalCluster, Producer, TransactionalProducer
from dafka.transport.security import keygen
from tests.integration.cluster.cluster_procs import wait_until

ACL = """
stores = ["tower"]
[[grant]]
keys = ["alice", "bob"]
produce = ["*"]
consume = ["*"]
"""


def _read_all(consumer: Consumer, what: str) -> list[bytes]:
    got: list[bytes] = []

    def done() -> bool:
        got.extend(r.value for r in consumer.poll(0.2))
        return len(got) >= 20

    wait_until(done, what, timeout=60)
    return got


@pytest.mark.parametrize("taker", ["alice", "bob"])
def test_a_take_fences_an_undecided_transaction_of_the_previous_owner(
    tmp_path: Path, taker: str
) -> None:
    auth = tmp_path / "auth"
    auth.mkdir()
    secrets = {}
    for name in ("tower", "alice", "bob"):
        public, secrets[name] = keygen(tmp_path / name)
        shutil.copy(public, auth)
    acl = tmp_path / "acl.toml"
    acl.write_text(ACL)
    with LocalCluster(
        tmp_path / "d",
        stores=1,
        beacon_interval=0.2,
        key=secrets["tower"],
        authorized_keys=auth,
        acl=acl,
    ) as cluster:

        def keyed(name: str) -> dict[str, Any]:
            return {
                "towers": cluster.towers,
                "beacon_interval": 0.2,
                "key": secrets[name],
                "authorized_keys": auth,
                "acl": acl,
            }

        with Producer("fin", name="fin-src", partitions=2, **keyed("alice")) as source:
            for i in range(20):
                source.send(b"%d" % i, key=b"%d" % i)
            assert source.flush(30) == 0
        group: dict[str, Any] = {
            "group_id": "g-fence",
            "enable_auto_commit": False,
            "offset_reset": "earliest",
        }
        producer = TransactionalProducer("fout", "fence-a", partitions=1, **keyed("alice"))
        member = Consumer(["fin"], session_timeout_ms=4000, **group, **keyed("alice"))
        _read_all(member, "alice's member to read the input")
        producer.begin_transaction()
        producer.send(b"out")
        producer.send_offsets_to_transaction(None, member)  # stored: undecided until its INTENT
        producer.close()  # gone before its INTENT: aborted, the commit record stays undecided
        member.close()

        with Consumer(["fin"], session_timeout_ms=4000, **group, **keyed(taker)) as taker_member:
            read = _read_all(taker_member, "the taker to read the input again (not committed)")
            stats = taker_member.group_statistics()
            assert stats is not None
        assert sorted(read) == sorted(b"%d" % i for i in range(20))
        if taker == "alice":
            assert (stats.logs_fenced, stats.fences_failed) == (1, 0)
        else:  # another key's log: refused, the take went on unfenced after resume_timeout
            assert (stats.logs_fenced, stats.fences_failed) == (0, 1)
