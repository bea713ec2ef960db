"""The one way the twin makes a figure, shared by every figure it writes (histograms of ``twin run``
and meshes, the decode study's figures, the sweep's, validate's overlays, the topology) so they look
alike and cost alike: a matplotlib ``Figure`` on its own Agg canvas without pyplot
(:func:`new_figure`), log axes labelled at their decades in plain text (:func:`decade_label`,
:func:`decades`), saved at :data:`DPI` as PNG at compression level :data:`PNG_COMPRESS_LEVEL`
(:func:`twin.output.files.savefig_writer`). Nothing here imports matplotlib until a figure is made."""
from __future__ import annotations

import math

DPI = 120
"""Dots per inch of every figure the twin writes (an 8-inch-wide figure is 960 pixels wide)."""
PNG_COMPRESS_LEVEL = 3
"""zlib level of the PNG files (Pillow's default is 6): a histogram figure encodes in about 70 % of
the time for files about 5 % larger; the pixels are the same (PNG is lossless)."""
_SUPERSCRIPT = str.maketrans("-0123456789", "\u207b\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077\u2078\u2079")


def new_figure(width_in: float, height_in: float):
    """A matplotlib ``Figure`` of ``width_in`` x ``height_in`` inches on its own Agg canvas, made
    without pyplot: nothing registers it and nothing needs closing (it is freed with its last
    reference), so the backend is always Agg whatever the user's matplotlib settings, and pyplot's
    import and figure manager are not paid."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width_in, height_in))
    FigureCanvasAgg(fig)
    return fig


def decade_label(value: float, pos: int | None = None) -> str:
    """The tick label of ``value`` on a log axis: a whole power of ten as 10 with its exponent in
    Unicode superscript digits (1 -> ``10⁰``, 1,000 -> ``10³``, 0.01 -> ``10⁻²``), any other value
    as ``%g``. Plain text the font draws directly: matplotlib's own log formatter writes mathtext
    (``$\\mathdefault{10^{3}}$``), parsed at every draw by a parser built at the first: about 40 % of
    a one-panel figure's first drawing (BENCHMARKS.md, "Figures against the simulation"). ``pos``
    (the tick's index) is matplotlib's formatter argument, not used."""
    if value > 0 and math.isfinite(value):
        e = round(math.log10(value))
        if math.isclose(10.0 ** e, value, rel_tol=1e-9):
            return "10" + str(e).translate(_SUPERSCRIPT)
    return f"{value:g}"


def decades(axis) -> None:
    """Tick a log-scale matplotlib ``axis`` (``ax.yaxis`` or ``ax.xaxis``, after ``set_yscale("log")``,
    which resets its ticks) at its decades only, labelled by :func:`decade_label`; no minor ticks
    (they were a third of a histogram panel's time)."""
    from matplotlib.ticker import FuncFormatter, NullLocator

    axis.set_major_formatter(FuncFormatter(decade_label))
    axis.set_minor_locator(NullLocator())
