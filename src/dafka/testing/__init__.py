"""dafka.testing (see docs/architecture.md)."""
