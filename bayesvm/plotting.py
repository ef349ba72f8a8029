"""Figures for the Bayesian reading of the SVM (matplotlib only).

Every function draws on plain arrays or bayesvm kernels, returns the
:class:`~matplotlib.figure.Figure` it drew on (the figure of ``ax`` when an
Axes is passed in) and never calls ``plt.show()``; all of them work with the
non-interactive Agg backend. New figures use constrained layout.

* :func:`plot_prior_sample`, :func:`plot_prior_grid`,
  :func:`plot_prior_functions_1d` -- samples of the GP prior and the label
  distribution they induce (Sollich 2002, Fig. 1).
* :func:`plot_evidence_curve`, :func:`plot_evidence_heatmap` -- the evidence
  and its two terms along C, and evidence surfaces (Sollich 2002, Fig. 2).
* :func:`plot_probability_1d`, :func:`plot_probability_2d` -- predictive
  class probabilities with error bars (Sollich 2002, Fig. 2).
* :func:`plot_reliability` -- reliability diagrams of several calibrators.

Reference: P. Sollich, "Bayesian methods for support vector machines:
evidence and predictive class probabilities", Machine Learning 46 (2002).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from . import model
from ._linalg import psd_cholesky
from ._precision import float64
from ._validation import check_kernel, check_labels, check_positive
from .kernels import Kernel

__all__ = [
    "label_grey_level",
    "plot_evidence_curve",
    "plot_evidence_heatmap",
    "plot_prior_functions_1d",
    "plot_prior_grid",
    "plot_prior_sample",
    "plot_probability_1d",
    "plot_probability_2d",
    "plot_reliability",
    "sample_prior",
    "save_figure",
    "unit_square_grid",
]

_LABEL_PATCHES = (
    Patch(facecolor="black", edgecolor="black", label=r"$Q(+1\,|\,\theta)$: label $+1$"),
    Patch(facecolor="white", edgecolor="black", label=r"$Q(-1\,|\,\theta)$: label $-1$"),
    Patch(facecolor="0.5", edgecolor="black", label=r"$1-\nu(\theta)$: don't know"),
)


# ---------------------------------------------------------------------------
# small shared helpers


def _new_axes(ax: Axes | None, **figure_kw) -> Axes:
    """``ax`` itself, or the single Axes of a new constrained-layout figure."""
    if ax is not None:
        if not isinstance(ax, Axes):
            raise ValueError(f"ax must be a matplotlib Axes or None; got {type(ax).__name__}")
        return ax
    _, new = plt.subplots(layout="constrained", **figure_kw)
    return new


def _vector(values, name: str, length: int | None = None) -> np.ndarray:
    """A 1-D float64 array, optionally of a given length."""
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a 1-D array of numbers; got {type(values).__name__}") from None
    if arr.ndim == 2 and 1 in arr.shape:
        arr = arr.ravel()
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D; got shape {arr.shape}")
    if length is not None and arr.shape[0] != length:
        raise ValueError(f"{name} has {arr.shape[0]} entries but {length} are needed to match the other arrays")
    return arr


def _optional_vector(values, name: str, length: int) -> np.ndarray | None:
    return None if values is None else _vector(values, name, length)


def _cell_edges(centres: np.ndarray, name: str, log: bool) -> np.ndarray:
    """Cell edges around strictly increasing centres (geometric midpoints on a log axis)."""
    if centres.shape[0] < 2:
        raise ValueError(f"{name} needs at least 2 values to draw cells; got {centres.shape[0]}")
    if not np.all(np.diff(centres) > 0):
        raise ValueError(f"{name} must be strictly increasing")
    if log and np.any(centres <= 0):
        raise ValueError(f"{name} must be > 0 on a log axis")
    c = np.log(centres) if log else centres
    mid = 0.5 * (c[1:] + c[:-1])
    edges = np.concatenate([[c[0] - (mid[0] - c[0])], mid, [c[-1] + (c[-1] - mid[-1])]])
    return np.exp(edges) if log else edges


def _single_kernel(kernel) -> Kernel:
    """A valid kernel with scalar hyperparameters (a batch of kernels cannot be drawn as one picture)."""
    kernel = check_kernel(kernel)
    batched = [k for k, v in kernel.hyperparameters.items() if np.ndim(v) != 0]
    if batched:
        raise ValueError(f"plotting takes a single kernel; hyperparameters {batched} are arrays (a batch of kernels)")
    return kernel


def _kernel_label(kernel: Kernel) -> str:
    """Short description, e.g. ``RBF(length_scale=0.1)``: shape hyperparameters only."""
    shape = {k: v for k, v in kernel.hyperparameters.items() if k not in ("amplitude", "offset")}
    inner = ", ".join(f"{k}={float(np.asarray(v)):g}" for k, v in shape.items())
    return f"{type(kernel).__name__}({inner})"


def _training_points(X_train, y_train, n_features: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Training inputs as (n, n_features) and labels in {-1, +1}, or None when not given."""
    if X_train is None and y_train is None:
        return None
    if X_train is None or y_train is None:
        raise ValueError("X_train and y_train must be given together (or both left out)")
    X = np.asarray(X_train, dtype=np.float64)
    if n_features == 1 and X.ndim == 1:
        X = X[:, None]
    if X.ndim != 2 or X.shape[1] != n_features:
        raise ValueError(f"X_train must have shape (n_samples, {n_features}); got {X.shape}")
    y, _ = check_labels(y_train, X.shape[0])
    return X, y


