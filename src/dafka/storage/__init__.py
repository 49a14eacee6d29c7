"""dafka.storage (see docs/architecture.md)."""
