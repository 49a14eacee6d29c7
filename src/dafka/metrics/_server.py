"""Serving a daemon's counters for Prometheus: ``/metrics`` and ``/healthz`` over HTTP.

A daemon hands a *collect* function (a snapshot of its counters, taken when Prometheus
scrapes, never on a timer) and a *healthy* function. prometheus-client renders the text
format; the HTTP server is the standard library's, in one background thread, so that
``/healthz`` answers 200 ``ok`` while the node runs and 503 with the reason once it died.
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from dafka.errors import DafkaError

Kind = Literal["counter", "gauge", "histogram"]


@dataclass(frozen=True, slots=True)
class Sample:
    """One metric value: ``dafka_<name>`` with its help and kind."""

    name: str
    value: float
    help: str
    kind: Kind = "counter"
    labels: tuple[tuple[str, str], ...] = ()
    buckets: tuple[tuple[float, int], ...] = ()
    """A histogram's (upper bound, cumulative count) pairs; ``value`` is then its sum and
    ``count`` how many were observed (the ``+Inf`` bucket)."""
    count: int = 0


Collect = Callable[[], list[Sample]]
Health = Callable[[], str | None]
"""None when healthy, else the reason."""


class _Snapshot(Collector):
    def __init__(self, collect: Collect) -> None:
        self._collect = collect

    def collect(self) -> Iterator[Metric]:
        families: dict[str, CounterMetricFamily | GaugeMetricFamily] = {}
        histograms: dict[str, HistogramMetricFamily] = {}
        for s in self._collect():
            name = f"dafka_{s.name}"
            label_names = [k for k, _ in s.labels]
            if s.kind == "histogram":
                histogram = histograms.get(name)
                if histogram is None:
                    histogram = histograms[name] = HistogramMetricFamily(
                        name, s.help, labels=label_names
                    )
                bounds = [(f"{bound:g}", float(n)) for bound, n in s.buckets]
                histogram.add_metric(
                    [v for _, v in s.labels], [*bounds, ("+Inf", float(s.count))], s.value
                )
                continue
            family = families.get(name)
            if family is None:
                family = (
                    CounterMetricFamily(name, s.help, labels=label_names)
                    if s.kind == "counter"
                    else GaugeMetricFamily(name, s.help, labels=label_names)
                )
                families[name] = family
            family.add_metric([v for _, v in s.labels], s.value)
        yield from families.values()
        yield from histograms.values()


class MetricsServer:
    """``MetricsServer(collect, healthy, port=9100).start()``; ``port`` 0 picks a free one."""

    def __init__(self, collect: Collect, healthy: Health, *, host: str, port: int) -> None:
        self._registry = CollectorRegistry(auto_describe=False)
        self._registry.register(_Snapshot(collect))
        registry, health = self._registry, healthy

        class _Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._reply(200, generate_latest(registry), "text/plain; version=0.0.4")
                elif path == "/healthz":
                    problem = health()
                    body = b"ok\n" if problem is None else problem.encode() + b"\n"
                    self._reply(200 if problem is None else 503, body, "text/plain")
                else:
                    self._reply(404, b"try /metrics or /healthz\n", "text/plain")

            def _reply(self, code: int, body: bytes, kind: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # scrapes are not worth a log line each

        try:
            self._server = http.server.ThreadingHTTPServer((host, port), _Handler)
        except OSError as exc:
            raise DafkaError(f"metrics: cannot listen on {host}:{port}: {exc.strerror}") from exc
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="dafka-metrics", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


__all__ = ["Collect", "Health", "MetricsServer", "Sample"]
