"""Figures of the GP prior: sample functions and the label distribution they induce (Sollich 2002, Fig. 1).

Part of :mod:`bayesvm.plotting`, which re-exports every public name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from .. import model
from ._helpers import axes_or_new, kernel_label, single_kernel
from .._linalg import psd_factor
from .._precision import float64
from .._validation import check_count, check_positive
from ..kernels import Kernel

__all__ = [
    "label_grey_level",
    "plot_prior_functions_1d",
    "plot_prior_grid",
    "plot_prior_sample",
    "sample_prior",
    "unit_square_grid",
]

_LABEL_PATCHES = (
    Patch(facecolor="black", edgecolor="black", label=r"$Q(+1\,|\,\theta)$: label $+1$"),
    Patch(facecolor="white", edgecolor="black", label=r"$Q(-1\,|\,\theta)$: label $-1$"),
    Patch(facecolor="0.5", edgecolor="black", label=r"$1-\nu(\theta)$: don't know"),
)



@float64
def sample_prior(
    kernel: Kernel, X, n_samples: int = 1, random_state: int | np.random.Generator | None = 0
) -> np.ndarray:
    """Draws of the GP prior theta ~ N(0, K(X, X)) at the rows of ``X``.

    theta = L z with L a square-root factor of K (:func:`bayesvm._linalg.psd_factor`, no jitter) and
    z ~ N(0, I); returns an array of shape ``(n_samples, len(X))``. The same
    ``random_state`` gives the same z for every kernel (common random numbers),
    so panels that differ only in amplitude show the same function rescaled.
    """
    kernel = single_kernel(kernel)
    n_samples = check_count(n_samples, "n_samples", 1)
    X = np.asarray(X, dtype=np.float64)
    L = psd_factor(kernel(X))
    z = np.random.default_rng(random_state).standard_normal((X.shape[0], n_samples))
    return (L @ z).T


def unit_square_grid(resolution: int) -> tuple[np.ndarray, np.ndarray]:
    """``(x, X)``: ``resolution`` points on [0, 1] and the grid over the unit square.

    ``X`` has shape ``(resolution**2, 2)`` and ``X.reshape(r, r, 2)[i, j] ==
    (x[j], x[i])``, i.e. row i of a reshaped image is x2 = x[i] (image order
    with ``origin="lower"``).
    """
    resolution = check_count(resolution, "resolution", 2)
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
    kernel = single_kernel(kernel)
    ax = axes_or_new(ax, figsize=(5.6, 4.0))
    _draw_prior_image(ax, kernel, C, resolution, random_state)
    ax.set_title(f"{kernel_label(kernel)}\n$C$ = {C:g}, $k_0$ = {float(kernel.amplitude):g}", fontsize="medium")
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
        rows = [(str(name), single_kernel(k)) for name, k in kernels.items()]
    else:
        rows = [(kernel_label(k), k) for k in map(single_kernel, kernels)]
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
    kernel = single_kernel(kernel)
    resolution = check_count(resolution, "resolution", 2)
    x = np.linspace(0.0, 1.0, resolution)
    theta = sample_prior(kernel, x[:, None], n_samples, random_state)
    dont_know = -float(np.expm1(model.log_nu(0.0, C)))
    ax = axes_or_new(ax, figsize=(7.8, 4.0))
    ax.axhspan(-1.0, 1.0, color="0.85", zorder=0, label=rf"gap $|\theta|<1$: don't know up to {dont_know:.2f}")
    for i, sample in enumerate(theta):
        ax.plot(x, sample, color=f"C{i % 10}", lw=1.5, label="prior samples" if i == 0 else "_nolegend_")
    ax.axhline(1.0, color="black", ls="--", lw=1.0, label=r"margins $\theta=\pm 1$")
    ax.axhline(-1.0, color="black", ls="--", lw=1.0, label="_nolegend_")
    ax.axhline(0.0, color="black", ls=":", lw=1.0, label=r"decision boundary $\theta=0$")
    ax.set_xlim(0.0, 1.0)
    ax.set_xlabel("$x$")
    ax.set_ylabel(r"$\theta(x)$")
    ax.set_title(f"{kernel_label(kernel)}, $C$ = {C:g}, $k_0$ = {float(kernel.amplitude):g}", fontsize="medium")
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize="small")
    return ax.figure

