"""The GP classifier (probit likelihood) in bayesvm's framework: its tilted moments against scipy quadrature, EP's
ln Z against exact integrals and Monte Carlo, the exact gradient against finite differences, predictions against
scikit-learn's GaussianProcessClassifier, the selection and BayesianSVC(likelihood="probit").

References are independent of the package: scipy's ``log_ndtr`` and adaptive quadrature, plain Monte Carlo from the
GP prior in NumPy, scikit-learn's Laplace approximation. Tolerances for EP (not exact for n > 1) were set from the
printed measurements (``pytest -s``) with a margin.
"""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest
from scipy import integrate, special
from scipy.optimize import minimize_scalar
from scipy.special import logsumexp

from bayesvm import BayesianSVC, log_evidence, probit_log_evidence
from bayesvm._validation import collapsed_training_data
from bayesvm.evidence.probit import probit_evidence
from bayesvm.exceptions import BayesvmWarning
from bayesvm.hyperparameters import coordinates_of, kernel_hyperparameters_at
from bayesvm.inference.ep import ep_log_evidence
from bayesvm.inference.ep_gradient import ep_naive_evidence_and_gradient, zero_sites
from bayesvm.inference.probit import probit_tilted_moments, weighted_probit_moments
from bayesvm.kernels import RBF
from bayesvm.selection.probit import select_probit

# ---------------------------------------------------------------------------
# references
# ---------------------------------------------------------------------------


def probit_reference(mean, v, y, w, o):
    """ln Z, mean, variance of N(theta; mean, v) Phi(y theta)^w Phi(-y theta)^o by scipy quad, on pieces between
    breakpoints spread geometrically around the maximum of the log integrand (found by scipy's scalar minimiser)."""
    def log_f(t):
        return (-0.5 * (t - mean) ** 2 / v - 0.5 * np.log(2 * np.pi * v) + w * special.log_ndtr(y * t)
                + o * special.log_ndtr(-y * t))

    sd = np.sqrt(v)
    # the log integrand is concave, its maximum between the cavity's mean and 0
    lo, hi = min(mean, 0.0) - 40.0 * sd - 10.0, max(mean, 0.0) + 40.0 * sd + 10.0
    mode = minimize_scalar(lambda t: -log_f(t), bounds=(lo, hi), method="bounded",
                           options={"xatol": 1e-10 * (hi - lo)}).x
    narrow = 1.0 / np.sqrt(1.0 / v + w + o)
    reach = 40.0 * sd / narrow + 10.0
    steps = np.geomspace(1e-2, reach, 120)
    pts = mode + narrow * np.concatenate([-steps[::-1], [0.0], steps])
    top = log_f(mode)

    def integral(g):
        return sum(integrate.quad(g, a, b, epsabs=0.0, epsrel=1e-12, limit=200)[0] for a, b in zip(pts[:-1], pts[1:]))

    z = integral(lambda t: np.exp(log_f(t) - top))
    m = mode + integral(lambda t: (t - mode) * np.exp(log_f(t) - top)) / z
    var = integral(lambda t: (t - m) ** 2 * np.exp(log_f(t) - top)) / z
    return np.log(z) + top, m, var


def assert_moments_close(got, reference, log_z_tol=1e-9, moment_tol=1e-8):
    log_z, mean, var = (float(np.ravel(a)[0]) for a in got)
    ref_log_z, ref_mean, ref_var = reference
    assert abs(log_z - ref_log_z) < log_z_tol * max(1.0, abs(ref_log_z))
    assert abs(mean - ref_mean) < moment_tol * np.sqrt(ref_var) + 1e-12 * abs(ref_mean)
    assert abs(var - ref_var) < moment_tol * ref_var


def rbf_gram(n, amplitude, seed=0, length_scale=1.0, offset=0.1):
    X = np.random.default_rng(seed).normal(size=(n, 1))
    return np.asarray(RBF(length_scale=length_scale, amplitude=amplitude, offset=offset)(X)), X


# ---------------------------------------------------------------------------
# tilted moments
# ---------------------------------------------------------------------------

# (cavity mean, cavity variance): both tails, tiny and huge variances (amplitudes up to 1e5)
ONE_LABEL_CAVITIES = [(0.0, 1.0), (0.7, 0.3), (-3.0, 1e-4), (0.5, 1e-4), (-8.0, 1.0), (-50.0, 2.0), (40.0, 1.0),
                      (0.0, 100.0), (-20.0, 1e3), (0.0, 1e5), (-1e3, 1e5), (3.0, 1e4)]


