"""Metrics for Prometheus (``--metrics-port``): ``/metrics`` and ``/healthz`` of the daemons,
of ``dafka produce`` and of ``dafka consume``.

Needs the ``metrics`` extra (``pip install 'dafka[metrics]'``, prometheus-client).
"""

from dafka.metrics._nodes import client_samples, directory_bytes, store_samples, tower_samples
from dafka.metrics._server import MetricsServer, Sample

__all__ = [
    "MetricsServer",
    "Sample",
    "client_samples",
    "directory_bytes",
    "store_samples",
    "tower_samples",
]
