"""ctypes binding of the device runtime library (``twin/runtime/c/qrt.h``, built as ``qrt_lib.c``).

The C code reads and writes the very memory a Python buffer holds: :class:`NativeEndpoint` wraps
``bytearray`` (or any writable buffer: ``memoryview``, numpy array) regions with
``(ctypes.c_uint8 * n).from_buffer(buf)``, so the twin's memory regions and the C runtime share
bytes, not copies. Layouts are the contract's (``twin/exchange/contract.yaml``): classic = 16-byte
header ``{seq u32, function u16, length u16, flags u32, reserved u32}`` then the payload; per-piece
= 16-byte pieces ``{seq u32, 12 data bytes}``.

Which shared object is loaded (:func:`library`):

1. ``twin.runtime._qrt``, built by ``pip install`` (setup.py), when its build id matches the
   sources next to this file (or when the sources are not installed);
2. otherwise a private build of the current sources with the system C compiler (``$CC``, ``cc``,
   ``gcc`` or ``clang``), cached under ``$TWIN_CACHE_DIR`` (default ``~/.cache/twin``) by build id,
   so a checkout that was never installed, or whose C sources changed since, still gets a library
   that matches its sources;
3. otherwise :class:`QrtError` naming what is missing.

Errors: every negative return of the C library is raised as :class:`QrtError` with the verb, the
code's name and the arguments that caused it.

This module imports only the standard library at top level: ``setup.py`` loads it by path to
compute the build id.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

C_DIR = Path(__file__).resolve().parent / "c"
#: The files whose bytes make the build id, in this order.
BUILD_SOURCES = ("qrt_contract.h", "qrt.h", "qrt_lookup.h", "qrt_uf_graph.h", "qrt_lib.c")
#: C translation units linked into the library besides qrt_lib.c when present (the C builds of
#: the registered functions, twin/runtime/functions.py); part of the build id too.
OPTIONAL_SOURCES = ("qrt_functions.c",)


def lib_sources(c_dir: Path = C_DIR) -> list[Path]:
    """The C files compiled into the library: qrt_lib.c and those of :data:`OPTIONAL_SOURCES`
    that exist."""
    return [c_dir / "qrt_lib.c", *(c_dir / n for n in OPTIONAL_SOURCES if (c_dir / n).is_file())]

ENCODINGS = {"classic": 0, "per_piece": 1}

#: Return codes of the C library.
ERRORS = {
    -1: "QRT_ERR_ARG (a null pointer or an argument out of range)",
    -2: "QRT_ERR_SLOT_BYTES (slot_bytes must be a multiple of 16 and at least 32)",
    -3: "QRT_ERR_SLOTS (slots must be 1..65536, the same for request and reply queue)",
    -4: "QRT_ERR_ENCODING (encoding must be classic (0) or per_piece (1))",
    -5: "QRT_ERR_ALIGN (queue memory and stage must be 4-byte aligned)",
    -6: "QRT_ERR_TOO_LONG (more payload than the slot holds)",
    -7: "QRT_ERR_FUNCTION_ID (function ids 1..63 can be registered; 0 is the built-in echo)",
    -8: "QRT_ERR_STATE (the message is not claimed, or was already completed)",
    -9: "QRT_ERR_STAGE (a per-piece queue needs a stage)",
}

SIZEOF_QUEUE, SIZEOF_MSG, SIZEOF_ENDPOINT, SIZEOF_SIGNAL, SIZEOF_DQ = 1, 2, 3, 4, 5
MSG_FREE, MSG_CLAIMED, MSG_COMPLETED = 0, 1, 2
MAX_FUNCTIONS = 64

#: The C function type of a served function: ``int32_t fn(const uint8_t *in, uint32_t in_len,
#: uint8_t *out, uint32_t out_cap)``; returns the reply length or a negative value on failure.
QRT_FN = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.POINTER(ctypes.c_uint8), ctypes.c_uint32,
                          ctypes.POINTER(ctypes.c_uint8), ctypes.c_uint32)


class QrtError(RuntimeError):
    """A call into the runtime library failed, or the library could not be loaded. ``code`` is the
    C return code (0 when the library itself is missing). Pickles whole (its own ``__reduce__``, as
    :class:`twin.picklable.Picklable` would: this module imports only the standard library)."""

    def __init__(self, message: str, code: int = 0):
        super().__init__(message)
        self.code = code

    def __reduce__(self):
        return _rebuild_qrt_error, (str(self), self.code, dict(self.__dict__))


def _rebuild_qrt_error(message: str, code: int, state: dict) -> QrtError:
    e = QrtError(message, code)
    e.__dict__.update(state)
    return e


class Msg(ctypes.Structure):
    """``qrt_msg``: a message descriptor (eight u32). ``seq`` sequence number, ``slot`` slot index
    (same in request and reply queue), ``function`` id, ``length`` payload bytes, ``flags``
    (request flags; a reply's status), ``reply_len`` bytes appended, ``status`` once completed,
    ``state`` 0 free / 1 claimed / 2 completed."""

    _fields_ = [(name, ctypes.c_uint32) for name in
                ("seq", "slot", "function", "length", "flags", "reply_len", "status", "state")]

    def __repr__(self) -> str:
        return "Msg(" + ", ".join(f"{n}={getattr(self, n)}" for n, _ in self._fields_) + ")"


class Queue(ctypes.Structure):
    """``qrt_queue``: base pointer, slot_bytes, slots, encoding, capacity (payload bytes per slot),
    and the cursor (next_seq, next_slot)."""

    _fields_ = [("base", ctypes.c_void_p), ("slot_bytes", ctypes.c_uint32), ("slots", ctypes.c_uint32),
                ("encoding", ctypes.c_uint32), ("capacity", ctypes.c_uint32),
                ("next_seq", ctypes.c_uint32), ("next_slot", ctypes.c_uint32)]


def source_build_id(c_dir: Path = C_DIR) -> str | None:
    """The build id of the C sources in ``c_dir``: the first 16 hex digits of the SHA-256 of the
    bytes of :data:`BUILD_SOURCES` and of the :data:`OPTIONAL_SOURCES` present (each prefixed by
    its name). None when a required source is missing."""
    h = hashlib.sha256()
    for name in (*BUILD_SOURCES, *OPTIONAL_SOURCES):
        p = c_dir / name
        if not p.is_file():
            if name in BUILD_SOURCES:
                return None
            continue
        h.update(name.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def _compiler() -> list[str] | None:
    cc = os.environ.get("CC")
    if cc:
        return shlex.split(cc)
    for name in ("cc", "gcc", "clang"):
        path = shutil.which(name)
        if path:
            return [path]
    return None


def _build_private(build_id: str) -> Path:
    """Compile :func:`lib_sources` into the cache (once per build id) and return the shared
    object's path."""
    return build_shared("qrt", "twin's runtime library", build_id, lib_sources(), [C_DIR],
                        [f'-DQRT_BUILD_ID="{build_id}"'], QrtError)


def installed_library(module: str, id_symbol: str, want: str | None) -> str | None:
    """The path of the installed extension ``module`` (e.g. ``twin.runtime._qrt``) when its
    ``id_symbol()`` (a C function returning the build id as ``char *``) equals ``want`` (any build
    when ``want`` is None: the sources are not there to compare), else None (not installed, or built
    from other sources)."""
    try:
        import importlib.util
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.origin:
        return None
    fn = getattr(ctypes.CDLL(spec.origin), id_symbol)
    fn.restype = ctypes.c_char_p
    return spec.origin if want is None or fn().decode() == want else None


def build_shared(stem: str, what: str, build_id: str, sources: list[Path], include_dirs: list[Path],
                 flags: list[str], error: type[Exception] = RuntimeError, libs: tuple[str, ...] = ()) -> Path:
    """Compile C11 ``sources`` into a shared object ``<stem>-<build_id>.so`` in the cache
    (``$TWIN_CACHE_DIR``, default ``~/.cache/twin``), once per build id, and return its path.
    ``what`` names the library in errors; ``error`` is raised (one message) when no compiler is
    found or the build fails. Used for the runtime library and the engine's compiled core
    (:mod:`twin.engine.native`). ``libs``: linker arguments after the sources (``-lm``)."""
    cache = Path(os.environ.get("TWIN_CACHE_DIR") or Path.home() / ".cache" / "twin")
    target = cache / f"{stem}-{build_id}.so"
    if target.is_file():
        return target
    cc = _compiler()
    if cc is None:
        raise error(f"{what} is not built and no C compiler was found (set CC, or install "
                    "gcc or clang, then `pip install -e .`)")
    cache.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f"{stem}-{build_id}-", suffix=".so", dir=cache)
    os.close(fd)
    cmd = [*cc, "-std=c11", "-O2", "-fPIC", "-shared", "-fno-strict-aliasing", "-Wall", *flags,
           *(a for d in include_dirs for a in ("-I", str(d))), *map(str, sources), *libs, "-o", tmp]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as e:
        os.unlink(tmp)
        raise error(f"could not run the C compiler {cc[0]!r} to build {what}: {e}") from None
    if res.returncode != 0:
        os.unlink(tmp)
        raise error(f"building {what} failed ({' '.join(cmd)}):\n{res.stderr.strip()}")
    os.replace(tmp, target)
    return target