# ---------------------------------------------------------------------------
# prior samples (Sollich 2002, Fig. 1)


@float64
def sample_prior(
    kernel: Kernel, X, n_samples: int = 1, random_state: int | np.random.Generator | None = 0
) -> np.ndarray:
    """Draws of the GP prior theta ~ N(0, K(X, X)) at the rows of ``X``.

    theta = L z with L the (jittered) lower Cholesky factor of K and
    z ~ N(0, I); returns an array of shape ``(n_samples, len(X))``. The same
    ``random_state`` gives the same z for every kernel (common random numbers),
    so panels that differ only in amplitude show the same function rescaled.
    """
    kernel = _single_kernel(kernel)
    if not (isinstance(n_samples, (int, np.integer)) and n_samples >= 1):
        raise ValueError(f"n_samples must be an integer >= 1; got {n_samples!r}")
    X = np.asarray(X, dtype=np.float64)
    L = psd_cholesky(kernel(X))
    z = np.random.default_rng(random_state).standard_normal((X.shape[0], n_samples))
    return (L @ z).T


def unit_square_grid(resolution: int) -> tuple[np.ndarray, np.ndarray]:
    """``(x, X)``: ``resolution`` points on [0, 1] and the grid over the unit square.

    ``X`` has shape ``(resolution**2, 2)`` and ``X.reshape(r, r, 2)[i, j] ==
    (x[j], x[i])``, i.e. row i of a reshaped image is x2 = x[i] (image order
    with ``origin="lower"``).
    """
    if not (isinstance(resolution, (int, np.integer)) and resolution >= 2):
        raise ValueError(f"resolution must be an integer >= 2; got {resolution!r}")
    x = np.linspace(0.0, 1.0, resolution)
    x1, x2 = np.meshgrid(x, x, indexing="xy")
    return x, np.column_stack([x1.ravel(), x2.ravel()])


