"""A function written in Python, called back from C through the runtime's function signature.

The runtime library (qrt.h's ``qrt_fn``) and the compiled event core (twin/engine/c/core.c, ``FP_FN``)
call a function as ``int32 fn(const uint8 *in, uint32 in_len, uint8 *out, uint32 out_cap)``: the
reply's length, or < 0 when it fails. :func:`callback_address` wraps a :class:`Function`'s Python
implementation (``python(payload: bytes) -> bytes``) in a ctypes callback of that signature, so the
C that serves the twin's bytes calls the Python back at the request it serves, and nothing else of
the loop leaves C: one Python node costs its own calls, not the whole mesh's time.

Failures keep the Python meaning. A ``ValueError`` (the function refused its input) returns -1,
which the runtime answers with status ``function_failed``, as the ``sim`` model does. Any other
exception cannot cross C: it is kept, -1 returned, and :func:`raise_pending` raises it (the very
exception object, traceback and all) once control is back in Python, so a run stops with the same
error the simpy reference stops with. A reply longer than ``out_cap`` returns -2 (the library's
``bad_length``).
"""
from __future__ import annotations

import ctypes
from typing import Any

from twin.runtime.functions import Function

QRT_FN = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.POINTER(ctypes.c_uint8), ctypes.c_uint32,
                          ctypes.POINTER(ctypes.c_uint8), ctypes.c_uint32)
"""qrt.h's ``qrt_fn`` (and core.c's ``core_fn_t``) as a ctypes function type."""

_CALLBACKS: dict[int, Any] = {}  # function id -> its ctypes callback (kept alive: C holds its address)
_PENDING: list[BaseException] = []  # exceptions a callback kept for raise_pending


def _wrap(fn: Function):
    python, string_at, memmove = fn.python, ctypes.string_at, ctypes.memmove

    def call(inp, n, out, cap):
        try:
            reply = python(string_at(inp, n))
        except ValueError:
            return -1
        except BaseException as e:  # noqa: BLE001 - kept and raised in Python by raise_pending
            if not _PENDING:
                _PENDING.append(e)
            return -1
        k = len(reply)
        if k > cap:
            return -2
        memmove(out, reply, k)
        return k
    return QRT_FN(call)


def callback_address(fn: Function) -> int:
    """The address of a C-callable ``qrt_fn`` that runs ``fn.python`` (made once per function id and
    kept alive for the process)."""
    cb = _CALLBACKS.get(fn.id)
    if cb is None or getattr(cb, "_twin_fn", None) is not fn:
        cb = _wrap(fn)
        cb._twin_fn = fn  # a re-registered id gets a new callback
        _CALLBACKS[fn.id] = cb
    return int(ctypes.cast(cb, ctypes.c_void_p).value or 0)


def raise_pending() -> None:
    """Raise the exception a callback kept (the first since the last call), if any; clears it."""
    if _PENDING:
        e = _PENDING.pop()
        _PENDING.clear()
        raise e


def clear_pending() -> None:
    """Forget any kept exception (before a run starts)."""
    _PENDING.clear()