_LIB: ctypes.CDLL | None = None
_LIB_PATH: str | None = None


def library_path() -> str:
    """The path of the shared object :func:`library` loads (loading it if needed)."""
    library()
    assert _LIB_PATH is not None
    return _LIB_PATH


def library() -> ctypes.CDLL:
    """The runtime library, loaded once, with argument and result types declared. Raises
    :class:`QrtError` when it cannot be found or built, or reports another contract version."""
    global _LIB, _LIB_PATH
    if _LIB is not None:
        return _LIB
    want = source_build_id()
    path = installed_library("twin.runtime._qrt", "qrt_build_id", want)
    if path is None:
        if want is None:
            raise QrtError("twin's runtime library is not installed (twin.runtime._qrt is missing) and its C "
                           f"sources are not in {C_DIR}: reinstall twin with `pip install .`")
        path = str(_build_private(want))
    lib = ctypes.CDLL(path)
    _declare(lib)
    from twin.exchange import contract as C
    version = lib.qrt_version()
    if version & 0xFFFF != C.VERSION:
        raise QrtError(f"{path} was built for contract version {version & 0xFFFF}, the Python side is "
                       f"version {C.VERSION}: rebuild with `pip install -e .`")
    if lib.qrt_sizeof(SIZEOF_MSG) != ctypes.sizeof(Msg) or lib.qrt_sizeof(SIZEOF_QUEUE) != ctypes.sizeof(Queue):
        raise QrtError(f"{path}: qrt_msg / qrt_queue sizes differ from twin.runtime.native's mirrors")
    _LIB, _LIB_PATH = lib, path
    return lib