@float64
def label_grey_level(theta, C: float) -> np.ndarray:
    """Grey level (0 black, 1 white) showing the label distribution at theta.

    Black is the probability Q(+1|theta) of label +1, white the probability
    Q(-1|theta) of label -1, and the "don't know" probability 1 - nu(theta)
    is split evenly into grey:

        level = Q(-1|theta) + (1 - nu(theta)) / 2 = (1 + Q(-1|theta) - Q(+1|theta)) / 2,

    with Q(y|theta) = kappa(C) exp(-C max(0, 1 - y theta)) (Sollich 2002, Sec. 2).
    """
    C = check_positive(C, "C")
    theta = np.asarray(theta, dtype=np.float64)
    q_plus = np.exp(np.asarray(model.log_label_likelihood(1.0, theta, C)))
    q_minus = np.exp(np.asarray(model.log_label_likelihood(-1.0, theta, C)))
    return 0.5 * (1.0 + q_minus - q_plus)


def _draw_prior_image(ax: Axes, kernel: Kernel, C: float, resolution: int, random_state) -> None:
    _, X = unit_square_grid(resolution)
    theta = sample_prior(kernel, X, 1, random_state)[0].reshape(resolution, resolution)
    half = 0.5 / (resolution - 1)
    ax.imshow(
        label_grey_level(theta, C),
        cmap="gray",
        vmin=0.0,
        vmax=1.0,
        origin="lower",
        extent=(-half, 1.0 + half, -half, 1.0 + half),
        interpolation="bilinear",
    )
    ax.set_xlabel("$x_1$")
    ax.set_ylabel("$x_2$")


@float64
def plot_prior_sample(
    kernel: Kernel,
    C: float,
    *,
    ax: Axes | None = None,
    resolution: int = 40,
    random_state: int | np.random.Generator | None = 0,
) -> Figure:
    """One draw theta of the GP prior on the unit square and the label distribution it induces.

    Each pixel shows the output distribution at that input: black for
    Q(+1|theta), white for Q(-1|theta), grey for the "don't know" probability
    1 - nu(theta) (see :func:`label_grey_level`), so the gaps |theta| < 1
    between the classes show grey (Sollich 2002, Fig. 1). The sample is drawn
    on a ``resolution x resolution`` grid via a jittered Cholesky factor of
    the grid's Gram matrix.
    """
    C = check_positive(C, "C")
    kernel = _single_kernel(kernel)
    ax = _new_axes(ax, figsize=(5.6, 4.0))
    _draw_prior_image(ax, kernel, C, resolution, random_state)
    ax.set_title(f"{_kernel_label(kernel)}\n$C$ = {C:g}, $k_0$ = {float(kernel.amplitude):g}", fontsize="medium")
    ax.legend(handles=list(_LABEL_PATCHES), loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize="small")
    return ax.figure


@float64
def plot_prior_grid(
    kernels: Mapping[str, Kernel] | Sequence[Kernel],
    Cs: float | Sequence[float] = 1.0,
    amplitudes: float | Sequence[float] | None = None,
    *,
    resolution: int = 30,
    random_state: int | np.random.Generator | None = 0,
) -> Figure:
    """Prior samples (as in :func:`plot_prior_sample`) for several kernels and (C, k0) settings.

    Rows are the kernels (a dict gives the row names). Columns are the pairs
    ``(Cs[j], amplitudes[j])``; a scalar is used in every column, and
    ``amplitudes=None`` keeps each kernel's own amplitude. The same
    ``random_state`` is used in every panel, so along a row the panels show
    the same draw z through different kernel scales and C.
    """
    if isinstance(kernels, Mapping):
        rows = [(str(name), _single_kernel(k)) for name, k in kernels.items()]
    else:
        rows = [(_kernel_label(k), k) for k in map(_single_kernel, kernels)]
    if not rows:
        raise ValueError("kernels is empty; give at least one kernel (a list or a dict name -> kernel)")
    Cs_arr = np.atleast_1d(np.asarray(Cs, dtype=np.float64))
    amp_arr = np.atleast_1d(np.asarray(np.nan if amplitudes is None else amplitudes, dtype=np.float64))
    if Cs_arr.ndim != 1 or amp_arr.ndim != 1 or (Cs_arr.size > 1 and amp_arr.size > 1 and Cs_arr.size != amp_arr.size):
        raise ValueError(
            "Cs and amplitudes must be scalars or 1-D sequences of equal length; "
            f"got {Cs_arr.size} and {amp_arr.size} values"
        )
    Cs_arr, amp_arr = np.broadcast_arrays(Cs_arr, amp_arr)
    for C in Cs_arr:
        check_positive(C, "each C")
    n_rows, n_cols = len(rows), Cs_arr.size
    fig, axes = plt.subplots(
        n_rows,
        n_cols,
        figsize=(2.3 * n_cols + 0.5, 2.4 * n_rows + 0.6),
        sharex=True,
        sharey=True,
        squeeze=False,
        layout="constrained",
    )
    for (name, kernel), row in zip(rows, axes):
        for C, amplitude, ax in zip(Cs_arr, amp_arr, row):
            k = kernel if np.isnan(amplitude) else kernel.replace(amplitude=float(amplitude))
            _draw_prior_image(ax, k, float(C), resolution, random_state)
            ax.set_title(f"{name}\n$C$ = {C:g}, $k_0$ = {float(k.amplitude):g}", fontsize="small")
            ax.label_outer()
    fig.legend(handles=list(_LABEL_PATCHES), loc="outside lower center", ncols=3, fontsize="small")
    return fig


