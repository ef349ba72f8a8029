"""The search coordinates of the evidence maximisation.

A point of the search is a vector of four logarithms,

    x = (ln C, ln k0, ln r, ln s),   r = k_b / k0 (offset ratio), s = the kernel's shape parameter,

so that the penalty is C = exp(x_0) and the prior covariance is
K = k0 (base_s(x, x') + r). Logarithms make every coordinate unconstrained
and scale-free. The MAP SVM depends on C and k0 only through the product
C k0, so the SVM's own ridge is the diagonal x_0 + x_1 = const; the
evidence depends on both separately, which is what lets it choose C and k0
apart (theory: "Hyperparameter selection"). C and k0 are kept as separate
coordinates rather than C k0 and k0 so that each can be held fixed or
bounded on its own with box bounds (a user fixes C, say); L-BFGS learns the
ridge's direction from the gradients. Kernels without a shape parameter
(linear) ignore x_3.

Per-feature length scales (ARD): a template kernel whose ``length_scale``
is an array of d entries (:func:`bayesvm.kernels.is_ard`) is searched over
3 + d coordinates,

    x = (ln C, ln k0, ln r, ln l_1, ..., ln l_d),

one log length scale per feature (:func:`coordinate_names`); everything
else is as above.

Any coordinate can be held fixed (:class:`SearchSpace`); the box bounds keep
k0 (1 + r) below what float64 resolves against the margin |theta| <= 1 at n
points (theory: "Numerical limits").
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from scipy.spatial.distance import pdist

from .kernels import Kernel, check_length_scale_features, is_ard

Array = jax.Array

__all__ = [
    "COORDINATES",
    "coordinate_names",
    "SearchSpace",
    "kernel_at",
    "kernel_hyperparameters_at",
    "penalty_at",
    "coordinates_of",
    "max_amplitude",
    "pairwise_distances",
    "feature_length_scale_bounds",
    "feature_pairwise_distances",
]

#: the search coordinates, in vector order (one shape parameter; :func:`coordinate_names` for per-feature length scales)
COORDINATES = ("log_C", "log_amplitude", "log_offset_ratio", "log_shape")
#: the rounding error allowed in the prior covariance, in theta^2 units against the margin |theta| <= 1
MARGIN_RESOLUTION = 1e-2


def penalty_at(x: Array) -> Array:
    """C = exp(x_0)."""
    return jnp.exp(x[0])


def coordinate_names(template: Kernel) -> tuple[str, ...]:
    """The names of the search coordinates for the template's family, in vector order.

    :data:`COORDINATES` for one shape parameter; with d per-feature length
    scales (ARD) ``log_length_scale_1`` .. ``log_length_scale_d`` in place of ``log_shape``.
    """
    if not is_ard(template):
        return COORDINATES
    return COORDINATES[:3] + tuple(f"log_length_scale_{j + 1}" for j in range(np.size(template.length_scale)))


def kernel_at(template: Kernel, x: Array) -> Kernel:
    """The kernel of the template's family at the coordinates x (traceable: x may be a JAX tracer).

    amplitude exp(x_1), offset exp(x_1 + x_2), shape exp(x_3) (or the per-feature length scales exp(x_3:)).
    """
    amplitude = jnp.exp(x[1])
    changes = {"amplitude": amplitude, "offset": amplitude * jnp.exp(x[2])}
    if template.shape_parameter is not None:
        changes[template.shape_parameter] = jnp.exp(x[3:]) if is_ard(template) else jnp.exp(x[3])
    return template.replace(**changes)


def kernel_hyperparameters_at(template: Kernel, x) -> dict[str, float | np.ndarray]:
    """The kernel's amplitude, offset and shape parameter (if any) at the coordinates x, as floats
    (per-feature length scales as a float64 array)."""
    x = np.asarray(x, dtype=np.float64)
    amplitude = float(np.exp(x[1]))
    out = {"amplitude": amplitude, "offset": amplitude * float(np.exp(x[2]))}
    if template.shape_parameter is not None:
        out[template.shape_parameter] = np.exp(x[3:]) if is_ard(template) else float(np.exp(x[3]))
    return out


def coordinates_of(C: float, kernel: Kernel) -> np.ndarray:
    """The coordinates x of a penalty C and a kernel (shape coordinate 0 for kernels without one; 3 + d
    coordinates for d per-feature length scales)."""
    amplitude, offset = float(kernel.amplitude), float(kernel.offset)
    if offset <= 0.0:
        raise ValueError("the search works with ln(k_b / k0): the kernel's offset must be > 0")
    shape = 1.0 if kernel.shape_parameter is None else getattr(kernel, kernel.shape_parameter)
    return np.log(np.concatenate([[C, amplitude, offset / amplitude], np.ravel(np.asarray(shape, dtype=np.float64))]))


def pairwise_distances(X: np.ndarray, max_points: int = 500) -> np.ndarray:
    """The distinct non-zero pairwise distances of X's rows, on at most ``max_points`` rows evenly spaced.

    What the data-derived defaults of length scales are read from.
    """
    rows = X[np.linspace(0, X.shape[0] - 1, min(X.shape[0], max_points)).astype(int)]
    d = pdist(np.asarray(rows, dtype=np.float64))
    return d[d > 0]


def max_amplitude(n: int, offset_ratio: float) -> float:
    """The largest k0 whose covariance k0 (base + r) float64 resolves at n points.

    Entries reach k0 (1 + r); sums and factorisations over n points carry a
    rounding error of about n eps k0 (1 + r) in theta^2 units, which must stay
    below ``MARGIN_RESOLUTION`` against the margin |theta| <= 1.
    """
    return MARGIN_RESOLUTION / (n * np.finfo(np.float64).eps * (1.0 + offset_ratio))


@dataclass(frozen=True)
class SearchSpace:
    """Box bounds on the coordinates; a coordinate with equal bounds is held fixed.

    ``lower`` and ``upper`` are length-4 arrays in :data:`COORDINATES` order,
    or length 3 + d with d per-feature length scales (:func:`coordinate_names`).
    """

    lower: np.ndarray
    upper: np.ndarray

    def __post_init__(self):
        lower = np.asarray(self.lower, dtype=np.float64)
        upper = np.asarray(self.upper, dtype=np.float64)
        if lower.ndim != 1 or lower.shape != upper.shape or lower.size < 4:
            raise ValueError(f"bounds must have one value per coordinate {COORDINATES} (or 3 + d, the last d one "
                             f"per feature's length scale); got shapes {lower.shape} and {upper.shape}")
        if np.any(~np.isfinite(lower) | ~np.isfinite(upper) | (lower > upper)):
            raise ValueError(f"bounds must be finite with lower <= upper; got {lower} and {upper}")
        object.__setattr__(self, "lower", lower)
        object.__setattr__(self, "upper", upper)

    @property
    def free(self) -> np.ndarray:
        """Mask of the coordinates the search moves."""
        return self.upper > self.lower

    def clip(self, x) -> np.ndarray:
        return np.clip(np.asarray(x, dtype=np.float64), self.lower, self.upper)

    def fix(self, index: int, value: float) -> "SearchSpace":
        """The same space with coordinate ``index`` held at ``value``."""
        lower, upper = self.lower.copy(), self.upper.copy()
        lower[index] = upper[index] = value
        return SearchSpace(lower, upper)

    @classmethod
    def default(cls, X: np.ndarray, template: Kernel) -> "SearchSpace":
        """Bounds from the data: wide in C, k0 and r, k0 up to what float64 resolves, the shape around the data's scale.

        * C in [1e-2, 1e3]; r in [1e-2, 1e2]; k0 in [1e-2, 1e5] (and below
          :func:`max_amplitude` at the largest r);
        * length scale: a fifth of the 5% quantile to three times the 95%
          quantile of the pairwise distances (on at most 500 points); gamma:
          1 / (d var) times 10^[-3, 2]; fixed for kernels without a shape parameter;
        * per-feature length scales (ARD, d features): l_j from a fifth of the
          5% quantile to 3 sqrt(d) times the 95% quantile of feature j's own
          pairwise distances |x_j - x'_j| (:func:`feature_length_scale_bounds`).

        The small-C, huge-amplitude, long-length-scale corner is left out by
        default: there the prior is far wider than the margin and nearly
        constant over the data, tempered SMC's runs disagree (its ln N(D) is
        biased low, the evidence high) and EP's posterior may not converge,
        so no estimate of the evidence can be verified (theory: "Numerical
        limits"). Pass wider bounds to look there.
        """
        n = X.shape[0]
        r_max = 1e2
        lower = np.log([1e-2, 1e-2, 1e-2, 1.0])
        upper = np.log([1e3, min(1e5, max_amplitude(n, r_max)), r_max, 1.0])
        name = template.shape_parameter
        if is_ard(template):
            check_length_scale_features(template.length_scale, X.shape[1], f"{type(template).__name__}.length_scale")
            feature_lower, feature_upper = feature_length_scale_bounds(X)
            return cls(np.concatenate([lower[:3], feature_lower]), np.concatenate([upper[:3], feature_upper]))
        if name == "length_scale":
            d = pairwise_distances(X)
            lo, hi = np.quantile(d, [0.05, 0.95]) if d.size else (1.0, 1.0)
            lower[3], upper[3] = np.log(0.2 * lo), np.log(3.0 * hi)
        elif name == "gamma":
            scale = 1.0 / (X.shape[1] * max(float(np.mean(np.var(X, axis=0))), np.finfo(float).tiny))
            lower[3], upper[3] = np.log(scale * 1e-3), np.log(scale * 1e2)
        return cls(lower, upper)


def feature_length_scale_bounds(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bounds on ln l_j for per-feature length scales, from each feature's own pairwise distances.

    l_j from a fifth of the 5% quantile q05_j to 3 sqrt(d) q95_j of the
    non-zero |x_j - x'_j| (on at most 500 rows, :func:`pairwise_distances`):
    at d = 1 the isotropic rule. The upper end is sqrt(d) times wider than
    the isotropic rule's per feature so that the isotropic optimum (one l
    of the order of sqrt(d) per-feature spreads) lies inside the box, and a
    feature at its upper end adds at most 1 / (18 d) to |(x - x') / l|^2
    over 95% of its pairs: switched off. A feature that is constant (no
    non-zero distance) does not enter the kernel at all; its length scale
    is held fixed at 1.
    """
    d = X.shape[1]
    lower, upper = np.zeros(d), np.zeros(d)
    for j, distances in enumerate(feature_pairwise_distances(X)):
        if distances.size:
            lo, hi = np.quantile(distances, [0.05, 0.95])
            lower[j], upper[j] = np.log(0.2 * lo), np.log(3.0 * np.sqrt(d) * hi)
    return lower, upper


def feature_pairwise_distances(X: np.ndarray, max_points: int = 500) -> list[np.ndarray]:
    """For each feature j, the distinct non-zero |x_j - x'_j| (:func:`pairwise_distances` of that column alone)."""
    return [pairwise_distances(X[:, j:j + 1], max_points) for j in range(X.shape[1])]
