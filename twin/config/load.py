"""Reading input files, bounded: every scenario, parameter set, measurement, hosting and gaps file
goes through :func:`read_input_text`, and every YAML one through :func:`load_yaml`.

What a file may be, checked before it costs anything:

- a regular file (``os.stat`` before it is opened: a FIFO would block forever, a device never end;
  it is then opened non-blocking and checked again, in case it was swapped in between);
- at most :data:`MAX_INPUT_BYTES` (16 MiB) of UTF-8 text;
- YAML read with the safe loader (libyaml's when installed: linear time, a 10^6-entry list in
  seconds rather than minutes), each key at most once in a mapping, nested at most
  :data:`MAX_YAML_DEPTH` deep, and at most :data:`MAX_YAML_NODES` values once every alias is
  expanded. The expanded count is measured on the composed node graph, where an alias is the
  node it names, so a 1.6 KB "billion laughs" document is refused without ever being expanded.

Every refusal is a :class:`ConfigError`, one line naming the file (and the line, for YAML).
"""
from __future__ import annotations

import os
import stat
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from twin.config.errors import ConfigError, Located, _dig, _key, scrub

M = TypeVar("M", bound=BaseModel)

MAX_INPUT_BYTES = 16 * 2**20  # any one input file: far above the largest real one (a gaps file of 10^6 lines)
MAX_YAML_DEPTH = 64  # nesting of mappings and lists; the schemas need fewer than 10
MAX_YAML_NODES = 4_000_000  # values in a document once its aliases are expanded (a 10^6-entry list is ~10^6)

_Base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when PyYAML was built with it


def read_input_text(path: str | Path) -> str:
    """The text of input file ``path``: a regular file of at most :data:`MAX_INPUT_BYTES` bytes of
    UTF-8. Raises :class:`ConfigError` (one line naming the file) for a missing or unreadable file,
    a folder, a FIFO, device or socket (refused before it is opened, so nothing blocks), a larger
    file, or bytes that are not UTF-8 (naming the line of the first bad byte)."""
    p = Path(path)
    try:
        st = os.stat(p)
        _check_kind(p, st)
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as e:
        raise ConfigError(p, None, None, f"cannot read it ({e.strerror or e})") from None
    with os.fdopen(fd, "rb") as f:
        _check_kind(p, os.fstat(f.fileno()))  # the same file, now that it is open
        try:
            data = f.read(MAX_INPUT_BYTES + 1)
        except OSError as e:
            raise ConfigError(p, None, None, f"cannot read it ({e.strerror or e})") from None
    if len(data) > MAX_INPUT_BYTES:
        raise ConfigError(p, None, None, f"larger than {MAX_INPUT_BYTES // 2**20} MiB, the most an input file may be")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise ConfigError(p, None, None, f"line {line}: byte 0x{data[e.start]:02x} is not UTF-8 text (scenario, "
                          "calibration, measurement and gaps files are UTF-8)") from None


BUNDLED = "bundled:"  # a value naming a file the twin ships, by its path in the bundle (twin.bundled)


@contextmanager
def named_input(scenario: str | Path, target: str | Path):
    """Read ``target``, a file that ``scenario`` names, inside: an error on any file but ``scenario``
    comes out with none of that file's content (:meth:`ConfigError.hidden`: a scenario may name any
    readable file, a key file or a password file, and the error must not print it), and one on
    ``scenario`` itself with what its problem quotes of ``target`` taken out."""
    try:
        yield
    except ConfigError as e:
        raise _hide(e, scenario, target) from None


def _hide(e: ConfigError, scenario: str | Path, target: str | Path) -> ConfigError:
    if getattr(e, "value_hidden", False):
        return e
    text = text_or_empty(target)
    if _same_file(e.file, scenario):
        out = ConfigError(e.file, e.key, e.value, scrub(e.problem, text))
    else:
        out = e.hidden(text if _same_file(e.file, target) else text_or_empty(e.file))
    out.value_hidden = True  # type: ignore[attr-defined]
    return out


def _same_file(a: str | Path, b: str | Path) -> bool:
    try:
        return Path(a).resolve() == Path(b).resolve()
    except (OSError, ValueError, RuntimeError):
        return str(a) == str(b)


