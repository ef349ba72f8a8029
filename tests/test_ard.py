"""Per-feature length scales (ARD): the kernels, the search coordinates, the gradients and the selection.

References are independent computations: scikit-learn's anisotropic RBF and
Matern(nu = 1/2) kernels, the isotropic kernels of this package, central
finite differences of tightly converged EP and of the ln N(D) path's own
estimate (same particles), and the fixed-hyperparameter evidence.
"""

import json
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.gaussian_process import kernels as gp_kernels

import bayesvm
from bayesvm.exceptions import BayesvmWarning
from bayesvm import BayesianSVC
from bayesvm._precision import float64_scope
from bayesvm.inference.ep_gradient import ep_naive_evidence_and_gradient, zero_sites
from bayesvm.inference.ep_low_rank import low_rank_naive_evidence_and_gradient
from bayesvm.hyperparameters import (
    COORDINATES,
    SearchSpace,
    coordinate_names,
    coordinates_of,
    kernel_at,
    kernel_hyperparameters_at,
)
from bayesvm.kernels import RBF, Exponential, gram_matrix, is_ard
from bayesvm.normalization.path import NormalizationPath
from bayesvm.selection.search import _describe, default_starts, screen_candidates


def _problem(n, d, seed=0):
    """Labels from the first two features only; the others are noise."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.where(np.sin(2.0 * X[:, 0]) + X[:, 1] + 0.3 * rng.normal(size=n) > 0, 1, 0)
    return X, y


# --- the kernels ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("ours, theirs", [(RBF, gp_kernels.RBF), (Exponential, lambda l: gp_kernels.Matern(l, nu=0.5))])
def test_ard_gram_matches_scikit_learn(ours, theirs):
    X, _ = _problem(30, 4)
    Z = X[:7] + 0.5
    length_scale = np.array([0.5, 2.0, 3.0, 0.8])
    kernel = ours(length_scale=length_scale, amplitude=2.5, offset=0.7)
    reference = 2.5 * theirs(length_scale)(X) + 0.7
    np.testing.assert_allclose(np.asarray(gram_matrix(kernel, X)), reference, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.asarray(gram_matrix(kernel, X, Z)), 2.5 * theirs(length_scale)(X, Z) + 0.7,
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.asarray(kernel.diag(X)), np.diag(reference), rtol=1e-12)


@pytest.mark.parametrize("family", [RBF, Exponential])
def test_equal_per_feature_length_scales_are_the_isotropic_kernel(family):
    X, _ = _problem(25, 3)
    isotropic = family(length_scale=1.7, amplitude=3.0, offset=0.5)
    ard = isotropic.replace(length_scale=np.full(3, 1.7))
    assert is_ard(ard) and not is_ard(isotropic)
    np.testing.assert_allclose(np.asarray(gram_matrix(ard, X)), np.asarray(gram_matrix(isotropic, X)), rtol=1e-13)


def test_a_batch_of_ard_kernels_works_under_vmap():
    X, _ = _problem(20, 3)
    scales = np.array([[0.5, 1.0, 2.0], [1.0, 1.0, 1.0], [3.0, 0.2, 1.5]])
    with float64_scope():
        batch = RBF(length_scale=scales, amplitude=np.ones(3), offset=np.zeros(3))
        grams = jax.vmap(lambda k: k(X))(batch)
    for b in range(3):
        np.testing.assert_allclose(np.asarray(grams[b]), gp_kernels.RBF(scales[b])(X), atol=1e-12)


def test_exponential_ard_gradient_is_finite_at_coincident_points():
    """The root of a zero distance has an infinite derivative; the kernel's must stay finite (here, 0)."""
    X = np.array([[0.0, 1.0], [0.0, 1.0], [1.0, -1.0]])
    with float64_scope():
        grad = jax.grad(lambda l: jnp.sum(Exponential(length_scale=l)(jnp.asarray(X))))(jnp.array([1.0, 2.0]))
    assert np.all(np.isfinite(np.asarray(grad)))


# --- bad inputs ----------------------------------------------------------------------------------------------


def test_a_length_scale_array_of_the_wrong_length_is_refused_with_the_accepted_forms():
    X, y = _problem(30, 3)
    kernel = RBF(length_scale=np.ones(2))
    for call in (lambda: gram_matrix(kernel, X), lambda: bayesvm.log_evidence(X, y, kernel=kernel),
                 lambda: bayesvm.select_hyperparameters(X, y, kernel=kernel)):
        with pytest.raises(ValueError, match=r"2 entries but the inputs have 3 features.*scalar.*array of 3"):
            call()


@pytest.mark.parametrize("bad", [[1.0, 0.0, 2.0], [1.0, -1.0, 2.0], [1.0, np.nan, 2.0], [1.0, np.inf, 2.0], []])
def test_non_positive_or_non_finite_length_scales_are_refused(bad):
    with pytest.raises(ValueError, match=r"RBF.length_scale must be finite and > 0"):
        RBF(length_scale=bad).check()


