"""Permissions (issue 19): the ACL file's rules (``dafka.config.Acl``: keys by certificate
name or Z85 key, glob topics, stores may do everything, a bad file is a clear error) and the
guard that applies them where the data is (``dafka.transport._guard``): refused messages are
counted, a partition belongs to the first key that wrote it - kept across a restart in the
owners file -, the ACL and the keys directory are re-read when they change (a broken ACL
keeps the last good one), and a producer's PUB serves only keys that may consume its topic.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from dafka import ConfigError
from dafka.config import Acl
from dafka.protocol import (
    Ack,
    ConsumerHello,
    DirectRecord,
    Fetch,
    GetHeads,
    Head,
    HeadsEnd,
    LogStart,
    Record,
)
from dafka.transport._guard import Guard
from dafka.transport.runner import RunnerStats
from dafka.transport.security import Security, keygen

ACL = """
stores = ["store"]
[[grant]]
keys = ["alice"]
produce = ["orders", "logs.*"]
consume = ["orders"]
[[grant]]
keys = ["bob.key"]
consume = ["logs.?"]
"""


def test_the_rules_of_an_acl_file() -> None:
    acl = Acl.parse(ACL)
    alice, bob, store = {"alice", "K" * 40}, {"bob"}, {"store"}
    assert acl.may_produce(alice, "orders")
    assert acl.may_produce(alice, "logs.eu")
    assert not acl.may_produce(alice, "orders2")
    assert acl.may_consume(alice, "orders")
    assert not acl.may_consume(alice, "logs.eu")
    assert acl.may_consume(bob, "logs.a")
    assert not acl.may_consume(bob, "logs.ab")
    assert not acl.may_produce(bob, "logs.a")
    assert acl.is_store(store)
    assert acl.may_produce(store, "anything")
    assert acl.may_consume(store, "anything")
    assert not acl.may_consume({"carol"}, "orders")
    z85 = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"
    assert Acl.parse(f'[[grant]]\nkeys = ["{z85}"]\nconsume = ["*"]').may_consume({z85}, "x")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("stores = [", "not TOML"),
        ("store = []", "unknown key"),
        ("stores = 'a'", "list of key names"),
        ("[grant]\nkeys=['a']", r"must be \[\[grant\]\] tables"),
        ("[[grant]]\nproduce = ['t']", "names no keys"),
        ("[[grant]]\nkeys = ['a']\nproduce = 't'", "list of topic patterns"),
        ("[[grant]]\nkeys = ['a']\nwrite = ['t']", "unknown key"),
    ],
)
def test_a_bad_acl_is_a_clear_error(text: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        Acl.parse(text, "acl.toml")


def _keys(tmp_path: Path, acl: str) -> tuple[Security, dict[str, bytes], Path]:
    auth = tmp_path / "auth"
    auth.mkdir()
    public: dict[str, bytes] = {}
    for name in ("store", "alice", "bob", "node"):
        made, secret = keygen(tmp_path / name)
        shutil.copy(made, auth)
        public[name] = Security.load(secret, auth).public_key
    path = tmp_path / "acl.toml"
    path.write_text(acl)
    return Security.load(tmp_path / "node.key_secret", auth, acl=path), public, path


def test_security_refuses_a_bad_acl_at_load(tmp_path: Path) -> None:
    security, _, path = _keys(tmp_path, ACL)
    path.write_text("stores = 1")
    with pytest.raises(ConfigError, match=r"acl\.toml"):
        Security.load(security.key_file, security.authorized_keys, acl=path)
    with pytest.raises(ConfigError, match="cannot read"):
        Security.load(security.key_file, security.authorized_keys, acl=tmp_path / "missing")


def test_the_guard_counts_what_a_key_may_not_send(tmp_path: Path) -> None:
    security, key, _ = _keys(tmp_path, ACL)
    stats = RunnerStats()
    guard = Guard(security, "node", stats)
    alice, bob, store = key["alice"], key["bob"], key["store"]
    assert guard.admit(Record("orders", "a.0", 0, b"x"), alice, 0.0)
    assert guard.admit(Head("orders", "a.0", 0), alice, 0.0)
    assert guard.admit(Fetch("orders", "b", "orders", 0, 1), alice, 0.0)
    assert not guard.admit(Record("orders", "b.0", 0, b"x"), bob, 0.0)
    assert not guard.admit(Fetch("a.0", "b", "orders", 0, 1), bob, 0.0)
    assert not guard.admit(GetHeads("orders", "b"), bob, 0.0)
    assert not guard.admit(ConsumerHello("s", "b", ("orders",)), bob, 0.0)
    assert not guard.admit(Ack("a.0", "orders", 0), alice, 0.0)  # only stores ACK
    assert not guard.admit(Record("orders", "x.0", 0, b"x"), None, 0.0)
    assert stats.acl_refused == 6
    assert guard.admit(Ack("a.0", "orders", 0), store, 0.0)
    assert guard.admit(DirectRecord("w", "secret", "z.0", 0, b"x"), store, 0.0)
    # a producer's PUB (one topic) serves only keys that may consume it
    assert guard.admit_subscription(b"Morders", alice.decode(), "orders", 0.0)
    assert not guard.admit_subscription(b"Morders", bob.decode(), "orders", 0.0)
    assert not guard.admit_subscription(b"D", bob.decode(), "orders", 0.0)
    assert guard.admit_subscription(b"M", store.decode(), "orders", 0.0)
    # other PUBs: not every node's direct messages to a non-store key, nor another's
    assert not guard.admit_subscription(b"D", bob.decode(), "", 0.0)
    assert guard.admit_subscription(b"Dbob-id", bob.decode(), "", 0.0)  # not seen yet
    guard.note_node("alice-id", alice.decode())
    guard.note_node("bob-id", bob.decode())
    assert guard.admit_subscription(b"Dbob-id", bob.decode(), "", 0.0)
    assert guard.admit_subscription(b"Lbob-id", bob.decode(), "", 0.0)
    assert not guard.admit_subscription(b"Dalice-id", bob.decode(), "", 0.0)
    assert not guard.admit_subscription(b"Ealice", bob.decode(), "", 0.0)
    assert not guard.admit_subscription(b"Dali", bob.decode(), "", 0.0)  # a prefix of hers
    assert guard.admit_subscription(b"Dalice-id", alice.decode(), "", 0.0)
    assert stats.acl_refused == 12


def test_only_stores_say_that_is_all_or_where_a_log_starts(tmp_path: Path) -> None:
    """A forged HEADS-END would end a producer's resume before the stores answered (reused
    sequences, lost records); a forged LOG-START would make a consumer skip records: both
    are taken from store keys only, and nobody else may listen for another node's."""
    security, key, _ = _keys(tmp_path, ACL)
    stats = RunnerStats()
    guard = Guard(security, "node", stats)
    alice, bob, store = key["alice"], key["bob"], key["store"]
    assert not guard.admit(HeadsEnd("a.0", "orders", "r", "w", 0, 1), alice, 0.0)
    assert not guard.admit(LogStart("b", "orders", "a.0", "r", 9), alice, 0.0)
    assert stats.acl_refused == 2
    assert guard.admit(HeadsEnd("a.0", "orders", "r", "w", 0, 1), store, 0.0)
    assert guard.admit(LogStart("b", "orders", "a.0", "r", 9), store, 0.0)
    guard.note_node("alice-id", alice.decode())
    assert not guard.admit_subscription(b"Aalice-id", bob.decode(), "", 0.0)
    assert not guard.admit_subscription(b"Salice-id", bob.decode(), "", 0.0)
    assert guard.admit_subscription(b"Aalice-id", alice.decode(), "", 0.0)