@float64
def plot_prior_functions_1d(
    kernel: Kernel,
    C: float,
    n_samples: int = 5,
    *,
    ax: Axes | None = None,
    resolution: int = 200,
    random_state: int | np.random.Generator | None = 0,
) -> Figure:
    """Sample functions theta(x) of the GP prior on [0, 1] with the margins theta = +-1.

    The band |theta| < 1 is shaded: there the model emits no label with
    probability 1 - nu(theta), largest at theta = 0 where it equals
    1 - 2 kappa(C) exp(-C) (the value given in the legend).
    """
    C = check_positive(C, "C")
    kernel = _single_kernel(kernel)
    if not (isinstance(resolution, (int, np.integer)) and resolution >= 2):
        raise ValueError(f"resolution must be an integer >= 2; got {resolution!r}")
    x = np.linspace(0.0, 1.0, resolution)
    theta = sample_prior(kernel, x[:, None], n_samples, random_state)
    dont_know = -float(np.expm1(model.log_nu(0.0, C)))
    ax = _new_axes(ax, figsize=(7.8, 4.0))
    ax.axhspan(-1.0, 1.0, color="0.85", zorder=0, label=rf"gap $|\theta|<1$: don't know up to {dont_know:.2f}")
    for i, sample in enumerate(theta):
        ax.plot(x, sample, color=f"C{i % 10}", lw=1.5, label="prior samples" if i == 0 else "_nolegend_")
    ax.axhline(1.0, color="black", ls="--", lw=1.0, label=r"margins $\theta=\pm 1$")
    ax.axhline(-1.0, color="black", ls="--", lw=1.0, label="_nolegend_")
    ax.axhline(0.0, color="black", ls=":", lw=1.0, label=r"decision boundary $\theta=0$")
    ax.set_xlim(0.0, 1.0)
    ax.set_xlabel("$x$")
    ax.set_ylabel(r"$\theta(x)$")
    ax.set_title(f"{_kernel_label(kernel)}, $C$ = {C:g}, $k_0$ = {float(kernel.amplitude):g}", fontsize="medium")
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize="small")
    return ax.figure


