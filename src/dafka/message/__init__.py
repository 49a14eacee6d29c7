"""dafka.message (see docs/architecture.md)."""
