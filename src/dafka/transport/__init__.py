"""dafka.transport (see docs/architecture.md)."""
