"""One error path for every command: ``Error: ...`` on stderr, exit 2 for usage, 1 at run time.

Click already reports bad flags as usage errors (exit 2). :class:`DafkaGroup` turns what our
code raises into the same shape: a :class:`ConfigError` (a bad setting, wherever it was
caught) exits 2, any other :class:`DafkaError` or an ``OSError`` (a file that cannot be read,
a port in use) exits 1. Tracebacks are for bugs only.
"""

from __future__ import annotations

from typing import Any

import click

from dafka.errors import ConfigError, DafkaError
from dafka.transport.runner import NodeNotReadyError


class UserError(click.ClickException):
    """A usage error found after parsing (a bad setting): exit 2."""

    exit_code = 2


def _os_message(exc: OSError) -> str:
    where = f": {exc.filename}" if exc.filename else ""
    return f"{exc.strerror or exc}{where}"


class DafkaGroup(click.Group):
    """The ``dafka`` group: maps our errors onto click's exit codes and messages."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ConfigError as exc:
            raise UserError(str(exc)) from exc
        except NodeNotReadyError as exc:
            raise click.ClickException(
                f"{exc} (is a tower running there? `dafka up` starts a tower and a store)"
            ) from exc
        except DafkaError as exc:
            raise click.ClickException(str(exc)) from exc
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise click.ClickException(_os_message(exc)) from exc


__all__ = ["DafkaGroup", "UserError"]
