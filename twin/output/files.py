"""Every file the twin writes goes through here: written whole or not at all, and never over a file
the twin did not write.

Two shapes:

- :class:`RunFolder`, a command's output folder (``twin run``, ``twin decode``, ``twin sweep``): each
  file is written into a staging folder inside the run folder (``.twin-tmp-<pid>-<token>/``, same
  file system), flushed and fsynced; :meth:`RunFolder.commit` then writes ``manifest.json`` and
  moves every staged file into place with :func:`os.replace` (atomic), fsyncs the folder and writes
  the manifest again, now ``complete``. A full disk, an error or Ctrl-C before the commit leaves the
  previous run's files exactly as they were (and no staging folder); a crash inside the commit's few
  renames leaves a manifest saying ``"complete": false``.
  ``manifest.json`` (schema ``twin.manifest/1``) names every file of the run: bytes and sha256,
  the command line, the twin's version, the seed, ``complete`` and ``partial`` (results that cover
  less than was asked, e.g. an interrupted run: :meth:`RunFolder.mark_partial`).
  A folder holding an earlier run's manifest is refused unless ``overwrite`` (``--overwrite``) is
  given; then only the files the earlier manifest names are replaced (or removed, when this run does
  not write them again: they would not match its results), and only while each is still the file the
  manifest describes (its bytes and sha256 checked before the work, its size and modification time
  again before the renames): a file changed since, or a manifest planted beside files the twin never
  wrote, refuses the run and nothing is touched. A file the twin would write that is there
  but not named in a manifest (the user's) is never touched: the run is refused before any work.
  One run at a time: the folder's lock (:mod:`twin.output.lock`) is taken by :meth:`RunFolder.check`
  (or the first staged file) and held until the commit or the discard; a second run on the same
  folder is refused at once, naming the pid that holds it.
- :func:`write_file`, one file a command names (``twin calibrate``'s fitted set, ``twin hosting
  --fit``, ``twin topology``'s image, ``twin gen``, ``twin scenarios copy``): a temporary name in
  the same folder, fsync, :func:`os.replace`; :func:`check_file` refuses, before the work, an
  existing file unless ``overwrite`` or it is one the twin wrote (its first line says so).

JSON is written with ``allow_nan=False``: a NaN or an infinity is refused with one line naming the
file and the field (:func:`dumps_json`). Every failure is an :class:`OutputError` (``cannot write
PATH: reason``, one line) or, for a folder or file in the way, :class:`twin.usage.UsageError`.
"""
from __future__ import annotations

import hashlib
import io
import json
import math
import os
import re
import secrets
import shutil
import weakref
from pathlib import Path
from typing import Any, Callable, Iterable

from twin.output.lock import FolderBusy, FolderLock
from twin.picklable import Picklable
from twin.usage import UsageError

MANIFEST = "manifest.json"
SCHEMA = "twin.manifest/1"
STAGING_PREFIX = ".twin-tmp-"


class OutputError(Picklable, Exception):
    """A file the twin could not write; ``str()`` is one line: ``cannot write PATH: reason``.

    Attributes: ``path`` (the file the user would have got), ``reason`` (the OS's words or the
    field that cannot be written)."""

    def __init__(self, path: str | Path, reason: str):
        self.path, self.reason = Path(path), reason
        super().__init__(f"cannot write {path}: {reason}")


def _reason(e: OSError) -> str:
    return e.strerror or str(e)


# -- JSON ------------------------------------------------------------------------------------------

def non_finite_field(doc: Any, where: str = "") -> str | None:
    """The first field of ``doc`` (nested dicts, lists, tuples) holding a NaN or an infinity, as a
    dotted path with list indices (``placements[0].cost.scale``), with its value; ``None`` if none."""
    if isinstance(doc, float) and not math.isfinite(doc):
        return f"{where or '(the document)'} = {doc}"
    if isinstance(doc, dict):
        for k, v in doc.items():
            found = non_finite_field(v, f"{where}.{k}" if where else str(k))
            if found:
                return found
    elif isinstance(doc, (list, tuple)):
        for i, v in enumerate(doc):
            found = non_finite_field(v, f"{where}[{i}]")
            if found:
                return found
    return None


