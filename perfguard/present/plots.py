"""Static SVG plots for the HTML report (matplotlib, rendered offline, inlined).

Why matplotlib and SVG: the report must open on an air-gapped admin workstation with no
network, and stay readable when mailed or archived as a CI artifact. Static SVG needs no
JavaScript runtime, scales on any screen, keeps text as text (searchable, small) and is
what matplotlib — the best-kept plotting library in Python — renders without a browser.
"""

from __future__ import annotations

import io
import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import StrMethodFormatter  # noqa: E402

matplotlib.rcParams.update({
    "svg.fonttype": "none",       # text stays text: small files, searchable
    "svg.hashsalt": "perfguard",  # stable ids: the same data gives the same file
    "font.size": 11,  # ≥ 11 px once the browser fits the figure to its column
    "axes.titlesize": 12,
    "legend.fontsize": 10,
    "xtick.labelsize": 10,
    "ytick.labelsize": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
})
CURRENT, PREVIOUS, BAND, BAD, GOOD = "#1f5fa8", "#9a9a9a", "#8fb8e8", "#c62828", "#2e7d32"


def _svg(fig: Figure, label: str) -> str:
    """The figure as an inline <svg> element (no XML prolog), labelled for screen readers
    and for the browser test (data-plot, data-series)."""
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", bbox_inches="tight",
                metadata={"Creator": None, "Date": None, "Format": None, "Type": None})
    plt.close(fig)
    text = buffer.getvalue()
    text = text[text.index("<svg"):]
    return text.replace("<svg ", f'<svg role="img" aria-label="{label}" ', 1)


def _tagged(svg: str, kind: str, series: int) -> str:
    return svg.replace("<svg ", f'<svg data-plot="{kind}" data-series="{series}" ', 1)


def sparkline(values: list[float], band: tuple[float, float] | None,
              bad: bool = False) -> str:
    """The series' history as a tiny line, its noise band shaded, the last point marked."""
    fig, ax = plt.subplots(figsize=(1.6, 0.36))
    xs = list(range(len(values)))
    if band:
        ax.axhspan(band[0], band[1], color=BAND, alpha=0.45, lw=0)
    ax.plot(xs, values, color=CURRENT, lw=0.9)
    ax.plot(xs[-1:], values[-1:], "o", ms=2.8, color=BAD if bad else CURRENT)
    ax.axis("off")
    return _tagged(_svg(fig, "history"), "sparkline", 1)


def size_label(size: float) -> str:
    for unit, factor in (("M", 1 << 20), ("K", 1 << 10)):
        if size >= factor:
            return f"{size / factor:g}{unit}"
    return f"{size:g}"


def curve(title: str, unit: str, sizes: list[int], current: list[float],
          previous: tuple[list[int], list[float]] | None,
          band: tuple[list[int], list[float], list[float]] | None,
          flagged: dict[int, bool], limit: tuple[int, float, bool] | None = None) -> str:
    """This run's curve against the previous run's and the history band, log size axis;
    sizes the verdict flagged are marked (``flagged``: size → worse), red when worse,
    green when better. ``limit`` (size, value, is_upper) is the reference threshold of
    the curve's key figure, drawn at that size: thresholds judge one point, not a line."""
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    series = 1
    if band and band[0]:
        ax.fill_between(band[0], band[1], band[2], color=BAND, alpha=0.45, lw=0,
                        label="history band")
        series += 1
    if previous and previous[0]:
        ax.plot(previous[0], previous[1], color=PREVIOUS, lw=1.2, ls="--", marker=".",
                label="previous run")
        series += 1
    ax.plot(sizes, current, color=CURRENT, lw=1.6, marker=".", label="this run")
    for worse, colour, label in ((True, BAD, "regressed"), (False, GOOD, "improved")):
        marked = [(s, v) for s, v in zip(sizes, current) if flagged.get(s) is worse]
        if marked:
            ax.plot(*zip(*marked), "o", color=colour, ms=5, label=label)
    if limit:
        size, value, upper = limit
        ax.plot([size], [value], "v" if upper else "^", color=BAD, ms=8, ls="none",
                label=f"{'upper' if upper else 'lower'} limit at {size_label(size)}")
        series += 1
    ax.set_xscale("log", base=2)
    ticks = [s for s in sizes if s > 0 and math.log2(s) % 2 == 0] or sizes
    ax.set_xticks(ticks, [size_label(s) for s in ticks])
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel(unit)
    if "latency" in title or unit in ("us", "usec"):
        ax.set_yscale("log")
    else:  # 15,000,000 msg/s, not "1.5" under a "1e7" offset
        ax.yaxis.set_major_formatter(StrMethodFormatter("{x:,.0f}"))
    ax.set_title(title, loc="left", wrap=True)
    ax.legend(frameon=False)
    return _tagged(_svg(fig, title), "curve", series)