def _declare(lib: ctypes.CDLL) -> None:
    P, u32, u64, ci = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_int
    sig = {
        "qrt_build_id": (ctypes.c_char_p, []),
        "qrt_version": (u32, []),
        "qrt_sizeof": (u32, [u32]),
        "qrt_capacity": (u32, [u32, u32]),
        "qrt_queue_init": (ci, [P, P, u32, u32, u32]),
        "qrt_peek": (ci, [P, u32, u32, P]),
        "qrt_queue_read": (u32, [P, P, P, u32]),
        "qrt_post": (ci, [P, P, u32, u32, P, u32]),
        "qrt_endpoint_stage_bytes": (u64, [P, P]),
        "qrt_endpoint_init": (ci, [P, P, P, P]),
        "qrt_register": (ci, [P, u32, P]),
        "qrt_next": (ci, [P, P]),
        "qrt_read": (u32, [P, P, P, u32]),
        "qrt_append": (ci, [P, P, P, u32]),
        "qrt_complete": (ci, [P, P, u32]),
        "qrt_dispatch_one": (ci, [P]),
        "qrt_signal_init": (None, [P, u32]),
        "qrt_signal_raise": (u32, [P, u32]),
        "qrt_signal_load": (u32, [P]),
        "qrt_signal_wait_nb": (ci, [P, u32]),
        "qrt_dq_init": (ci, [P, P, u32]),
        "qrt_dq_push": (ci, [P, P]),
        "qrt_dq_pop": (ci, [P, P]),
        "qrt_dq_count": (u32, [P]),
    }
    for name, (res, args) in sig.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args


def _check(verb: str, rc: int, detail: str = "") -> int:
    if rc < 0:
        raise QrtError(f"{verb}: {ERRORS.get(rc, f'error {rc}')}{': ' + detail if detail else ''}", rc)
    return rc


def _encoding(encoding: str | int) -> int:
    if isinstance(encoding, str):
        if encoding not in ENCODINGS:
            raise ValueError(f"unknown encoding {encoding!r} (use 'classic' or 'per_piece')")
        return ENCODINGS[encoding]
    return int(encoding)