def text_or_empty(path: str | Path) -> str:
    """The text of ``path`` (bounded, :func:`read_input_text`), or "" if it cannot be read."""
    try:
        return read_input_text(path)
    except (ConfigError, OSError, ValueError, RuntimeError):
        return ""


def named_file(scenario: str | Path, key: str, value: str) -> Path:
    """The file that ``key: value`` in the file ``scenario`` names (relative to it, absolute, or
    ``bundled:calibrations/...``: a file the twin ships, by its path in the repository, found in a
    checkout or an installed wheel alike, :func:`twin.bundled.bundled_path`), resolved: an existing
    regular file. Raises :class:`ConfigError` naming ``scenario``, ``key`` and ``value`` for a missing
    one, a folder, a FIFO or device, a ``bundled:`` name outside the bundle, or a name the system
    refuses (too long, a NUL byte)."""
    scenario = Path(scenario)
    f = _bundled(scenario, key, str(value)) if str(value).startswith(BUNDLED) else scenario.parent / str(value)
    try:
        f = f.resolve()
        st = os.stat(f)
    except FileNotFoundError:
        raise ConfigError(scenario, key, value, f"no such file ({_shown(f)})") from None
    except RuntimeError:  # Path.resolve() before Python 3.13 on a symlink loop
        raise ConfigError(scenario, key, value, "cannot read it (a symlink loop)") from None
    except (OSError, ValueError) as e:
        why = getattr(e, "strerror", None) or e
        raise ConfigError(scenario, key, value, f"cannot read it ({why})") from None
    if stat.S_ISDIR(st.st_mode):
        raise ConfigError(scenario, key, value, f"a folder, not a file ({_shown(f)})")
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError(scenario, key, value, f"not a regular file (a FIFO, device or socket: {_shown(f)})")
    return f


def _bundled(scenario: Path, key: str, value: str) -> Path:
    """The bundled file ``bundled:REL`` names; REL is relative and stays inside the bundle."""
    from twin.bundled import FOLDERS, bundled_path
    rel = Path(value[len(BUNDLED):])
    if rel.is_absolute() or ".." in rel.parts or not rel.parts or rel.parts[0] not in FOLDERS:
        raise ConfigError(scenario, key, value, f"a {BUNDLED} name is a path inside the bundled files, "
                          f"starting with one of {', '.join(f + '/' for f in FOLDERS)}")
    return bundled_path(rel)


def _shown(p: Path) -> str:
    text = str(p)
    return text if len(text) <= 300 else text[:297] + "..."


def _check_kind(p: Path, st: os.stat_result) -> None:
    if stat.S_ISDIR(st.st_mode):
        raise ConfigError(p, None, None, "a folder, not a file")
    if not stat.S_ISREG(st.st_mode):
        what = ("a FIFO (named pipe)" if stat.S_ISFIFO(st.st_mode) else
                "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else
                "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file")
        raise ConfigError(p, None, None, f"{what}, not a regular file; give a file")
    if st.st_size > MAX_INPUT_BYTES:
        raise ConfigError(p, None, None, f"{st.st_size:,} bytes: larger than {MAX_INPUT_BYTES // 2**20} MiB, the "
                          "most an input file may be")


class _Loader(_Base):
    """The safe loader, refusing a key written twice in one mapping (YAML would keep the last)."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *anchor`: its keys are merged below, and
                continue  # the keys written beside it override them (YAML's merge, not a duplicate)
            key = self.construct_object(key_node, deep=deep)
            try:
                dup = key in seen
            except TypeError:  # unhashable: the safe constructor refuses it below, with its line
                continue
            if dup:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)

    def refuse_tag(self, node):
        """A value of a YAML type that no input of the twin's holds (``!!binary`` bytes, ``!!set``,
        ``!!omap``, ``!!pairs``): refused with its line rather than turned into a string or list."""
        raise yaml.constructor.ConstructorError(None, None, f"{node.tag.rsplit(':', 1)[-1]} values are not "
                                                "taken here; write the value as plain text", node.start_mark)


    def construct_yaml_int(self, node):
        """An integer, refusing YAML 1.1's octal (``020000`` is 8,192) and base-60 (``5:33:20`` is 20,000)
        forms, which read as other numbers than a reader sees; ``0x``/``0b`` say what they are."""
        _decimal_only(node)
        return super().construct_yaml_int(node)

    def construct_yaml_float(self, node):
        """A float, refusing YAML 1.1's base-60 form (``1:30.5``)."""
        _decimal_only(node)
        return super().construct_yaml_float(node)


