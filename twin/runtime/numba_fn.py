"""Python user functions compiled to native code and installed in the C runtime's dispatch table.

A user function is written once, in the runtime's calling convention::

    def kernel(inp, n, out, cap):      # inp: n request bytes; out: cap reply bytes
        ...                            # write the reply into out[0:k]
        return k                       # reply length, or a negative error

:func:`user_function` registers it under a function id: the ``sim`` model runs it as plain Python
on the request bytes (also the reference the card checks replies against); the ``code`` model runs
the same source compiled by numba (``numba.cfunc``, nopython mode: Python lowered to LLVM IR,
``math.sin`` to libm) from the C runtime's dispatch table, on the twin's bytes. numba is optional
(``pip install -e '.[numba]'``); without it only the ``sim`` side exists and asking for the native
build raises ImportError with that hint.
"""
from __future__ import annotations

from typing import Callable

from twin.runtime.functions import Function, register

_COMPILED: dict[int, object] = {}  # function id -> numba cfunc (kept alive: the C table holds its address)


def compile_kernel(kernel: Callable) -> object:
    """``kernel`` compiled with ``numba.cfunc`` to ``int32(uint8*, uint32, uint8*, uint32)``.
    Raises ImportError without numba and numba's errors for code it cannot compile."""
    try:
        from numba import cfunc, types
    except ImportError:
        raise ImportError("native user functions need numba: pip install -e '.[numba]'") from None
    sig = types.int32(types.CPointer(types.uint8), types.uint32, types.CPointer(types.uint8), types.uint32)
    return cfunc(sig, nopython=True)(kernel)


def user_function(function_id: int, name: str, kernel: Callable, max_reply: int = 4096, doc: str = "") -> Function:
    """Register ``kernel`` as function ``function_id`` (see module docstring). ``max_reply`` is the
    reply capacity the Python side offers (the C side offers the reply slot's). Returns the
    registered :class:`Function`; raises ValueError if the id or name is taken."""

    def python(payload: bytes) -> bytes:
        out = bytearray(max_reply)
        k = kernel(bytearray(payload), len(payload), out, max_reply)
        if k < 0:
            raise ValueError(f"user function {name!r} failed with {k}")
        return bytes(out[:k])

    def native() -> int:
        if function_id not in _COMPILED:
            _COMPILED[function_id] = compile_kernel(kernel)
        return _COMPILED[function_id].address

    return register(Function(function_id, name, python, None, doc or (kernel.__doc__ or "").strip(), native))
