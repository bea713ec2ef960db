"""One error type for bad input files: it names the file, the key and the value."""
from __future__ import annotations

import datetime
import re
import reprlib
from pathlib import Path

from twin.picklable import Picklable

SHORT_CHARS = 80  # an offending value is shown in at most this many characters
SHORT_KEY_CHARS = 160  # and its key (a dotted path, or a name read from a file) in at most this many


SHORT_LINE_CHARS = 2000  # a whole error line (a list of the choices there are fits; a pasted file does not)


def cut_words(text: str) -> str:
    """``text`` with every run of non-space characters longer than :data:`SHORT_KEY_CHARS` cut to
    that many (ending ``...``), and the whole cut to :data:`SHORT_LINE_CHARS`: a name, path or value
    that a message quotes whole (a library's, or an argument's) is shown as a key is. Linear."""
    if len(text) <= SHORT_KEY_CHARS:
        return text
    words = re.split(r"(\s+)", text)
    out = "".join(w if len(w) <= SHORT_KEY_CHARS else w[:SHORT_KEY_CHARS - 3] + "..." for w in words)
    return out if len(out) <= SHORT_LINE_CHARS else out[:SHORT_LINE_CHARS - 3] + "..."


class ConfigError(Picklable, ValueError):
    """A scenario, calibration or measurement file holds a bad value.

    ``str(err)`` is one line: ``FILE: KEY: VALUE: what is wrong``, or ``FILE: what is wrong`` for
    a problem with the file itself (``key`` None: not a regular file, too large, not UTF-8). The
    value is shown through :func:`short` (at most 80 characters, never formatted whole), the key
    cut to :data:`SHORT_KEY_CHARS` (a key may hold a name read from a file).
    """

    def __init__(self, file: str | Path, key: str | None, value: object, problem: str):
        self.file, self.key, self.value, self.problem = str(file), key, value, problem
        problem = cut_words(" ".join(str(problem).split()))  # one line, whatever a library's message holds
        shown = key if key is None or len(key) <= SHORT_KEY_CHARS else key[:SHORT_KEY_CHARS - 3] + "..."
        super().__init__(f"{file}: {problem}" if key is None else
                         f"{file}: {shown or '(top level)'}: {short(value)}: {problem}")

    def hidden(self, text: str = "") -> ConfigError:
        """This error with none of its file's content (the file is one another file names: a
        scenario may name any readable file, and its error must not print it): the value described
        by kind and size (:func:`describe`), the problem with what it quotes of ``text`` (the file's
        text) or of the value taken out (:func:`scrub`), the key kept (cut to :data:`SHORT_CHARS`)."""
        raw = self.value if isinstance(self.value, str) else ""
        key = self.key if self.key is None or len(self.key) <= SHORT_CHARS else self.key[:SHORT_CHARS - 3] + "..."
        keep = self.value is None or (isinstance(self.value, str) and self.value == "<missing>")
        e = ConfigError(self.file, key, self.value if keep else Described(describe(self.value)),
                        scrub(self.problem, text, raw))
        e.value = self.value  # for code that asks; str(e) never shows it
        return e


class Described(str):
    """A value's description standing where the value would be shown (printed as is, unquoted)."""

    def __repr__(self) -> str:
        return str(self)


def describe(value: object) -> str:
    """What ``value`` is, without any of it: ``<a string of 31 characters>``, ``<a mapping of 2 keys>``,
    ``<a number>``; ``<missing>`` stays."""
    if isinstance(value, Described) or value == "<missing>" or value is None:
        return "<missing>" if value == "<missing>" else ("<null>" if value is None else str(value))
    for kind, word, unit in ((str, "a string", "character"), (bytes, "bytes", "byte"), (dict, "a mapping", "key"),
                             ((list, tuple), "a list", "item")):
        if isinstance(value, kind):
            n = len(value)  # type: ignore[arg-type]
            return f"<{word} of {n:,} {unit}{'' if n == 1 else 's'}>"
    if isinstance(value, bool):
        return "<a boolean>"
    if isinstance(value, (int, float)):
        return "<a number>"
    return f"<a {type(value).__name__}>"


_QUOTED = re.compile(r"'[^'\n]*'|\"[^\"\n]*\"")


def scrub(problem: str, text: str, value: str = "", keep: tuple[str, ...] = ()) -> str:
    """``problem`` with what it quotes of ``text`` (a file's content) or of ``value`` replaced by ``'…'``
    (a quoted piece, or a piece of one cut short with ``...``, of 3 or more characters found in either),
    and ``value`` itself where it stands unquoted (when 4 or more characters long); a quoted piece in
    ``keep`` (a name the user gave elsewhere) stays."""
    flat = " ".join(text.split())
    val = " ".join(value.split())

    def found(piece: str) -> bool:
        piece = " ".join(piece.split())
        return len(piece) >= 3 and (piece in flat or piece in val)

    def sub(m: re.Match) -> str:
        inner = m.group(0)[1:-1]
        if inner in keep:
            return m.group(0)
        pieces = [p for p in inner.split("...") if p]
        return "'…'" if any(found(p) for p in pieces) or (inner and inner in val) else m.group(0)
    out = _QUOTED.sub(sub, " ".join(str(problem).split()))
    return out.replace(val, "…") if len(val) >= 4 else out


class Located(Picklable, ValueError):
    """Raised inside a validator to point at a key below the model being validated.

    ``path`` is a tuple of keys and list indices relative to that model, ``value`` the offending
    value, ``problem`` what is wrong; :func:`load_model` turns it into a :class:`ConfigError`.
    """

    def __init__(self, path: tuple, value: object, problem: str):
        self.path, self.value, self.problem = tuple(path), value, problem
        super().__init__(problem)


_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = _REPR.maxlong = SHORT_CHARS
_REPR.maxlevel, _REPR.maxlist, _REPR.maxtuple, _REPR.maxdict, _REPR.maxset = 3, 6, 6, 4, 6


def short(value: object) -> str:
    """``repr(value)`` in at most :data:`SHORT_CHARS` characters, one line. The value is cut down
    *before* it is formatted (:mod:`reprlib`), so a huge or deeply shared value (a YAML alias bomb,
    a 16 MiB string, a 10,000-digit integer) costs no more than a short one."""
    if isinstance(value, (datetime.date, datetime.time)):  # YAML read 2026-12-02 as a date: show it so
        return value.isoformat()
    try:
        text = _REPR.repr(value)
    except (ValueError, RecursionError):  # e.g. an int past Python's digit limit for str()
        text = f"<{type(value).__name__}>"
    text = " ".join(text.split())
    return text if len(text) <= SHORT_CHARS else text[:SHORT_CHARS - 3] + "..."


def _dig(data: object, loc: tuple) -> object:
    cur = data
    for part in loc:
        try:
            cur = cur[part]
        except (KeyError, IndexError, TypeError):
            return "<missing>"
    return cur


def _key(loc: tuple) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out
