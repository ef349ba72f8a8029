"""The hyperparameter grid: axes, data-derived defaults and extension at an edge.

The grid is parametrised by the quantities the MAP solution depends on
(theory: "Hyperparameter selection"): the kernel's shape parameter, the
offset ratio r = k_b / k0, the box P = C k0 and C. With K = k0 (base + r),
the dual solution on the box P = C k0 is the same for every (C, k0) with the
same product, so one solve serves a whole line of C values. Surfaces are
arrays of shape ``(n_shape, n_offset_ratio, n_C_k0, n_C)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from .._precision import float64
from .._validation import check_inputs, check_kernel
from ..exceptions import BayesvmWarning
from ..hyperparameters import pairwise_distances
from ..kernels import Kernel, make_kernel

__all__ = ["AXES", "Grid", "GridEdgeWarning", "default_grid", "grid_for", "resolve_grid", "kernel_template", "edge_axes",
           "extended", "grid_argument"]

#: the grid's axes, in surface order
AXES = ("shape", "offset_ratio", "C_k0", "C")
#: below this many training points the default grid is one value shorter on each varied axis
_SMALL_PROBLEM = 100
#: the pairwise distances behind the default length scales are taken on at most this many points
_MAX_DISTANCE_POINTS = 500


class GridEdgeWarning(BayesvmWarning):
    """The evidence optimum lies on the edge of the hyperparameter grid."""


@dataclass(frozen=True)
class Grid:
    """A product grid over (shape, offset ratio k_b/k0, C k0, C), all strictly positive.

    ``shape`` holds the kernel's shape parameter (``length_scale`` or
    ``gamma``; the single placeholder value 1 for the linear kernel). k0 = C_k0 / C
    and k_b = offset_ratio * k0 at each point.
    """

    shape: np.ndarray
    offset_ratio: np.ndarray
    C_k0: np.ndarray
    C: np.ndarray

    def __post_init__(self):
        for name in AXES:
            values = np.atleast_1d(np.asarray(getattr(self, name), dtype=np.float64))
            if values.ndim != 1 or values.size == 0:
                raise ValueError(f"grid axis {name!r} must be a non-empty 1-D sequence; got shape {values.shape}")
            if not np.all(np.isfinite(values)) or np.any(values <= 0):
                raise ValueError(f"grid axis {name!r} must hold finite values > 0; got {values.tolist()}")
            if np.unique(values).size != values.size:
                raise ValueError(f"grid axis {name!r} has repeated values: {values.tolist()}")
            object.__setattr__(self, name, np.sort(values))

    @property
    def axes(self) -> tuple[np.ndarray, ...]:
        return tuple(getattr(self, name) for name in AXES)

    @property
    def shape_of_surface(self) -> tuple[int, ...]:
        return tuple(a.size for a in self.axes)

    def replace(self, **axes) -> "Grid":
        return Grid(**{name: axes.get(name, getattr(self, name)) for name in AXES})

    def point(self, index: tuple[int, ...]) -> dict:
        """The coordinates (``shape``, ``offset_ratio``, ``C_k0``, ``C``) at a surface index."""
        return {name: float(axis[i]) for name, axis, i in zip(AXES, self.axes, index)}


def kernel_template(kernel) -> Kernel:
    """The kernel family to select within: a name, or a kernel whose static settings are kept."""
    if isinstance(kernel, str):
        return make_kernel(kernel)
    return check_kernel(kernel)


@float64
def default_grid(X, kernel="rbf") -> Grid:
    """Default grid derived from the data.

    * length scale (RBF, exponential): 4 values (3 for fewer than 100 points),
      log-spaced from half the 10% quantile to twice the 90% quantile of the
      pairwise distances (on at most 500 points);
    * gamma (polynomial): 1 / (d * mean feature variance) times 10^[-1, 1];
    * C k0: 10^-1 .. 10^3 (5 values, one a decade; 4 for small problems);
    * C: 10^-1 .. 10^1.5 (5 values; 4 for small problems);
    * offset ratio k_b / k0: 1 (held fixed; pass an ``offset_ratio`` axis to
      select the offset too -- each value costs one more set of solves).
    """
    return grid_for(check_inputs(X), kernel_template(kernel))


def grid_for(X: np.ndarray, template: Kernel) -> Grid:
    """:func:`default_grid` for validated inputs and a kernel family."""
    small = X.shape[0] < _SMALL_PROBLEM
    name = template.shape_parameter
    if name == "length_scale":
        d = pairwise_distances(X, max_points=_MAX_DISTANCE_POINTS)
        lo, hi = (np.quantile(d, [0.1, 0.9]) if d.size else (1.0, 1.0))
        shape = np.geomspace(0.5 * lo, 2.0 * hi, 3 if small else 4)
    elif name == "gamma":
        scale = 1.0 / (X.shape[1] * max(float(np.mean(np.var(X, axis=0))), np.finfo(float).tiny))
        shape = scale * np.geomspace(0.1, 10.0, 3 if small else 4)
    else:
        shape = np.array([1.0])  # placeholder: the family has no shape parameter
    return Grid(
        shape=shape,
        offset_ratio=np.array([1.0]),
        C_k0=np.geomspace(0.1, 1e3, 4 if small else 5),
        C=np.geomspace(0.1, 10**1.5, 4 if small else 5),
    )


def resolve_grid(grid, X, template: Kernel) -> Grid:
    """A :class:`Grid` from ``None``, a Grid, or a mapping that overrides some default axes (validated inputs X)."""
    if isinstance(grid, Grid):
        return grid
    defaults = grid_for(X, template)
    if grid is None:
        return defaults
    if not isinstance(grid, Mapping):
        raise ValueError(f"grid must be None, a Grid or a mapping of axis name -> values; got {type(grid).__name__}")
    shape_name = template.shape_parameter
    accepted = {"C", "C_k0", "offset_ratio", "shape"} | ({shape_name} if shape_name else set())
    unknown = set(grid) - accepted
    if unknown:
        raise ValueError(f"unknown grid axes {sorted(unknown)} for the {template.name} kernel; accepted: {sorted(accepted)}")
    axes = {("shape" if key == shape_name else key): value for key, value in grid.items()}
    if shape_name is None and "shape" in axes:
        raise ValueError(f"the {template.name} kernel has no shape parameter to put on a grid")
    return defaults.replace(**axes)


def edge_axes(index: tuple[int, ...], grid: Grid) -> list[tuple[str, str]]:
    """(axis, side) for every varied axis on whose edge ``index`` lies."""
    edges = []
    for name, i, axis in zip(AXES, index, grid.axes):
        if axis.size > 1 and i == 0:
            edges.append((name, "low"))
        elif axis.size > 1 and i == axis.size - 1:
            edges.append((name, "high"))
    return edges


def grid_argument(names) -> str:
    """The ``grid=`` argument that sets the named axes, for a warning's remedy: ``grid={'C': ..., 'C_k0': ...}``."""
    return "grid={" + ", ".join(f"{name!r}: ..." for name in names) + "}"


def extended(axis: np.ndarray, side: str, points: int) -> np.ndarray:
    """``axis`` extended by ``points`` steps of its own log spacing at the end ``side``."""
    if side == "low":
        step = axis[1] / axis[0]
        return np.concatenate([axis[0] * step ** -np.arange(points, 0, -1), axis])
    step = axis[-1] / axis[-2]
    return np.concatenate([axis, axis[-1] * step ** np.arange(1, points + 1)])