def _decimal_only(node) -> None:
    digits = str(node.value).replace("_", "").lstrip("+-")
    if ":" in digits:
        raise yaml.constructor.ConstructorError(
            None, None, f"{node.value}: YAML 1.1 reads a number with colons as base 60 (5:33:20 is 20,000); write it "
            "in decimal (or quote it as text)", node.start_mark)
    if len(digits) > 1 and digits[0] == "0" and digits[1].isdigit():
        raise yaml.constructor.ConstructorError(
            None, None, f"{node.value}: YAML 1.1 reads a number with a leading 0 as octal (020000 is 8,192); write "
            "it in decimal without the leading 0 (or quote it as text)", node.start_mark)


_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)
_Loader.add_constructor("tag:yaml.org,2002:float", _Loader.construct_yaml_float)
for _tag in ("binary", "set", "omap", "pairs"):
    _Loader.add_constructor(f"tag:yaml.org,2002:{_tag}", _Loader.refuse_tag)


def _check_shape(path: Path, root: yaml.Node, text: str) -> None:
    """Refuse a document nested deeper than :data:`MAX_YAML_DEPTH` or holding more than
    :data:`MAX_YAML_NODES` values with its aliases expanded, or an alias inside the node it names
    (a recursive value). One pass over the composed graph, each node measured once (an alias is
    the node it names): linear in the file, however much the aliases would expand."""
    if isinstance(root, yaml.ScalarNode):
        return
    _ShapeWalk(path, text).walk(root)


class _ShapeWalk:
    """The pass of :func:`_check_shape`: depth first on an explicit stack (no recursion limit) of
    frames ``[node, children, next child, values so far, height so far]``; ``measured``: id(node)
    -> (expanded values, height) of every node finished; ``on_path``: the nodes on the stack."""

    def __init__(self, path: Path, text: str):
        self.path, self.text = path, text
        self.measured: dict[int, tuple[int, int]] = {}
        self.on_path: set[int] = set()
        self.stack: list[list] = []

    def refuse(self, node: yaml.Node, problem: str) -> NoReturn:
        raise ConfigError(self.path, f"line {node.start_mark.line + 1}", _line(self.text, node.start_mark.line),
                          problem)

    def push(self, node: yaml.Node) -> None:
        self.on_path.add(id(node))
        kids = node.value if isinstance(node, yaml.SequenceNode) else [n for kv in node.value for n in kv]
        self.stack.append([node, kids, 0, 1, 1])

    def walk(self, root: yaml.Node) -> None:
        self.push(root)
        while self.stack:
            if not self.advance(self.stack[-1]):
                self.finish()

    def advance(self, top: list) -> bool:
        """Add ``top``'s children, from its next one on, to its values and height; True when it
        stopped at a child not yet measured and pushed it (to walk first), False when all are in."""
        node, kids, i, count, height = top
        depth = len(self.stack)  # of ``node``; its children stand at depth + 1
        while i < len(kids):
            k = kids[i]
            i += 1
            if k.__class__ is yaml.ScalarNode:
                count += 1
                height = max(height, 2)
                if depth + 1 > MAX_YAML_DEPTH:
                    self.refuse(k, f"nested more than {MAX_YAML_DEPTH} deep")
                continue
            if id(k) in self.on_path:
                self.refuse(k, "an alias inside the value it names (a recursive value)")
            seen = self.measured.get(id(k))
            if seen is None:
                if depth + 1 > MAX_YAML_DEPTH:
                    self.refuse(k, f"nested more than {MAX_YAML_DEPTH} deep")
                top[2:] = [i, count, height]
                self.push(k)
                return True
            count += seen[0]  # an alias to a node already measured
            height = max(height, 1 + seen[1])
            if depth + seen[1] > MAX_YAML_DEPTH:
                self.refuse(k, f"nested more than {MAX_YAML_DEPTH} deep")
            if count > MAX_YAML_NODES:
                self.refuse(k, f"its aliases expand to more than {MAX_YAML_NODES:,} values (an alias bomb?)")
        top[2:] = [i, count, height]
        return False

    def finish(self) -> None:
        """The top node is measured: check its values, record it, add it to its parent."""
        node, _, _, count, height = self.stack[-1]
        if count > MAX_YAML_NODES:
            self.refuse(node, f"its aliases expand to more than {MAX_YAML_NODES:,} values (an alias bomb?)")
        self.stack.pop()
        self.on_path.discard(id(node))
        self.measured[id(node)] = (count, height)
        if self.stack:
            parent = self.stack[-1]
            parent[3] += count
            parent[4] = max(parent[4], 1 + height)

