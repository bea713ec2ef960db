"""A user's decoder function as a registry decoder (``function``): Python ``fn(bytes) -> bytes``,
or a C function in a shared library (:func:`c_function`)."""
from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Callable

import numpy as np

from twin.picklable import Picklable
from twin.qec.decoders.base import Decoder


class FunctionFailed(Picklable, ValueError):
    """A user decoder function failed on one request: it raised, or its reply is not ``reply_bytes``
    bytes. ``payload``: the request payload it was given (bytes); ``problem``: what went wrong (one
    line). A ValueError, so a consumer in the event model answers it with status ``function_failed``
    as the runtime library does; :func:`twin.studies.decode.run_decode_study` turns it into a ConfigError
    naming ``decode.function`` and the shot."""

    def __init__(self, payload: bytes, problem: str):
        self.payload, self.problem = bytes(payload), problem
        super().__init__(problem)


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:160]}" if text else type(e).__name__


class FunctionDecoder(Decoder):
    """A user function ``fn(syndrome: bytes) -> bytes`` (syndrome bytes in, correction bytes out)
    for a code with ``n_detectors`` detectors and ``n_observables`` observables. The reply may be
    any bytes-like object (bytes, bytearray, memoryview, a uint8 array) of exactly ``reply_bytes``
    bytes. It is given the shot's ``ceil(D / 8)`` syndrome bytes (a request's padding is not
    part of them). Raises :class:`FunctionFailed` (from any decode call) when the function raises or
    its reply is None, a str, a number, or of the wrong length."""

    kind = "function"

    def __init__(self, fn: Callable[[bytes], bytes], n_detectors: int, n_observables: int, name: str | None = None):
        self.fn = fn
        self.name = name or getattr(fn, "__name__", "function")
        self.n_detectors = n_detectors
        self.n_observables = n_observables

    def decode_shots_bit_packed(self, dets: np.ndarray) -> np.ndarray:
        """``fn`` once per shot on that shot's ``ceil(D/8)`` syndrome bytes (bits at and above D
        zero), each reply checked (:meth:`_call`). Raises :class:`FunctionFailed`."""
        d = np.ascontiguousarray(dets, np.uint8)
        out = np.zeros((len(d), self.reply_bytes), np.uint8)
        for i, row in enumerate(d):
            out[i] = np.frombuffer(self._call(row.tobytes()), np.uint8)
        return out

    def _call(self, payload: bytes) -> bytes:
        """``fn(payload)``, checked: bytes-like, ``reply_bytes`` long. Raises :class:`FunctionFailed`."""
        try:
            r = self.fn(payload)
        except Exception as e:  # the user's code: any exception is its failure on this request
            raise FunctionFailed(payload, f"it raised {_first_line(e)}") from e
        if r is None or isinstance(r, (str, int, float, complex)):
            return self._bad_type(payload, r)
        try:
            r = bytes(memoryview(r).cast("B")) if not isinstance(r, (bytes, bytearray)) else bytes(r)
        except (TypeError, ValueError):
            return self._bad_type(payload, r)
        if len(r) != self.reply_bytes:
            raise FunctionFailed(payload, f"it returned {len(r)} bytes, expected {self._expected} "
                                          f"(one bit per logical observable, {self.n_observables})")
        return r

    def _bad_type(self, payload: bytes, r) -> bytes:
        text = repr(r)
        text = text if len(text) <= 40 else text[:37] + "..."
        got = "None" if r is None else f"{type(r).__name__} {text}"
        raise FunctionFailed(payload, f"it returned {got}, expected bytes ({self._expected})")

    @property
    def _expected(self) -> str:
        return f"{self.reply_bytes} byte" + ("s" if self.reply_bytes != 1 else "")




def c_function(library: str | Path, symbol: str, reply_bytes: int) -> Callable[[bytes], bytes]:
    """A C decoder in a shared library as a Python callable ``bytes -> bytes``.

    The C signature: ``int symbol(const uint8_t *syndrome, size_t syndrome_bytes, uint8_t *reply,
    size_t reply_bytes)``; it writes ``reply_bytes`` bytes and returns 0, or returns nonzero on
    failure (the callable raises RuntimeError then). ``reply_bytes``: ceil(K / 8).
    Raises OSError (no such library) or AttributeError (no such symbol) when built.
    """
    fn = getattr(ctypes.CDLL(str(library)), symbol)
    fn.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t]
    fn.restype = ctypes.c_int

    def call(syndrome: bytes) -> bytes:
        out = ctypes.create_string_buffer(reply_bytes)
        rc = fn(bytes(syndrome), len(syndrome), ctypes.addressof(out), reply_bytes)
        if rc != 0:
            raise RuntimeError(f"{symbol} returned {rc}")
        return out.raw
    call.__name__ = symbol
    return call