# ---------------------------------------------------------------------------
# evidence (Sollich 2002, Fig. 2)


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
    C = _vector(C, "C")
    n = C.shape[0]
    if np.any(C <= 0):
        raise ValueError("C must be > 0 (it is plotted on a log axis)")
    series = [
        (r"naive $\ln Q(D)$", _vector(naive, "naive", n), _optional_vector(se_naive, "se_naive", n), "C0", "--"),
        (
            r"normalisation $\ln N(D)$",
            _vector(log_normalization, "log_normalization", n),
            _optional_vector(se_normalization, "se_normalization", n),
            "C1",
            ":",
        ),
        (r"evidence $\ln P(D)$", _vector(total, "total", n), _optional_vector(se_total, "se_total", n), "C2", "-"),
    ]
    order = np.argsort(C)
    ax = _new_axes(ax, figsize=(6.4, 4.2))
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
    x = _vector(x_values, "x_values")
    y = _vector(y_values, "y_values")
    Z = np.asarray(values, dtype=np.float64)
    if Z.shape != (y.shape[0], x.shape[0]):
        raise ValueError(
            f"values must have shape (len(y_values), len(x_values)) = {(y.shape[0], x.shape[0])}; got {Z.shape}"
        )
    x_edges = _cell_edges(x, "x_values", log_x)
    y_edges = _cell_edges(y, "y_values", log_y)
    ax = _new_axes(ax, figsize=(6.0, 4.6))
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


# ---------------------------------------------------------------------------
# predictive probabilities with error bars (Sollich 2002, Fig. 2)


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
    x = _vector(x, "x")
    n = x.shape[0]
    order = np.argsort(x)
    ax = _new_axes(ax, figsize=(7.6, 4.2))
    lower, upper = _vector(p_lower, "p_lower", n), _vector(p_upper, "p_upper", n)
    ax.fill_between(x[order], lower[order], upper[order], color="C0", alpha=0.25, lw=0, label="error bars")
    if p_true is not None:
        ax.plot(x[order], _vector(p_true, "p_true", n)[order], color="black", lw=2.0, label="true probability")
    ax.plot(x[order], _vector(p_map, "p_map", n)[order], color="C3", ls="--", lw=1.6, label="MAP plug-in")
    ax.plot(x[order], _vector(p_averaged, "p_averaged", n)[order], color="C0", lw=1.8, label="posterior average")
    train = _training_points(X_train, y_train, 1)
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
    gx, gy = _vector(grid_x, "grid_x"), _vector(grid_y, "grid_y")
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
    x_edges, y_edges = _cell_edges(gx, "grid_x", False), _cell_edges(gy, "grid_y", False)
    train = _training_points(X_train, y_train, 2)
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


# ---------------------------------------------------------------------------
# reliability diagrams


def _histogram_edges(bins, curves_bins: int) -> np.ndarray:
    """Edges of the histogram cells of :func:`plot_reliability` (``bins`` as documented there)."""
    if bins is None:
        bins = max(10, curves_bins)
    if isinstance(bins, (int, np.integer)) and not isinstance(bins, bool):
        if bins < 1:
            raise ValueError(f"bins must be an integer >= 1 or strictly increasing edges; got {bins!r}")
        return np.linspace(0.0, 1.0, int(bins) + 1)
    edges = _vector(bins, "bins")
    if edges.shape[0] < 2 or not np.all(np.diff(edges) > 0) or not np.all(np.isfinite(edges)):
        raise ValueError("bins must be an integer >= 1 or at least 2 finite, strictly increasing edges")
    return edges


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
    if not isinstance(curves, Mapping) or not curves:
        raise ValueError("curves must be a non-empty dict name -> (mean_predicted, observed_frequency, counts)")
    checked = {}
    for name, curve in curves.items():
        try:
            mean, freq, counts = curve
        except (TypeError, ValueError):
            raise ValueError(f"curves[{name!r}] must be (mean_predicted, observed_frequency, counts)") from None
        mean = _vector(mean, f"mean_predicted of {name!r}")
        freq = _vector(freq, f"observed_frequency of {name!r}", mean.shape[0])
        counts = _vector(counts, f"counts of {name!r}", mean.shape[0])
        keep = (counts > 0) & np.isfinite(mean) & np.isfinite(freq)
        checked[name] = (mean[keep], freq[keep], counts[keep])
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


def save_figure(fig: Figure, path, *, dpi: int = 90) -> Path:
    """Write ``fig`` to ``path`` (format from the suffix), close it, and return the path."""
    path = Path(path)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path
