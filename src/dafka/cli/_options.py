"""Options shared by the sub-commands that join a cluster."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from dafka.errors import ConfigError
from dafka.transport.config import TransportConfig

F = TypeVar("F", bound=Callable[..., Any])


def transport_options(fn: F) -> F:
    """``--tower HOST:SUBPORT[:PUBPORT]`` (repeatable), ``--advertise``, ``--bind``."""
    for decorator in reversed(
        [
            click.option(
                "--tower",
                "towers",
                multiple=True,
                default=("127.0.0.1:5556",),
                show_default=True,
                envvar="DAFKA_TOWERS",
                help="A tower as HOST:PORT (its beacon XSUB; the XPUB is PORT+1) or "
                "HOST:SUBPORT:PUBPORT. Repeat for several towers.",
            ),
            click.option(
                "--advertise",
                default="",
                envvar="DAFKA_ADVERTISE",
                help="beacon/address: the host peers should connect to.",
            ),
            click.option(
                "--bind",
                "bind_host",
                default="*",
                show_default=True,
                help="Interface the data sockets bind to.",
            ),
            click.option(
                "--beacon-interval",
                default=1.0,
                show_default=True,
                help="beacon/interval in seconds.",
            ),
        ]
    ):
        fn = decorator(fn)
    return fn


def transport_config(
    towers: tuple[str, ...], advertise: str, bind_host: str, beacon_interval: float
) -> TransportConfig:
    subs: list[str] = []
    pubs: list[str] = []
    for tower in towers:
        parts = tower.split(":")
        try:
            if len(parts) == 2:
                host, sub, pub = parts[0], int(parts[1]), int(parts[1]) + 1
            elif len(parts) == 3:
                host, sub, pub = parts[0], int(parts[1]), int(parts[2])
            else:
                raise ValueError(tower)
        except ValueError:
            raise ConfigError(
                f"--tower {tower!r}: expected HOST:PORT or HOST:SUBPORT:PUBPORT"
            ) from None
        subs.append(f"tcp://{host}:{sub}")
        pubs.append(f"tcp://{host}:{pub}")
    return TransportConfig(
        tower_sub_addresses=tuple(subs),
        tower_pub_addresses=tuple(pubs),
        advertised_host=advertise,
        bind_host=bind_host,
        beacon_interval=beacon_interval,
        beacon_timeout=4 * beacon_interval,
    )


__all__ = ["transport_config", "transport_options"]
