"""The connector's security options (issue 19): ``key``, ``authorizedKeys``, ``towerKey``,
case-insensitive as every dafka option, checked on the driver (a bad file fails the query at
once, naming the option), and carried as paths to every client the connector builds."""

from __future__ import annotations

import pickle
import shutil
from pathlib import Path

import pytest
import zmq.auth

from dafka.errors import ConfigError
from dafka.spark._options import PLAINTEXT, parse_sink_options, parse_source_options
from dafka.spark._read import RangePartition
from dafka.transport.security import keygen


def _keys(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A client's secret certificate, the authorized directory, the towers' public key."""
    auth = tmp_path / "authorized"
    auth.mkdir()
    client_public, client_secret = keygen(tmp_path / "client")
    tower_public, _ = keygen(tmp_path / "tower")
    shutil.copy(client_public, auth)
    return client_secret, auth, tower_public


def test_source_and_sink_take_the_keys_case_insensitively(tmp_path: Path) -> None:
    secret, auth, tower = _keys(tmp_path)
    given = {"KEY": str(secret), "authorizedkeys": str(auth), "TowerKey": str(tower)}
    source = parse_source_options({"subscribe": "t", **given}, streaming=True)
    sink = parse_sink_options({"topic": "t", "name": "n", **given})
    for options in (source, sink):
        assert options.security.fields() == {
            "key": str(secret),
            "authorized_keys": str(auth),
            "tower_key": str(tower),
            "acl": None,
        }
        loaded = options.transport.security
        assert loaded is not None
        assert loaded.public_key == zmq.auth.load_certificate(tmp_path / "client.key")[0]
        assert loaded.tower_key == zmq.auth.load_certificate(tower)[0]


def test_without_a_key_the_clients_run_in_plaintext() -> None:
    source = parse_source_options({"subscribe": "t"}, streaming=False)
    assert source.security == PLAINTEXT
    assert source.transport.security is None
    assert parse_sink_options({"topic": "t"}).transport.security is None


def test_a_task_carries_the_paths_and_its_consumer_loads_them(tmp_path: Path) -> None:
    secret, auth, _ = _keys(tmp_path)
    options = parse_source_options(
        {"subscribe": "t", "key": str(secret), "authorizedKeys": str(auth)}, streaming=False
    )
    task = RangePartition("127.0.0.1:5556", "t", "p", 0, 5, 1.0, True, security=options.security)
    shipped = pickle.loads(pickle.dumps(task))  # as Spark sends it to an executor
    assert shipped.settings().transport().security is not None
    assert shipped.settings().key == str(secret)


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"authorizedKeys": "AUTH"}, "'key'"),
        ({"towerKey": "TOWER"}, "'key'"),
        ({"key": "SECRET"}, "authorized"),
        ({"key": "MISSING", "authorizedKeys": "AUTH"}, "missing"),
        ({"key": "PUBLIC", "authorizedKeys": "AUTH"}, "no secret key"),
        ({"key": "SECRET", "authorizedKeys": "SECRET"}, "not a directory"),
    ],
)
def test_bad_security_options_fail_at_once_naming_the_problem(
    tmp_path: Path, options: dict[str, str], named: str
) -> None:
    secret, auth, tower = _keys(tmp_path)
    paths = {
        "AUTH": str(auth),
        "TOWER": str(tower),
        "SECRET": str(secret),
        "PUBLIC": str(tmp_path / "client.key"),
        "MISSING": str(tmp_path / "missing.key_secret"),
    }
    resolved = {k: paths[v] for k, v in options.items()}
    with pytest.raises(ConfigError, match=named):
        parse_source_options({"subscribe": "t", **resolved}, streaming=False)
    with pytest.raises(ConfigError, match=named):
        parse_sink_options({"topic": "t", **resolved})
