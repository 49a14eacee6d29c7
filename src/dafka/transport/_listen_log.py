"""What a node says about where it listens, when it opens its sockets.

One INFO line per node (where it binds, why, what it advertises). The rule's warnings
(``Listen.warnings``: a loopback bind or advertise while the towers are reached off loopback)
are said once per process each, so that a program with a hundred consumers says them once.
(A plaintext node listening beyond loopback is said by ``security.warn_if_exposed``.)
"""

from __future__ import annotations

import logging
import threading

from dafka.config import Listen

log = logging.getLogger("dafka.transport.runner")

_said: set[str] = set()
_lock = threading.Lock()


def _once(text: str) -> bool:
    with _lock:
        if text in _said:
            return False
        _said.add(text)
        return True


def say_listening(name: str, listen: Listen, ports: list[int]) -> None:
    """Log where node ``name`` listens; warn (once per process) about what peers cannot
    reach."""
    told = listen.advertise or "the address the tower sees"
    log.info(
        "%s: listening on %s port %s (%s), advertising %s",
        name,
        listen.bind,
        ", ".join(map(str, ports)),
        listen.why,
        told,
    )
    for warning in listen.warnings:
        if _once(warning):
            log.warning("%s: %s", name, warning)


__all__ = ["say_listening"]
