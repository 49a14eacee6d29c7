"""Metrics of the daemons for Prometheus (``--metrics-port``): ``/metrics`` and ``/healthz``.

Needs the ``metrics`` extra (``pip install 'dafka[metrics]'``, prometheus-client).
"""

from dafka.metrics._nodes import directory_bytes, store_samples, tower_samples
from dafka.metrics._server import MetricsServer, Sample

__all__ = ["MetricsServer", "Sample", "directory_bytes", "store_samples", "tower_samples"]