def dumps_json(doc: Any, path: str | Path, default: Callable | None = None) -> str:
    """``doc`` as the twin's JSON text (indent 2, sorted keys, one trailing newline) for the file
    ``path``. Raises :class:`OutputError` naming ``path`` and the field for a NaN or infinity (JSON
    has neither; Python would write ``NaN`` / ``Infinity``, which no JSON reader accepts)."""
    try:
        return json.dumps(doc, indent=2, sort_keys=True, allow_nan=False, default=default) + "\n"
    except ValueError:
        # default= (e.g. float for numpy scalars) may be what produced the value: find it after conversion
        plain = json.loads(json.dumps(doc, default=default))
        field = non_finite_field(plain) or "a value"
        raise OutputError(path, f"{field} is not a finite number (JSON has no NaN or Infinity)") from None


# -- low level: one file, atomically ---------------------------------------------------------------

Writer = Callable[[io.IOBase], Any]


def _payload(data: str | bytes | Writer) -> tuple[Writer, bool]:
    """A writer for ``data`` and whether it wants a binary file."""
    if isinstance(data, str):
        return (lambda f: f.write(data)), False
    if isinstance(data, (bytes, bytearray)):
        return (lambda f: f.write(data)), True
    return data, getattr(data, "binary", False)


def binary(writer: Writer) -> Writer:
    """Mark ``writer`` (a function of an open file) as wanting a binary file (figures, npz)."""
    writer.binary = True
    return writer


def _write_fsync(tmp: Path, data: str | bytes | Writer) -> None:
    fn, is_binary = _payload(data)
    with (open(tmp, "xb") if is_binary else open(tmp, "x", encoding="utf-8", newline="")) as f:
        fn(f)
        f.flush()
        os.fsync(f.fileno())


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems cannot fsync a folder; the rename itself is still atomic
    finally:
        os.close(fd)


def _digest(path: Path, sync: bool = True) -> dict:
    """``{"bytes", "sha256"}`` of the file at ``path`` (``sync``: fsync it too, for a file another
    writer filled, e.g. a VCD from the RTL harness). Raises OSError."""
    h = hashlib.sha256()
    n = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
            n += len(chunk)
        if sync:
            os.fsync(f.fileno())
    return {"bytes": n, "sha256": h.hexdigest()}


def _as_recorded(p: Path, entry: object) -> bool:
    """Whether ``p`` is still the file a manifest entry ``{"bytes", "sha256"}`` describes (a plain
    file, not a link, the same size and digest)."""
    if not isinstance(entry, dict) or p.is_symlink() or not p.is_file():
        return False
    try:
        if p.stat().st_size != entry.get("bytes"):
            return False
        return _digest(p, sync=False) == {"bytes": entry.get("bytes"), "sha256": entry.get("sha256")}
    except OSError:
        return False


def _stamp(p: Path) -> tuple | None:
    """What tells a file changed without reading it: (inode, size, modification time in ns)."""
    try:
        st = p.stat(follow_symlinks=False)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def _unlink_quietly(p: Path) -> None:
    try:
        p.unlink()
    except OSError:
        pass


def _first_line(p: Path) -> str:
    try:
        with open(p, "rb") as f:
            return f.readline(200).decode("utf-8", "replace")
    except OSError:
        return ""


def check_file(path: str | Path, overwrite: bool, option: str, ours: tuple[str, ...] = ()) -> Path:
    """Before the work: may ``path`` be written? It may if it is not there, or ``overwrite``
    (``--overwrite``), or its first line contains one of ``ours`` (the marks the twin writes in its
    own files, e.g. ``"Written by `twin calibrate`"``). Creates nothing. Returns ``Path(path)``.
    Raises :class:`twin.usage.UsageError` naming ``option`` and the file, one line."""
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"{option} {p}: is a folder; name the file to write")
    if p.exists() and not p.is_file():
        raise UsageError(f"{option} {p}: is not a regular file (a device, a pipe?); name the file to write")
    if (p.exists() or p.is_symlink()) and not overwrite and not any(m in _first_line(p) for m in ours):
        raise UsageError(f"{option} {p}: exists and the twin did not write it; add --overwrite to replace it, "
                         "or name another file")
    return p


