"""Building message instances without the dataclass ``__init__``, for the decoder.

A frozen dataclass ``__init__`` assigns each field through ``object.__setattr__`` (a frozen
class forbids plain assignment), which costs about as much as all the rest of decoding a
RECORD. The decoder has already checked every value, so it builds instances the way the
interpreter stores them: ``object.__new__`` plus the slot descriptors' ``__set__``, about
twice as fast. The result is an ordinary instance: same class, same fields, same ``==``,
``hash`` and ``repr``; the messages stay frozen for everyone else.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def constructor(cls: type[T]) -> Callable[..., T]:
    """A function taking ``cls``'s fields positionally, in declaration order."""
    names = [field.name for field in dataclasses.fields(cls)]  # type: ignore[arg-type]
    setters: list[Callable[[Any, Any], None]] = [vars(cls)[n].__set__ for n in names]
    new = object.__new__
    if len(setters) == 2:
        s0, s1 = setters

        def make2(a: object, b: object) -> T:
            obj = new(cls)
            s0(obj, a)
            s1(obj, b)
            return obj

        return make2
    if len(setters) == 3:
        s0, s1, s2 = setters

        def make3(a: object, b: object, c: object) -> T:
            obj = new(cls)
            s0(obj, a)
            s1(obj, b)
            s2(obj, c)
            return obj

        return make3
    if len(setters) == 4:
        s0, s1, s2, s3 = setters

        def make4(a: object, b: object, c: object, d: object) -> T:
            obj = new(cls)
            s0(obj, a)
            s1(obj, b)
            s2(obj, c)
            s3(obj, d)
            return obj

        return make4
    if len(setters) == 5:
        s0, s1, s2, s3, s4 = setters

        def make5(a: object, b: object, c: object, d: object, e: object) -> T:
            obj = new(cls)
            s0(obj, a)
            s1(obj, b)
            s2(obj, c)
            s3(obj, d)
            s4(obj, e)
            return obj

        return make5
    if len(setters) == 6:
        s0, s1, s2, s3, s4, s5 = setters

        def make6(a: object, b: object, c: object, d: object, e: object, f: object) -> T:
            obj = new(cls)
            s0(obj, a)
            s1(obj, b)
            s2(obj, c)
            s3(obj, d)
            s4(obj, e)
            s5(obj, f)
            return obj

        return make6
    if len(setters) == 7:
        s0, s1, s2, s3, s4, s5, s6 = setters

        def make7(a: object, b: object, c: object, d: object, e: object, f: object, g: object) -> T:
            obj = new(cls)
            s0(obj, a)
            s1(obj, b)
            s2(obj, c)
            s3(obj, d)
            s4(obj, e)
            s5(obj, f)
            s6(obj, g)
            return obj

        return make7
    return cls


__all__ = ["constructor"]
