"""``dafka consume`` never waits without a word (issue 22, "the seams users meet").

Against one cluster (a tower and a store, processes) holding ``numbers``: 1000 lines
produced batched (a few RECORDs: how many depends on the machine's pace; the tests read
the last offset back). Real ``dafka consume`` processes:

* ``-o {"P": 5000}`` says the offset is past the head and where the head is (``-e``: then
  exits 0; without: keeps waiting, the notice on stderr);
* ``-o '{"NOPE.0": 0}'`` is an error naming the partitions the cluster knows (exit 1);
* ``no-such-topic -c 1`` says nobody knows the topic while it waits (``-e``: exits 0);
* a topic someone only tried to consume is not listed by ``dafka topics``/``status``
  afterwards (the stores keep asking for its heads, so it was listed forever).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest

from dafka import TransactionalProducer
from dafka.server import LocalCluster
from tests.integration.cli.cli_run import dafka
from tests.integration.cluster.cluster_procs import BEACON_INTERVAL, DAFKA, Processes


@pytest.fixture(scope="module")
def numbers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[list[str], str, int]]:
    """The cluster's ``--tower`` options, the one partition of ``numbers`` and its last offset."""
    data = tmp_path_factory.mktemp("consume-lookout")
    with LocalCluster(data, stores=1, beacon_interval=float(BEACON_INTERVAL)) as cluster:
        join = ["--tower", cluster.towers, "--beacon-interval", BEACON_INTERVAL]
        done = dafka("produce", "numbers", *join, stdin=b"".join(b"%d\n" % i for i in range(1000)))
        assert done.code == 0, done.err
        every = dafka("consume", "numbers", *join, "-o", "earliest", "-c", "1000", "-f", "%p %o\n")
        assert every.code == 0, every.err
        lines = [line.split() for line in every.out.decode().splitlines()]
        assert len(lines) == 1000
        assert len({partition for partition, _ in lines}) == 1
        yield join, lines[0][0], int(lines[-1][1])


def test_an_offset_past_the_head_says_where_the_head_is_with_e(
    numbers: tuple[list[str], str, int],
) -> None:
    join, partition, last = numbers
    done = dafka("consume", "numbers", *join, "-o", json.dumps({partition: 5000}), "-e")
    assert done.code == 0, done.err
    assert done.out == b""
    assert f"numbers/{partition}: --offset 5000 is past the head" in done.err
    assert f"the last RECORD is offset {last}" in done.err
    assert "nothing to read" in done.err


def test_an_offset_past_the_head_is_said_while_waiting(
    numbers: tuple[list[str], str, int], procs: Processes
) -> None:
    join, partition, last = numbers
    waiting = procs.spawn(
        "consume", [*DAFKA, "consume", "numbers", *join, "-o", json.dumps({partition: 5000})]
    )
    waiting.wait_log(
        re.compile(rf"--offset 5000 is past the head: the last RECORD is offset {last}\b")
    )
    assert "waiting for offset 5000" in waiting.stderr()
    assert waiting.running()


def test_an_unknown_partition_is_an_error_naming_the_known_ones(
    numbers: tuple[list[str], str, int],
) -> None:
    join, partition, _ = numbers
    done = dafka("consume", "numbers", *join, "-o", '{"NOPE.0": 0}', "-c", "1", timeout=60)
    assert done.code == 1, done.err
    assert "Error: --offset names partition 'NOPE.0' of 'numbers'" in done.err
    assert f"its partitions: {partition}" in done.err
    assert "Traceback" not in done.err


def test_a_topic_nobody_knows_is_said_and_not_listed_afterwards(
    numbers: tuple[list[str], str, int], procs: Processes
) -> None:
    join, _, _ = numbers
    waiting = procs.spawn("consume", [*DAFKA, "consume", "no-such-topic", *join, "-c", "1"])
    waiting.wait_log(re.compile(r"no-such-topic: no store or producer knows this topic \(yet\)"))
    assert "waiting for it" in waiting.stderr()
    assert waiting.running()
    waiting.kill()
    done = dafka("consume", "never-made", *join, "-e")
    assert done.code == 0, done.err
    assert "never-made: no store or producer knows this topic (yet); nothing to read" in done.err

    listed = dafka("topics", *join, "--json", "--wait", "5")
    assert listed.code == 0, listed.err
    names = [row["topic"] for row in json.loads(listed.out)]
    assert names == ["numbers"]
    shown = dafka("status", *join, "--json", "--wait", "5")
    assert list(json.loads(shown.out)["topics"]) == ["numbers"]
    # asked by name, it is shown as it is: nothing known
    shown = dafka("status", "never-made", *join, "--json", "--wait", "5")
    assert json.loads(shown.out)["topics"]["never-made"]["partitions"] == []


def test_transaction_acks_are_never_printed(numbers: tuple[list[str], str, int]) -> None:
    """Issue 21: ``dafka consume`` (read_uncommitted) prints the messages of transactions,
    never their ACKs - Kafka's control records, which no consumer shows (before: an empty
    line per opening and commit ACK)."""
    join, _, _ = numbers
    with TransactionalProducer(
        "txn-lines", "tl", partitions=1, towers=join[1], beacon_interval=float(BEACON_INTERVAL)
    ) as producer:
        for n in range(2):
            with producer.transaction():
                for i in range(3):
                    producer.send(b"t%d.%d" % (n, i))
    done = dafka("consume", "txn-lines", *join, "-o", "earliest", "-e", "-f", "[%s]\n")
    assert done.code == 0, done.err
    assert done.out.decode().splitlines() == [f"[t{n}.{i}]" for n in range(2) for i in range(3)]