@pytest.mark.parametrize("kernel", ["linear", "polynomial"])
def test_ard_needs_a_kernel_with_a_length_scale(kernel):
    X, y = _problem(30, 3)
    with pytest.raises(ValueError, match="ard=True.*'rbf' or 'exponential'"):
        BayesianSVC(kernel=kernel, ard=True).fit(X, y)


def test_ard_with_a_fixed_length_scale_is_refused():
    X, y = _problem(30, 3)
    with pytest.raises(ValueError, match="leave length_scale None"):
        BayesianSVC(ard=True, length_scale=1.0).fit(X, y)


@pytest.mark.parametrize("method", ["grid", "cv"])
def test_ard_is_selected_by_the_search_only(method):
    X, y = _problem(30, 3)
    with pytest.raises(ValueError, match="method='search' only"):
        bayesvm.select_hyperparameters(X, y, kernel=RBF(length_scale=np.ones(3)), method=method)
    with pytest.raises(ValueError, match="cannot be fixed through grid"):
        bayesvm.select_hyperparameters(X, y, kernel=RBF(length_scale=np.ones(3)), grid={"length_scale": 1.0})


def test_search_space_bounds_must_match_each_other():
    with pytest.raises(ValueError, match="one value per coordinate"):
        SearchSpace(np.zeros(6), np.ones(5))
    with pytest.raises(ValueError, match="one value per coordinate"):
        SearchSpace(np.zeros(3), np.ones(3))


# --- coordinates, bounds and starts --------------------------------------------------------------------------


def test_coordinates_of_an_ard_kernel_round_trip_and_are_named():
    template = RBF(length_scale=np.ones(3))
    kernel = RBF(length_scale=np.array([0.5, 2.0, 7.0]), amplitude=4.0, offset=2.0)
    x = coordinates_of(3.0, kernel)
    np.testing.assert_allclose(x, np.log([3.0, 4.0, 0.5, 0.5, 2.0, 7.0]))
    back = kernel_hyperparameters_at(template, x)
    np.testing.assert_allclose(back["length_scale"], [0.5, 2.0, 7.0])
    assert (back["amplitude"], back["offset"]) == pytest.approx((4.0, 2.0))
    with float64_scope():
        np.testing.assert_allclose(np.asarray(kernel_at(template, jnp.asarray(x)).length_scale), [0.5, 2.0, 7.0])
    assert coordinate_names(template) == COORDINATES[:3] + ("log_length_scale_1", "log_length_scale_2",
                                                          "log_length_scale_3")
    assert coordinate_names(RBF()) == COORDINATES
    assert _describe(x) == "(C 3, k0 4, k_b/k0 0.5, length scales 0.5, 2, 7)"
    assert _describe(coordinates_of(3.0, RBF(2.0, 4.0, 2.0))) == "(C 3, k0 4, k_b/k0 0.5, shape 2)"


def test_default_bounds_and_starts_follow_each_features_spread():
    X, _ = _problem(100, 3)
    X[:, 1], X[:, 2] = 10.0 * X[:, 0], 5.0  # feature 2 is feature 1 ten times wider, feature 3 is constant
    template = RBF(length_scale=np.ones(3))
    space = SearchSpace.default(X, template)
    assert space.lower.shape == (6,)
    np.testing.assert_allclose(space.upper[4] - space.upper[3], np.log(10.0), atol=1e-12)
    np.testing.assert_allclose(space.lower[4] - space.lower[3], np.log(10.0), atol=1e-12)
    assert space.free[:5].all() and not space.free[5]  # the constant feature's length scale is held fixed
    starts = default_starts(space, X, template)
    assert starts.shape == (2, 6)
    np.testing.assert_allclose(starts[:, 4] - starts[:, 3], np.log(10.0), atol=1e-12)
    np.testing.assert_allclose(starts[0, 3:5] - starts[1, 3:5], np.log(2.0), atol=1e-12)
    assert np.all((space.lower <= starts) & (starts <= space.upper))


def test_the_screens_shape_move_applies_to_every_length_scale():
    space = SearchSpace(np.full(6, -5.0), np.full(6, 5.0))
    start = np.zeros(6)
    moved = [c - start for c in screen_candidates(space, start, 8)]
    longer = [m for m in moved if m[3] > 0]
    assert longer and all(np.allclose(m[3:], m[3]) for m in moved)


# --- the gradients -------------------------------------------------------------------------------------------

#: (C, k0, k_b/k0, l_1, l_2, l_3)
_POINT = np.log([1.0, 10.0, 1.0, 0.8, 1.5, 3.0])


def _tight_ep(x, X, y, template, sites=None):
    """EP converged to 1e-11 in the sites, from ``sites`` (a nearby fixed point: the same fixed point, fewer sweeps)."""
    return ep_naive_evidence_and_gradient(
        jnp.asarray(x), jnp.asarray(X), jnp.asarray(y, dtype=jnp.float64), template,
        zero_sites(X.shape[0]) if sites is None else sites, tol=1e-11, log_z_tol=0.0, max_iter=3000,
    )


