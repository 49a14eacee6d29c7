"""``dafka consume`` never waits without a word (issue 22, "the seams users meet").

Against one cluster (a tower and a store, processes) holding ``numbers``: 1000 lines
produced batched, so one RECORD (offset 0). Real ``dafka consume`` processes:

* ``-o '{"P": 500}'`` says the offset is past the head and where the head is (``-e``: then
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

from dafka.server import LocalCluster
from tests.integration.cli.cli_run import dafka
from tests.integration.cluster.cluster_procs import BEACON_INTERVAL, DAFKA, Processes


@pytest.fixture(scope="module")
def numbers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[list[str], str]]:
    """The cluster's ``--tower`` options and the one partition of ``numbers``."""
    data = tmp_path_factory.mktemp("consume-lookout")
    with LocalCluster(data, stores=1, beacon_interval=float(BEACON_INTERVAL)) as cluster:
        join = ["--tower", cluster.towers, "--beacon-interval", BEACON_INTERVAL]
        done = dafka("produce", "numbers", *join, stdin=b"".join(b"%d\n" % i for i in range(1000)))
        assert done.code == 0, done.err
        first = dafka("consume", "numbers", *join, "-o", "earliest", "-c", "1", "-f", "%p %o\n")
        assert first.code == 0, first.err
        partition, offset = first.out.decode().split()
        assert offset == "0"
        yield join, partition


def test_an_offset_past_the_head_says_where_the_head_is_with_e(
    numbers: tuple[list[str], str],
) -> None:
    join, partition = numbers
    done = dafka("consume", "numbers", *join, "-o", json.dumps({partition: 500}), "-e")
    assert done.code == 0, done.err
    assert done.out == b""
    assert f"numbers/{partition}: --offset 500 is past the head" in done.err
    assert "the last RECORD is offset 0" in done.err
    assert "nothing to read" in done.err


def test_an_offset_past_the_head_is_said_while_waiting(
    numbers: tuple[list[str], str], procs: Processes
) -> None:
    join, partition = numbers
    waiting = procs.spawn(
        "consume", [*DAFKA, "consume", "numbers", *join, "-o", json.dumps({partition: 500})]
    )
    waiting.wait_log(re.compile(r"--offset 500 is past the head: the last RECORD is offset 0"))
    assert "waiting for offset 500" in waiting.stderr()
    assert waiting.running()


def test_an_unknown_partition_is_an_error_naming_the_known_ones(
    numbers: tuple[list[str], str],
) -> None:
    join, partition = numbers
    done = dafka("consume", "numbers", *join, "-o", '{"NOPE.0": 0}', "-c", "1", timeout=60)
    assert done.code == 1, done.err
    assert "Error: --offset names partition 'NOPE.0' of 'numbers'" in done.err
    assert f"its partitions: {partition}" in done.err
    assert "Traceback" not in done.err


def test_a_topic_nobody_knows_is_said_and_not_listed_afterwards(
    numbers: tuple[list[str], str], procs: Processes
) -> None:
    join, _ = numbers
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
