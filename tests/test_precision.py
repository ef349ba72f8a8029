"""float64 without a global side effect: importing bayesvm leaves ``jax_enable_x64`` alone, and every
public entry point still computes in float64 (``bayesvm._precision``)."""

import os
import pickle
import subprocess
import sys
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate
from sklearn.datasets import make_classification

import bayesvm
from bayesvm._precision import float64_scope
from bayesvm.inference.ep import ep_log_evidence


@pytest.fixture
def x64_off():
    """Run the test with JAX's float64 flag off, whatever the environment says, and check it is left as found."""
    before = jax.config.jax_enable_x64
    with jax.enable_x64(False):
        yield
        assert jax.config.jax_enable_x64 is False, "a bayesvm call left float64 switched on"
    assert jax.config.jax_enable_x64 == before


@pytest.fixture(scope="module")
def data():
    X, y = make_classification(n_samples=30, n_features=2, n_redundant=0, n_clusters_per_class=1, random_state=3)
    return X, y


def test_import_does_not_switch_float64_on():
    env = {key: value for key, value in os.environ.items() if key != "JAX_ENABLE_X64"}
    result = subprocess.run(
        [sys.executable, "-c", "import jax; import bayesvm; print(jax.config.jax_enable_x64)"],
        capture_output=True, text=True, env=env, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "False"


def test_log_evidence_matches_a_float64_reference(x64_off, data):
    X, y = data
    # (C = 2: this module's MAP fits then all share one free-set buffer size, and one compiled polish)
    ev = bayesvm.log_evidence(X, y, C=2.0, approximation="ep", normalization="ep")
    assert jax.config.jax_enable_x64 is False
    with float64_scope():
        reference = bayesvm.log_evidence(X, y, C=2.0, approximation="ep", normalization="ep")
    for name in ("total", "naive", "log_normalization"):
        assert isinstance(getattr(ev, name), float)
        np.testing.assert_allclose(getattr(ev, name), getattr(reference, name), rtol=1e-12, atol=0)
    assert ev.fit.solution.alpha.dtype == np.float64
    np.testing.assert_allclose(ev.posterior.predict_proba(X), reference.posterior.predict_proba(X), rtol=1e-12)


def test_ep_outputs_are_float64(x64_off, data):
    X, y = data
    K = np.asarray(bayesvm.RBF(length_scale=1.0)(X))
    assert K.dtype == np.float64
    result = ep_log_evidence(K, np.where(y > 0, 1.0, -1.0), 1.0)
    assert jax.config.jax_enable_x64 is False
    for name in ("log_z", "mean", "variance", "site_precision", "site_shift"):
        assert getattr(result, name).dtype == jnp.float64, name
    # the caller's own JAX code still runs in float32
    assert jnp.ones(3).dtype == jnp.float32


def test_the_cells_of_a_point_hold_a_float64_gram_matrix(x64_off, data):
    """A public helper that only builds arrays: outside the package's scope JAX would truncate them to float32."""
    from bayesvm.evidence.log_evidence import point_cells

    X, y = data
    cells = point_cells(X, bayesvm.RBF(length_scale=0.7), 1.0, y=y)
    assert cells.base.dtype == jnp.float64
    np.testing.assert_allclose(np.asarray(cells.base), np.exp(-0.5 * ((X[:, None] - X[None]) ** 2).sum(-1) / 0.49),
                               rtol=1e-12)


def test_one_site_ep_evidence_has_float64_accuracy(x64_off):
    # one site: EP is exact, ln Q = ln kappa(C) + ln INT N(theta; 0, k) exp(-C max(0, 1 - theta)) dtheta
    k, C = 1.7, 0.5
    density = lambda t: np.exp(-0.5 * t * t / k - C * max(0.0, 1.0 - t)) / np.sqrt(2 * np.pi * k)  # noqa: E731
    exact = sum(integrate.quad(density, a, b, epsabs=0.0, epsrel=1e-13)[0] for a, b in ((-60, 1), (1, 60)))
    result = ep_log_evidence(np.array([[k]]), np.array([1.0]), C)
    # float32 would leave an error of order 1e-7
    np.testing.assert_allclose(float(result.log_z), np.log(exact) - np.logaddexp(0.0, -2.0 * C), rtol=1e-11)


def test_pickled_posterior_keeps_float64(x64_off, data):
    X, y = data
    fit = bayesvm.fit_map(X, y, C=2.0)
    for approximation in ("laplace", "ep"):
        posterior = bayesvm.Posterior.from_fit(fit, approximation)
        clone = pickle.loads(pickle.dumps(posterior))
        np.testing.assert_array_equal(clone.predict_proba(X), posterior.predict_proba(X))
    assert pickle.loads(pickle.dumps(fit)).solution.alpha.dtype == np.float64


def test_warnings_point_at_the_callers_line(x64_off, data):
    X, y = data
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        bayesvm.log_evidence(X, y, C=1.0, kernel=bayesvm.RBF(0.2, amplitude=10.0), approximation="laplace",
                             normalization="ep")
    marginal = [w for w in caught if "marginal" in str(w.message)]
    assert marginal, "expected the Laplace warning (most points marginal)"
    assert all(w.filename == __file__ for w in marginal)


def test_entry_point_inside_the_callers_jit_follows_the_callers_precision(x64_off, data):
    X, _ = data
    kernel = bayesvm.RBF(length_scale=1.0)
    assert jax.jit(lambda Z: kernel(Z))(jnp.asarray(X)).dtype == jnp.float32
    with float64_scope():
        assert jax.jit(lambda Z: kernel(Z))(jnp.asarray(X)).dtype == jnp.float64
