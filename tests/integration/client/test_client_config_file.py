"""A Producer and a Consumer configured by the same TOML file as the commands."""

from __future__ import annotations

from pathlib import Path

from dafka import Consumer, LocalCluster, Producer


def test_producer_and_consumer_take_the_commands_config_file(tmp_path: Path) -> None:
    with LocalCluster(tmp_path / "data", stores=1, beacon_interval=0.2) as cluster:
        path = tmp_path / "dafka.toml"
        path.write_text(
            f'towers = "{cluster.towers}"\n'
            "[beacon]\ninterval = 0.2\n"
            '[producer]\nname = "cfg"\npartitions = 2\nlinger_ms = 0\n'
            '[consumer.offset]\nreset = "earliest"\n'
        )
        with Producer("configured", config_file=path) as producer:
            assert producer.partitions == ("cfg.0", "cfg.1")  # name and partitions from the file
            for i in range(20):
                producer.send(b"m%d" % i, key=b"%d" % i)
            assert producer.flush(30) == 0
        with Consumer(["configured"], config_file=path) as consumer:  # earliest from the file
            got: list[bytes] = []
            while len(got) < 20:
                records = consumer.poll(timeout=30)
                assert records, f"only {len(got)} of 20"
                got += [r.value for r in records]
        assert sorted(got) == sorted(b"m%d" % i for i in range(20))
