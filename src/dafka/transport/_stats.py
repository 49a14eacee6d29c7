"""The counters of a runner (``NodeRunner.statistics()``), shared by its parts."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class RunnerStats:
    """Counters of a runner: written by its thread only, copied by ``statistics()``."""

    received: int = 0
    sent: int = 0
    sent_here: int = 0
    """Of ``sent``: sent by a caller's thread itself (``NodeRunner.run_here``: a producer's
    lone records), not by the runner's."""
    received_here: int = 0
    """Of ``received``: read by a caller's thread itself (``NodeRunner.wait_here``: a
    consumer's ``poll`` waiting for records), not by the runner's."""
    reads_here: int = 0
    """Reads of a data SUB by a caller's thread (``NodeRunner.wait_here``), each up to
    ``receive_batch`` messages: one per lone record a waiting ``poll`` reads (a read that
    finds nothing costs as much as one that finds a record)."""
    undecodable: int = 0
    injected_drops: int = 0
    """Messages dropped by the fault injector (``drop_inbound``; tests and chaos only)."""
    peers_connected: int = 0
    peers_expired: int = 0
    rejected_endpoints: int = 0
    """Forwarded beacons naming an endpoint nobody can connect to (ignored)."""
    refused_peers: int = 0
    """New node ids refused by discovery's bounds (``max_peers``, a full probation table:
    a beacon flood; docs/nodes.md, limits against strangers)."""
    unencodable: int = 0
    """Messages the machine asked to send that the encoder refused (dropped): e.g. a
    STORE-HELLO to a subscriber whose id is not a valid name."""
    connect_errors: int = 0
    """Peers ZeroMQ refused to connect to (the endpoint passed our checks but not its)."""
    keyless_peers: int = 0
    """Secured node: peers whose beacon carried no public key (not connected)."""
    refused_keys: int = 0
    """Secured node: connections to its sockets refused by ZAP (key not authorized)."""
    failed_handshakes: int = 0
    """Secured node: connections to its sockets whose CURVE handshake failed (no key...)."""
    acl_refused: int = 0
    """Node with an ACL: messages and subscriptions refused because the sender's key may
    not produce to / consume from the topic (``dafka.transport._guard``)."""
    not_owner: int = 0
    """Node with an ACL: RECORDs, HEADs and direct ones for a partition first written by
    another key (dropped)."""
    peers_awaited: int = 0
    """Peers found through the towers that have not connected back yet (within their grace;
    ``dafka.transport._reach``)."""
    peers_unreached: int = 0
    """Peers found through the towers that never connected back within their grace: they
    cannot reach this node's advertised address (said in a WARNING line naming --bind)."""


__all__ = ["RunnerStats"]
