"""The one way the twin makes a figure, shared by every figure it writes (histograms of ``twin run``
and meshes, the decode study's figures, the sweep's, validate's overlays, the topology) so they look
alike and cost alike: a matplotlib ``Figure`` on its own Agg canvas without pyplot
(:func:`new_figure`), log axes labelled at their decades in plain text (:func:`decade_label`,
:func:`decades`), saved in one of :data:`FORMATS` (``--figure-format``): PNG at :data:`DPI` and
compression level :data:`PNG_COMPRESS_LEVEL`, or PDF / SVG as vector drawings with no date or random
id in them, so one seed gives the same bytes (:func:`save_options`, used by
:func:`twin.output.files.savefig_writer`, the one save path). Series of many values take their
colours and markers from :func:`series_styles` (never two colours alike in one figure). Nothing here
imports matplotlib until a figure is made."""
from __future__ import annotations

import math

DPI = 300
"""Dots per inch of every PNG the twin writes, a print resolution (an 8-inch-wide figure is 2,400 pixels
wide); PDF and SVG are vector drawings, without pixels."""
FORMATS = ("png", "pdf", "svg")
"""The figure formats (``--figure-format``; png the default): PNG a raster at :data:`DPI`, PDF and SVG
vector drawings (each line, step outline and glyph a path or text, as a paper's figure wants)."""
PNG_COMPRESS_LEVEL = 3
"""zlib level of the PNG files (Pillow's default is 6): a histogram figure encodes in about 70 % of
the time for files about 5 % larger; the pixels are the same (PNG is lossless)."""
_SUPERSCRIPT = str.maketrans("-0123456789", "\u207b\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077\u2078\u2079")


def save_options(fmt: str) -> dict:
    """matplotlib ``savefig`` arguments of a figure saved as ``fmt`` (one of :data:`FORMATS`):
    ``dpi`` (:data:`DPI`), for PNG Pillow's compression level, for PDF and SVG metadata without the
    creation date (``CreationDate`` / ``Date`` None) so the bytes depend on the drawing alone.
    Raises ValueError for another format."""
    if fmt not in FORMATS:
        raise ValueError(f"figure format {fmt!r}: one of {', '.join(FORMATS)}")
    kw: dict = {"dpi": DPI, "format": fmt}
    if fmt == "png":
        kw["pil_kwargs"] = {"compress_level": PNG_COMPRESS_LEVEL}
    else:
        kw["metadata"] = {"CreationDate": None} if fmt == "pdf" else {"Date": None}
    return kw


def figure_name(name: str, fmt: str) -> str:
    """``name`` (a figure's file name as the code knows it, e.g. ``histograms.png``) with the suffix of
    format ``fmt`` (``histograms.pdf``); a name that is not a ``.png`` is returned as it is."""
    return name[:-4] + "." + fmt if name.endswith(".png") else name


SERIES_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
                  "#bcbd22", "#7f7f7f", "#393b79", "#637939")
"""Twelve colours told apart in print (matplotlib's tab10, then two of tab20b's darker ones)."""
SERIES_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
"""Markers of the series beyond :data:`SERIES_COLOURS` (:func:`series_styles`)."""


def series_styles(n: int) -> list[tuple[str, str]]:
    """``n`` (colour, marker) pairs for the series of one figure, no two colours alike: the
    :data:`SERIES_COLOURS` with marker ``o`` up to twelve series; more: the ``turbo`` colormap
    sampled at ``n`` evenly spaced points (distinct colours up to its 256 entries), the markers of
    :data:`SERIES_MARKERS` in turn, so neighbours in the colormap differ in marker too. Raises
    ValueError for more than 256 series."""
    if n <= len(SERIES_COLOURS):
        return [(c, "o") for c in SERIES_COLOURS[:n]]
    if n > 256:
        raise ValueError(f"{n} series: at most 256 told apart in one figure")
    from matplotlib import colormaps
    from matplotlib.colors import to_hex
    cmap = colormaps["turbo"].resampled(n)
    return [(to_hex(cmap(i)), SERIES_MARKERS[i % len(SERIES_MARKERS)]) for i in range(n)]


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
