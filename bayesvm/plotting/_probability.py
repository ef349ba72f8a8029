"""Figures of predictive class probabilities with error bars (Sollich 2002, Fig. 2).

Part of :mod:`bayesvm.plotting`, which re-exports every public name.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from ._helpers import axes_or_new, cell_edges, float_vector, training_points

__all__ = ["plot_probability_1d", "plot_probability_2d"]


def plot_probability_1d(
    x,
    p_map,
    p_averaged,
    p_lower,
    p_upper,
    *,
    p_true=None,
    X_train=None,
    y_train=None,
    ax: Axes | None = None,
) -> Figure:
    """Class probability P(y = +1 | x) along a 1-D input with its error-bar band.

    Draws the MAP plug-in and the posterior-averaged predictions, the band
    between the probabilities at the error-bar ends (``p_lower``, ``p_upper``,
    e.g. at theta*(x) -+ sigma(x)), the true probability when known and the
    training points as ticks at 0 (y = -1) and 1 (y = +1) (Sollich 2002,
    Fig. 2 bottom right). Points are sorted by x.
    """
    x = float_vector(x, "x")
    n = x.shape[0]
    order = np.argsort(x)
    ax = axes_or_new(ax, figsize=(7.6, 4.2))
    lower, upper = float_vector(p_lower, "p_lower", n), float_vector(p_upper, "p_upper", n)
    ax.fill_between(x[order], lower[order], upper[order], color="C0", alpha=0.25, lw=0, label="error bars")
    if p_true is not None:
        ax.plot(x[order], float_vector(p_true, "p_true", n)[order], color="black", lw=2.0, label="true probability")
    ax.plot(x[order], float_vector(p_map, "p_map", n)[order], color="C3", ls="--", lw=1.6, label="MAP plug-in")
    ax.plot(x[order], float_vector(p_averaged, "p_averaged", n)[order], color="C0", lw=1.8, label="posterior average")
    train = training_points(X_train, y_train, 1)
    if train is not None:
        X, y = train
        ax.plot(X[y > 0, 0], np.ones(np.sum(y > 0)), "|", color="black", ms=10, mew=1.2, label="training $y=+1$")
        ax.plot(X[y < 0, 0], np.zeros(np.sum(y < 0)), "|", color="0.45", ms=10, mew=1.2, label="training $y=-1$")
    ax.set_ylim(-0.05, 1.05)
    ax.set_xlabel("$x$")
    ax.set_ylabel(r"$P(y=+1\,|\,x)$")
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize="small")
    return ax.figure


def _scatter_training(ax: Axes, train: tuple[np.ndarray, np.ndarray] | None) -> None:
    if train is None:
        return
    X, y = train
    ax.scatter(X[y > 0, 0], X[y > 0, 1], marker="o", s=22, c="white", edgecolors="black", label="$y=+1$")
    ax.scatter(X[y < 0, 0], X[y < 0, 1], marker="X", s=26, c="black", edgecolors="white", lw=0.5, label="$y=-1$")


def plot_probability_2d(
    grid_x,
    grid_y,
    p,
    *,
    band_width=None,
    X_train=None,
    y_train=None,
    ax: Axes | Sequence[Axes] | None = None,
) -> Figure:
    """Class probability P(y = +1 | x) over a 2-D input grid with its 0.5 contour.

    ``p`` (and ``band_width``, e.g. p_upper - p_lower) have shape
    ``(len(grid_y), len(grid_x))``. With ``band_width`` a second panel shows
    the error-bar width with the same contour; ``ax`` is then a pair of Axes.
    Training points are overlaid on every panel.
    """
    gx, gy = float_vector(grid_x, "grid_x"), float_vector(grid_y, "grid_y")
    shape = (gy.shape[0], gx.shape[0])
    P = np.asarray(p, dtype=np.float64)
    if P.shape != shape:
        raise ValueError(f"p must have shape (len(grid_y), len(grid_x)) = {shape}; got {P.shape}")
    panels = [(P, "RdBu_r", (0.0, 1.0), r"$P(y=+1\,|\,x)$", "class probability")]
    if band_width is not None:
        W = np.asarray(band_width, dtype=np.float64)
        if W.shape != shape:
            raise ValueError(f"band_width must have the shape of p {shape}; got {W.shape}")
        panels.append((W, "viridis", (0.0, None), "error-bar width", "error-bar width"))
    if ax is None:
        _, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.2), squeeze=False, layout="constrained")
        axes = list(axes[0])
    else:
        axes = [ax] if isinstance(ax, Axes) else list(ax)
        if len(axes) != len(panels) or not all(isinstance(a, Axes) for a in axes):
            wanted = "one Axes" if len(panels) == 1 else "a pair of Axes"
            raise ValueError(f"ax must be {wanted} for these panels; got {ax!r}")
    x_edges, y_edges = cell_edges(gx, "grid_x", False), cell_edges(gy, "grid_y", False)
    train = training_points(X_train, y_train, 2)
    contour = Line2D([], [], color="black", lw=1.5, label="$P=0.5$")
    for (values, cmap, (vmin, vmax), cbar_label, title), panel in zip(panels, axes):
        mesh = panel.pcolormesh(x_edges, y_edges, values, cmap=cmap, vmin=vmin, vmax=vmax, shading="flat")
        panel.figure.colorbar(mesh, ax=panel, label=cbar_label)
        if np.nanmin(P) < 0.5 < np.nanmax(P):
            panel.contour(gx, gy, P, levels=[0.5], colors="black", linewidths=1.5)
        _scatter_training(panel, train)
        panel.set_xlabel("$x_1$")
        panel.set_ylabel("$x_2$")
        panel.set_title(title, fontsize="medium")
        handles, _ = panel.get_legend_handles_labels()
        panel.legend(handles=[contour, *handles], loc="upper right", fontsize="small", framealpha=0.85)
    return axes[0].figure

