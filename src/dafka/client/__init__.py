"""dafka.client (see docs/architecture.md)."""
