"""Evidence: Laplace-style naive evidence, prior-sampling normalisation, log_evidence."""

import dataclasses
import warnings

import jax
import numpy as np
import pytest
from scipy import integrate, stats
from scipy.special import logsumexp

from bayesvm.exceptions import BayesvmWarning, UntrustedEvidenceWarning
from bayesvm import RBF, Linear
from bayesvm.evidence.log_evidence import LAPLACE_MARGINAL_SHARE, log_evidence, log_naive_evidence, log_normalization
from bayesvm.normalization.annealing import annealed_log_normalization
from bayesvm.kernels import gram_matrix
from bayesvm.normalization.draws import (
    log_normalization_from_draws,
    normalization_inputs,
    prior_draws,
)
from bayesvm.solver.dual import fit_map


def _tiny_problem(n=8, seed=0):
    rng = np.random.default_rng(seed)
    X = np.sort(rng.uniform(0, 1, n))[:, None]
    y = np.where(np.sin(6 * X[:, 0]) + 0.3 * rng.normal(size=n) > 0, 1.0, -1.0)
    return X, y


def _log_kappa(C):
    """ln kappa(C) = -ln(1 + exp(-2C)) in NumPy."""
    return -np.logaddexp(0.0, -2.0 * C)


def _brute_force_log_naive(X, y, kernel, C, n_draws=400_000, seed=1):
    """ln Q(D) = n ln kappa + ln E_{theta ~ GP}[exp(-C sum_i l(y_i theta_i))] by plain Monte Carlo."""
    K = np.asarray(kernel(X))
    L = np.linalg.cholesky(K + 1e-12 * np.eye(len(y)))
    theta = np.random.default_rng(seed).normal(size=(n_draws, len(y))) @ L.T
    log_w = -C * np.maximum(0.0, 1.0 - y * theta).sum(axis=1)
    return len(y) * _log_kappa(C) + logsumexp(log_w) - np.log(n_draws)


def test_naive_terms_match_direct_numpy():
    X, y = _tiny_problem(12, seed=3)
    C, kernel = 2.0, RBF(0.2, 1.5, 0.5)
    fit = fit_map(X, y, C=C, kernel=kernel)
    terms = log_naive_evidence(fit)
    raw = log_naive_evidence(fit, determinant="raw")
    a, theta, m = fit.alpha, fit.theta, fit.marginal
    K = np.asarray(gram_matrix(kernel, X))
    L = 2 * np.pi * (a[m] * (C - a[m]) / C) ** 2
    K_m = K[np.ix_(m, m)]
    assert int(terms.n_marginal) == m.sum() >= 2
    np.testing.assert_allclose(terms.log_kappa_term, -len(y) * np.log1p(np.exp(-2 * C)))
    np.testing.assert_allclose(terms.quadratic_term, -0.5 * np.sum(fit.y * a * theta))
    np.testing.assert_allclose(terms.hinge_term, -C * np.sum(np.maximum(0, 1 - fit.y * theta)))
    # det(I + L_m K_m) and det(L_m K_m), computed directly (non-symmetric products)
    np.testing.assert_allclose(terms.log_det_term, -0.5 * np.linalg.slogdet(np.eye(m.sum()) + np.diag(L) @ K_m)[1])
    np.testing.assert_allclose(raw.log_det_term, -0.5 * np.linalg.slogdet(np.diag(L) @ K_m)[1])
    np.testing.assert_allclose(
        terms.value, terms.log_kappa_term + terms.quadratic_term + terms.hinge_term + terms.log_det_term
    )


def test_regularised_and_raw_determinants_differ_by_the_unit_term():
    # det(I + L K) / det(L K) = det(I + (L K)^-1) > 1: regularised evidence is always lower
    X, y = _tiny_problem(12, seed=4)
    fit = fit_map(X, y, C=1.0, kernel=RBF(0.3))
    assert log_naive_evidence(fit).value < log_naive_evidence(fit, determinant="raw").value


def test_laplace_ranks_settings_like_brute_force_monte_carlo():
    """The Laplace-style ln Q(D) is off by an offset of under 3 nats here but keeps the ranking (theory: "Where the
    Laplace form breaks")."""
    X, y = _tiny_problem(8)
    settings = [(1.0, RBF(0.1, 1.0, 1.0)), (0.3, RBF(0.3, 1.0, 1.0)), (2.0, RBF(0.3, 0.25, 1.0)), (3.0, RBF(0.3, 1.0, 1.0))]
    laplace = np.array([float(log_naive_evidence(fit_map(X, y, C=C, kernel=k)).value) for C, k in settings])
    brute = np.array([_brute_force_log_naive(X, y, k, C) for C, k in settings])
    assert np.all(np.abs(laplace - brute) < 3.0), (laplace, brute)
    np.testing.assert_array_equal(np.argsort(laplace), np.argsort(brute))
    assert stats.spearmanr(laplace, brute).statistic == 1.0


