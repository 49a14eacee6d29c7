"""dafka.node (see docs/architecture.md)."""