def _first_seq(seq: int) -> int:
    if not 0 < seq < 2**32:
        raise ValueError(f"first_seq must be in 1..2**32-1, got {seq}")
    return seq


def _view(buf: Any, need: int, what: str) -> ctypes.Array:
    """A ctypes byte array over the writable buffer ``buf`` (same memory), at least ``need`` bytes."""
    try:
        mv = memoryview(buf)
    except TypeError:
        raise TypeError(f"{what} must be a writable buffer (bytearray, memoryview, numpy array), "
                        f"got {type(buf).__name__}") from None
    if mv.readonly:
        raise TypeError(f"{what} must be writable, got a read-only {type(buf).__name__}")
    if mv.nbytes < need:
        raise ValueError(f"{what} holds {mv.nbytes} bytes, the queue needs {need} (slot_bytes * slots)")
    return (ctypes.c_uint8 * mv.nbytes).from_buffer(buf)


def _bytes_arg(data: bytes | bytearray | memoryview) -> tuple[bytes | None, int]:
    b = bytes(data)
    return (b or None), len(b)


def _new_queue(lib: ctypes.CDLL, arr: ctypes.Array, slot_bytes: int, slots: int, encoding: int, what: str) -> Queue:
    q = Queue()
    _check("qrt_queue_init", lib.qrt_queue_init(ctypes.byref(q), ctypes.addressof(arr), slot_bytes, slots, encoding),
           f"{what}: slot_bytes={slot_bytes}, slots={slots}, encoding={encoding}, "
           f"address=0x{ctypes.addressof(arr):x}")
    return q


class NativeQueue:
    """A queue over ``buf`` seen from the producer's side: :meth:`post` writes whole messages (publish
    last), :meth:`peek` and :meth:`read` inspect one. The producer of the twin is normally Python
    (``twin.exchange.encoding``); this is the C library's producer, used by C hosts and to check
    the two agree.

    ``buf``: writable buffer of at least ``slot_bytes * slots`` bytes. ``slot_bytes``: a multiple
    of 16, at least 32. ``slots``: 1..65536. ``encoding``: ``"classic"``, ``"per_piece"`` or 0/1.
    ``first_seq``: sequence number of the first message (1..2**32-1; it goes to slot 0).
    Raises QrtError (bad geometry), TypeError / ValueError (bad buffer)."""

    def __init__(self, buf: Any, slot_bytes: int, slots: int, encoding: str | int = "classic",
                 first_seq: int = 1):
        self.lib = library()
        self._arr = _view(buf, slot_bytes * slots, "queue buffer")
        self._q = _new_queue(self.lib, self._arr, slot_bytes, slots, _encoding(encoding), "queue")
        self._q.next_seq = _first_seq(first_seq)

    @property
    def capacity(self) -> int:
        """Payload bytes one slot holds."""
        return self._q.capacity

    @property
    def next_seq(self) -> int:
        """Sequence number the next :meth:`post` uses."""
        return self._q.next_seq

    @property
    def next_slot(self) -> int:
        """Slot the next :meth:`post` uses."""
        return self._q.next_slot

    def post(self, payload: bytes, function: int = 0, flags: int = 0) -> Msg:
        """Write ``payload`` as the next message and publish it; returns its descriptor. Raises
        QrtError (QRT_ERR_TOO_LONG when longer than :attr:`capacity`)."""
        m = Msg()
        src, n = _bytes_arg(payload)
        _check("qrt_post", self.lib.qrt_post(ctypes.byref(self._q), ctypes.byref(m), function, flags, src, n),
               f"{n} payload bytes, capacity {self.capacity}, function {function}")
        return m

    def peek(self, slot: int, seq: int) -> Msg | None:
        """The descriptor of message ``seq`` if it is complete in ``slot``, else None."""
        m = Msg()
        r = _check("qrt_peek", self.lib.qrt_peek(ctypes.byref(self._q), slot, seq, ctypes.byref(m)),
                   f"slot {slot}, seq {seq}")
        return m if r == 1 else None

    def read(self, m: Msg, cap: int | None = None) -> bytes:
        """The payload of message ``m`` (at most ``cap`` bytes; default its length)."""
        cap = m.length if cap is None else cap
        out = (ctypes.c_uint8 * max(cap, 1))()
        n = self.lib.qrt_queue_read(ctypes.byref(self._q), ctypes.byref(m), out, cap)
        return bytes(out[:n])


