"""docs/cli.md, "Batching, offsets and C consumers", checked against a real store.

A C consumer hands out each RECORD's content as stored. ``dafka produce`` batches by
default: the store holds one RECORD per batch (the batch format, starting with its magic),
which a C consumer would print as a binary blob; with ``--no-batching`` each line is its own
RECORD whose content is the line. The docs say when to pass it; this reads the store's log
(what a FETCH serves to a C consumer) to show both.
"""

from __future__ import annotations

from pathlib import Path

from dafka.records import decode_batch
from dafka.server import LocalCluster
from dafka.storage import Storage
from tests.integration.cli.cli_run import dafka
from tests.integration.cluster.cluster_procs import BEACON_INTERVAL

ROOT = Path(__file__).resolve().parents[3]
BATCH_MAGIC = b"\x89DFKB\r\n"
"""The batch format's magic (docs/client.md, "Batch format"), without its version byte."""
LINES = [b"%d" % i for i in range(1, 101)]


def test_no_batching_is_what_a_c_consumer_reads_and_the_docs_say_when(tmp_path: Path) -> None:
    text = " ".join((ROOT / "docs" / "cli.md").read_text().split())
    assert "Pass `--no-batching` when a C consumer reads the topic" in text
    with LocalCluster(tmp_path / "d", stores=1, beacon_interval=float(BEACON_INTERVAL)) as c:
        join = ["--tower", c.towers, "--beacon-interval", BEACON_INTERVAL]
        for topic, extra in (("batched", []), ("plain", ["--no-batching"])):
            done = dafka("produce", topic, *join, *extra, stdin=b"\n".join(LINES) + b"\n")
            assert done.code == 0, done.err
        data = c.stores[0].data_dir
        assert data is not None
    storage = Storage.open(data / "log")  # StoreNode keeps its log there
    try:
        (batched,) = storage.partitions("batched")
        _, contents = storage.read_contents("batched", batched, 0, 1000)
        # a few RECORDs (the first line leaves alone: nothing was in flight), each a batch:
        # what a C consumer would print, blobs
        assert len(contents) < len(LINES) // 4
        assert all(content.startswith(BATCH_MAGIC) for content in contents)
        assert [v for content in contents for v in decode_batch(content).values] == LINES
        (plain,) = storage.partitions("plain")
        _, contents = storage.read_contents("plain", plain, 0, 1000)
        assert contents == LINES  # one RECORD per line, content = the line
    finally:
        storage.close()
