"""Lookup-table decoders compiled to native code for the C runtime's dispatch table (model ``code``).

The table of :func:`twin.qec.lookup.standard_table` is frozen into a numba ``cfunc`` in the runtime's
calling convention ``int32(uint8* in, uint32 n, uint8* out, uint32 cap)``: it reads the syndrome
bytes (detector ``i`` in bit ``i % 8`` of byte ``i // 8``, bits at and above D ignored), looks the
observable flips up and writes them little-endian; returns the reply length, -1 for a payload
shorter than the syndrome, -2 for a reply capacity too small. Same table, same answers as
:func:`twin.qec.lookup.decode_payload` (tested). numba is optional (``pip install -e '.[numba]'``).
"""
from __future__ import annotations

import numpy as np

from twin.qec.lookup import standard_table, syndrome_bytes

_COMPILED: dict[str, object] = {}  # table name -> cfunc (kept alive: the C table holds its address)


def table_kernel(name: str):
    """The plain-Python kernel for table ``name`` (what numba compiles; also callable as is)."""
    t = standard_table(name)
    table = np.ascontiguousarray(t.table, dtype=np.uint32)
    nb, rb = syndrome_bytes(t.n_detectors), syndrome_bytes(t.n_observables)
    mask = (1 << t.n_detectors) - 1

    def kernel(inp, n, out, cap):
        if n < nb:
            return -1
        if cap < rb:
            return -2
        s = 0
        for i in range(nb):
            s |= np.uint32(inp[i]) << np.uint32(8 * i)
        v = table[s & mask]
        for i in range(rb):
            out[i] = (v >> np.uint32(8 * i)) & np.uint32(0xFF)
        return rb
    return kernel


def table_native(name: str) -> int:
    """Address of the compiled kernel for table ``name`` (compiled on first use). Raises
    ImportError without numba."""
    if name not in _COMPILED:
        from twin.runtime.numba_fn import compile_kernel
        _COMPILED[name] = compile_kernel(table_kernel(name))
    return _COMPILED[name].address
