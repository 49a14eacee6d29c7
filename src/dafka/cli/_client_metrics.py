"""``dafka produce``/``consume --metrics-port``: the client's metrics for Prometheus.

The command's :class:`MetricsHost` (the daemons' ``/metrics`` server, off without a port)
serves ``dafka_producer_*`` / ``dafka_consumer_*`` built from ``metrics()`` snapshots taken at
scrape time (``dafka.metrics.client_samples``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol


class MetricsHost(Protocol):
    """Where a command serves its client's metrics (``daemon.MetricsServerHost``: off
    without a port)."""

    def start(self, collect: Callable[[], Any], healthy: Callable[[], str | None]) -> None: ...

    def stop(self) -> None: ...


def serve_metrics(
    host: MetricsHost | None,
    client: str,
    metrics: Callable[[], Any],
    extra: Callable[[Any], list[Any]] | None = None,
) -> None:
    """Serve ``dafka_<client>_*`` from ``metrics()`` snapshots on ``host`` (if any);
    ``extra``: more samples from the same snapshot (a group member's lag in messages)."""
    if host is None:
        return

    def collect() -> Any:
        from dafka.metrics import client_samples

        snapshot = metrics()
        samples = client_samples(client, snapshot)
        return samples if extra is None else samples + extra(snapshot)

    host.start(collect, lambda: None)


__all__ = ["MetricsHost", "serve_metrics"]
