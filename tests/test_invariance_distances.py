"""A row's prediction depends only on that row and the fitted model; stationary kernels ignore an offset of every
input; kernel hyperparameters are checked when the kernel is built."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer
from sklearn.preprocessing import StandardScaler

from bayesvm import BayesianSVC, BayesvmWarning
from bayesvm.inference.ep import ep_predict
from bayesvm.kernels import RBF, Exponential, Linear, Polynomial, gram_matrix, scaled_distances, squared_distances

FIXED = dict(C=1.0, amplitude=2.0, length_scale=1.5, offset=1.0)
#: a shift of every input far from the origin (the rows' differences stay O(1))
FAR = 1.7e9


@pytest.fixture(scope="module")
def cancer():
    X, y = load_breast_cancer(return_X_y=True)
    rows = np.random.default_rng(0).permutation(X.shape[0])[:72]
    X = StandardScaler().fit_transform(X[rows])[:, :5]
    return X[:60], y[rows][:60], X[60:]


def _predictions(model, X):
    bars = model.error_bars(X)
    return np.column_stack([model.predict_proba(X)[:, 1], model.decision_function(X), bars.theta, bars.sigma])


@pytest.mark.parametrize("posterior", ["ep", "laplace"])
def test_a_rows_prediction_ignores_an_extreme_row_in_its_batch(cancer, posterior):
    """Next to a row with a feature at 1e10, every row is predicted as it is alone (to 1e-9)."""
    X, y, X_new = cancer
    model = BayesianSVC(posterior=posterior, **FIXED).fit(X, y)
    extreme = X_new[:1].copy()
    extreme[0, 0] = 1e10
    together = _predictions(model, np.vstack([X_new, extreme]))[:-1]
    alone = np.vstack([_predictions(model, X_new[i:i + 1]) for i in range(X_new.shape[0])])
    np.testing.assert_allclose(together, alone, rtol=0.0, atol=1e-9)


@pytest.mark.parametrize("kernel", ["rbf", "exponential"])
def test_stationary_kernels_ignore_an_offset_of_every_input(cancer, kernel):
    """Training and new inputs all shifted by 1.7e9: the same probabilities at fixed hyperparameters (to 1e-6)."""
    X, y, X_new = cancer
    near = BayesianSVC(kernel=kernel, **FIXED).fit(X, y).predict_proba(X_new)
    far = BayesianSVC(kernel=kernel, **FIXED).fit(X + FAR, y).predict_proba(X_new + FAR)
    np.testing.assert_allclose(far, near, rtol=0.0, atol=1e-6)


def test_low_rank_prediction_ignores_batch_neighbours_and_an_offset(cancer):
    """Through k-means inducing inputs: a row's prediction is its own next to a row at 1e10, and every input
    shifted by 1.7e9 gives the same probabilities (k-means centres the data itself)."""
    X, y, X_new = cancer
    near = BayesianSVC(n_inducing=8, **FIXED).fit(X, y)
    extreme = X_new[:1].copy()
    extreme[0, 0] = 1e10
    together = near.predict_proba(np.vstack([X_new, extreme]))[:-1]
    alone = np.vstack([near.predict_proba(X_new[i:i + 1]) for i in range(X_new.shape[0])])
    np.testing.assert_allclose(together, alone, rtol=0.0, atol=1e-9)
    far = BayesianSVC(n_inducing=8, **FIXED).fit(X + FAR, y)
    np.testing.assert_allclose(far.inducing_, near.inducing_ + FAR, rtol=0.0, atol=1e-5)
    np.testing.assert_allclose(far.predict_proba(X_new + FAR), near.predict_proba(X_new), rtol=0.0, atol=1e-6)


def test_a_batch_predicted_in_one_call_equals_it_in_pieces_and_row_by_row(cancer):
    """Predicted in blocks of a fixed number of rows: the same answers for any split of the batch, and one
    compiled program for every number of rows."""
    X, y, X_new = cancer
    model = BayesianSVC(**FIXED).fit(X, y)
    batch = np.vstack([X_new, X, -X])
    whole = _predictions(model, batch)
    programs = gram_matrix._cache_size(), ep_predict._cache_size()
    pieces = np.vstack([_predictions(model, batch[start:start + 13]) for start in range(0, batch.shape[0], 13)])
    np.testing.assert_allclose(pieces, whole, rtol=1e-12, atol=1e-12)
    rows = np.vstack([_predictions(model, batch[i:i + 1]) for i in range(0, batch.shape[0], 11)])
    np.testing.assert_allclose(rows, whole[::11], rtol=1e-12, atol=1e-12)
    assert (gram_matrix._cache_size(), ep_predict._cache_size()) == programs
    fit = model.fit_
    np.testing.assert_allclose(np.concatenate([fit.decision_function(batch[:70]), fit.decision_function(batch[70:])]),
                               fit.decision_function(batch), rtol=1e-12, atol=1e-12)


def test_a_pairs_distance_depends_only_on_the_two_rows():
    """Far from the origin and next to an extreme row, each squared distance is the float64 difference's."""
    rng = np.random.default_rng(1)
    X1 = FAR + rng.normal(size=(6, 3))
    X2 = np.vstack([FAR + rng.normal(size=(4, 3)), np.full((1, 3), 1e10)])
    expected = np.sum((X1[:, None, :] - X2[None, :, :]) ** 2, axis=-1)
    np.testing.assert_allclose(np.asarray(squared_distances(X1, X2)), expected, rtol=1e-15)
    np.testing.assert_allclose(np.asarray(squared_distances(X1[:1], X2[:1]))[0, 0], expected[0, 0], rtol=1e-15)
    scales = np.array([0.5, 2.0, 3.0])
    expected_scaled = np.sqrt(np.sum(((X1[:, None, :] - X2[None, :, :]) / scales) ** 2, axis=-1))
    np.testing.assert_allclose(np.asarray(scaled_distances(X1, X2, scales)), expected_scaled, rtol=1e-15)


