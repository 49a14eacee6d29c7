"""The root of every error dafka raises on purpose.

One root (``DafkaError``) so that applications can catch everything of ours in one clause;
each package adds a few subclasses that say what the caller can do about it.
"""


class DafkaError(Exception):
    """Base class of all errors raised by dafka."""


class ConfigError(DafkaError, ValueError):
    """A setting is missing, malformed or out of range."""