def _central_differences(value, x, h):
    steps = h * np.eye(x.size)
    return np.array([(value(x + s) - value(x - s)) / (2 * h) for s in steps])


@pytest.mark.parametrize("family", [RBF, Exponential])
def test_ep_gradient_in_every_length_scale_matches_finite_differences(family):
    X, y = _problem(40, 3)
    y_pm = 2.0 * y - 1.0
    template = family(length_scale=np.ones(3))
    with float64_scope():
        result = _tight_ep(_POINT, X, y_pm, template)
        assert bool(result.converged) and result.gradient.shape == (6,)
        numeric = _central_differences(lambda x: float(_tight_ep(x, X, y_pm, template, result.sites).value),
                                       _POINT, 1e-5)
    np.testing.assert_allclose(np.asarray(result.gradient), numeric, rtol=1e-5, atol=1e-5)


def test_low_rank_ep_gradient_in_every_length_scale_matches_finite_differences():
    X, y = _problem(40, 3)
    y_pm = jnp.asarray(2.0 * y - 1.0)
    template = RBF(length_scale=np.ones(3))

    def tight(x, sites):
        return low_rank_naive_evidence_and_gradient(jnp.asarray(x), jnp.asarray(X), jnp.asarray(X[::4]), y_pm,
                                                   template, sites, tol=1e-11, log_z_tol=0.0, max_iter=3000)

    with float64_scope():
        result = tight(_POINT, zero_sites(40))
        assert bool(result.converged)
        numeric = _central_differences(lambda x: float(tight(x, result.sites).value), _POINT, 1e-5)
    np.testing.assert_allclose(np.asarray(result.gradient), numeric, rtol=1e-5, atol=1e-5)


def test_path_gradient_in_every_length_scale_is_the_gradient_of_its_estimate():
    X, _ = _problem(40, 3)
    with float64_scope(), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", BayesvmWarning)
        path = NormalizationPath(jnp.asarray(X), RBF(length_scale=np.ones(3)), key=0)
        estimate = path.estimate(_POINT)
        numeric = _central_differences(lambda x: path.estimate(x).value, _POINT, 1e-5)
    assert path.n_anchors == 1 and estimate.gradient.shape == (6,)
    assert np.all(np.abs(estimate.gradient[3:]) > 1e-3)  # the length scales do move ln N(D) here
    np.testing.assert_allclose(estimate.gradient, numeric, rtol=1e-4, atol=1e-4)


# --- the selection -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ard_fit():
    X, y = _problem(64, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", BayesvmWarning)
        return X, y, BayesianSVC(ard=True).fit(X, y)


def test_ard_selection_switches_off_the_noise_features(ard_fit):
    _, _, model = ard_fit
    relevant, noise = model.length_scale_[:2], model.length_scale_[2:]
    assert model.length_scale_.shape == (3,)
    assert model.selection_.report.trusted
    assert noise.min() > 3.0 * relevant.max()


def test_ard_selection_reports_the_evidence_of_its_kernel(ard_fit):
    X, y, model = ard_fit
    theta = np.log([model.C_, model.amplitude_, model.offset_ / model.amplitude_, *model.length_scale_])
    assert model.log_marginal_likelihood(theta) == pytest.approx(model.log_evidence_, abs=1e-8)
    kernel = RBF(length_scale=model.length_scale_, amplitude=model.amplitude_, offset=model.offset_)
    fixed = bayesvm.log_evidence(X, y, C=model.C_, kernel=kernel)
    assert fixed.total == pytest.approx(model.log_evidence_, abs=1e-8)
    with pytest.raises(ValueError, match="theta must be 6 finite log hyperparameters"):
        model.log_marginal_likelihood(theta[:4])
    record = json.loads(json.dumps(model.selection_.to_dict()))
    np.testing.assert_allclose(record["best"]["length_scale"], model.length_scale_)
    assert len(record["path"][0]["x"]) == 6


def test_kernel_families_with_the_same_fields_never_share_a_compiled_program():
    """RBF and Exponential have the same pytree fields; their tree structures must still differ, or a compiled
    program of one family (gram_matrix at the same shapes) can be served to the other (it was, in a full test
    run, under JAX 0.10's register_dataclass)."""
    X, _ = _problem(30, 4)
    length_scale = np.array([0.5, 2.0, 3.0, 0.8])
    rbf, exponential = RBF(length_scale=length_scale), Exponential(length_scale=length_scale)
    assert jax.tree_util.tree_structure(rbf) != jax.tree_util.tree_structure(exponential)
    distances = np.sqrt((((X[:, None, :] - X[None, :, :]) / length_scale) ** 2).sum(-1))
    np.testing.assert_allclose(np.asarray(gram_matrix(rbf, X)), np.exp(-0.5 * distances**2) + 1.0, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(gram_matrix(exponential, X)), np.exp(-distances) + 1.0, rtol=1e-12)
