"""What a node says about where it listens, when it opens its sockets.

One INFO line per node (where it binds, why, what it advertises). The rule's warnings
(``Listen.warnings``: a loopback bind or advertise while the towers are reached off loopback)
and the plaintext warning (a node that listens beyond loopback without keys can be read and
written by anyone who reaches it; docs/security.md) are said once per process each, so that a
program with a hundred consumers says them once.
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


def say_listening(name: str, listen: Listen, ports: list[int], *, secured: bool) -> None:
    """Log where node ``name`` listens; warn (once per process) about what peers cannot reach
    and, unless it is ``secured`` (CURVE keys), about listening beyond loopback."""
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
    if not listen.loopback_only and not secured:
        say_plaintext(name, listen.bind)


def say_plaintext(name: str, where: str) -> None:
    """Warn, once per process, that node ``name`` listens beyond loopback (on ``where``)
    without keys: anyone who reaches it can read and write (the security issue's rule)."""
    if _once("beyond loopback"):
        log.warning(
            "%s: listening beyond loopback (on %s) in plaintext, without keys: anyone who "
            "can reach that address can read and write every topic; give --key and "
            "--authorized-keys (docs/security.md) or keep it behind a firewall "
            "(docs/deploy.md)",
            name,
            where,
        )


__all__ = ["say_listening", "say_plaintext"]
