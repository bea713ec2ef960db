"""One error type for bad input files: it names the file, the key and the value."""
from __future__ import annotations

from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)


class ConfigError(ValueError):
    """A scenario, calibration or measurement file holds a bad value.

    ``str(err)`` is one line: ``FILE: KEY: VALUE: what is wrong``.
    """

    def __init__(self, file: str | Path, key: str, value: object, problem: str):
        self.file, self.key, self.value, self.problem = str(file), key, value, problem
        super().__init__(f"{file}: {key or '(top level)'}: {_short(value)}: {problem}")


class Located(ValueError):
    """Raised inside a validator to point at a key below the model being validated.

    ``path`` is a tuple of keys and list indices relative to that model, ``value`` the offending
    value, ``problem`` what is wrong; :func:`load_model` turns it into a :class:`ConfigError`.
    """

    def __init__(self, path: tuple, value: object, problem: str):
        self.path, self.value, self.problem = tuple(path), value, problem
        super().__init__(problem)


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


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


class _UniqueKeyLoader(yaml.SafeLoader):
    """A safe loader that refuses a key written twice in one mapping (YAML would keep the last)."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def load_yaml(path: str | Path) -> object:
    """Parse a YAML file; raises :class:`ConfigError` if it is missing or not valid YAML."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(p, "", str(p), f"cannot read file ({e.strerror})") from None
    except UnicodeDecodeError as e:
        line = p.read_bytes()[:e.start].count(b"\n") + 1
        raise ConfigError(p, f"line {line}", f"byte 0x{e.object[e.start]:02x}",
                          "not UTF-8 text (a scenario, calibration or measurement file is YAML in UTF-8)") from None
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else "?"
        bad = text.splitlines()[mark.line].strip() if mark and mark.line < len(text.splitlines()) else ""
        raise ConfigError(p, where, bad, f"not valid YAML ({getattr(e, 'problem', e)})") from None


def load_model(path: str | Path, model: type[M], data: object | None = None) -> M:
    """Validate the YAML in ``path`` (or already-parsed ``data``) as ``model``.

    Raises :class:`ConfigError` naming the first bad key and its value.
    """
    if data is None:
        data = load_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError(path, "", data, "expected a mapping at the top level")
    try:
        return model.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        value = err.get("input") if err["type"] != "missing" else "<missing>"
        cause = (err.get("ctx") or {}).get("error")
        if isinstance(cause, Located):
            loc, value, problem = loc + cause.path, cause.value, cause.problem
            raw = _dig(data, loc)  # the value as the file spells it, where the key points at one
            if not isinstance(raw, (dict, list)) and raw != "<missing>" and raw == value:
                value = raw
        elif err["type"] == "extra_forbidden":
            problem = "unknown key"
        else:
            problem = err["msg"].removeprefix("Value error, ")
        raise ConfigError(path, _key(loc), value if value is not None else _dig(data, loc), problem) from None