def write_file(path: str | Path, data: str | bytes | Writer) -> Path:
    """Write one file whole: to a temporary name in its folder (created if need be), flushed and
    fsynced, then :func:`os.replace` onto ``path``. ``data``: text (UTF-8), bytes, or a function of
    the open file (text; :func:`binary` for a binary one). On any failure the previous file (or
    none) is left as it was and the temporary one removed. Raises :class:`OutputError`. Whether the
    file may be replaced is :func:`check_file`'s question (ask it first)."""
    p = Path(path)
    if p.exists() and not p.is_file():  # os.replace would put a plain file where a device or pipe was
        raise OutputError(p, "not a regular file")
    tmp = p.with_name(f".{p.name}{STAGING_PREFIX}{os.getpid()}-{secrets.token_hex(4)}")
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        _write_fsync(tmp, data)
        os.replace(tmp, p)
    except OSError as e:
        _unlink_quietly(tmp)
        raise OutputError(p, _reason(e)) from None
    except BaseException:
        _unlink_quietly(tmp)
        raise
    _fsync_dir(p.parent)
    return p


def savefig_writer(fig, fmt: str, **kw) -> Writer:
    """A :func:`binary` writer that saves matplotlib figure ``fig`` in format ``fmt`` (png, pdf, svg:
    :data:`twin.output.figure.FORMATS`) with :func:`twin.output.figure.save_options` (a PNG at
    :data:`twin.output.figure.DPI`, a PDF or SVG a vector drawing without a date; an SVG's element ids
    from a fixed salt, so the same figure gives the same bytes); ``kw`` (matplotlib's ``savefig``
    arguments) replaces any of them. Raises ValueError for another format."""
    from twin.output.figure import save_options
    opts = {**save_options(fmt), **kw}

    def save(f) -> None:
        import matplotlib
        with matplotlib.rc_context({"svg.hashsalt": "twin"}):
            fig.savefig(f, **opts)
    return binary(save)


def npz_writer(arrays: dict) -> Writer:
    """A :func:`binary` writer of a compressed ``.npz`` holding ``arrays`` (name -> numpy array)."""
    import numpy as np
    return binary(lambda f: np.savez_compressed(f, **arrays))


# -- a run folder with its manifest ----------------------------------------------------------------

def _plain_name(name) -> bool:
    return isinstance(name, str) and name not in ("", ".", "..") and "/" not in name and os.sep not in name \
        and "\0" not in name


def read_manifest(folder: str | Path) -> dict | None:
    """The manifest of ``folder`` (a dict, schema ``twin.manifest/1``), or ``None`` where there is
    none. Raises :class:`twin.usage.UsageError` when ``manifest.json`` is there but is not one."""
    p = Path(folder) / MANIFEST
    if not p.exists() and not p.is_symlink():
        return None
    from twin.config import ConfigError
    from twin.config.bounded import read_json
    try:  # bounded: a regular file of at most 16 MiB, nested at most so deep (not a FIFO, /dev/zero, a JSON bomb)
        doc = read_json(p, MANIFEST)
        ok = isinstance(doc, dict) and doc.get("schema") == SCHEMA and isinstance(doc.get("files"), dict) \
            and all(_plain_name(n) for n in doc["files"])  # never a path out of the folder (../x, /etc/x)
    except (OSError, ValueError, ConfigError):
        ok = False
    if not ok:
        raise UsageError(f"{p}: is there but is not a twin run manifest ({SCHEMA}); the twin will not write "
                         "into this folder: choose another --out")
    return doc


OUTPUT_NAME = re.compile(
    r"(results|sweep|validate)\.json|(rounds|requests)\.(parquet|csv)|(stats|queue_depth|ler_vs_latency|sweep)\.csv"
    r"|live_rounds\.npz|(histograms|latency_vs_round|backlog_vs_time|ler_vs_latency|sweep|validate|machine)\.(png|pdf|svg)"
    r"|waves(\.[A-Za-z0-9_.-]+)?\.vcd")
"""The names of the files a twin command writes into a run folder (the per-round file in either format,
a figure in any of ``--figure-format``'s, the RTL harness's waveforms)."""


def is_output_name(name: str) -> bool:
    """Whether ``name`` is one a twin command writes (:data:`OUTPUT_NAME`): only such a file of an earlier
    run is removed when this run does not write it again. A manifest naming another file (a planted one
    whose entry matches one of the user's files byte for byte) removes nothing."""
    return OUTPUT_NAME.fullmatch(name) is not None


