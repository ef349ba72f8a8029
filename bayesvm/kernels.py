"""Kernel families of the SVM's Gaussian-process prior.

Every kernel has the form

    K(x, x') = amplitude * base(x, x') + offset,

where ``base`` is the unit-amplitude shape of the family, ``amplitude`` is the
prior variance scale k0 and ``offset`` is the variance k_b of a constant
(bias) term: a Gaussian prior of variance B^2 on the SVM bias b is the same as
adding B^2 to the kernel (theory: "The bias is the kernel offset"), so there
is no separate b.

Kernels are frozen dataclasses registered as JAX pytrees: their continuous
hyperparameters are array leaves, so a kernel whose leaves are arrays of
shape ``(B,)`` is a batch of ``B`` kernels and works under ``jax.vmap``.
Discrete settings (the polynomial degree) are static metadata.

The RBF and exponential kernels take either one length scale or one per
feature (automatic relevance determination, ARD): ``length_scale`` of shape
``(d,)`` for inputs with d features measures distances as |(x - x') / l|
with the division feature by feature (:func:`scaled_squared_distances`). A
batch of B such kernels has ``length_scale`` of shape ``(B, d)``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from ._precision import float64
from .compilation import jit

Array = jax.Array

__all__ = [
    "Kernel",
    "RBF",
    "Exponential",
    "Polynomial",
    "Linear",
    "make_kernel",
    "gram_matrix",
    "gram_diagonal",
    "is_ard",
]


@float64
def squared_distances(X1: Array, X2: Array) -> Array:
    """|x - x'|^2 = sum_j (x_j - x'_j)^2 for every row x of ``X1`` and x' of ``X2``
    (:func:`scaled_squared_distances` with l = 1)."""
    return scaled_squared_distances(X1, X2, 1.0)


def check_length_scale_features(length_scale, n_features: int, owner: str = "length_scale") -> None:
    """Raise ``ValueError`` unless ``length_scale`` is a scalar or has one entry per feature (shapes only)."""
    shape = np.shape(length_scale)
    if len(shape) == 1 and shape[0] != n_features:
        raise ValueError(
            f"{owner} has {shape[0]} entries but the inputs have {n_features} features; pass one length scale "
            f"(a scalar, the same for every feature) or an array of {n_features} (one per feature)"
        )


@float64
def scaled_squared_distances(X1: Array, X2: Array, length_scale) -> Array:
    """|(x - x') / l|^2 = sum_j ((x_j - x'_j) / l_j)^2 for every row x of ``X1`` and x' of ``X2``.

    ``length_scale``: a scalar l (the same for every feature) or an array of
    one l_j per feature. Each pair's differences x_j - x'_j are taken
    directly, so its distance depends on the two rows alone and is exact to
    the float64 rounding of x - x' wherever the inputs lie (the expansion
    |x|^2 + |x'|^2 - 2 x.x' loses the digits of a small distance between rows
    far from the origin). The broadcast, difference, division, square and sum
    fuse into one XLA loop over the pairs (the features on the middle axis,
    so that its innermost steps run along the rows of ``X2``), and the
    derivatives recompute the differences (``jax.checkpoint``) instead of
    keeping them: no (n1, d, n2) array is stored.
    """
    check_length_scale_features(length_scale, X1.shape[-1])
    return _summed_squared_differences(X1, X2, jnp.reshape(length_scale, (-1, 1)))


@jax.checkpoint
def _summed_squared_differences(X1: Array, X2: Array, scale: Array) -> Array:
    """sum_j ((x_j - x'_j) / scale_j)^2 for every row x of ``X1`` and x' of ``X2`` (``scale``: (d, 1) or (1, 1))."""
    differences = (X1[:, :, None] - X2.T[None, :, :]) / scale
    return jnp.sum(differences * differences, axis=1)


@float64
def scaled_distances(X1: Array, X2: Array, length_scale) -> Array:
    """|(x - x') / l| for every pair of rows (see :func:`scaled_squared_distances`).

    The root is taken as 0 where the squared distance is 0, so that its
    derivative in l stays finite there (it is 0 for every l).
    """
    d2 = scaled_squared_distances(X1, X2, length_scale)
    positive = d2 > 0.0
    return jnp.where(positive, jnp.sqrt(jnp.where(positive, d2, 1.0)), 0.0)


@dataclass(frozen=True)
class Kernel:
    """Base class: ``K = amplitude * base(x, x') + offset``.

    Subclasses define :meth:`base` and list the hyperparameters that must be
    strictly positive in ``_positive``; ``amplitude`` must be positive and
    ``offset`` non-negative for every family.
    """

    _positive: ClassVar[tuple[str, ...]] = ()
    name: ClassVar[str] = "kernel"
    #: the continuous hyperparameter of ``base`` that the selection searches (None: the family has none)
    shape_parameter: ClassVar[str | None] = None

    def base(self, X1: Array, X2: Array) -> Array:  # pragma: no cover - abstract
        raise NotImplementedError

    def base_diag(self, X: Array) -> Array:
        """Diagonal of ``base(X, X)``; subclasses override when it is cheaper."""
        return jax.vmap(lambda x: self.base(x[None, :], x[None, :])[0, 0])(X)

    def __call__(self, X1: Array, X2: Array | None = None) -> Array:
        """Gram matrix ``K(X1, X2)`` (``K(X1, X1)`` when ``X2`` is None): :func:`gram_matrix`, one compiled
        program per kernel family and input shapes (traced into the caller's program inside its ``jax.jit``)."""
        return gram_matrix(self, X1, X2)

    def diag(self, X: Array) -> Array:
        """``K(x, x)`` for each row of ``X`` (:func:`gram_diagonal`)."""
        return gram_diagonal(self, X)

    def _gram(self, X1: Array, X2: Array | None) -> Array:
        """The body of :func:`gram_matrix`: exact symmetry and diagonal for ``K(X1, X1)``, whatever the rounding in
        ``base``."""
        X1 = jnp.asarray(X1)
        if X2 is None:
            base = self.base(X1, X1)
            base = 0.5 * (base + base.T)
            n = X1.shape[0]
            base = base.at[jnp.arange(n), jnp.arange(n)].set(self.base_diag(X1))
        else:
            base = self.base(X1, jnp.asarray(X2))
        return self.amplitude * base + self.offset

    def __post_init__(self):
        """Lists become arrays, then :meth:`check`: a kernel built with a hyperparameter out of range raises
        ``ValueError`` at once (a kernel that JAX rebuilds from its leaves skips both, see :func:`_register`)."""
        # a list or tuple of per-feature length scales would be a pytree node of Python floats: one array leaf
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, (list, tuple)):
                object.__setattr__(self, f.name, np.asarray(value, dtype=np.float64))
        self.check()

    def replace(self, **changes) -> "Kernel":
        """A copy with some hyperparameters changed."""
        return dataclasses.replace(self, **changes)

    @property
    def hyperparameters(self) -> dict[str, object]:
        """The kernel's hyperparameters by name (continuous and static)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def check(self, n_features: int | None = None) -> "Kernel":
        """Raise ``ValueError`` for hyperparameters outside their range.

        Only concrete values are checked (a JAX tracer, inside ``jit`` or
        ``vmap``, is passed through unchanged); an array (per-feature length
        scales, a batch of kernels) is checked entry by entry. Called when the
        kernel is built. ``n_features``: the number of features of the
        inputs the kernel will meet; an array of per-feature length scales
        must have that many entries. Returns ``self`` so it can be chained.
        """
        ranges = {name: "> 0" for name in ("amplitude", *self._positive)}
        ranges["offset"] = ">= 0"
        for name, rule in ranges.items():
            value = getattr(self, name)
            if isinstance(value, jax.core.Tracer):
                continue
            try:
                value = np.asarray(value, dtype=float)
            except (TypeError, ValueError):
                raise ValueError(f"{type(self).__name__}.{name} must be a number or an array of numbers; "
                                 f"got {value!r}") from None
            bad = ~np.isfinite(value) | ((value <= 0) if rule == "> 0" else (value < 0))
            if np.any(bad) or value.size == 0:
                raise ValueError(
                    f"{type(self).__name__}.{name} must be finite and {rule}; got {value.tolist()}"
                )
        if n_features is not None and self.shape_parameter == "length_scale":
            check_length_scale_features(self.length_scale, n_features, f"{type(self).__name__}.length_scale")
        return self


def _register(cls, data_fields, meta_fields=()):
    """The frozen dataclass ``cls`` as a JAX pytree: ``data_fields`` are leaves, ``meta_fields`` static.

    Registered with ``register_pytree_with_keys`` rather than ``register_dataclass``: in JAX 0.10 the tree
    structures of two dataclasses registered that way compare equal when their fields are the same (RBF and
    Exponential), so a compiled program of one kernel family could be served to the other.

    Unflattening sets the fields without ``__init__``, so without :meth:`Kernel.check`: JAX rebuilds kernels from
    leaves that are not hyperparameters (placeholders such as ``object()``, vmap's axes, tracers, cotangents).
    """
    cls = dataclass(frozen=True)(cls)
    data_fields, meta_fields = tuple(data_fields), tuple(meta_fields)

    def flatten_with_keys(kernel):
        return [(jax.tree_util.GetAttrKey(f), getattr(kernel, f)) for f in data_fields], \
            tuple(getattr(kernel, f) for f in meta_fields)

    def flatten(kernel):
        return [getattr(kernel, f) for f in data_fields], tuple(getattr(kernel, f) for f in meta_fields)

    def unflatten(meta, leaves):
        kernel = object.__new__(cls)
        for name, value in (*zip(data_fields, leaves), *zip(meta_fields, meta)):
            object.__setattr__(kernel, name, value)
        return kernel

    jax.tree_util.register_pytree_with_keys(cls, flatten_with_keys, unflatten, flatten)
    return cls


class RBF(Kernel):
    """Squared-exponential kernel, base = exp(-|(x - x') / l|^2 / 2) with l = ``length_scale``.

    ``length_scale``: one l for every feature, or an array of one l_j per
    feature (ARD), |(x - x') / l|^2 = sum_j (x_j - x'_j)^2 / l_j^2.
    """

    length_scale: float | Array = 1.0
    amplitude: float | Array = 1.0
    offset: float | Array = 1.0
    _positive: ClassVar[tuple[str, ...]] = ("length_scale",)
    name: ClassVar[str] = "rbf"
    shape_parameter: ClassVar[str | None] = "length_scale"

    def base(self, X1, X2):
        return jnp.exp(-0.5 * scaled_squared_distances(X1, X2, self.length_scale))

    def base_diag(self, X):
        return jnp.ones(X.shape[0], dtype=X.dtype)


class Exponential(Kernel):
    """Ornstein-Uhlenbeck kernel, base = exp(-|(x - x') / l|) with l = ``length_scale`` (one, or one per feature as for :class:`RBF`)."""

    length_scale: float | Array = 1.0
    amplitude: float | Array = 1.0
    offset: float | Array = 1.0
    _positive: ClassVar[tuple[str, ...]] = ("length_scale",)
    name: ClassVar[str] = "exponential"
    shape_parameter: ClassVar[str | None] = "length_scale"

    def base(self, X1, X2):
        return jnp.exp(-scaled_distances(X1, X2, self.length_scale))

    def base_diag(self, X):
        return jnp.ones(X.shape[0], dtype=X.dtype)


class Polynomial(Kernel):
    """Polynomial kernel, base = (gamma x.x' + coef0)^degree (``degree`` is static)."""

    gamma: float | Array = 1.0
    coef0: float | Array = 1.0
    amplitude: float | Array = 1.0
    offset: float | Array = 1.0
    degree: int = 2
    _positive: ClassVar[tuple[str, ...]] = ("gamma",)
    name: ClassVar[str] = "polynomial"
    shape_parameter: ClassVar[str | None] = "gamma"

    def base(self, X1, X2):
        return (self.gamma * (X1 @ X2.T) + self.coef0) ** self.degree

    def base_diag(self, X):
        return (self.gamma * jnp.sum(X * X, axis=1) + self.coef0) ** self.degree

    def check(self, n_features: int | None = None):
        if not (isinstance(self.degree, (int, np.integer)) and self.degree >= 1):
            raise ValueError(f"Polynomial.degree must be an integer >= 1; got {self.degree!r}")
        coef0 = self.coef0
        if not isinstance(coef0, jax.core.Tracer) and np.any(np.asarray(coef0) < 0):
            raise ValueError(f"Polynomial.coef0 must be >= 0 (positive definite kernel); got {coef0}")
        return super().check(n_features)


class Linear(Kernel):
    """Linear kernel, base = x.x'."""

    amplitude: float | Array = 1.0
    offset: float | Array = 1.0
    name: ClassVar[str] = "linear"

    def base(self, X1, X2):
        return X1 @ X2.T

    def base_diag(self, X):
        return jnp.sum(X * X, axis=1)


RBF = _register(RBF, ["length_scale", "amplitude", "offset"])
Exponential = _register(Exponential, ["length_scale", "amplitude", "offset"])
Polynomial = _register(Polynomial, ["gamma", "coef0", "amplitude", "offset"], ["degree"])
Linear = _register(Linear, ["amplitude", "offset"])

def is_ard(kernel: Kernel) -> bool:
    """Whether ``kernel`` has one length scale per feature (``length_scale`` an array of shape (d,)).

    For a single kernel, not a batch: a batch of B isotropic kernels also has a (B,) ``length_scale``.
    """
    return kernel.shape_parameter == "length_scale" and np.ndim(kernel.length_scale) == 1


@float64
@jit
def gram_matrix(kernel: Kernel, X1: Array, X2: Array | None = None) -> Array:
    """``kernel(X1, X2)`` = amplitude base(X1, X2) + offset, compiled once per kernel family and input shapes.

    Called eagerly, the dozen jax.numpy operations of a Gram matrix would each compile a program of their own for
    every shape they meet; this is one program."""
    return kernel._gram(X1, X2)


@float64
@jit
def gram_diagonal(kernel: Kernel, X: Array) -> Array:
    """``kernel.diag(X)`` = amplitude base(x, x) + offset for each row x of ``X``, compiled as :func:`gram_matrix`."""
    return kernel.amplitude * kernel.base_diag(jnp.asarray(X)) + kernel.offset


KERNELS: dict[str, type[Kernel]] = {
    cls.name: cls for cls in (RBF, Exponential, Polynomial, Linear)
}


def make_kernel(name: str, **hyperparameters) -> Kernel:
    """Build a kernel from its family name (``rbf``, ``exponential``, ``polynomial``, ``linear``)."""
    key = str(name).lower()
    aliases = {"ou": "exponential", "ornstein-uhlenbeck": "exponential", "gaussian": "rbf", "poly": "polynomial"}
    key = aliases.get(key, key)
    if key not in KERNELS:
        raise ValueError(f"unknown kernel {name!r}; accepted: {', '.join(sorted(KERNELS))}")
    cls = KERNELS[key]
    try:
        kernel = cls(**hyperparameters)
    except TypeError as err:
        accepted = [f.name for f in dataclasses.fields(cls)]
        raise ValueError(f"{cls.__name__} accepts {accepted}; got {sorted(hyperparameters)}") from err
    return kernel.check()