def test_a_partition_belongs_to_its_first_writer_across_a_restart(tmp_path: Path) -> None:
    everything = ACL.replace('"orders", "logs.*"', '"*"')
    security, key, _ = _keys(tmp_path, everything + '[[grant]]\nkeys = ["bob"]\nproduce = ["*"]')
    owners = tmp_path / "owners.jsonl"
    stats = RunnerStats()
    guard = Guard(security, "store", stats, owners)
    topic = "ord\udcc3ers"  # any bytes a C peer sends
    assert guard.admit(Record("orders", "a.0", 0, b"x"), key["alice"], 0.0)
    assert guard.admit(Record(topic, "a.0", 0, b"x"), key["alice"], 0.0)
    assert not guard.admit(Record("orders", "a.0", 1, b"forged"), key["bob"], 0.0)
    assert not guard.admit(Head("orders", "a.0", 9), key["bob"], 0.0)
    assert not guard.admit(DirectRecord("w", "orders", "a.0", 1, b"f"), key["bob"], 0.0)
    assert guard.admit(Record("orders", "b.0", 0, b"x"), key["bob"], 0.0)
    assert stats.not_owner == 3
    owners.write_text(owners.read_text() + '["torn", "li')  # a crash mid-line
    again = Guard(security, "store", RunnerStats(), owners)
    assert not again.admit(Record("orders", "a.0", 2, b"forged"), key["bob"], 0.0)
    assert again.admit(Record("orders", "a.0", 2, b"ok"), key["alice"], 0.0)
    assert not again.admit(Record("orders", "b.0", 1, b"forged"), key["alice"], 0.0)
    assert not again.admit(Record(topic, "a.0", 1, b"forged"), key["bob"], 0.0)
    assert again.admit(Record("torn", "li", 0, b"claimed again"), key["bob"], 0.0)