class NativeEndpoint:
    """A consumer endpoint of the C runtime over two Python buffers.

    ``request_buf``: the request queue (the consumer's memory), ``reply_buf``: the reply queue (the
    producer's memory); each a writable buffer of at least ``slot_bytes * slots`` bytes, used in
    place. ``slot_bytes``: bytes per slot, a multiple of 16, at least 32. ``slots``: 1..65536.
    ``encoding``: ``"classic"`` / ``"per_piece"`` (or 0 / 1) for both queues;
    ``reply_slot_bytes`` / ``reply_encoding`` override the reply queue's. A per-piece queue gets a
    private staging area (consumer-local memory, ``slots`` times a slot's capacity).
    ``first_seq``: sequence number of the first request expected (1..2**32-1; in slot 0), for a
    consumer that joins a running stream.

    Raises QrtError for a geometry the library refuses, TypeError / ValueError for a bad buffer.
    While the endpoint lives, a ``bytearray`` under it cannot be resized (BufferError).
    """

    def __init__(self, request_buf: Any, reply_buf: Any, slot_bytes: int, slots: int,
                 encoding: str | int = "classic", reply_slot_bytes: int | None = None,
                 reply_encoding: str | int | None = None, first_seq: int = 1):
        lib = self.lib = library()
        enc = _encoding(encoding)
        renc = enc if reply_encoding is None else _encoding(reply_encoding)
        rsb = slot_bytes if reply_slot_bytes is None else reply_slot_bytes
        self._req_arr = _view(request_buf, slot_bytes * slots, "request_buf")
        self._rep_arr = _view(reply_buf, rsb * slots, "reply_buf")
        req = _new_queue(lib, self._req_arr, slot_bytes, slots, enc, "request queue")
        rep = _new_queue(lib, self._rep_arr, rsb, slots, renc, "reply queue")
        req.next_seq = _first_seq(first_seq)
        nstage = lib.qrt_endpoint_stage_bytes(ctypes.byref(req), ctypes.byref(rep))
        self._stage = (ctypes.c_uint64 * max(1, -(-nstage // 8)))() if nstage else None
        size = lib.qrt_sizeof(SIZEOF_ENDPOINT)
        self._ep = (ctypes.c_uint64 * (-(-size // 8)))()
        self._req, self._rep = req, rep
        self._keep: dict[int, Any] = {}
        _check("qrt_endpoint_init", lib.qrt_endpoint_init(self._ep, ctypes.byref(req), ctypes.byref(rep),
                                                          self._stage), f"stage {nstage} bytes")

    @property
    def request_capacity(self) -> int:
        """Payload bytes a request slot holds."""
        return self._req.capacity

    @property
    def reply_capacity(self) -> int:
        """Payload bytes a reply slot holds."""
        return self._rep.capacity

    def cursor(self) -> tuple[int, int]:
        """(sequence number, slot) of the next request :meth:`next` waits for."""
        q = Queue.from_buffer(self._ep)  # qrt_endpoint starts with its request queue
        return q.next_seq, q.next_slot

    def register(self, function_id: int, fn: Any) -> None:
        """Serve ``function_id`` (1..63) with a C function ``int32_t fn(const uint8_t *in, uint32_t
        in_len, uint8_t *out, uint32_t out_cap)``: either a raw address (int; e.g. numba
        ``cfunc(...).address`` or a symbol from a loaded shared object) or a ctypes function object
        (e.g. ``QRT_FN(python_callable)``; kept alive by the endpoint). ``None`` removes it.
        Raises QrtError (QRT_ERR_FUNCTION_ID for 0 or >= 64)."""
        if fn is None:
            addr = None
        elif isinstance(fn, int):
            addr = fn
        else:
            addr = ctypes.cast(fn, ctypes.c_void_p).value
        _check("qrt_register", self.lib.qrt_register(self._ep, function_id, addr), f"function id {function_id}")
        self._keep[function_id] = fn

    def next(self) -> Msg | None:
        """Claim the next request if it has landed completely (non-blocking): its descriptor, or
        None. Each claimed message must be completed (:meth:`complete`) before its slot's next use."""
        m = Msg()
        r = _check("qrt_next", self.lib.qrt_next(self._ep, ctypes.byref(m)))
        return m if r == 1 else None

    def read(self, m: Msg, cap: int | None = None) -> bytes:
        """The claimed request's payload (at most ``cap`` bytes; default all of it)."""
        cap = m.length if cap is None else cap
        out = (ctypes.c_uint8 * max(cap, 1))()
        n = self.lib.qrt_read(self._ep, ctypes.byref(m), out, cap)
        return bytes(out[:n])

    def append(self, m: Msg, data: bytes) -> None:
        """Append ``data`` to the reply to ``m`` (not visible until :meth:`complete`). Raises
        QrtError: QRT_ERR_TOO_LONG past :attr:`reply_capacity` (nothing appended),
        QRT_ERR_STATE after complete."""
        src, n = _bytes_arg(data)
        _check("qrt_append", self.lib.qrt_append(self._ep, ctypes.byref(m), src, n),
               f"{n} bytes after {m.reply_len}, reply capacity {self.reply_capacity}")

    def complete(self, m: Msg, status: int = 0) -> None:
        """Publish the reply to ``m`` with ``status`` (contract status code, 0 = ok) in its flags
        field. Raises QrtError (QRT_ERR_STATE when already completed)."""
        _check("qrt_complete", self.lib.qrt_complete(self._ep, ctypes.byref(m), status), f"seq {m.seq}")

    def dispatch_one(self) -> bool:
        """Serve one request if one is ready (echo for function 0, else the registered function):
        True when one was served, False when none was ready."""
        return _check("qrt_dispatch_one", self.lib.qrt_dispatch_one(self._ep)) == 1


class NativeSignal:
    """``qrt_signal``: a 32-bit counter. :meth:`raise_` adds with release ordering and returns the
    new value; :meth:`wait_nb` is 1/True once the value has reached ``target`` (wrap-aware)."""

    def __init__(self, value: int = 0):
        self.lib = library()
        self._s = ctypes.c_uint32(0)
        self.lib.qrt_signal_init(ctypes.byref(self._s), value)

    @property
    def address(self) -> int:
        """Address of the counter (to hand to C code)."""
        return ctypes.addressof(self._s)

    def raise_(self, n: int = 1) -> int:
        """Add ``n`` (release); returns the new value."""
        return self.lib.qrt_signal_raise(ctypes.byref(self._s), n)

    def load(self) -> int:
        """The current value (acquire)."""
        return self.lib.qrt_signal_load(ctypes.byref(self._s))

    def wait_nb(self, target: int) -> bool:
        """True once the value has reached ``target`` (wrap-aware); never blocks."""
        return self.lib.qrt_signal_wait_nb(ctypes.byref(self._s), target) == 1


class NativeDeviceQueue:
    """``qrt_dq``: a single-producer/single-consumer ring of :class:`Msg` descriptors with
    ``capacity`` entries (a power of two, 1..2**31). :meth:`push` returns False when full,
    :meth:`pop` None when empty. Raises QrtError for a bad capacity."""

    def __init__(self, capacity: int):
        self.lib = library()
        if not 1 <= capacity <= 2**31 or capacity & (capacity - 1):
            raise QrtError(f"qrt_dq_init: {ERRORS[-1]}: capacity {capacity} (a power of two, 1..2**31)", -1)
        self._items = (Msg * capacity)()
        size = self.lib.qrt_sizeof(SIZEOF_DQ)
        self._dq = (ctypes.c_uint64 * (-(-size // 8)))()
        _check("qrt_dq_init", self.lib.qrt_dq_init(self._dq, self._items, capacity),
               f"capacity {capacity} (a power of two, 1..2**31)")

    @property
    def address(self) -> int:
        """Address of the ring (to hand to C code)."""
        return ctypes.addressof(self._dq)

    def push(self, m: Msg) -> bool:
        """Append a descriptor; False when the ring is full."""
        return _check("qrt_dq_push", self.lib.qrt_dq_push(self._dq, ctypes.byref(m))) == 1

    def pop(self) -> Msg | None:
        """Take the oldest descriptor; None when the ring is empty."""
        m = Msg()
        return m if _check("qrt_dq_pop", self.lib.qrt_dq_pop(self._dq, ctypes.byref(m))) == 1 else None

    def __len__(self) -> int:
        return self.lib.qrt_dq_count(self._dq)


def c_function_address(symbol: str) -> int:
    """Address of an exported C function of the runtime library (e.g. ``"qrt_fn_invert"``), for a
    dispatch table (:meth:`NativeEndpoint.register`). Raises AttributeError for an unknown symbol."""
    return ctypes.cast(getattr(library(), symbol), ctypes.c_void_p).value