def scaling(rows: list[dict]) -> str:
    """Himeno: MFLOPS and parallel efficiency against total ranks, a line per node count."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.6, 3.4))
    nodes = sorted({r["nodes"] for r in rows})
    for count in nodes:
        mine = sorted((r for r in rows if r["nodes"] == count), key=lambda r: r["ranks"])
        ranks = [r["ranks"] for r in mine]
        left.plot(ranks, [r["mflops"] for r in mine], marker="o", label=f"{count} node(s)")
        right.plot(ranks, [r["efficiency"] for r in mine], marker="o", label=f"{count} node(s)")
    left.set(xlabel="ranks", ylabel="MFLOPS", title="Himeno MFLOPS")
    right.set(xlabel="ranks", ylabel="efficiency", title="parallel efficiency")
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.legend(frameon=False)
    return _tagged(_svg(fig, "Himeno scaling"), "scaling", len(nodes))


def allreduce_scaling(by_sharp: dict[str, list[tuple[int, float]]]) -> str:
    """Seed 003's chart: small-message allreduce latency against the node count, software
    collectives and SHARP side by side (a software allreduce grows with the nodes, an
    in-network one stays flat)."""
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    labels = {"off": "software", "on": "SHARP"}
    for sharp in sorted(by_sharp, key=lambda s: s != "off"):
        points = sorted(by_sharp[sharp])
        ax.plot([n for n, _ in points], [v for _, v in points], marker="o",
                label=labels.get(sharp, sharp))
    ax.set_xscale("log", base=2)
    ax.set(xlabel="nodes", ylabel="us", title="allreduce latency (smallest size) over nodes")
    ax.legend(frameon=False)
    return _tagged(_svg(fig, "allreduce scaling"), "allreduce", len(by_sharp))


def heatmap(title: str, rows: list[str], columns: list[str],
            values: list[list[float | None]], unit: str, centre: float | None = 0.0,
            reverse: bool = False) -> str:
    """A matrix with its values written in the cells; ``centre`` diverging (changes)."""
    fig, ax = plt.subplots(figsize=(1.6 + 0.8 * len(columns), 1.2 + 0.42 * len(rows)))
    data = [[math.nan if v is None else v for v in row] for row in values]
    finite = [v for row in data for v in row if not math.isnan(v)] or [0.0]
    cmap = plt.get_cmap("RdBu" if not reverse else "RdBu_r")
    if centre is not None:
        span = max(abs(min(finite) - centre), abs(max(finite) - centre)) or 1.0
        image = ax.imshow(data, cmap=cmap, vmin=centre - span, vmax=centre + span,
                          aspect="auto")
    else:
        image = ax.imshow(data, cmap="viridis", aspect="auto")
    for i, row in enumerate(values):
        for j, value in enumerate(row):
            if value is not None:
                ax.text(j, i, f"{value:.3g}", ha="center", va="center", fontsize=10)
    ax.set_xticks(range(len(columns)), columns, rotation=40, ha="right")
    ax.set_yticks(range(len(rows)), rows)
    ax.grid(False)
    ax.set_title(title, loc="left")
    fig.colorbar(image, ax=ax, label=unit, shrink=0.8)
    return _tagged(_svg(fig, title), "heatmap", 1)

