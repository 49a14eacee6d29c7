"""Every setting of the ``dafka`` commands, in one table: key, flag, default, kind, help.

Keys follow the C reference's zconfig paths where it has one (``beacon/interval``,
``consumer/offset/reset``, ``store/db``, ``tower/sub_address``...); the environment variable
of a key is ``DAFKA_`` + the key in upper case with ``/`` as ``_`` (``DAFKA_BEACON_INTERVAL``).
The command line builds its options from this table, so --help, the environment variables,
the TOML file and ``dafka config`` can never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dafka.config import _values as v
from dafka.protocol import MAX_MESSAGE_BYTES, MIN_MESSAGE_BYTES


@dataclass(frozen=True, slots=True)
class Setting:
    key: str
    flag: str
    kind: v.Kind
    default: Any
    help: str

    @property
    def env(self) -> str:
        return "DAFKA_" + self.key.upper().replace("/", "_").replace("-", "_")


_TABLE = [
    # -- every node -------------------------------------------------------------------------
    Setting(
        "towers",
        "--tower",
        v.TOWERS,
        "127.0.0.1:5556",
        "Towers as HOST:PORT (beacons in; out on PORT+1) or HOST:SUBPORT:PUBPORT, "
        "comma-separated or repeated.",
    ),
    Setting(
        "beacon/interval", "--beacon-interval", v.number(0, 3600), 1.0, "Seconds between beacons."
    ),
    Setting(
        "beacon/address",
        "--advertise",
        v.HOST,
        "",
        "The host peers connect to (default: the --bind address; with --bind '*' the "
        "address the tower sees).",
    ),
    Setting(
        "bind",
        "--bind",
        v.LISTEN_ADDRESS,
        "",
        "Address to listen on; * for every interface (default: the address this host "
        "reaches its tower from, 127.0.0.1 when the tower is on loopback; for dafka tower: "
        "127.0.0.1).",
    ),
    Setting(
        "max_message_bytes",
        "--max-message-bytes",
        v.integer(MIN_MESSAGE_BYTES, MAX_MESSAGE_BYTES),
        MAX_MESSAGE_BYTES,
        "Largest RECORD content, in bytes, on every node: producers refuse a bigger message, "
        "stores keep a drop notice in place of a bigger RECORD, consumers skip both.",
    ),
    # -- security (docs/security.md) --------------------------------------------------------
    Setting(
        "security/key",
        "--key",
        v.OPTIONAL_TEXT,
        "",
        "This node's secret certificate (dafka keygen PATH writes PATH.key_secret): every "
        "socket becomes CURVE (encrypted, authenticated); empty: plaintext, as the C "
        "reference.",
    ),
    Setting(
        "security/authorized_keys",
        "--authorized-keys",
        v.OPTIONAL_TEXT,
        "",
        "Directory of the public certificates (*.key) allowed to connect, re-read when it "
        "changes; needed with --key.",
    ),
    Setting(
        "security/tower_key",
        "--tower-key",
        v.OPTIONAL_TEXT,
        "",
        "The towers' public certificate (default: tower.key in --authorized-keys, else this "
        "node's own key).",
    ),
    Setting(
        "security/acl",
        "--acl",
        v.OPTIONAL_TEXT,
        "",
        "Permissions file (TOML: which keys may produce to and consume from which topics, "
        "and the stores' keys), re-read when it changes; needs --key; empty: every "
        "authorized key may do everything.",
    ),
    # -- tower ------------------------------------------------------------------------------
    Setting("tower/sub_address", "--sub", v.ENDPOINT, "tcp://127.0.0.1:5556", "Beacons in (XSUB)."),
    Setting(
        "tower/pub_address", "--pub", v.ENDPOINT, "tcp://127.0.0.1:5557", "Beacons out (XPUB)."
    ),
    # -- store ------------------------------------------------------------------------------
    Setting("store/db", "--data", v.DIRECTORY, None, "The store's data directory (created)."),
    Setting(
        "store/fsync",
        "--fsync",
        v.FSYNC,
        "ms:5",
        "When records become durable and are ACKed: batch, records:N, ms:T, os, or several "
        "joined with +.",
    ),
    Setting(
        "store/segment_bytes",
        "--segment-bytes",
        v.size(4096, 1 << 31),
        64 << 20,
        "Segment file size: the log rolls to a new file before one would exceed it; "
        "retention deletes whole closed segments.",
    ),
    Setting(
        "store/retention/bytes",
        "--retention-bytes",
        v.size(1, 1 << 62, zero="no limit"),
        0,
        "Keep at most about this much of each partition (whole closed segments are deleted, "
        "oldest first); 0: no limit.",
    ),
    Setting(
        "store/retention/age",
        "--retention-age",
        v.duration(100 * 365 * 86400, zero="no limit"),
        0.0,
        "Delete closed segments last written longer ago than this (90, 15m, 7d); 0: no limit.",
    ),
    Setting(
        "store/retention/check",
        "--retention-check",
        v.number(0, 86400),
        60.0,
        "Seconds between two applications of retention by a running store.",
    ),
    Setting(
        "store/scrub_rate",
        "--scrub-rate",
        v.size(1024, 1 << 40, zero="off"),
        1 << 20,
        "Bytes per second of the store's background check of its logs (1M, 512K...; damage "
        "found is repaired from the other stores); 0: off.",
    ),
    Setting(
        "store/receive_watermark",
        "--receive-watermark",
        v.integer(1, 100_000_000),
        20_000,
        "Messages a store queues from one peer before TCP holds the rest back in the sender: "
        "a store that lags holds about this many messages per peer in memory.",
    ),
    Setting(
        "store/max_partitions",
        "--max-partitions",
        v.integer(1, 1 << 40),
        100_000,
        "The most partitions a store tracks: a RECORD or HEAD of a new partition beyond is "
        "refused and counted (partitions_refused), so a peer inventing partitions cannot "
        "grow a store without bound.",
    ),
    # -- up ---------------------------------------------------------------------------------
    Setting("up/db", "--data", v.DIRECTORY, "./dafka-data", "Where the stores keep their data."),
    Setting("up/stores", "--stores", v.integer(0, 64), 1, "How many stores to run."),
    Setting("up/host", "--host", v.BIND_ADDRESS, "127.0.0.1", "Address everything binds to."),
    Setting(
        "up/port", "--port", v.integer(1, 65534), 5556, "The tower's beacon-in port (out: PORT+1)."
    ),
    # -- producer ---------------------------------------------------------------------------
    Setting(
        "producer/flush_timeout",
        "--flush-timeout",
        v.number(0, 86400),
        30.0,
        "Seconds to wait for the stores' ACKs (and for room to send) before giving up.",
    ),
    Setting(
        "producer/partitions",
        "--partitions",
        v.integer(1, 1024),
        1,
        "Partitions of this producer (keys map to one by FNV-1a).",
    ),
    Setting(
        "producer/name",
        "--name",
        v.OPTIONAL_TEXT,
        "",
        "Producer name: partitions are NAME.0..N-1 and a restart with the same name "
        "resumes them (default: a random name).",
    ),
    Setting(
        "producer/linger_ms",
        "--linger-ms",
        v.number(0, 60_000, inclusive_min=True),
        5.0,
        "How long a batch may wait for more messages.",
    ),
    Setting(
        "producer/batch_size",
        "--batch-size",
        v.integer(1, 64 << 20),
        256 * 1024,
        "Bytes after which a batch is sent.",
    ),
    Setting(
        "producer/head_interval",
        "--head-interval",
        v.number(0, 3600),
        1.0,
        "Seconds between HEADs announcing a partition's last sequence.",
    ),
    Setting(
        "producer/acks_from",
        "--acks-from",
        v.choice("stores", "any"),
        "stores",
        "Whose ACKs count: stores, only stores that greeted this producer (dafka stores "
        "do); any, every peer's (needed for C stores, which never greet; a stray or forged "
        "ACK then marks messages stored).",
    ),
    Setting(
        "producer/max_in_flight",
        "--max-in-flight",
        v.integer(1, 100_000_000),
        1_000_000,
        "Messages sent and not yet stored before sending waits.",
    ),
    # -- consumer ---------------------------------------------------------------------------
    Setting(
        "consumer/offset/reset",
        "--offset-reset",
        v.choice("earliest", "latest"),
        "latest",
        "Where to start a partition with no position.",
    ),
    Setting(
        "consumer/fail_on_data_loss",
        "--fail-on-data-loss",
        v.BOOLEAN,
        True,
        "Records gone from every store (damage no store could repair, retention) stop the "
        "consumer with an error naming them; false skips them with a warning.",
    ),
    # -- operations -------------------------------------------------------------------------
    Setting(
        "metrics/port",
        "--metrics-port",
        v.integer(0, 65535),
        0,
        "Serve /metrics (Prometheus) and /healthz over HTTP on this port; 0: off.",
    ),
    Setting(
        "metrics/host", "--metrics-host", v.BIND_ADDRESS, "127.0.0.1", "Where /metrics listens."
    ),
    Setting(
        "consumer/isolation",
        "--isolation",
        v.choice("read_uncommitted", "read_committed"),
        "read_uncommitted",
        "read_committed: only messages of committed transactions, each once.",
    ),
    # -- logs -------------------------------------------------------------------------------
    Setting("log/format", "--log-format", v.choice("text", "json"), "text", "Log lines' format."),
]

SETTINGS: dict[str, Setting] = {s.key: s for s in _TABLE}
"""Every setting by key."""

CLIENT_FIELDS: dict[str, tuple[str, frozenset[str]]] = {
    "towers": ("towers", frozenset({"producer", "consumer"})),
    "beacon/interval": ("beacon_interval", frozenset({"producer", "consumer"})),
    "beacon/address": ("advertised_host", frozenset({"producer", "consumer"})),
    "bind": ("bind_host", frozenset({"producer", "consumer"})),
    "max_message_bytes": ("max_message_bytes", frozenset({"producer", "consumer"})),
    "security/key": ("key", frozenset({"producer", "consumer"})),
    "security/authorized_keys": ("authorized_keys", frozenset({"producer", "consumer"})),
    "security/tower_key": ("tower_key", frozenset({"producer", "consumer"})),
    "security/acl": ("acl", frozenset({"producer", "consumer"})),
    "producer/partitions": ("partitions", frozenset({"producer"})),
    "producer/name": ("name", frozenset({"producer"})),
    "producer/linger_ms": ("linger_ms", frozenset({"producer"})),
    "producer/batch_size": ("batch_size", frozenset({"producer"})),
    "producer/max_in_flight": ("max_in_flight", frozenset({"producer"})),
    "producer/head_interval": ("head_interval", frozenset({"producer"})),
    "producer/acks_from": ("acks_from", frozenset({"producer"})),
    "consumer/offset/reset": ("offset_reset", frozenset({"consumer"})),
    "consumer/isolation": ("isolation_level", frozenset({"consumer"})),
    "consumer/fail_on_data_loss": ("fail_on_data_loss", frozenset({"consumer"})),
}
"""Config key -> (field of ``ProducerSettings``/``ConsumerSettings``, which clients read it):
``ProducerSettings.from_config`` and ``ConsumerSettings.from_config`` read the same file and
``DAFKA_*`` variables as the commands through this table (the other keys are the daemons')."""