@pytest.mark.parametrize("mean,v", ONE_LABEL_CAVITIES)
@pytest.mark.parametrize("y", [1.0, -1.0])
def test_one_label_closed_form_and_quadrature_match_scipy(mean, v, y):
    reference = probit_reference(mean, v, y, 1.0, 0.0)
    assert_moments_close(probit_tilted_moments(np.array([mean]), np.array([v]), y), reference)
    # the quadrature at weight 1 (an array: the static choice takes the quadrature) agrees with both
    assert_moments_close(probit_tilted_moments(np.array([mean]), np.array([v]), y, np.array([1.0])), reference)


# (cavity mean, cavity variance, w, o): weighted sites as merged rows make them, up to hundreds of rows of each
# label at one input (a sharp log-concave peak), with wide cavities
WEIGHTED_CAVITIES = [(0.0, 1.0, 0.5, 0.0), (-5.0, 1.0, 500.0, 0.0), (3.0, 2.0, 500.0, 550.0), (-2.0, 50.0, 3.0, 2.0),
                     (10.0, 1e3, 0.3, 0.0), (0.0, 1.0, 0.5, 0.5), (-40.0, 100.0, 200.0, 0.0),
                     (2.0, 1e5, 300.0, 250.0), (0.0, 1e4, 2.0, 0.0), (1e3, 1e5, 1.0, 1.0), (0.3, 1e-3, 7.0, 3.0),
                     (1e3, 1e5, 1.3, 0.0), (300.0, 1e4, 0.8, 0.0), (5.0, 1e5, 1000.0, 0.0), (0.5, 1e-4, 2.0, 0.0)]


@pytest.mark.parametrize("mean,v,w,o", WEIGHTED_CAVITIES)
@pytest.mark.parametrize("y", [1.0, -1.0])
def test_weighted_sites_match_scipy(mean, v, w, o, y):
    got = probit_tilted_moments(np.array([mean]), np.array([v]), y, np.array([w]), np.array([o]))
    assert_moments_close(got, probit_reference(mean, v, y, w, o), log_z_tol=1e-7, moment_tol=1e-7)


def test_the_static_choice_and_the_symmetries():
    mean, v = np.array([-1.5, 0.2, 4.0]), np.array([0.5, 30.0, 2.0])
    closed = probit_tilted_moments(mean, v, 1.0)
    quadrature = weighted_probit_moments(mean, v, 1.0, 1.0, 0.0)
    for a, b in zip(closed, quadrature):
        assert np.allclose(a, b, rtol=1e-10, atol=1e-12)
    # Phi(y theta)^w Phi(-y theta)^o is Phi(-y theta)^o Phi(y theta)^w: the label and its opposite swap
    swapped = probit_tilted_moments(mean, v, -1.0, np.array(2.0), np.array(3.0))
    direct = probit_tilted_moments(mean, v, 1.0, np.array(3.0), np.array(2.0))
    for a, b in zip(swapped, direct):
        assert np.allclose(a, b, rtol=1e-12, atol=1e-13)


# ---------------------------------------------------------------------------
# EP's ln Z against exact integrals and Monte Carlo
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("k11,y", [(0.3, 1.0), (4.0, -1.0), (100.0, 1.0)])
def test_one_site_is_exact(k11, y):
    result = ep_log_evidence(np.array([[k11]]), np.array([y]), likelihood="probit")
    assert bool(result.converged)
    assert abs(float(result.log_z) - special.log_ndtr(0.0)) < 1e-12  # Phi(y theta) with a centred prior: 1/2


@pytest.mark.parametrize("w,o,k11", [(1.0, 1.0, 2.0), (3.0, 1.0, 10.0), (40.0, 35.0, 5.0), (500.0, 550.0, 100.0)])
def test_one_input_with_both_labels_is_the_one_dimensional_integral(w, o, k11):
    """Rows of both labels at one input: one site Phi(theta)^w Phi(-theta)^o (merged), ln Z exact."""
    result = ep_log_evidence(np.array([[k11]]), np.array([1.0]), likelihood="probit", weights=np.array([w]),
                             opposite=np.array([o]))
    reference = probit_reference(0.0, k11, 1.0, w, o)[0]
    assert bool(result.converged)
    assert abs(float(result.log_z) - reference) < 1e-8


