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


def serve_metrics(host: MetricsHost | None, client: str, metrics: Callable[[], Any]) -> None:
    """Serve ``dafka_<client>_*`` from ``metrics()`` snapshots on ``host`` (if any)."""
    if host is None:
        return

    def collect() -> Any:
        from dafka.metrics import client_samples

        return client_samples(client, metrics())

    host.start(collect, lambda: None)


__all__ = ["MetricsHost", "serve_metrics"]