@pytest.mark.parametrize("kernel, field, message", [
    (lambda: RBF(length_scale=-1.0), "length_scale", r"RBF.length_scale must be finite and > 0; got -1.0"),
    (lambda: Exponential(amplitude=0.0), "amplitude", r"Exponential.amplitude must be finite and > 0"),
    (lambda: Linear(offset=-0.5), "offset", r"Linear.offset must be finite and >= 0"),
    (lambda: Polynomial(coef0=-1.0), "coef0", r"Polynomial.coef0 must be >= 0"),
    (lambda: Polynomial(degree=0), "degree", r"Polynomial.degree must be an integer >= 1"),
    (lambda: RBF(length_scale=np.array([1.0, np.nan])), "length_scale", r"RBF.length_scale must be finite and > 0"),
    (lambda: RBF(amplitude=np.array([1.0, 2.0, -3.0])), "amplitude", r"RBF.amplitude must be finite and > 0"),
])
def test_kernel_hyperparameters_are_checked_when_the_kernel_is_built(kernel, field, message):
    with pytest.raises(ValueError, match=message):
        kernel()


def test_kernels_rebuilt_by_jax_are_not_checked_on_placeholders_or_tracers():
    """Unflattening with placeholder leaves, vmap over a batch of kernels with (B,) leaves and gradients in a
    kernel (whose leaves may be negative) still work."""
    batch = RBF(length_scale=np.array([0.5, 1.0, 2.0]), amplitude=np.ones(3), offset=np.zeros(3))
    leaves, tree = jax.tree_util.tree_flatten(batch)
    placeholder = jax.tree_util.tree_unflatten(tree, [object()] * len(leaves))
    assert isinstance(placeholder, RBF)
    X = np.linspace(-1.0, 1.0, 8).reshape(4, 2)
    with jax.enable_x64(True):
        grams = jax.vmap(lambda kernel: kernel(X))(batch)
        gradient = jax.grad(lambda scale: jnp.sum(RBF(length_scale=scale)(X)))(1.0)
        cotangent = jax.grad(lambda kernel: -jnp.sum(kernel(X)))(RBF())  # negative leaves, rebuilt unchecked
    assert grams.shape == (3, 4, 4) and np.isfinite(float(gradient)) and float(cotangent.offset) == -16.0


@pytest.mark.xfail(strict=True, reason=(
    "the offset inputs carry float64 rounding of about 1e-7, and the search is not stable to it: on this ridge, where "
    "ln P(D) changes by hundredths of a nat, a perturbation of the inputs by 1e-12 moves the selected amplitude from "
    "267 to 1456; the offset moves the held-out NLL by 0.007"))
def test_a_default_fit_on_offset_inputs_scores_the_same(cancer):
    """The whole default fit (the evidence search, its checks, the posterior) on inputs offset by 1.7e9: held-out NLL
    within 1e-3 of the fit on the inputs as they are."""
    from sklearn.metrics import log_loss

    X, y, X_new = cancer
    labels = load_breast_cancer(return_X_y=True)[1][np.random.default_rng(0).permutation(569)[60:72]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BayesvmWarning)
        near = BayesianSVC().fit(X, y).predict_proba(X_new)
        far = BayesianSVC().fit(X + FAR, y).predict_proba(X_new + FAR)
    assert abs(log_loss(labels, far, labels=[0, 1]) - log_loss(labels, near, labels=[0, 1])) < 1e-3
