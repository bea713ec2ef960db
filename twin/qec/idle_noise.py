"""Idle noise: what a qubit suffers while the program waits, as a Pauli channel of the idle time.

Two models, parameters as inputs (:class:`IdleNoise`):

- ``t1t2``: amplitude damping (T1) and pure dephasing (T2) for ``t``, Pauli-twirled: the Pauli
  twirl approximation of the combined channel, ``p_x = p_y = (1 - e^{-t/T1}) / 4`` and
  ``p_z = (1 - e^{-t/T2}) / 2 - p_x`` (Ghosh, Fowler and Geller, "Surface code with decoherence:
  An analysis of three superconducting architectures", Phys. Rev. A 86, 062318 (2012);
  Tomita and Svore, "Low-distance surface codes under realistic quantum noise", Phys. Rev. A 90,
  062320 (2014)). It needs ``T2 <= 2 T1`` (else ``p_z`` would be negative: no physical qubit has it).
- ``depolarizing``: a depolarising process of ``rate`` per microsecond: the Bloch vector shrinks
  as ``e^{-4 r t / 3}``, i.e. stim's ``DEPOLARIZE1(p)`` with ``p = 3/4 (1 - e^{-4 r t / 3})``
  (``p ~ r t`` for short idles, saturating at the fully mixed 3/4); each of X, Y, Z ``p / 3``.

Times are integer picoseconds (arrays welcome); probabilities are float arrays of the same shape.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

PS_PER_US = 1_000_000


@dataclass(frozen=True)
class IdleNoise:
    """An idle-noise model: ``model`` ``t1t2`` (``t1_ps``, ``t2_ps``) or ``depolarizing``
    (``rate_per_us``: error probability per microsecond for short idles). Raises ValueError for a
    non-positive T1 or T2, ``T2 > 2 T1``, a negative rate or another model."""

    model: str
    t1_ps: int = 0
    t2_ps: int = 0
    rate_per_us: float = 0.0

    def __post_init__(self):
        if self.model == "t1t2":
            if self.t1_ps <= 0 or self.t2_ps <= 0:
                raise ValueError(f"T1 and T2 must be > 0, got {self.t1_ps} and {self.t2_ps} ps")
            if self.t2_ps > 2 * self.t1_ps:
                raise ValueError(f"T2 ({self.t2_ps / 1e6:g} µs) above 2 T1 ({2 * self.t1_ps / 1e6:g} µs): no qubit has "
                                 "it (the twirled channel's p_z would be negative)")
        elif self.model == "depolarizing":
            if not self.rate_per_us >= 0:
                raise ValueError(f"depolarising rate {self.rate_per_us} per us: must be >= 0")
        else:
            raise ValueError(f"idle noise model {self.model!r}: expected 't1t2' or 'depolarizing'")

    def pauli(self, t_ps) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(p_x, p_y, p_z)`` of the Pauli channel for idling ``t_ps`` (int ps, scalar or array;
        negative times count as 0)."""
        t = np.maximum(np.asarray(t_ps, np.float64), 0.0)
        if self.model == "t1t2":
            px = (1.0 - np.exp(-t / self.t1_ps)) / 4.0
            pz = (1.0 - np.exp(-t / self.t2_ps)) / 2.0 - px
            return px, px.copy(), np.maximum(pz, 0.0)
        p = 0.75 * (1.0 - np.exp(-4.0 * self.rate_per_us * t / PS_PER_US / 3.0))
        return p / 3.0, p / 3.0, p / 3.0

    def describe(self) -> dict:
        """The model and its parameters for results.json (us, per us)."""
        if self.model == "t1t2":
            return {"model": "t1t2", "t1_us": self.t1_ps / PS_PER_US, "t2_us": self.t2_ps / PS_PER_US,
                    "channel": "Pauli twirl: p_x = p_y = (1 - exp(-t/T1))/4, p_z = (1 - exp(-t/T2))/2 - p_x"}
        return {"model": "depolarizing", "rate_per_us": self.rate_per_us,
                "channel": "DEPOLARIZE1(3/4 (1 - exp(-4 r t / 3)))"}


def draw_paulis(noise: IdleNoise, t_ps: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One Pauli per entry of ``t_ps`` (int ps, any shape), drawn from :meth:`IdleNoise.pauli`:
    uint8 of the same shape, 0 = I, 1 = X, 2 = Y, 3 = Z (stim's convention)."""
    px, py, pz = noise.pauli(t_ps)
    u = rng.random(np.shape(t_ps))
    return np.where(u < px, 1, np.where(u < px + py, 2, np.where(u < px + py + pz, 3, 0))).astype(np.uint8)
