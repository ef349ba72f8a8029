"""float64 inside the package's computations, without touching the user's process.

JAX computes in float32 unless ``jax_enable_x64`` is on. The evidence sums
hundreds of log terms and factorises kernel matrices whose condition numbers
float32 cannot hold, so every computation of the package runs in float64.
Importing bayesvm does not switch the global flag (that would silently change
the precision and memory of every other JAX program in the process): each
public entry point enters ``jax.enable_x64(True)`` for the duration of the
call and leaves the flag as it found it.

Arrays returned to the caller are NumPy arrays or Python floats wherever the
package converts them; a JAX float64 array taken out of the scope keeps its
dtype, but further JAX arithmetic on it outside the scope follows the
caller's setting.

Inside the caller's own JAX transformation (an entry point called on tracers,
e.g. within ``jax.jit`` or ``jax.vmap``) with float64 off, the decorator does
not switch it on: JAX lowers the caller's whole computation after the call
returns, under the caller's setting, and a part traced in float64 inside it
fails there with mixed-dtype errors. The computation then follows the
caller's setting; enter :func:`float64_scope` around the transformation for
float64 (the transformation's inputs are converted on entry, so they need
the scope too). Keep to one setting per transformation: JAX's caches of a
jit nested in the caller's ``jax.jit`` do not tell the two settings apart,
and tracing the same transformation under both in one process can fail.
Calls inside the package's own computations find float64 on already and
pass straight through.

Pickling: a JAX array is rebuilt on unpickling in the precision of the
moment, i.e. float32 with the flag off. Result objects that hold JAX arrays
therefore pickle them as NumPy arrays (:func:`numpy_leaves`), which keep
their dtype and enter the package's computations as float64 again.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeVar

import jax
import numpy as np

__all__ = ["as_float64", "as_int64", "float64", "float64_scope", "numpy_leaves"]

F = TypeVar("F", bound=Callable)


def float64_scope():
    """Context manager: JAX computes in float64 inside it, the global flag is restored on exit.

    bayesvm's functions compute in float64 whatever the caller's setting; wrap your own ``jax.jit`` or ``jax.vmap``
    around them in it, since inside a transformation JAX follows the setting of the moment it traces.
    """
    return jax.enable_x64(True)


def float64(function: F) -> F:
    """Decorator: run ``function`` with float64 enabled (see the module docstring)."""

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        if jax.config.jax_enable_x64 or _traced(args, kwargs):
            return function(*args, **kwargs)
        with jax.enable_x64(True):
            return function(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def _traced(args, kwargs) -> bool:
    """Whether any argument holds a JAX tracer (the call is part of the caller's transformation)."""
    try:
        leaves = jax.tree_util.tree_leaves((args, kwargs))
    except Exception:  # not a pytree JAX can flatten (e.g. a mapping with unorderable keys): not traced
        return False
    return any(isinstance(leaf, jax.core.Tracer) for leaf in leaves)


def as_float64(a) -> jax.Array:
    """``a`` as a float64 JAX array without compiling anything: a float64 JAX array is returned as it is, a tracer
    converted in the caller's trace, anything else (NumPy, Python numbers, other dtypes) goes through NumPy and
    ``jax.device_put``. Called eagerly, ``jnp.asarray`` of a NumPy array compiles a small program of its own for
    every shape it meets (JAX 0.10); ``device_put`` copies it."""
    return _as_jax_array(a, np.float64)


def as_int64(a) -> jax.Array:
    """``a`` as an int64 JAX array without compiling anything, as :func:`as_float64`."""
    return _as_jax_array(a, np.int64)


def _as_jax_array(a, dtype) -> jax.Array:
    if isinstance(a, jax.core.Tracer):
        return jax.numpy.asarray(a, dtype=dtype)
    if isinstance(a, jax.Array) and a.dtype == dtype:
        return a
    return jax.device_put(np.asarray(a, dtype=dtype))


def numpy_leaves(tree):
    """``tree`` with every JAX array replaced by the NumPy array of the same dtype (for ``__getstate__``)."""
    return jax.tree_util.tree_map(lambda leaf: np.asarray(leaf) if isinstance(leaf, jax.Array) else leaf, tree)