def _exact_log_normalization_one_point(k, C, n):
    """ln INT N(theta; 0, k) nu(theta)^n d theta by adaptive quadrature."""
    log_k = _log_kappa(C)

    def integrand(t):
        nu = np.exp(log_k) * (np.exp(-C * max(0.0, 1 - t)) + np.exp(-C * max(0.0, 1 + t)))
        return stats.norm.pdf(t, scale=np.sqrt(k)) * nu**n

    s = 12 * np.sqrt(k)
    value, _ = integrate.quad(integrand, -s, s, points=[-1.0, 1.0], limit=200, epsabs=0, epsrel=1e-12)
    return np.log(value)


@pytest.mark.parametrize("n", [1, 5, 20])
@pytest.mark.parametrize("C", [0.5, 3.0])
def test_prior_sampling_normalisation_against_quadrature(n, C):
    kernel = RBF(1.0, amplitude=1.3, offset=0.7)  # prior variance at one point: 2.0
    est = log_normalization(kernel=kernel, C=C, n=n, inputs=np.zeros((1, 1)), method="prior", n_samples=200_000,
                            random_state=3)
    exact = _exact_log_normalization_one_point(2.0, C, n)
    assert abs(float(est.value) - exact) < 4 * float(est.se) + 1e-3, (float(est.value), exact, float(est.se))
    assert 0 < float(est.diagnostics["ess"]) <= 200_000


def test_common_random_numbers_reuse_one_set_of_draws():
    X, _ = _tiny_problem(30, seed=5)
    draws = prior_draws(RBF(0.4), X, n_samples=500, random_state=7)
    # theta = sqrt(k0) f + sqrt(kb) b: an amplitude/offset change rescales the same draws
    a = log_normalization_from_draws(draws, 2.0, 0.5, 1.0, 30)
    direct = log_normalization(kernel=RBF(0.4, 2.0, 0.5), C=1.0, n=30, inputs=X, method="prior", n_samples=500,
                               random_state=7)
    np.testing.assert_allclose(float(a.value), float(direct.value), rtol=1e-12)
    # common draws make the estimate smooth in C; independent draws per C make it rough
    Cs = np.linspace(0.5, 1.5, 21)
    # (Python floats throughout: the calls share the first one's compiled program)
    common = [float(log_normalization_from_draws(draws, 1.0, 1.0, float(C), 30).value) for C in Cs]
    independent = [
        float(log_normalization_from_draws(prior_draws(RBF(0.4), X, n_samples=500, random_state=s), 1.0, 1.0, float(C),
                                           30).value)
        for s, C in enumerate(Cs)
    ]
    roughness = [np.std(np.diff(v, 2)) for v in (common, independent)]
    # (the ratio depends on the draws: 8x with these, 10x with an earlier square-root factor of the same Gram)
    assert roughness[0] < 0.2 * roughness[1], roughness


def test_normalisation_inputs_choices():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3)) * [1.0, 2.0, 3.0] + 5.0
    np.testing.assert_array_equal(normalization_inputs(X, "training", max_inputs=100), X)
    sub = normalization_inputs(X, "training", max_inputs=10)
    assert sub.shape == (10, 3) and all(any(np.array_equal(r, x) for x in X) for r in sub)
    box = normalization_inputs(X, "box", max_inputs=200)
    assert np.all(box >= X.min(0)) and np.all(box <= X.max(0))
    gauss = normalization_inputs(X, "gaussian", max_inputs=4000)
    np.testing.assert_allclose(gauss.std(0), X.std(0, ddof=1), rtol=0.1)
    with pytest.raises(ValueError, match="inputs must be one of"):
        normalization_inputs(X, "uniform")


