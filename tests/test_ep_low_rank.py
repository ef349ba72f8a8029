"""EP over the low-rank prior (bayesvm.inference.ep_low_rank).

References are independent computations: dense EP on the full Gram matrix
(Z = X), the posterior and predictive distributions from the dense
covariance V V^T + diag(d) with NumPy inverses, and central finite
differences of tightly converged low-rank EP.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.cluster import KMeans
from sklearn.model_selection import train_test_split

from bayesvm._precision import float64_scope
from bayesvm.datasets import load_dataset
from bayesvm.inference.ep import ep_log_evidence
from bayesvm.inference.ep_gradient import ep_naive_evidence_and_gradient, zero_sites
from bayesvm.inference.ep_low_rank import (
    low_rank_naive_evidence_and_gradient,
    low_rank_posterior,
    low_rank_predict,
    low_rank_predictor,
)
from bayesvm.hyperparameters import kernel_at
from bayesvm.kernels import RBF
from bayesvm.low_rank import low_rank_prior_at


def _subsample(name, n, seed=0):
    data = load_dataset(name)
    X, _, y, _ = train_test_split(data.X, data.y, train_size=n, stratify=data.y, random_state=seed)
    return X, y


def _dense(prior):
    V = np.asarray(prior.V)
    return V @ V.T + np.diag(np.asarray(prior.d))


def _tiny_problem(kind, n=12, m=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n + 5, 3))
    Z = rng.normal(size=(m, 3))
    x = np.log([1.0, 2.0, 0.5, 1.5])
    tau = rng.uniform(0.0, 2.0, n)
    tau[[1, 5, 8]] = [-0.05, -0.1, 0.0]  # negative sites (as nu's), still a proper posterior
    return x, X[:n], X[n:], Z, tau, rng.normal(size=n)


#: as tests/test_search.py's tight EP: the dense path's compilation is shared when both run
TIGHT = dict(tol=1e-11, log_z_tol=0.0, max_iter=3000)
#: low-rank EP's options as the posterior's (bayesvm.posterior.low_rank_posteriors) at a tighter tolerance: its
#: compiled program serves both (these problems converge well within the default max_iter; each run asserts it)
LOW_RANK_TIGHT = dict(tol=1e-11, log_z_tol=0.0)


@pytest.mark.parametrize("hyper", [(1.0, 10.0, 1.0, 5.0), (10.0, 100.0, 0.1, 2.0), (0.3, 1000.0, 1.0, 10.0)])
def test_inducing_inputs_at_the_data_give_the_dense_evidence_and_gradient(hyper):
    X, y = _subsample("breast_cancer", 30)  # 30 rows at 30 inducing inputs: the subsample tests' low-rank evidence
    x = np.log(hyper)  # float64, as the other tests pass the hyperparameters
    with float64_scope():
        X, y = jnp.asarray(X), jnp.asarray(y, dtype=jnp.float64)
        dense = ep_log_evidence(kernel_at(RBF(), x)(X), y, hyper[0], tol=1e-11)
        dense_path = ep_naive_evidence_and_gradient(x, X, y, RBF(), zero_sites(30), **TIGHT)
        low = low_rank_naive_evidence_and_gradient(x, X, X, y, RBF(), zero_sites(30), **LOW_RANK_TIGHT)
    assert bool(dense.converged) and bool(dense_path.converged) and bool(low.converged)
    assert abs(float(low.value) - float(dense.log_z)) < 1e-6
    np.testing.assert_allclose(np.asarray(low.gradient), np.asarray(dense_path.gradient), rtol=1e-6, atol=1e-6)


def test_callers_with_other_options_and_dtypes_share_one_compiled_program():
    """The search passes EP's damping and sweep cap, the posterior leaves them at their defaults, a caller may pass
    float32 inputs and integer labels: one compiled program per input shapes serves them all, with the same
    values where the options are the same."""
    from bayesvm.inference.ep_low_rank import _low_rank_naive_evidences_and_gradient as program

    X, y = _subsample("breast_cancer", 30)
    x = np.log([1.0, 10.0, 1.0, 5.0])
    before = program._cache_size()
    default = low_rank_naive_evidence_and_gradient(x, X, X, y, RBF(), zero_sites(30), **LOW_RANK_TIGHT)
    explicit = low_rank_naive_evidence_and_gradient(x, X, X, y, RBF(), zero_sites(30), damping=0.5, max_iter=200,
                                                    **LOW_RANK_TIGHT)
    narrow = low_rank_naive_evidence_and_gradient(x, X.astype(np.float32), X.astype(np.float32), y.astype(int),
                                                  RBF(), zero_sites(30), **LOW_RANK_TIGHT)
    assert program._cache_size() - before <= 1
    assert bool(default.converged) and float(explicit.value) == float(default.value)
    np.testing.assert_array_equal(np.asarray(explicit.gradient), np.asarray(default.gradient))
    assert abs(float(narrow.value) - float(default.value)) < 1e-3  # the float32 inputs' rounding, no more


@pytest.mark.parametrize("kind", ["fitc", "dtc"])
def test_posterior_matches_the_dense_covariance(kind):
    x, X, _, Z, tau, shift = _tiny_problem(kind)
    posterior = jax.jit(low_rank_posterior)  # compiled, as EP's loop runs it: one program, not one per operation
    with float64_scope():
        prior = low_rank_prior_at(jnp.asarray(x), jnp.asarray(X), jnp.asarray(Z), RBF(), kind)
        post = posterior(prior, jnp.asarray(tau), jnp.asarray(shift))
        improper = posterior(prior, jnp.asarray(tau - 50.0), jnp.asarray(shift))
    K = _dense(prior)
    if kind == "dtc":
        assert np.linalg.matrix_rank(K) == Z.shape[0] + 1  # singular K: the reference must not invert it
    # Sigma = (K^-1 + S)^-1 = K (I + S K)^-1, valid for singular K and negative tau
    B = np.eye(len(tau)) + tau[:, None] * K
    sigma = K @ np.linalg.inv(B)
    assert np.all(np.linalg.eigvalsh(0.5 * (sigma + sigma.T)) > -1e-12)  # the posterior is proper
    np.testing.assert_allclose(np.asarray(post.mean), sigma @ shift, rtol=0, atol=1e-10)
    np.testing.assert_allclose(np.asarray(post.variance), np.diag(sigma), rtol=0, atol=1e-10)
    assert abs(float(post.log_det) - np.linalg.slogdet(B)[1]) < 1e-10
    assert not np.isfinite(float(improper.log_det))


@pytest.mark.parametrize("kind", ["fitc", "dtc"])
def test_predictions_match_the_dense_joint_posterior(kind):
    x, X, X_new, Z, tau, shift = _tiny_problem(kind)
    tau = np.abs(tau)
    n = X.shape[0]
    with float64_scope():
        sites = zero_sites(n)._replace(precision=jnp.asarray(tau), shift=jnp.asarray(shift))
        predictor = low_rank_predictor(jnp.asarray(x), jnp.asarray(X), jnp.asarray(Z), RBF(), sites, kind=kind)
        mean, variance = low_rank_predict(predictor, jnp.asarray(X_new))
        train = low_rank_prior_at(jnp.asarray(x), jnp.asarray(X), jnp.asarray(Z), RBF(), kind)
        test = low_rank_prior_at(jnp.asarray(x), jnp.asarray(X_new), jnp.asarray(Z), RBF(), "fitc")
        k_new = np.asarray(kernel_at(RBF(), jnp.asarray(x)).diag(X_new))
    # joint prior of (train, test): shared V, independent eps with the training kind's d and FITC's test d
    V = np.vstack([np.asarray(train.V), np.asarray(test.V)])
    K = V @ V.T + np.diag(np.concatenate([np.asarray(train.d), np.asarray(test.d)]))
    np.testing.assert_allclose(np.diag(K)[n:], k_new, rtol=1e-12)  # the exact test conditional
    # Sigma_j = K_j - K_jn (I + S K_nn)^-1 S K_nj,  mu_j = K_jn (I + S K_nn)^-1 h
    inner = np.linalg.inv(np.eye(n) + tau[:, None] * K[:n, :n])
    sigma = K - K[:, :n] @ inner @ (tau[:, None] * K[:n, :])
    np.testing.assert_allclose(np.asarray(mean), (K[:, :n] @ inner @ shift)[n:], rtol=0, atol=1e-10)
    np.testing.assert_allclose(np.asarray(variance), np.diag(sigma)[n:], rtol=0, atol=1e-10)


def _inducing(X, m=30):
    return KMeans(n_clusters=m, n_init=1, random_state=0).fit(X).cluster_centers_


def _tight(x, X, Z, y, kind):
    sites = zero_sites(X.shape[0])
    result = low_rank_naive_evidence_and_gradient(jnp.asarray(x), X, Z, y, RBF(), sites, kind=kind, **LOW_RANK_TIGHT)
    assert bool(result.converged)
    return result


@pytest.mark.parametrize("kind, hyper", [("fitc", (1.0, 10.0, 1.0, 5.0)), ("dtc", (3.0, 30.0, 0.3, 3.0))])
def test_gradient_matches_finite_differences(kind, hyper):
    X, y = _subsample("breast_cancer", 60)
    Z = _inducing(X)
    x = np.log(hyper)
    with float64_scope():
        X, Z, y = jnp.asarray(X), jnp.asarray(Z), jnp.asarray(y, dtype=jnp.float64)
        result = _tight(x, X, Z, y, kind)
        h = 1e-5
        numeric = []
        for j in range(4):
            step = np.zeros(4)
            step[j] = h
            numeric.append((float(_tight(x + step, X, Z, y, kind).value)
                            - float(_tight(x - step, X, Z, y, kind).value)) / (2 * h))
    np.testing.assert_allclose(np.asarray(result.gradient), numeric, rtol=1e-5, atol=1e-5)


def test_warm_start_reaches_the_same_fixed_point_in_fewer_sweeps():
    X, y = _subsample("breast_cancer", 60)
    y = y.astype(np.float64)  # float labels and the options' names as the finite-difference test's: one program
    Z = _inducing(X)
    x0, x1 = np.log([1.0, 10.0, 1.0, 5.0]), np.log([1.3, 14.0, 0.8, 5.5])
    options = dict(LOW_RANK_TIGHT, tol=1e-8)
    with float64_scope():
        sites = low_rank_naive_evidence_and_gradient(x0, X, Z, y, RBF(), zero_sites(60), **options).sites
        cold = low_rank_naive_evidence_and_gradient(x1, X, Z, y, RBF(), zero_sites(60), **options)
        warm = low_rank_naive_evidence_and_gradient(x1, X, Z, y, RBF(), sites, **options)
    assert bool(cold.converged) and bool(warm.converged)
    assert abs(float(warm.value) - float(cold.value)) < 1e-6
    assert int(warm.n_iter) < int(cold.n_iter)
    assert int(warm.n_factorizations) == int(warm.n_iter) + 3
