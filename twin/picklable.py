"""Exceptions that cross a process boundary whole (a sinter, multiprocessing, concurrent.futures or
Dask worker raising them: the parent gets the same type, message and attributes).

Python pickles an exception as ``type(e)(*e.args)``: an exception whose ``__init__`` takes other
arguments than its message (``ConfigError(file, key, value, problem)``) fails to unpickle in the
parent, which then sees ``TypeError: __init__() missing 3 required positional arguments`` instead of
the error. :class:`Picklable` rebuilds it without calling ``__init__``: the same ``args`` (its
message) and the same attribute dictionary (``file``, ``key``, ... and whatever a layer set on it
later, e.g. ``partial``), so it needs no change when a subclass adds arguments.
"""
from __future__ import annotations


def _rebuild(cls: type, args: tuple, state: dict) -> BaseException:
    """An instance of exception ``cls`` with ``args`` and attributes ``state``, ``__init__`` not called."""
    e = cls.__new__(cls)
    e.args = args
    e.__dict__.update(state)
    return e


class Picklable:
    """Mixin for an exception class (put it first: ``class ConfigError(Picklable, ValueError)``)."""

    def __reduce__(self):
        return _rebuild, (type(self), self.args, dict(self.__dict__))  # type: ignore[attr-defined]


__all__ = ["Picklable"]
