"""``with`` blocks, written once: everything that is closed, stopped or awaited-closed.

The clients, the watchers, the storage and the servers each had their own ``__enter__`` /
``__exit__`` (six near-identical copies for ``close`` alone, issue 22). They share three
shapes, one mixin each; a class states what differs, not the plumbing:

* :class:`Closing` - built ready, ``close()`` at the end of the block. When the block
  raised, :meth:`Closing.close_after_error` runs instead: by default ``close()`` with the
  errors named in ``quiet_errors`` suppressed (a client whose node died raises
  ``NodeFailedError`` from ``close`` too: the error in flight says more); a class that can
  close faster after an error (a producer that need not wait for its stores) overrides it.
* :class:`Running` - ``start()`` on entry, ``stop()`` at the end (the servers: a store
  node, the local clusters).
* :class:`AsyncClosing` - the asyncio clients: ``await start()`` on entry, ``await
  close()`` at the end, :meth:`AsyncClosing.close_after_error` after an error.

Pure: this module imports nothing of dafka, so every layer may use it.
"""

from __future__ import annotations

import contextlib
from types import TracebackType
from typing import ClassVar, Self


class Closing:
    """``with thing: ...`` calls ``thing.close()`` at the end (see the module docstring)."""

    quiet_errors: ClassVar[tuple[type[BaseException], ...]] = ()
    """Errors of ``close()`` that :meth:`close_after_error` suppresses."""

    def close(self) -> None:
        raise NotImplementedError

    def close_after_error(self) -> None:
        """Close at the end of a block that raised: the block's error is what propagates."""
        with contextlib.suppress(*self.quiet_errors):
            self.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self.close_after_error()


class Running:
    """``with thing: ...`` calls ``thing.start()`` on entry and ``thing.stop()`` at the end."""

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class AsyncClosing:
    """``async with thing: ...``: ``await thing.start()``, then ``await thing.close()``."""

    quiet_errors: ClassVar[tuple[type[BaseException], ...]] = ()
    """Errors of ``close()`` that :meth:`close_after_error` suppresses."""

    async def start(self) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError

    async def close_after_error(self) -> None:
        """Close at the end of a block that raised: the block's error is what propagates."""
        with contextlib.suppress(*self.quiet_errors):
            await self.close()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            await self.close()
        else:
            await self.close_after_error()


__all__ = ["AsyncClosing", "Closing", "Running"]