def load_yaml(path: str | Path) -> object:
    """Parse a YAML input file (:func:`read_input_text`, then the bounded safe loader; see the
    module docstring). Returns the document (``None`` for an empty one). Raises
    :class:`ConfigError` naming the file and line for anything else."""
    p = Path(path)
    text = read_input_text(p)
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_shape(p, node, text)
        return loader.construct_document(node)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        line = mark.line if mark else text.count("\n", 0, e.position) if isinstance(e, yaml.reader.ReaderError) \
            else None  # a character the reader refuses (a NUL byte) has a position, not a mark
        where = f"line {line + 1}" if line is not None else "?"
        bad = _line(text, line) if line is not None else ""
        raise ConfigError(p, where, bad, f"not valid YAML ({getattr(e, 'problem', None) or e})") from None
    except ConfigError:
        raise
    except (ValueError, TypeError, OverflowError) as e:  # a value the constructor cannot make (2024-13-45)
        raise ConfigError(p, None, None, f"not valid YAML: {e}") from None
    finally:
        loader.dispose()


def _line(text: str, n: int) -> str:
    start = 0
    for _ in range(n):
        start = text.find("\n", start) + 1
        if start == 0:
            return ""
    end = text.find("\n", start)
    return text[start:end if end >= 0 else len(text)].strip()


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
        err = e.errors(include_url=False)[0]
        loc = _file_loc(data, err["loc"])
        value = err.get("input") if err["type"] != "missing" else "<missing>"
        cause = (err.get("ctx") or {}).get("error")
        if isinstance(cause, Located):
            loc, value, problem = loc + cause.path, cause.value, cause.problem
            raw = _dig(data, loc)  # the value as the file spells it, where the key points at one
            if not isinstance(raw, (dict, list)) and raw != "<missing>" and _same(raw, value):
                value = raw
        elif err["type"] == "extra_forbidden":
            problem = "unknown key"
        else:
            problem = err["msg"].removeprefix("Value error, ")
        raise ConfigError(path, _key(loc), value if value is not None else _dig(data, loc), problem) from None


def _file_loc(data: object, loc: tuple) -> tuple:
    """pydantic's error location as the file's keys: the parts that name a member of a union or a
    validator (``list[function-after[_one_form(), IdleModel]]``, ``function-after[...]``, ``str``) are
    not keys of the document and are left out (a str part where the document has a list or a value, or
    one with a bracket that the mapping does not hold); a key the file lacks stays (a missing key)."""
    out: list = []
    cur: object = data
    missing = object()
    for part in loc:
        if isinstance(part, str):
            if isinstance(cur, dict) and part in cur:
                out.append(part)
                cur = cur[part]
            elif isinstance(cur, dict) and "[" not in part and not part.startswith("function-"):
                out.append(part)
                cur = missing
            elif cur is missing and "[" not in part and not part.startswith("function-"):
                out.append(part)
            continue  # a union member's or a validator's tag
        out.append(part)
        cur = cur[part] if isinstance(cur, list) and -len(cur) <= part < len(cur) else missing
    return tuple(out)


def _same(a: object, b: object) -> bool:
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 (a comparison of two odd values says only "not the same")
        return False
