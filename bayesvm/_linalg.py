"""Fixed-shape linear algebra on index subsets.

The solver, the evidence and the posterior all work on a subset of the
training points (the free / marginal set) whose size is only known at run
time. To stay jit- and vmap-friendly they gather that subset into a buffer of
static size ``size`` and pad it with identity rows: a padded symmetric matrix
``[[K_SS, 0], [0, I]]`` has the same Cholesky factor, log-determinant and
solves on the subset as ``K_SS`` itself.

Whole problems are padded the same way (:func:`problem_size`,
:func:`pad_gram`): the EP runs, the dual solver and the tempered-SMC sampler
work at one of a few static sizes, so that a program compiled for one
training-set size serves its neighbours (compiling one takes seconds, far
longer than running it at small n).
"""

from __future__ import annotations


import jax
import jax.numpy as jnp
import numpy as np


Array = jax.Array


#: every problem of up to this many points is padded to it: one compiled program serves them all
SMALLEST_PROBLEM_SIZE = 64


def problem_size(n: int) -> int:
    """The static size a problem of ``n`` points is padded to (:func:`pad_gram`).

    At least :data:`SMALLEST_PROBLEM_SIZE`, above it one of eight sizes per
    doubling (at most 12.5% padding): problems of nearby sizes share one
    compiled program instead of compiling their own (seconds each), while the
    O(n^3) work grows by at most 42% (the cube of 1.125).
    """
    step = max(1, 1 << max(0, n.bit_length() - 4))
    return max(SMALLEST_PROBLEM_SIZE, -(-n // step) * step)


def padding_mask(n: int, size: int) -> np.ndarray:
    """(size,) bool: True at the ``n`` data entries, False at the padding (a constant, also under jit)."""
    return np.arange(size) < n


def _array_module(*arrays):
    """jax.numpy where any of ``arrays`` is a tracer (inside a compiled function or the caller's transformation),
    NumPy otherwise.

    Padding on the host costs no compilation: called eagerly, a jax.numpy operation compiles a program of its
    own for every shape it meets (documentation: speed).
    """
    return jnp if any(isinstance(a, jax.core.Tracer) for a in arrays) else np


def unit_padding(K: Array, mask: Array) -> Array:
    """K on the data block, the identity on the padding: blockdiag(K_data, I) (K is (..., size, size); NumPy
    unless K is traced, :func:`_array_module`)."""
    xp = _array_module(K)
    return xp.where(mask[:, None] & mask[None, :], K, xp.eye(mask.shape[0], dtype=K.dtype))


def pad_gram(K: Array, size: int) -> Array:
    """The (..., n, n) prior covariance K padded to blockdiag(K, I) of shape (..., size, size).

    The padding entries are independent N(0, 1) latents: where their
    likelihood sites are flat (or masked out of a sum) they change no
    integral, posterior or determinant of the data block. A NumPy array
    unless K is traced (:func:`_array_module`).
    """
    xp = _array_module(K)
    K = xp.asarray(K)
    n = K.shape[-1]
    widths = [(0, 0)] * (K.ndim - 2) + [(0, size - n), (0, size - n)]
    return unit_padding(xp.pad(K, widths), padding_mask(n, size))


def pad_vector(v: Array, size: int, fill: float = 0.0) -> Array:
    """The (n,) vector v padded with ``fill`` to (size,) (NumPy unless v is traced)."""
    xp = _array_module(v)
    return xp.pad(xp.asarray(v), [(0, size - v.shape[-1])], constant_values=fill)


def pad_weights(weights, n: int, size: int) -> np.ndarray:
    """The (n,) row weights (None: every weight 1) padded with 0 to (size,), as float64 NumPy (a traced vector is
    padded with jax.numpy): a weight of 0 is an entry that is not there, so the padding takes no part."""
    if weights is None:
        return padding_mask(n, size).astype(np.float64)
    xp = _array_module(weights)
    return pad_vector(xp.asarray(weights, dtype=np.float64), size)


def pad_labels(y: Array, size: int) -> Array:
    """The (n,) labels y padded with +1 to (size,): a valid label wherever the padding's site is flat or unused."""
    return pad_vector(y, size, fill=1.0)


def pad_rows(X, size: int) -> np.ndarray:
    """The (n, ...) array X (host-side: training or new inputs, or one value per input) padded with zero rows
    to (size, ...), as float64 NumPy: placeholders whose kernel entries :func:`unit_padding` replaces, or whose
    outputs :func:`on_row_blocks` drops."""
    X = np.asarray(X, dtype=np.float64)
    return np.pad(X, [(0, size - X.shape[0])] + [(0, 0)] * (X.ndim - 1))


#: rows of new inputs per block of a prediction (:func:`on_row_blocks`)
PREDICTION_BLOCK_ROWS = SMALLEST_PROBLEM_SIZE


def on_row_blocks(function, *arrays):
    """``function(*arrays)`` on blocks of :data:`PREDICTION_BLOCK_ROWS` rows, every output (a pytree of arrays,
    one row per input row) joined and trimmed back to the arrays' m rows as NumPy.

    The last block is padded with zero rows (valid inputs whose outputs are dropped). Every block has the same
    shape, so one compiled program serves every number of inputs, and the memory of a prediction stays that of
    one block however many rows it has. ``function`` must compute each row's output from that row alone.
    """
    m = arrays[0].shape[0]
    blocks = [function(*(pad_rows(a[start:start + PREDICTION_BLOCK_ROWS], PREDICTION_BLOCK_ROWS) for a in arrays))
              for start in range(0, max(m, 1), PREDICTION_BLOCK_ROWS)]
    return jax.tree_util.tree_map(lambda *outs: np.concatenate([np.asarray(out) for out in outs])[:m], *blocks)


def buffer_size(count: int, n: int, smallest: int = 32) -> int:
    """A static buffer for a subset of ``count`` of ``n`` points, at least ``smallest`` (or n).

    Room for growth (the solver's free set can grow while it is polished),
    rounded up to a power of two so that few distinct sizes get compiled.
    """
    wanted = max(smallest, int(1.25 * count) + 16)
    return min(n, 1 << (wanted - 1).bit_length())


def subset_indices(mask: Array, size: int) -> tuple[Array, Array]:
    """Indices of the ``True`` entries of ``mask``, padded to ``size``.

    Returns ``(index, valid)``: ``index[:k]`` are the positions of the
    ``k = mask.sum()`` selected entries in increasing order (truncated to
    ``size`` when ``k > size``), ``valid[j]`` says whether slot ``j`` holds one.
    """
    index = jnp.argsort(~mask, stable=True)[:size]
    valid = jnp.arange(size) < jnp.sum(mask)
    return index, valid


def padded_submatrix(K: Array, index: Array, valid: Array) -> Array:
    """``K[index][:, index]`` with padding slots replaced by identity rows/columns."""
    sub = K[index[:, None], index[None, :]]
    both = valid[:, None] & valid[None, :]
    return jnp.where(both, sub, jnp.eye(index.shape[0], dtype=K.dtype))


def padded_vector(v: Array, index: Array, valid: Array) -> Array:
    """``v[index]`` with padding slots set to zero."""
    return jnp.where(valid, v[index], 0.0)


def scatter_subset(values: Array, index: Array, valid: Array, n: int) -> Array:
    """Inverse of :func:`padded_vector`: a length-``n`` vector, zero off the subset."""
    return jnp.zeros(n, dtype=values.dtype).at[index].add(jnp.where(valid, values, 0.0))


def cholesky_logdet(L: Array) -> Array:
    """ln det(A) from the lower Cholesky factor L of A."""
    return 2.0 * jnp.sum(jnp.log(jnp.diagonal(L, axis1=-2, axis2=-1)), axis=-1)


def psd_factor(A) -> np.ndarray:
    """A square-root factor S of a positive semi-definite matrix, S S^T = A, without jitter (host-side).

    The lower Cholesky factor where A is numerically positive definite,
    otherwise the symmetric eigen-factor V diag(sqrt(max(lambda, 0))), which
    reproduces A up to rounding. Raises ``LinAlgError`` for a matrix that is not
    positive semi-definite (an eigenvalue below -1e-8 times the largest).
    """
    A = np.asarray(A, dtype=np.float64)
    try:
        return np.linalg.cholesky(A)
    except np.linalg.LinAlgError:
        eigenvalues, vectors = np.linalg.eigh(0.5 * (A + A.T))
    if eigenvalues[0] < -1e-8 * max(eigenvalues[-1], 0.0) or eigenvalues[-1] <= 0.0:
        raise np.linalg.LinAlgError(
            f"matrix is not positive semi-definite (eigenvalues from {eigenvalues[0]:.3g} to {eigenvalues[-1]:.3g})"
        )
    return vectors * np.sqrt(np.clip(eigenvalues, 0.0, None))


def distinct_rows(X, weights=None) -> tuple[np.ndarray, np.ndarray]:
    """The first row of each distinct row of X (n, ...), in order of first appearance, and the summed weight of the
    rows equal to it (``weights`` (n,); None: each row counts 1, so the sums are counts): ``(index, totals)`` with
    X[index] the distinct rows. Rows that are equal share one latent theta under any kernel, so a likelihood over
    them collapses exactly onto the distinct rows, each term to the power of its total."""
    X = np.asarray(X)
    _, first, inverse = np.unique(X.reshape(X.shape[0], -1), axis=0, return_index=True, return_inverse=True)
    totals = np.bincount(inverse.ravel(), weights=weights, minlength=first.size)
    order = np.argsort(first)
    return first[order], (totals if weights is not None else totals.astype(np.int64))[order]