def test_log_evidence_assembles_its_parts():
    # 30 points and 500 prior draws: the draws' shape of the common-random-numbers test above
    X, y = _tiny_problem(30, seed=6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", BayesvmWarning)
        ev = log_evidence(X, y, C=1.0, kernel=RBF(0.3), approximation="laplace", normalization="prior",
                          n_samples=500, random_state=2)
    np.testing.assert_allclose(ev.total, ev.naive - ev.log_normalization)
    np.testing.assert_allclose(ev.naive, float(log_naive_evidence(ev.fit).value))
    assert ev.total_se == ev.log_normalization_se > 0
    assert ev.n_marginal == int(ev.fit.marginal.sum())
    assert "ln P(D)" in ev.summary() and f"{ev.total:.3f}" in ev.summary()
    assert f"{ev.normalization_ess:.1f}" in ev.summary()  # prior sampling reports its effective sample size
    assert "effective samples" not in dataclasses.replace(ev, normalization_ess=np.inf).summary()


def test_low_effective_sample_size_warns():
    # n = 300 training points, ln N(D) over 30 stand-in inputs with 500 draws (the draws' shape of the tests above)
    rng = np.random.default_rng(1)
    X = rng.uniform(size=(30, 1))
    with pytest.warns(UntrustedEvidenceWarning, match="effective draws"):
        log_normalization(kernel=RBF(0.1, 5.0, 1.0), C=2.0, n=300, inputs=X, method="prior", n_samples=500)


@pytest.mark.slow
def test_laplace_warning_follows_the_measured_marginal_share():
    """Laplace warns exactly above LAPLACE_MARGINAL_SHARE marginal points (docs/evidence-accuracy.md); EP never does."""
    rng = np.random.default_rng(4)
    X = np.concatenate([rng.normal(-2.0, 0.5, size=(40, 2)), rng.normal(2.0, 0.5, size=(40, 2))])
    y = np.repeat([-1, 1], 40)
    noisy = np.where(rng.uniform(size=80) > 0.5, 1, -1)
    outcomes = set()
    for labels, kernel in ((y, RBF(3.0, amplitude=10.0, offset=10.0)), (noisy, RBF(0.3, amplitude=10.0, offset=1.0))):
        for approximation in ("laplace", "ep"):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                ev = log_evidence(X, labels, C=3.0, kernel=kernel, approximation=approximation)
            warned = any("points are marginal" in str(w.message) for w in caught)
            if approximation == "ep":
                assert not warned
                continue
            assert warned == (ev.n_marginal / ev.n > LAPLACE_MARGINAL_SHARE)
            outcomes.add(warned)
    assert outcomes == {True, False}  # both sides of the threshold were exercised


def test_many_marginal_points_warn_about_laplace():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(30, 2))
    y = np.where(rng.uniform(size=30) > 0.5, 1, -1)  # noise labels, short length scale: most points marginal
    # (ln N(D) by prior sampling with the draws' shape of the tests above: the warning is Laplace's ln Q(D)'s)
    with pytest.warns(UntrustedEvidenceWarning, match="marginal"):
        log_evidence(X, y, C=1.0, kernel=RBF(0.05, amplitude=100.0, offset=1.0), approximation="laplace",
                     normalization="prior", n_samples=500)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"approximation": "magic"}, "approximation must be one of"),
        ({"determinant": "pseudo"}, "determinant must be one of"),
        ({"normalization": "exact"}, "normalization must be one of"),
        ({"C": -1.0}, "C must be"),
        # built by hand it raises at once; rebuilt from its leaves (as JAX rebuilds kernels) it reaches the check
        ({"kernel": jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(Linear()), [-1.0, 1.0])}, "amplitude"),
    ],
)
def test_log_evidence_bad_arguments(kwargs, match):
    X, y = _tiny_problem(10)
    with pytest.raises(ValueError, match=match):
        log_evidence(X, y, **kwargs)


def test_log_normalization_bad_arguments():
    with pytest.raises(ValueError, match="n must be a positive integer"):
        log_normalization(kernel=RBF(), C=1.0, n=0, inputs=np.zeros((2, 1)))
    with pytest.raises(ValueError, match="NaN"):
        log_normalization(kernel=RBF(), C=1.0, n=3, inputs=np.array([[np.nan]]))
    # prior sampling takes stand-in inputs of any number (here 30, with 500 draws: the draws' shape of the tests above)
    assert np.isfinite(log_normalization(kernel=RBF(), C=1.0, n=3, inputs=np.zeros((30, 1)), method="prior",
                                         n_samples=500).value)
    with pytest.raises(ValueError, match="n training inputs"):
        log_normalization(kernel=RBF(), C=1.0, n=3, inputs=np.zeros((2, 1)))  # the default integrates over the n inputs


@pytest.mark.slow
def test_log_normalization_default_is_accurate_on_the_1d_toy_at_n_500():
    """The default estimator against an independent annealed reference (another seed, twice the particles).

    The 1-D toy of the normalisation study (inputs uniform on [0, 1], RBF length scale 0.2), where plain
    prior sampling, the default before, is biased low at this n.
    """
    X = np.random.default_rng(5).uniform(size=(500, 1))
    kernel, C = RBF(length_scale=0.2, amplitude=1.0, offset=1.0), 2.0
    default = log_normalization(kernel=kernel, C=C, n=500, inputs=X)
    reference = annealed_log_normalization(kernel, C, 500, X, route="product", key=17, n_particles=256)
    assert reference.runs_agree
    assert abs(float(default.value) - reference.value) < 0.3
