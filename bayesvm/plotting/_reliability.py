"""Reliability diagrams of several calibrators, with the histograms of their predictions.

Part of :mod:`bayesvm.plotting`, which re-exports every public name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ._helpers import float_vector

__all__ = ["plot_reliability"]


def _histogram_edges(bins, curves_bins: int) -> np.ndarray:
    """Edges of the histogram cells of :func:`plot_reliability` (``bins`` as documented there)."""
    if bins is None:
        bins = max(10, curves_bins)
    if isinstance(bins, (int, np.integer)) and not isinstance(bins, bool):
        if bins < 1:
            raise ValueError(f"bins must be an integer >= 1 or strictly increasing edges; got {bins!r}")
        return np.linspace(0.0, 1.0, int(bins) + 1)
    edges = float_vector(bins, "bins")
    if edges.shape[0] < 2 or not np.all(np.diff(edges) > 0) or not np.all(np.isfinite(edges)):
        raise ValueError("bins must be an integer >= 1 or at least 2 finite, strictly increasing edges")
    return edges


def _nonempty_bins(curves) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """name -> (mean_predicted, observed_frequency, counts) of the bins with points and finite values."""
    if not isinstance(curves, Mapping) or not curves:
        raise ValueError("curves must be a non-empty dict name -> (mean_predicted, observed_frequency, counts)")
    checked = {}
    for name, curve in curves.items():
        try:
            mean, freq, counts = curve
        except (TypeError, ValueError):
            raise ValueError(f"curves[{name!r}] must be (mean_predicted, observed_frequency, counts)") from None
        mean = float_vector(mean, f"mean_predicted of {name!r}")
        freq = float_vector(freq, f"observed_frequency of {name!r}", mean.shape[0])
        counts = float_vector(counts, f"counts of {name!r}", mean.shape[0])
        keep = (counts > 0) & np.isfinite(mean) & np.isfinite(freq)
        checked[name] = (mean[keep], freq[keep], counts[keep])
    return checked


def plot_reliability(
    curves: Mapping[str, tuple],
    *,
    bins: int | Sequence[float] | None = None,
    ax: Axes | Sequence[Axes] | None = None,
) -> Figure:
    """Reliability diagrams of several calibrators, with the histograms of their predictions.

    ``curves`` maps a name to ``(mean_predicted, observed_frequency, counts)``
    per bin (what ``bayesvm.metrics.reliability_curve`` returns); empty bins
    (count 0 or non-finite values) are skipped. The top panel shows observed
    against predicted frequency with +-1 binomial standard errors
    sqrt(f (1 - f) / count) and the diagonal of perfect calibration.

    The bottom panel shows, per method, the fraction of test points in each
    bin as a grouped bar chart: the bins are the cells given by ``bins`` (an
    integer number of equal-width cells on [0, 1], or the cell edges; by
    default the larger of 10 and the most bins any curve has), a curve's bin
    is put in the cell that holds its mean predicted probability (cells
    include their right edge, as in ``reliability_curve``), and within a cell
    the methods stand side by side in the order of ``curves``, each in its
    own slot, so bars never overlap. For curves from ``reliability_curve``
    with ``strategy="uniform"``, pass its ``n_bins`` (the default reproduces
    ``n_bins=10``) and the cells are its bins; with fewer cells than bins
    (e.g. quantile bins) the bins sharing a cell are added up.

    ``ax`` may be a pair of Axes (diagram, histogram) or a single Axes
    (diagram only).
    """
    checked = _nonempty_bins(curves)
    edges = _histogram_edges(bins, max(mean.shape[0] for mean, _, _ in checked.values()))
    if ax is None:
        _, (diagram, hist) = plt.subplots(
            2, 1, figsize=(5.6, 6.2), sharex=True, height_ratios=(3, 1), layout="constrained"
        )
    elif isinstance(ax, Axes):
        diagram, hist = ax, None
    else:
        diagram, hist = ax
    diagram.plot([0.0, 1.0], [0.0, 1.0], color="0.5", ls="--", lw=1.0, label="perfectly calibrated")
    n_cells, n_curves = edges.shape[0] - 1, len(checked)
    # each cell: a margin of 10% of its width on either side, the rest split into one slot per method
    slot = 0.8 * np.diff(edges) / n_curves
    for k, (name, (mean, freq, counts)) in enumerate(checked.items()):
        colour = f"C{k % 10}"
        se = np.sqrt(freq * (1.0 - freq) / counts)
        diagram.errorbar(mean, freq, yerr=se, color=colour, marker="o", ms=4, lw=1.5, capsize=2, label=name)
        if hist is not None and counts.sum() > 0:
            cell = np.clip(np.searchsorted(edges, mean, side="left") - 1, 0, n_cells - 1)
            fraction = np.bincount(cell, weights=counts, minlength=n_cells) / counts.sum()
            filled = np.flatnonzero(fraction > 0)
            left = edges[filled] + 0.1 * np.diff(edges)[filled] + k * slot[filled]
            hist.bar(left, fraction[filled], width=slot[filled], align="edge", color=colour, edgecolor="none",
                     label=name)
    diagram.set_xlim(min(-0.03, edges[0]), max(1.03, edges[-1]))
    diagram.set_ylim(-0.03, 1.03)
    diagram.set_ylabel("observed frequency of $y=+1$")
    diagram.legend(loc="upper left", fontsize="small")
    if hist is None:
        diagram.set_xlabel("mean predicted probability")
    else:
        hist.set_xlim(diagram.get_xlim())
        hist.set_xlabel("mean predicted probability")
        hist.set_ylabel("fraction of points")
    return diagram.figure

