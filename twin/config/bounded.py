"""Bounded readers for the machine-written files the twin reads back: a run folder's JSON
(``results.json``, ``passes.json``) and NumPy archives (``live_rounds.npz``), as ``twin validate``
and ``twin calibrate --from-live`` read them. The text files go through
:func:`twin.config.load.read_input_text` (a regular file, at most 16 MiB, checked with ``stat``
before it is opened: a 300 MB results.json is refused unread; a symlink loop is a refusal, not a
RuntimeError). What is checked, each refusal a :class:`ConfigError` naming the file, the key and
the value:

- JSON (:func:`read_json`): nested at most :data:`MAX_JSON_DEPTH` deep, measured on the text
  before it is parsed (Python's parser recurses: 100,000 ``[`` would be a RecursionError); no
  ``NaN``/``Infinity`` (not JSON, and a NaN round trip would be fitted); then, given a pydantic
  ``model``, validated (a missing key is a refusal naming it, not a KeyError).
- NPZ (:func:`read_npz`): at most :data:`MAX_NPZ_BYTES` on disk; every member's ``.npy`` header
  read from the zip before any array is: a plain numeric dtype (no objects, so no pickles), a shape
  whose bytes (shape product times item size) are at most :data:`MAX_ARRAY_BYTES` and no more than
  the member's recorded size (an archive of a few KB declaring 5.6 GiB is refused, nothing
  allocated); only then are the arrays named read.
"""
from __future__ import annotations

import math
import os
import re
import zipfile
from pathlib import Path
from typing import TypeVar

import numpy as np
from pydantic import BaseModel

from twin.config.errors import ConfigError
from twin.config.load import load_model, read_input_text

M = TypeVar("M", bound=BaseModel)

MAX_JSON_DEPTH = 64                # a results.json nests about 8 deep
MAX_NPZ_BYTES = 4 * 2**30          # a live run's rounds file: 10^7 rounds of five int64 arrays is 400 MB
MAX_ARRAY_BYTES = 2**30            # one array of it
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)  # a JSON string: the alternatives are disjoint, no backtracking
_BRACKETS = {ord(c): None for c in map(chr, range(128)) if c not in "[]{}"}


def json_depth(text: str) -> int:
    """How deep the JSON ``text`` nests (``[]`` and ``{}``; 0 for a scalar), brackets inside strings
    not counted. Linear: the strings are cut out by a regular expression without backtracking, the
    rest reduced to its brackets and summed with numpy."""
    bare = _STRING.sub("", text)
    bare = "".join(ch for ch in bare if ch in "[]{}") if not bare.isascii() else bare.translate(_BRACKETS)
    if not bare:
        return 0
    codes = np.frombuffer(bare.encode("ascii"), np.uint8)
    steps = np.where((codes == ord("[")) | (codes == ord("{")), 1, -1)
    return int(np.cumsum(steps).max())


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number (a run folder's values are finite)")


def read_json(path: str | Path, key: str, model: type[M] | None = None):
    """The JSON document in ``path`` (a regular file of at most 16 MiB of UTF-8: :func:`read_input_text`),
    nested at most :data:`MAX_JSON_DEPTH` deep, without ``NaN``/``Infinity``; validated as ``model``
    (a pydantic model: the document must be a mapping) when given. ``key`` names the file in a
    refusal of the whole document (e.g. ``results.json``). Raises :class:`ConfigError`."""
    import json
    p = Path(path)
    text = read_input_text(p)
    depth = json_depth(text)
    if depth > MAX_JSON_DEPTH:
        raise ConfigError(p, key, f"<{depth} levels>", f"nested more than {MAX_JSON_DEPTH} deep: not a file the "
                          "twin wrote")
    try:
        doc = json.loads(text, parse_constant=_no_constant)
    except ValueError as e:  # JSONDecodeError is one; so are NaN, Infinity and an integer of 5,000 digits
        raise ConfigError(p, key, "<unreadable>", f"not JSON: {str(e)[:160]}") from None
    if model is None:
        return doc
    if not isinstance(doc, dict):
        raise ConfigError(p, key, type(doc).__name__, "expected a mapping at the top level")
    return load_model(p, model, doc)


def _npy_header(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> tuple[tuple[int, ...], np.dtype]:
    from numpy.lib import format as npformat
    with zf.open(info) as f:
        version = npformat.read_magic(f)
        if version == (1, 0):
            shape, _, dtype = npformat.read_array_header_1_0(f)
        else:
            shape, _, dtype = npformat.read_array_header_2_0(f)
    return shape, dtype


def _check_member(path: Path, zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> None:
    name = info.filename.removesuffix(".npy")
    try:
        shape, dtype = _npy_header(zf, info)
    except (ValueError, OSError, zipfile.BadZipFile, EOFError) as e:
        raise ConfigError(path, name, "<header>", f"not a NumPy array: {str(e)[:160]}") from None
    if dtype.hasobject or dtype.kind not in "biuf":
        raise ConfigError(path, name, str(dtype), "expected a numeric array (integers or floats)")
    declared = math.prod(shape) * dtype.itemsize
    if declared > MAX_ARRAY_BYTES:
        raise ConfigError(path, name, f"shape {shape} of {dtype}", f"declares {declared:,} bytes: more than "
                          f"{MAX_ARRAY_BYTES // 2**20:,} MiB, the most one array may be")
    if declared > info.file_size:
        raise ConfigError(path, name, f"shape {shape} of {dtype}", f"declares {declared:,} bytes but holds "
                          f"{info.file_size:,}")


def read_npz(path: str | Path, names: list[str]) -> dict[str, np.ndarray]:
    """The arrays ``names`` of the NPZ archive ``path`` that it holds (a name it lacks is left out),
    after its size and every member's header are checked (module docstring). Raises :class:`ConfigError`
    naming the file, the array and what it declares."""
    p = Path(path)
    try:
        st = os.stat(p)
    except (OSError, ValueError) as e:
        raise ConfigError(p, None, None, f"cannot read it ({getattr(e, 'strerror', None) or e})") from None
    if st.st_size > MAX_NPZ_BYTES:
        raise ConfigError(p, None, None, f"{st.st_size:,} bytes: larger than {MAX_NPZ_BYTES // 2**30} GiB, the most "
                          "a rounds file may be")
    out: dict[str, np.ndarray] = {}
    try:
        with zipfile.ZipFile(p) as zf:
            members = {i.filename.removesuffix(".npy"): i for i in zf.infolist()}
            for name in names:
                if name in members:
                    _check_member(p, zf, members[name])
            with np.load(p, allow_pickle=False) as z:
                for name in names:
                    if name in members:
                        out[name] = z[name]
    except ConfigError:
        raise
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as e:
        raise ConfigError(p, None, None, f"not a NumPy archive: {str(e)[:160]}") from None
    return out
