"""Build the bridge's C parts with the system C compiler, cached by a hash of their sources.

``producer_library()`` loads ``c/hb_producer.c`` (with the runtime header ``twin/runtime/c/qrt.h``)
as a shared object through ctypes; ``consumer_program()`` returns the path of the ``shm``
backend's consumer executable (``c/hb_shm_consumer.c`` + ``twin/runtime/c/qrt_functions.c``).
Artifacts go to ``$TWIN_CACHE_DIR`` (default ``~/.cache/twin``) as ``<name>-<hash>``; a changed
source gives a new hash and a new build. Raises :class:`BuildError` when no compiler is found or
the build fails (the message holds the command and the compiler's output).
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import subprocess
import tempfile
from pathlib import Path

from twin.runtime.native import C_DIR as RUNTIME_C
from twin.runtime.native import _compiler

HERE = Path(__file__).resolve().parent / "c"


class BuildError(RuntimeError):
    """The bridge's C code could not be built."""


def _cache() -> Path:
    return Path(os.environ.get("TWIN_CACHE_DIR") or Path.home() / ".cache" / "twin")


def _digest(files: list[Path], flags: list[str]) -> str:
    h = hashlib.sha256(" ".join(flags).encode())
    for f in [*files, RUNTIME_C / "qrt.h", RUNTIME_C / "qrt_contract.h", RUNTIME_C / "qrt_lookup.h",
              RUNTIME_C / "qrt_uf_graph.h"]:
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def build(name: str, sources: list[Path], shared: bool, extra: list[str] | None = None) -> Path:
    """Compile ``sources`` into ``<cache>/<name>-<hash>[.so]`` once; return its path."""
    flags = ["-std=gnu11", "-O2", "-Wall", "-fno-strict-aliasing", *(extra or [])]
    if shared:
        flags += ["-fPIC", "-shared"]
    target = _cache() / (f"{name}-{_digest(sources, flags)}" + (".so" if shared else ""))
    if target.is_file():
        return target
    cc = _compiler()
    if cc is None:
        raise BuildError("hw_bridge needs a C compiler (set CC, or install gcc or clang)")
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=name + "-", dir=target.parent)
    os.close(fd)
    cmd = [*cc, *flags, "-I", str(RUNTIME_C), *map(str, sources), "-o", tmp, "-lrt"]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        os.unlink(tmp)
        raise BuildError(f"building {name} failed ({' '.join(cmd)}):\n{res.stderr.strip()}")
    os.chmod(tmp, 0o755)
    os.replace(tmp, target)
    return target


_PRODUCER: ctypes.CDLL | None = None


def producer_library() -> ctypes.CDLL:
    """The producer-side helpers (``hb_deliver``, ``hb_wait``, ``hb_exchange``, ``hb_batch``,
    ``hb_paced``, ``hb_now_ns``, ``hb_stamp_geometry``) with their ctypes signatures declared."""
    global _PRODUCER
    if _PRODUCER is None:
        lib = ctypes.CDLL(str(build("hb_producer", [HERE / "hb_producer.c"], shared=True)))
        P, u32, i64, ci = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int64, ctypes.c_int
        for fn, res, args in (("hb_now_ns", i64, []),
                              ("hb_deliver", ci, [P, P, u32, u32]),
                              ("hb_wait", ci, [P, u32, u32, u32, i64, P, P, P]),
                              ("hb_exchange", ci, [P, P, u32, u32, P, u32, i64, P, P, P, i64]),
                              ("hb_batch", i64, [P, P, u32, u32, u32, P, P, P, P, u32, i64, i64, P, P, P, P]),
                              ("hb_paced", i64, [P] * 17),
                              ("hb_stamp_geometry", ctypes.c_int32, [])):
            f = getattr(lib, fn)
            f.restype, f.argtypes = res, args
        _PRODUCER = lib
    return _PRODUCER


def consumer_program() -> Path:
    """Path of the ``shm`` backend's consumer executable."""
    return build("hb_shm_consumer", [HERE / "hb_shm_consumer.c", RUNTIME_C / "qrt_functions.c"], shared=False)
