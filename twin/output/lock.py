"""One twin run at a time in an output folder: an exclusive lock held from the run's check to its
commit (or its discard).

The lock is :func:`fcntl.flock` on a file ``.twin-lock`` inside the folder, taken without waiting:
a second run on the same ``--out`` is refused at once with one line naming the folder and the pid
that holds it, before any work, so it can neither replace the first run's files nor interleave its
own with them. The kernel drops the lock when its process ends (a crash, SIGKILL), so a lock file
left behind by a dead run is taken by the next one. Releasing unlinks the file before unlocking it;
a run that locked a file another run had just unlinked sees the path no longer names its file
(inode check) and takes the lock again on the new one.
"""
from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

from twin.picklable import Picklable

LOCK_NAME = ".twin-lock"


class FolderBusy(Picklable, Exception):
    """The folder's lock is held by another run (``pid``: what its lock file says, or None), or
    cannot be taken (``reason``: the OS's words)."""

    def __init__(self, folder: Path, pid: int | None = None, reason: str | None = None):
        self.folder, self.pid, self.reason = folder, pid, reason
        super().__init__(reason or f"held by pid {pid}")


class FolderLock:
    """The exclusive lock of ``folder`` (which must exist). :meth:`acquire` raises
    :class:`FolderBusy`; :meth:`release` may be called any number of times."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.path = self.folder / LOCK_NAME
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> FolderLock:
        """Take the lock without waiting; returns ``self``."""
        while self._fd is None:
            fd = self._open()
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                pid = _read_pid(fd)
                os.close(fd)
                if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise FolderBusy(self.folder, pid) from None
                raise FolderBusy(self.folder, reason=e.strerror or str(e)) from None
            if _same_file(fd, self.path):
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()}\n".encode())
                self._fd = fd
            else:  # the run that held it released (unlinked) it between our open and our lock: again
                os.close(fd)
        return self

    def _open(self) -> int:
        try:
            return os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
        except OSError as e:
            why = "is a symbolic link" if e.errno == errno.ELOOP else (e.strerror or str(e))
            raise FolderBusy(self.folder, reason=f"{LOCK_NAME} {why}") from None

    def release(self) -> None:
        """Unlink the lock file, then unlock it (closing it)."""
        if self._fd is None:
            return
        try:
            if _same_file(self._fd, self.path):
                self.path.unlink()
        except OSError:
            pass
        os.close(self._fd)
        self._fd = None


def _same_file(fd: int, path: Path) -> bool:
    try:
        a, b = os.fstat(fd), os.stat(path, follow_symlinks=False)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


__all__ = ["FolderBusy", "FolderLock", "LOCK_NAME"]
