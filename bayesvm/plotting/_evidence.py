"""Figures of the evidence: its two terms along C and evidence surfaces (Sollich 2002, Fig. 2).

Part of :mod:`bayesvm.plotting`, which re-exports every public name.
"""

from __future__ import annotations

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ._helpers import axes_or_new, cell_edges, float_vector, optional_float_vector
from .._validation import check_positive

__all__ = ["plot_evidence_curve", "plot_evidence_heatmap"]


def plot_evidence_curve(
    C,
    naive,
    log_normalization,
    total,
    *,
    se_naive=None,
    se_normalization=None,
    se_total=None,
    true_C: float | None = None,
    ax: Axes | None = None,
) -> Figure:
    """The evidence and its two terms against C (log axis) at fixed C k0.

    Draws the naive evidence ln Q(D), the normalisation ln N(D) and the
    evidence ln P(D) = ln Q(D) - ln N(D), each with a +-1 standard-error band
    when its ``se_*`` is given, marks the maximum of ``total`` and, when
    given, the true C (Sollich 2002, Fig. 2 top right). Values are plotted as
    given (pass per-example values to compare data sets of different size).
    """
    C = float_vector(C, "C")
    n = C.shape[0]
    if np.any(C <= 0):
        raise ValueError("C must be > 0 (it is plotted on a log axis)")
    series = [
        (
            r"naive $\ln Q(D)$",
            float_vector(naive, "naive", n),
            optional_float_vector(se_naive, "se_naive", n),
            "C0",
            "--",
        ),
        (
            r"normalisation $\ln N(D)$",
            float_vector(log_normalization, "log_normalization", n),
            optional_float_vector(se_normalization, "se_normalization", n),
            "C1",
            ":",
        ),
        (
            r"evidence $\ln P(D)$",
            float_vector(total, "total", n),
            optional_float_vector(se_total, "se_total", n),
            "C2",
            "-",
        ),
    ]
    order = np.argsort(C)
    ax = axes_or_new(ax, figsize=(6.4, 4.2))
    for label, values, se, colour, style in series:
        ax.plot(C[order], values[order], color=colour, ls=style, lw=1.8, label=label)
        if se is not None:
            ax.fill_between(C[order], (values - se)[order], (values + se)[order], color=colour, alpha=0.2, lw=0)
    total_values = series[2][1]
    if np.any(np.isfinite(total_values)):
        best = int(np.nanargmax(np.where(np.isfinite(total_values), total_values, np.nan)))
        ax.plot(C[best], total_values[best], marker="*", ms=14, color="C2", mec="black", ls="none",
                label=f"maximum at $C$ = {C[best]:.3g}")
    if true_C is not None:
        true_C = check_positive(true_C, "true_C")
        ax.axvline(true_C, color="0.3", ls="-.", lw=1.2, label=f"true $C$ = {true_C:.3g}")
    ax.set_xscale("log")
    ax.set_xlabel(r"$C$ (at fixed $C\,k_0$)")
    ax.set_ylabel("log evidence (nats)")
    ax.legend(fontsize="small", loc="best")
    return ax.figure


def plot_evidence_heatmap(
    x_values,
    y_values,
    values,
    *,
    x_label: str,
    y_label: str,
    log_x: bool = False,
    log_y: bool = False,
    mark_max: bool = True,
    colorbar_label: str = "log evidence (nats)",
    ax: Axes | None = None,
) -> Figure:
    """A surface over two hyperparameters (e.g. the evidence over C k0 and length scale) with a colour bar.

    ``values`` has shape ``(len(y_values), len(x_values))``; both coordinate
    vectors must be strictly increasing (cells are centred on them, with
    geometric edges on a log axis). NaN cells are left blank. With
    ``mark_max`` the largest finite value is marked with a star, whose legend
    entry names both coordinates with the axis labels ("maximum: x_label =
    ..., y_label = ...").
    """
    x = float_vector(x_values, "x_values")
    y = float_vector(y_values, "y_values")
    Z = np.asarray(values, dtype=np.float64)
    if Z.shape != (y.shape[0], x.shape[0]):
        raise ValueError(
            f"values must have shape (len(y_values), len(x_values)) = {(y.shape[0], x.shape[0])}; got {Z.shape}"
        )
    x_edges = cell_edges(x, "x_values", log_x)
    y_edges = cell_edges(y, "y_values", log_y)
    ax = axes_or_new(ax, figsize=(6.0, 4.6))
    mesh = ax.pcolormesh(x_edges, y_edges, np.ma.masked_invalid(Z), cmap="viridis", shading="flat")
    ax.figure.colorbar(mesh, ax=ax, label=colorbar_label)
    if log_x:
        ax.set_xscale("log")
    if log_y:
        ax.set_yscale("log")
    if mark_max and np.any(np.isfinite(Z)):
        i, j = np.unravel_index(np.nanargmax(np.where(np.isfinite(Z), Z, np.nan)), Z.shape)
        ax.plot(x[j], y[i], marker="*", ms=16, color="white", mec="black", ls="none",
                label=f"maximum: {x_label} = {x[j]:.3g}, {y_label} = {y[i]:.3g}")
        ax.legend(loc="best", fontsize="small", framealpha=0.85)
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    return ax.figure