def test_the_acl_and_the_keys_are_reread_when_they_change(tmp_path: Path) -> None:
    security, key, path = _keys(tmp_path, ACL)
    stats = RunnerStats()
    guard = Guard(security, "node", stats)
    fetch = Fetch("p.0", "c", "orders", 0, 1)
    assert not guard.admit(fetch, key["bob"], 0.0)
    path.write_text(ACL + '[[grant]]\nkeys = ["bob"]\nconsume = ["orders"]\n')
    assert not guard.admit(fetch, key["bob"], 0.5)  # looked at once a second at most
    assert guard.admit(fetch, key["bob"], 1.0)
    path.write_text("stores = [")  # broken: the last good ACL stays
    assert guard.admit(fetch, key["bob"], 2.0)
    # a key is known by its certificate's name: renaming the file changes its rights
    path.write_text(ACL)
    assert guard.admit(fetch, key["alice"], 3.0)
    (security.authorized_keys / "alice.key").rename(security.authorized_keys / "eve.key")
    assert not guard.admit(fetch, key["alice"], 4.0)


def test_only_a_partitions_owner_sends_a_fencing_get_heads(tmp_path: Path) -> None:
    """A fencing GET-HEADS makes the stores refuse a producer's older runs: a reader sending
    one would stop a producer it may only read. Only a key that may produce the topic and
    owns the producer's partition 0 may send it; a plain GET-HEADS stays a reader's."""
    everything = ACL.replace('"orders", "logs.*"', '"*"')
    security, key, _ = _keys(tmp_path, everything + '[[grant]]\nkeys = ["bob"]\nconsume = ["*"]')
    stats = RunnerStats()
    guard = Guard(security, "store", stats, tmp_path / "owners.jsonl")
    alice, bob = key["alice"], key["bob"]
    assert guard.admit(Record("orders", "a.0", 0, b"x"), alice, 0.0)
    assert guard.admit(GetHeads("orders", "b"), bob, 0.0)
    assert not guard.admit(GetHeads("orders", "a.0", 7, 2), bob, 0.0)  # before: admitted
    assert guard.admit(GetHeads("orders", "a.0", 7, 2), alice, 0.0)
    assert stats.acl_refused == 1
