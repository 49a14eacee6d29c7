"""produce | consume through real ``dafka`` processes against one shared LocalCluster."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from dafka.server import LocalCluster
from tests.integration.cli.cli_run import dafka
from tests.integration.cluster.cluster_procs import DAFKA


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path_factory.mktemp("cli-cluster"), stores=1, beacon_interval=0.2) as c:
        yield c


def _node(cluster: LocalCluster) -> list[str]:
    return ["--tower", cluster.towers, "--beacon-interval", "0.2"]


def test_lines_in_lines_out(cluster: LocalCluster) -> None:
    lines = b"".join(b"line %d\n" % i for i in range(500))
    produced = dafka("produce", "lines", *_node(cluster), stdin=lines)
    assert produced.code == 0, produced.err
    assert produced.err == ""  # quiet in a pipe
    consumed = dafka("consume", "lines", *_node(cluster), "--offset", "earliest", "-c", "500")
    assert consumed.code == 0, consumed.err
    assert consumed.out == lines


def test_exit_at_end_stops_after_the_last_record(cluster: LocalCluster) -> None:
    lines = b"".join(b"e%d\n" % i for i in range(3000))
    assert dafka("produce", "end", *_node(cluster), stdin=lines).code == 0
    consumed = dafka("consume", "end", *_node(cluster), "-o", "earliest", "-e")
    assert consumed.code == 0, consumed.err
    assert consumed.out == lines


def test_keys_partitions_and_json(cluster: LocalCluster) -> None:
    lines = b"".join(b"k%d:v%d\n" % (i % 5, i) for i in range(400))
    produced = dafka(
        "produce",
        "keyed",
        *_node(cluster),
        "-K",
        ":",
        "--partitions",
        "3",
        "--name",
        "kw",
        "--linger-ms",
        "1",
        "--batch-size",
        "512",
        stdin=lines,
    )
    assert produced.code == 0, produced.err
    consumed = dafka(
        "consume", "keyed", *_node(cluster), "-o", "earliest", "-c", "400", "--format", "json"
    )
    assert consumed.code == 0, consumed.err
    rows = [json.loads(line) for line in consumed.out.splitlines()]
    assert sorted(r["value"] for r in rows) == sorted(f"v{i}" for i in range(400))
    by_key: dict[str, set[str]] = {}
    for r in rows:
        by_key.setdefault(r["key"], set()).add(r["partition"])
        assert r["timestamp"] > 0
    assert set(by_key) == {f"k{i}" for i in range(5)}
    assert all(len(parts) == 1 for parts in by_key.values())  # one key, one partition
    assert {p for parts in by_key.values() for p in parts} <= {"kw.0", "kw.1", "kw.2"}
    assert any(r["index"] > 0 for r in rows)  # several messages per RECORD: batching
    for key in by_key:  # per key, in the order sent
        values = [int(r["value"][1:]) for r in rows if r["key"] == key]
        assert values == sorted(values)


def test_nul_delimited_and_json_output(cluster: LocalCluster) -> None:
    produced = dafka("produce", "nul", "-z", *_node(cluster), stdin=b"a\nb\0\xff\xfe\0c")
    assert produced.code == 0, produced.err
    consumed = dafka("consume", "nul", *_node(cluster), "--earliest", "-c", "3", "--format", "json")
    assert consumed.code == 0, consumed.err
    rows = [json.loads(line) for line in consumed.out.splitlines()]
    assert [r["value"] for r in rows] == ["a\nb", "//4=", "c"]
    assert rows[1]["value_encoding"] == "base64"
    positions = [(r["offset"], r["index"]) for r in rows]
    assert positions == sorted(set(positions))  # in order, each once
    assert {r["topic"] for r in rows} == {"nul"}
    assert len({r["partition"] for r in rows}) == 1


def test_files_whole_and_a_template_over_two_topics(cluster: LocalCluster, tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    one.write_bytes(b"first file")
    two.write_bytes(b"second")
    assert dafka("produce", "ta", *_node(cluster), "--file", str(one)).code == 0
    assert dafka("produce", "tb", *_node(cluster), "--file", str(two)).code == 0
    consumed = dafka(
        "consume", "ta", "tb", *_node(cluster), "--earliest", "-c", "2", "-f", r"%t %o %S|%s\n"
    )
    assert consumed.code == 0, consumed.err
    assert sorted(consumed.out.splitlines()) == [b"ta 0 10|first file", b"tb 0 6|second"]


def test_consume_into_head_exits_quietly(cluster: LocalCluster) -> None:
    lines = b"".join(b"%d\n" % i for i in range(20_000))
    assert dafka("produce", "many", *_node(cluster), stdin=lines).code == 0
    consume = subprocess.Popen(
        [*DAFKA, "consume", "many", *_node(cluster), "--earliest"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    head = subprocess.run(
        ["head", "-3"], stdin=consume.stdout, capture_output=True, timeout=60, check=False
    )
    assert consume.stdout is not None
    consume.stdout.close()
    code = consume.wait(60)
    assert head.stdout == b"0\n1\n2\n"
    assert code == 0
    assert consume.stderr is not None
    with consume.stderr:
        assert consume.stderr.read() == b""


def test_offset_json_starts_a_partition_where_asked(cluster: LocalCluster) -> None:
    plain = dafka("produce", "pos", *_node(cluster), "--no-batching", stdin=b"a\nb\nc\nd\n")
    assert plain.code == 0, plain.err  # one RECORD (offset) per message
    first = dafka("consume", "pos", *_node(cluster), "--earliest", "-c", "1", "--format", "json")
    partition = json.loads(first.out)["partition"]
    rest = dafka(
        "consume", "pos", *_node(cluster), "--offset", json.dumps({partition: 2}), "-c", "2"
    )
    assert rest.code == 0, rest.err
    assert rest.out == b"c\nd\n"


def test_config_file_env_and_flag_precedence(cluster: LocalCluster, tmp_path: Path) -> None:
    config = tmp_path / "dafka.toml"
    config.write_text(f'towers = "{cluster.towers}"\n[beacon]\ninterval = 0.2\n')
    env = {"DAFKA_CONFIG": str(config)}
    # The file names the cluster: no --tower needed.
    assert dafka("produce", "cfg", stdin=b"x\n", env=env).code == 0
    got = dafka("consume", "cfg", "--earliest", "-c", "1", env=env)
    assert got.out == b"x\n"
    # The environment wins over the file, and a flag over the environment.
    shown = dafka("config", "--json", env={**env, "DAFKA_BEACON_INTERVAL": "0.3"})
    table = json.loads(shown.out)
    assert table["towers"] == {
        "value": cluster.towers,
        "source": f"file {config}",
        "env": "DAFKA_TOWERS",
        "flag": "--tower",
    }
    assert table["beacon/interval"]["value"] == "0.3"
    assert table["beacon/interval"]["source"] == "env DAFKA_BEACON_INTERVAL"
    assert table["bind"]["source"] == "default"
    wrong = {**env, "DAFKA_TOWERS": "127.0.0.1:1"}
    flagged = dafka("consume", "cfg", "--earliest", "-c", "1", "--tower", cluster.towers, env=wrong)
    assert flagged.out == b"x\n"


def test_status_shows_partitions_and_heads(cluster: LocalCluster) -> None:
    produced = dafka(
        "produce",
        "st",
        *_node(cluster),
        "--no-batching",
        "--partitions",
        "2",
        "--name",
        "sw",
        "--batch-size",
        "1",
        stdin=b"".join(b"%d\n" % i for i in range(40)),
    )
    assert produced.code == 0, produced.err
    shown = dafka("status", "st", *_node(cluster), "--json", "--wait", "3")
    assert shown.code == 0, shown.err
    table = json.loads(shown.out)
    assert table["towers"] == [cluster.towers]
    assert table["peers_connected"] >= 1
    parts = {p["partition"]: p["head"] for p in table["topics"]["st"]["partitions"]}
    assert set(parts) == {"sw.0", "sw.1"}
    assert sum(h + 1 for h in parts.values()) == 40  # one RECORD per message
    text = dafka("status", "st", *_node(cluster), "--wait", "3")
    assert "topic st: 2 partition(s)" in text.out.decode()


def test_transactions_and_read_committed(cluster: LocalCluster) -> None:
    lines = b"".join(b"t%d\n" % i for i in range(300))
    produced = dafka(
        "produce",
        "txn",
        *_node(cluster),
        "--transactional-id",
        "cli-tx",
        "--transaction-size",
        "100",
        "--partitions",
        "2",
        stdin=lines,
    )
    assert produced.code == 0, produced.err
    consumed = dafka(
        "consume",
        "txn",
        *_node(cluster),
        "-o",
        "earliest",
        "--isolation",
        "read_committed",
        "-c",
        "300",
    )
    assert consumed.code == 0, consumed.err
    assert sorted(consumed.out.splitlines()) == sorted(lines.splitlines())