def prior_monte_carlo(K, y, weights, n_draws, seed):
    """ln E_{theta ~ N(0, K)}[prod_i Phi(y_i theta_i)^w_i] from prior draws, with its delta-method standard error."""
    L = np.linalg.cholesky(K + 1e-12 * np.eye(len(K)))
    rng = np.random.default_rng(seed)
    log_w = np.concatenate([np.sum(weights * special.log_ndtr(y * (rng.standard_normal((n_draws // 10, len(K))) @ L.T)),
                                   axis=1) for _ in range(10)])
    w = np.exp(log_w - log_w.max())
    return logsumexp(log_w) - np.log(len(log_w)), np.std(w) / np.mean(w) / np.sqrt(len(w))


# (amplitude, weights, tolerance in nats); printed with -s: EP - MC against 1e6 prior draws
EVIDENCE_MC_CASES = [(0.5, None, 0.01), (3.0, None, 0.02), (30.0, None, 0.05), (3.0, "weighted", 0.03)]


@pytest.mark.parametrize("amplitude,weighted,tol", EVIDENCE_MC_CASES)
def test_evidence_vs_prior_monte_carlo(amplitude, weighted, tol):
    n = 5
    K, X = rbf_gram(n, amplitude)
    y = np.sign(X[:, 0] + 0.3 * np.random.default_rng(1).normal(size=n))
    weights = None if weighted is None else np.array([1.0, 2.0, 0.5, 3.0, 1.0])
    result = ep_log_evidence(K, y, likelihood="probit", weights=weights)
    assert bool(result.converged)
    mc, se = prior_monte_carlo(K, y, np.ones(n) if weights is None else weights, 1_000_000, seed=2)
    diff = float(result.log_z) - mc
    print(f"\nprobit evidence n={n} amp={amplitude} {weighted}: EP {float(result.log_z):.5f} MC {mc:.5f} +- {se:.1e} "
          f"diff {diff:+.2e}")
    assert abs(diff) < tol + 4 * se


@pytest.mark.parametrize("weighted", [False, True])
def test_gradient_matches_finite_differences(weighted):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 2))
    y = np.where(X[:, 0] + 0.3 * rng.normal(size=30) > 0, 1.0, -1.0)
    weights = rng.uniform(0.5, 3.0, 30) if weighted else None
    x = np.log([1.0, 3.0, 0.5, 1.2])

    def evaluate(x):
        return ep_naive_evidence_and_gradient(x, X, y, RBF(), zero_sites(30), weights=weights, likelihood="probit",
                                              tol=1e-11, log_z_tol=0.0)

    at = evaluate(x)
    assert bool(at.converged) and at.gradient[0] == 0.0  # no C in the probit likelihood
    for i in range(1, 4):
        step = np.zeros(4)
        step[i] = 1e-5
        numeric = (evaluate(x + step).value - evaluate(x - step).value) / 2e-5
        assert abs(at.gradient[i] - numeric) < 1e-6 * max(1.0, abs(numeric))


# ---------------------------------------------------------------------------
# the evidence's sampled check, predictions against scikit-learn, the selection
# ---------------------------------------------------------------------------


def _toy(n=60, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    y = np.where(X[:, 0] + 0.5 * X[:, 1] ** 2 - 0.5 + 0.5 * rng.normal(size=n) > 0, 1, 0)
    return X, y


def test_the_annealed_check_agrees_with_ep():
    """Tempered SMC from EP's Gaussian (an unbiased estimate whatever the start) against EP, with weights."""
    X, y = _toy(60)
    weights = np.random.default_rng(3).uniform(0.5, 2.0, 60)
    evidence = probit_log_evidence(X, y, kernel=RBF(amplitude=20.0, length_scale=1.0, offset=2.0),
                                   sample_weight=weights, check=True)
    print(f"\n{evidence.summary()}")
    assert evidence.naive_converged and bool(np.all(evidence.annealed_trusted))
    assert evidence.annealed_total_se < 0.05
    assert abs(evidence.total - evidence.annealed_total) < 0.3


def test_predictions_are_close_to_scikit_learns_gp_classifier():
    """scikit-learn's GaussianProcessClassifier (Laplace, logistic likelihood) at the matching fixed kernel: the
    logistic sigma(f) is about Phi(f sqrt(pi / 8)), so the probit model with prior K is the logistic one with prior
    (8 / pi) K. Laplace against EP and the two links: close, not equal."""
    from sklearn.gaussian_process import GaussianProcessClassifier
    from sklearn.gaussian_process.kernels import RBF as SklearnRBF
    from sklearn.gaussian_process.kernels import ConstantKernel

    X, y = _toy(80)
    X_test = np.random.default_rng(5).normal(size=(200, 2))
    amplitude, length_scale, offset = 4.0, 1.2, 1.0
    model = BayesianSVC(likelihood="probit", amplitude=amplitude, length_scale=length_scale, offset=offset).fit(X, y)
    scale = 8.0 / np.pi
    kernel = (ConstantKernel(scale * amplitude, "fixed") * SklearnRBF(length_scale, "fixed")
              + ConstantKernel(scale * offset, "fixed"))
    reference = GaussianProcessClassifier(kernel=kernel, optimizer=None).fit(X, y)
    ours, theirs = model.predict_proba(X_test)[:, 1], reference.predict_proba(X_test)[:, 1]
    plug_in = special.ndtr(model.decision_function(X_test))  # without the posterior's variance
    gap, plug_in_gap = np.abs(ours - theirs), np.abs(plug_in - theirs)
    print(f"\n|P(+1) - scikit-learn's|: mean {gap.mean():.3f}, max {gap.max():.3f} (plug-in Phi(mean): mean "
          f"{plug_in_gap.mean():.3f}, max {plug_in_gap.max():.3f}); labels agree on "
          f"{np.mean(model.predict(X_test) == reference.predict(X_test)):.3f}")
    assert gap.mean() < 0.045 and gap.max() < 0.1 and plug_in_gap.mean() > 1.5 * gap.mean()
    assert np.mean(model.predict(X_test) == reference.predict(X_test)) > 0.97


def test_the_selection_ends_at_a_local_maximum_of_the_evidence():
    X, y = _toy(60)
    data, _ = collapsed_training_data(X, y)
    selection = select_probit(data, RBF())
    assert selection.trusted and selection.evidence.total == pytest.approx(selection.log_evidence)
    x = coordinates_of(1.0, selection.kernel)
    for i in (1, 2, 3):
        for step in (-0.1, 0.1):
            moved = x.copy()
            moved[i] += step
            kernel = RBF().replace(**kernel_hyperparameters_at(RBF(), moved))
            assert probit_evidence(data, kernel).total < selection.log_evidence + 1e-3


# ---------------------------------------------------------------------------
# BayesianSVC(likelihood="probit")
# ---------------------------------------------------------------------------


def test_the_estimator_fits_predicts_and_pickles():
    X, y = _toy(60)
    labels = np.where(y == 1, "yes", "no")
    with warnings.catch_warnings():
        warnings.simplefilter("error", BayesvmWarning)
        model = BayesianSVC(likelihood="probit").fit(X, labels)
    assert model.C_ is None and model.fit_ is None and model.support_ is None and model.dual_coef_ is None
    assert model.amplitude_ > 0 and model.length_scale_ > 0 and model.log_evidence_se_ == 0.0
    assert model.log_evidence_ == pytest.approx(model.selection_.log_evidence)
    p = model.predict_proba(X)
    assert np.allclose(p.sum(axis=1), 1.0) and set(model.predict(X)) <= {"no", "yes"}
    assert np.array_equal(model.predict(X), model.classes_[(p[:, 1] >= 0.5).astype(int)])
    bars = model.error_bars(X[:5])
    assert np.all(bars.p_lower <= p[:5, 1]) and np.all(p[:5, 1] <= bars.p_upper)
    assert np.mean(model.predict(X) == labels) > 0.8
    restored = pickle.loads(pickle.dumps(model))
    assert np.array_equal(restored.predict_proba(X), p)
    theta = np.log([model.amplitude_, model.offset_ / model.amplitude_, model.length_scale_])
    assert model.log_marginal_likelihood(theta) == pytest.approx(model.log_evidence_, abs=1e-6)


def test_rows_twice_are_sample_weight_two():
    X, y = _toy(40)
    twice = BayesianSVC(likelihood="probit").fit(np.vstack([X, X[:10]]), np.concatenate([y, y[:10]]))
    weights = np.ones(40)
    weights[:10] = 2.0
    weighted = BayesianSVC(likelihood="probit").fit(X, y, sample_weight=weights)
    assert weighted.log_evidence_ == pytest.approx(twice.log_evidence_, abs=1e-9)
    assert np.allclose(weighted.predict_proba(X), twice.predict_proba(X), atol=1e-12)
    # at a fixed kernel: the copies a hair apart (their own sites, nearly one latent) are about the weight of 2, and
    # far from no weight at all
    fixed = {"amplitude": 2.0, "length_scale": 1.0, "offset": 1.0}
    weighted = BayesianSVC(likelihood="probit", **fixed).fit(X, y, sample_weight=weights).log_evidence_
    apart = BayesianSVC(likelihood="probit", **fixed).fit(np.vstack([X, X[:10] + 1e-6]),
                                                          np.concatenate([y, y[:10]])).log_evidence_
    plain = BayesianSVC(likelihood="probit", **fixed).fit(X, y).log_evidence_
    print(f"\nweight 2: {weighted:.4f}, copies 1e-6 apart: {apart:.4f}, no weights: {plain:.4f}")
    assert abs(weighted - apart) < 0.05 and plain - weighted > 1.0


def test_an_input_with_both_labels_is_one_site():
    """Rows of both labels at one input: one site Phi(theta)^w Phi(-theta)^o; with the input alone it is exact."""
    X = np.zeros((7, 1))
    y = np.array([1, 1, 1, 0, 0, 1, 0])
    evidence = probit_log_evidence(X, y, kernel=RBF(amplitude=3.0, offset=1.0))
    assert abs(evidence.total - probit_reference(0.0, 4.0, 1.0, 4.0, 3.0)[0]) < 1e-8


def test_k_classes_are_one_vs_rest_with_shared_or_per_class_hyperparameters():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(60, 2))
    y = np.argmax(X @ rng.normal(size=(2, 3)), axis=1)
    shared = BayesianSVC(likelihood="probit").fit(X, y)
    assert len(shared.posterior_) == 3 and shared.evidence_.values.shape == (3,)
    assert shared.log_evidence_ == pytest.approx(np.sum(shared.evidence_.values))
    assert np.allclose(shared.predict_proba(X).sum(axis=1), 1.0) and np.mean(shared.predict(X) == y) > 0.8
    per_class = BayesianSVC(likelihood="probit", multiclass="per_class", amplitude=5.0).fit(X, y)
    assert np.allclose(per_class.amplitude_, 5.0) and len(set(per_class.length_scale_.tolist())) == 3
    assert per_class.C_ is None and len(per_class.selection_) == 3


def test_probit_refuses_what_it_does_not_have():
    X, y = _toy(20)
    for options in ({"C": 1.0}, {"posterior": "laplace"}, {"n_inducing": 10}):
        with pytest.raises(ValueError):
            BayesianSVC(likelihood="probit", **options).fit(X, y)
    with pytest.raises(ValueError, match="likelihood"):
        ep_log_evidence(np.eye(2), np.ones(2), likelihood="logit")


def test_the_hinge_evidence_has_no_way_to_drop_its_normalisation():
    """ln N(D) = 0 belongs to a normalised likelihood: the SVM's evidence refuses to leave it out."""
    X = np.random.default_rng(0).normal(size=(12, 2))
    y = (X[:, 0] > 0).astype(int)
    with pytest.raises(ValueError, match="normalization must be one of"):
        log_evidence(X, y, normalization="none")


def test_auto_keeps_the_model_whose_evidence_is_clearly_higher_and_is_that_model():
    """likelihood="auto" reports both models' evidence on the same rows, keeps the GP classifier only where its
    ln P(D) clears the SVM's by the margin beyond three standard errors, and predicts as that model fitted alone."""
    from bayesvm.selection.probit import MODEL_CHOICE_MARGIN

    X, y = _toy(40)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BayesvmWarning)
        auto = BayesianSVC(likelihood="auto").fit(X, y)
        alone = {name: BayesianSVC(likelihood=name).fit(X, y) for name in ("hinge", "probit")}
    for name, model in alone.items():
        assert auto.model_evidences_[name] == pytest.approx((model.log_evidence_, model.log_evidence_se_))
    (hinge, hinge_se), (probit, probit_se) = auto.model_evidences_["hinge"], auto.model_evidences_["probit"]
    clearly = probit > hinge + MODEL_CHOICE_MARGIN + 3.0 * np.hypot(hinge_se, probit_se)
    assert auto.likelihood_ == ("probit" if clearly else "hinge")
    np.testing.assert_allclose(auto.predict_proba(X), alone[auto.likelihood_].predict_proba(X), atol=1e-12)
    with pytest.raises(ValueError, match="likelihood='auto' fits the GP classifier too"):
        BayesianSVC(likelihood="auto", C=1.0).fit(X, y)
