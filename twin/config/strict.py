"""The strict base of every input-file model: an unknown key or a non-finite number is an error.

Every pydantic model read from a user's file (a scenario, a calibration, a measured set, a
per-call decoder file, a generated table) derives from :class:`Strict` (or :class:`StrictByName`,
which also takes a field by its Python name where the file's key is an alias, or :class:`StrictTyped`,
which also refuses a value of another type than its field's), so a misspelt key
is refused at load (``extra="forbid"``) and ``.inf``/``.nan`` never reach the engine
(``allow_inf_nan=False``): the one-line error names file, key and value
(:class:`twin.config.ConfigError`).

``defer_build=True`` (pydantic's documented option): a model's validator is built when it first
validates, not when its class is defined, so a command pays only for the models its files use
(loading the default scenario builds 10 of the 48)."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    """A model that refuses unknown keys and non-finite numbers."""
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, defer_build=True)


class StrictTyped(Strict):
    """:class:`Strict`, and every value of its field's own type (pydantic's strict mode): no ``"24"``
    or ``24.0`` or ``true`` for an integer, no ``"0.1"`` or ``true`` for a number (an integer is a
    number), a YAML list for a list; a field with its own parser (a duration) reads its text as
    before."""
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)


class StrictByName(Strict):
    """:class:`Strict`, and a field may be given by its Python name as well as its alias."""
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, populate_by_name=True, defer_build=True)


__all__ = ["Strict", "StrictByName", "StrictTyped"]