def _remove_empty(created: list[Path]) -> None:
    """Remove the folders of ``created`` (innermost first) while they are empty; empties the list."""
    for d in created:  # only folders this run made, and only while they are empty
        try:
            d.rmdir()
        except OSError:
            break
    created.clear()


def _abandon(lock: FolderLock, created: list[Path]) -> None:
    """A run folder dropped with neither a commit nor a discard (a command that returned early): its
    lock released, the folders it made and left empty removed."""
    lock.release()
    _remove_empty(created)


class RunFolder:
    """The output folder of one command run (see the module docstring).

    ``out``: the folder (created at the first write, with any missing parents; removed again if the
    run writes nothing); ``overwrite``: replace an earlier run's files (only those its manifest
    names); ``command``: the command line (list of arguments) recorded in the manifest; ``seed``:
    the run's seed (or ``None``); ``option``: the command-line option that named the folder, for
    messages. Use :meth:`check` before the work, the ``write*`` methods to stage files,
    :meth:`commit` to put them in place, or the object as a context manager (an exception discards
    what was staged). Raises :class:`twin.usage.UsageError` for a folder or file in the way and
    :class:`OutputError` for a write that failed (``cannot write runs/x/rounds.csv: No space left on
    device``)."""

    def __init__(self, out: str | Path, *, overwrite: bool = False, command: Iterable[str] | None = None,
                 seed: int | None = None, option: str = "--out", figure_format: str = "png"):
        from twin.output.figure import FORMATS
        if figure_format not in FORMATS:
            raise ValueError(f"figure format {figure_format!r}: one of {', '.join(FORMATS)}")
        self.out = Path(out)
        self.figure_format = figure_format
        self.overwrite = overwrite
        self.command = list(command) if command is not None else None
        self.seed = seed
        self.option = option
        self.partial = False
        self.partial_reason: str | None = None
        self._staged: dict[str, Path] = {}
        self._stage: Path | None = None
        self._created: list[Path] = []  # folders this run made, innermost first (the finalizer holds this list)
        self._owned: dict | None = None
        self._stamps: dict[str, tuple | None] = {}  # the earlier run's files as checked: (inode, size, mtime)
        self._lock = FolderLock(self.out)
        weakref.finalize(self, _abandon, self._lock, self._created)  # a run that neither commits nor discards

    # -- before the work
    def owned(self) -> dict:
        """The earlier run's files this run may replace: its manifest's ``files`` mapping when
        ``overwrite``; empty when there is no earlier manifest. Raises UsageError for an earlier
        manifest without ``overwrite``."""
        if self._owned is None:
            if self.out.exists() and not self.out.is_dir():
                raise UsageError(f"{self.option} {self.out}: exists and is not a folder")
            doc = read_manifest(self.out) if self.out.is_dir() else None
            if doc is not None and not self.overwrite:
                n = len(doc["files"])
                raise UsageError(f"{self.option} {self.out}: holds an earlier run's outputs ({n} files named in "
                                 f"{MANIFEST}); add --overwrite to replace them (only those), or choose another "
                                 f"{self.option}")
            self._owned = dict(doc["files"]) if doc else {}
            self._verify_owned()
        return self._owned

    def _verify_owned(self) -> None:
        """Every file the earlier manifest names that is there must still be the one it describes;
        otherwise it is the user's (edited since, or never the twin's: a planted manifest) and the
        run is refused before anything is replaced or removed."""
        assert self._owned is not None
        for name, entry in self._owned.items():
            p = self.out / name
            if not (p.exists() or p.is_symlink()) or name == MANIFEST:
                continue
            if not _as_recorded(p, entry):
                raise UsageError(f"{self.option} {self.out}: {name} is not the file {MANIFEST} records (changed "
                                 "since the twin wrote it, or never written by it); the twin never replaces it: move "
                                 f"it away or choose another {self.option}")
            self._stamps[name] = _stamp(p)

    def _recheck_owned(self) -> None:
        """Before the renames: a file of the earlier run whose stamp changed since :meth:`_verify_owned`
        is read again."""
        for name, stamp in self._stamps.items():
            p = self.out / name
            if _stamp(p) != stamp and (p.exists() or p.is_symlink()) \
                    and not _as_recorded(p, (self._owned or {}).get(name)):
                raise UsageError(f"{self.option} {self.out}: {name} changed during the run; the twin never "
                                 f"replaces it: nothing was written (move it away or choose another {self.option})")

    def check(self, names: Iterable[str] = ()) -> RunFolder:
        """Before the work: take the folder's lock (creating the folder: :meth:`discard` removes it
        again), then refuse (UsageError, one line) when another run holds it, when the folder holds
        an earlier run and no ``overwrite``, or when one of ``names`` (the files this run will write)
        is there and the twin did not write it. Returns ``self``."""
        if self.out.exists() and not self.out.is_dir():
            raise UsageError(f"{self.option} {self.out}: exists and is not a folder")
        self._make_folder()
        try:
            owned = self.owned()
            for name in [*map(self.figure_name, names), MANIFEST]:
                self._check_name(name, owned)
        except BaseException:
            self.discard()
            raise
        return self

    def _make_folder(self) -> None:
        """Create the run folder (recording the folders made, innermost first, for :meth:`discard`)
        and take its lock. Raises OutputError, or UsageError when another run holds the lock."""
        if self._lock.held:
            return
        missing = []
        d = self.out
        while not d.exists() and d != d.parent:
            missing.append(d)
            d = d.parent
        try:
            self.out.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise OutputError(self.out, _reason(e)) from None
        self._created[:] = missing  # innermost first: removed again if the run writes nothing
        try:
            self._lock.acquire()
        except FolderBusy as e:
            self._remove_created()
            held = f"another twin run (pid {e.pid}) is writing into it" if e.reason is None and e.pid else (
                "another twin run is writing into it" if e.reason is None else f"cannot lock it: {e.reason}")
            raise UsageError(f"{self.option} {self.out}: {held}; wait for it to end or choose another "
                             f"{self.option}") from None

    def _check_name(self, name: str, owned: dict) -> None:
        p = self.out / name
        if name != MANIFEST and (p.exists() or p.is_symlink()) and name not in owned:
            what = "a folder" if p.is_dir() else "a file the twin did not write (no manifest names it)"
            raise UsageError(f"{self.option} {self.out}: {name} is there and is {what}; the twin never replaces "
                             f"it: move it away or choose another {self.option}")

    # -- staging
    def path(self, name: str) -> Path:
        """A staged path for ``name`` that another writer fills (e.g. the RTL harness's VCD
        waveforms); :meth:`commit` fsyncs it, records it and moves it into place. A file that is
        never created there is simply not part of the run."""
        if not _plain_name(name) or name == MANIFEST:
            raise ValueError(f"not a file name of a run folder: {name!r}")
        self._check_name(name, self.owned())
        self._staged[name] = self.stage_dir() / name
        return self._staged[name]

    def stage_dir(self) -> Path:
        """The staging folder (made on first use, with the run folder): a writer that names its own
        files (the RTL harness's ``waves.<loop>.<node>.vcd``) writes them here; :meth:`commit`
        moves every file it finds here into the run folder (refusing, as :meth:`check` does, a name
        that is the user's)."""
        if self._stage is None:
            self._make_folder()
            stage = self.out / f"{STAGING_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
            try:
                stage.mkdir()
            except OSError as e:
                self._lock.release()
                self._remove_created()
                raise OutputError(self.out / "", _reason(e)) from None
            self._stage = stage
        return self._stage

    def write(self, name: str, data: str | bytes | Writer) -> Path:
        """Stage file ``name``: text, bytes or a writer function (:func:`write_file`'s ``data``).
        Returns the path it will have once committed. Raises OutputError naming that path."""
        tmp = self.path(name)
        try:
            _write_fsync(tmp, data)
        except OSError as e:
            _unlink_quietly(tmp)
            self._staged.pop(name, None)
            raise OutputError(self.out / name, _reason(e)) from None
        return self.out / name

    def write_json(self, name: str, doc: Any, default: Callable | None = None) -> Path:
        """Stage ``doc`` as JSON (:func:`dumps_json`: no NaN or infinity, named by field)."""
        return self.write(name, dumps_json(doc, self.out / name, default))

    def figure_name(self, name: str) -> str:
        """``name`` as this run writes it: a ``.png`` in the run's :attr:`figure_format`."""
        from twin.output.figure import figure_name
        return figure_name(name, self.figure_format)

    def savefig(self, name: str, fig, **kw) -> Path:
        """Stage matplotlib figure ``fig`` as ``name`` (a ``NAME.png`` as ``NAME.<figure_format>``:
        :meth:`figure_name`; the format from the suffix, :func:`savefig_writer`)."""
        name = self.figure_name(name)
        return self.write(name, savefig_writer(fig, Path(name).suffix.lstrip(".").lower() or "png", **kw))

    def savez(self, name: str, arrays: dict) -> Path:
        """Stage a compressed ``.npz`` of ``arrays``."""
        return self.write(name, npz_writer(arrays))

    def mark_partial(self, reason: str) -> None:
        """Record in the manifest that the results cover less than was asked (``partial: true``,
        ``partial_reason``), e.g. a run stopped by Ctrl-C or a live device that failed mid-run."""
        self.partial, self.partial_reason = True, reason

    # -- the end
    def _manifest(self, files: dict, complete: bool) -> str:
        from twin import __version__
        doc = {"schema": SCHEMA, "twin_version": __version__, "command": self.command, "seed": self.seed,
               "complete": complete, "partial": self.partial, "partial_reason": self.partial_reason,
               "files": dict(sorted(files.items()))}
        return dumps_json(doc, self.out / MANIFEST)

    def _put_manifest(self, files: dict, complete: bool) -> None:
        tmp = self.stage_dir() / MANIFEST
        try:
            _write_fsync(tmp, self._manifest(files, complete))
            os.replace(tmp, self.out / MANIFEST)
        except OSError as e:
            _unlink_quietly(tmp)
            raise OutputError(self.out / MANIFEST, _reason(e)) from None

    def commit(self) -> list[Path]:
        """Put every staged file in place and write the manifest (see the module docstring).
        Returns the paths of the run's files (without the manifest), in the order they were staged.
        Raises OutputError; before the first rename, a failure leaves the folder as it was."""
        owned = self.owned()
        done = {}
        try:
            if self._stage is not None:  # files another writer named itself
                for p in sorted(self._stage.iterdir()):
                    if p.name not in self._staged and p.name != MANIFEST and p.is_file():
                        self._check_name(p.name, owned)
                        self._staged[p.name] = p
            for name, tmp in self._staged.items():
                if tmp.exists():
                    try:
                        done[name] = _digest(tmp)
                    except OSError as e:
                        raise OutputError(self.out / name, _reason(e)) from None
            self._recheck_owned()
            # first the manifest names the earlier files and the new ones (not complete), then the renames
            self._put_manifest({**owned, **done}, complete=False)
            for name in done:
                try:
                    os.replace(self._staged[name], self.out / name)
                except OSError as e:
                    raise OutputError(self.out / name, _reason(e)) from None
            for name in owned:  # the earlier run's files this run did not write again: stale beside its results
                p = self.out / name
                if name not in done and name != MANIFEST and is_output_name(name) and p.is_file() \
                        and not p.is_symlink():
                    _unlink_quietly(p)
            _fsync_dir(self.out)
            self._put_manifest(done, complete=True)
            _fsync_dir(self.out)
        finally:
            self._drop_stage()
        self._lock.release()
        self._staged = {}
        self._created.clear()
        return [self.out / n for n in done]

    def discard(self) -> None:
        """Forget every staged file and release the folder's lock (the folder is left as it was before
        this run)."""
        self._drop_stage()
        self._staged = {}
        self._lock.release()
        self._remove_created()

    def _drop_stage(self) -> None:
        if self._stage is not None:
            shutil.rmtree(self._stage, ignore_errors=True)
            self._stage = None

    def _remove_created(self) -> None:
        _remove_empty(self._created)

    def __enter__(self) -> RunFolder:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.discard()  # after a commit there is nothing left to discard


def mark_partial(folder: str | Path, reason: str) -> None:
    """Mark an already committed run folder's manifest ``partial`` with ``reason`` (rewritten
    atomically). Raises UsageError without a manifest, OutputError if it cannot be written."""
    folder = Path(folder)
    doc = read_manifest(folder)
    if doc is None:
        raise UsageError(f"{folder}: no {MANIFEST} to mark partial")
    doc.update(partial=True, partial_reason=reason)
    write_file(folder / MANIFEST, dumps_json(doc, folder / MANIFEST))


__all__ = ["OutputError", "RunFolder", "MANIFEST", "SCHEMA", "binary", "check_file", "dumps_json", "mark_partial",
           "non_finite_field", "npz_writer", "read_manifest", "savefig_writer", "write_file"]
