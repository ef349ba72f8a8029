"""Shared pieces of the :mod:`bayesvm.plotting` figures: argument checks, axes and cell edges."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes

from .._validation import check_kernel, check_labels
from ..kernels import Kernel


def axes_or_new(ax: Axes | None, **figure_kw) -> Axes:
    """``ax`` itself, or the single Axes of a new constrained-layout figure."""
    if ax is not None:
        if not isinstance(ax, Axes):
            raise ValueError(f"ax must be a matplotlib Axes or None; got {type(ax).__name__}")
        return ax
    _, new = plt.subplots(layout="constrained", **figure_kw)
    return new


def float_vector(values, name: str, length: int | None = None) -> np.ndarray:
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


def optional_float_vector(values, name: str, length: int) -> np.ndarray | None:
    return None if values is None else float_vector(values, name, length)


def cell_edges(centres: np.ndarray, name: str, log: bool) -> np.ndarray:
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


def single_kernel(kernel) -> Kernel:
    """A valid kernel with scalar hyperparameters (a batch of kernels cannot be drawn as one picture)."""
    kernel = check_kernel(kernel)
    batched = [k for k, v in kernel.hyperparameters.items() if np.ndim(v) != 0]
    if batched:
        raise ValueError(f"plotting takes a single kernel; hyperparameters {batched} are arrays (a batch of kernels)")
    return kernel


def kernel_label(kernel: Kernel) -> str:
    """Short description, e.g. ``RBF(length_scale=0.1)``: shape hyperparameters only."""
    shape = {k: v for k, v in kernel.hyperparameters.items() if k not in ("amplitude", "offset")}
    inner = ", ".join(f"{k}={float(np.asarray(v)):g}" for k, v in shape.items())
    return f"{type(kernel).__name__}({inner})"


def training_points(X_train, y_train, n_features: int) -> tuple[np.ndarray, np.ndarray] | None:
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
