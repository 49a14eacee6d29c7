"""The connector on a secured (CURVE) cluster (issue 19): with the options ``key`` and
``authorizedKeys`` the source reads what a secured producer wrote and the sink writes
exactly-once to a topic a secured read-committed consumer reads back; without them the
tower refuses the connector's handshakes and the query fails on the driver."""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from dafka.client import Producer
from dafka.server import LocalCluster
from dafka.spark._options import ClientSecurity
from dafka.transport.security import keygen
from tests.spark.committed import committed_values


class Secured:
    """A secured LocalCluster (a tower and a store process) and the keys to reach it."""

    def __init__(self, root: Path) -> None:
        self.auth = root / "authorized"
        self.auth.mkdir()
        keys = root / "keys"
        keys.mkdir()
        for name in ("tower", "client"):
            public, _ = keygen(keys / name)
            shutil.copy(public, self.auth)  # tower.key: the towers' key, found by name
        self.secret = keys / "client.key_secret"
        self.cluster = LocalCluster(
            root / "d",
            stores=1,
            beacon_interval=0.5,
            key=keys / "tower.key_secret",
            authorized_keys=self.auth,
        )

    @property
    def towers(self) -> str:
        return self.cluster.towers

    @property
    def security(self) -> ClientSecurity:
        """A secured client's keys (``Producer(**security.fields())``)."""
        return ClientSecurity(str(self.secret), str(self.auth))

    def spark(self) -> dict[str, str]:
        """The connector's options for the same keys."""
        return {"towers": self.towers, "key": str(self.secret), "authorizedKeys": str(self.auth)}


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    s = Secured(tmp_path_factory.mktemp("secured"))
    with s.cluster:
        yield s


def test_source_and_sink_on_a_secured_cluster_and_refused_without_the_key(
    spark: SparkSession, secured: Secured
) -> None:
    sent = [b"secret-%d" % i for i in range(200)]
    with Producer("sec-in", towers=secured.towers, **secured.security.fields()) as producer:
        for value in sent:
            producer.send(value)
        assert producer.flush(30.0) == 0

    reader = spark.read.format("dafka").options(**secured.spark()).option("subscribe", "sec-in")
    rows = reader.load().collect()
    assert sorted(r.value for r in rows) == sorted(sent)

    out = spark.createDataFrame([(v,) for v in sent], "value BINARY").repartition(2)
    out.write.mode("append").format("dafka").options(**secured.spark()).option(
        "topic", "sec-out"
    ).option("name", "secw").save()
    committed = committed_values(secured, "sec-out", security=secured.security)
    assert Counter(committed) == Counter(sent)  # exactly once

    # without the key the secured tower refuses the connector's plaintext handshakes: the
    # query fails on the driver, planning (no welcome from the tower), for the source and sink
    plain = spark.read.format("dafka").option("towers", secured.towers)
    with pytest.raises(Exception, match="no welcome from any tower"):
        plain.option("subscribe", "sec-in").load().collect()
    with pytest.raises(Exception, match="no welcome from any tower"):
        out.write.mode("append").format("dafka").option("towers", secured.towers).option(
            "topic", "sec-out"
        ).option("name", "plainw").save()
    assert Counter(committed_values(secured, "sec-out", security=secured.security)) == Counter(sent)
