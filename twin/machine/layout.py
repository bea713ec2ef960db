"""Patches on a grid: which patches are neighbours (a lattice-surgery merge joins two of them)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Layout:
    """``rows`` x ``cols`` patches, row-major: patch ``i`` at row ``i // cols``, column ``i % cols``."""
    rows: int
    cols: int

    @property
    def patches(self) -> int:
        return self.rows * self.cols

    def neighbours(self, i: int) -> list[int]:
        """The patches sharing an edge with patch ``i``, ascending."""
        r, c = divmod(i, self.cols)
        out = []
        if r > 0:
            out.append(i - self.cols)
        if c > 0:
            out.append(i - 1)
        if c < self.cols - 1:
            out.append(i + 1)
        if r < self.rows - 1:
            out.append(i + self.cols)
        return out
