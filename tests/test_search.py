"""The gradient-based evidence selection: EP's exact gradient, the ln N(D) path, the search and its checks.

References are independent computations: central finite differences of
tightly converged EP, fresh tempered-SMC runs with other seeds, and the
fixed-hyperparameter evidence of log_evidence.
"""

import dataclasses
import warnings

import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.model_selection import train_test_split

import bayesvm
from bayesvm.exceptions import BayesvmWarning, UntrustedEvidenceWarning
from bayesvm._precision import float64_scope
from bayesvm._validation import training_data
from bayesvm.normalization.annealing import annealed_log_normalization
from bayesvm.datasets import load_dataset
from bayesvm.inference.ep_gradient import ep_naive_evidence_and_gradient, zero_sites
from bayesvm.hyperparameters import SearchSpace, coordinates_of, kernel_hyperparameters_at, pairwise_distances
from bayesvm.kernels import RBF, Polynomial
from bayesvm.normalization.path import NormalizationPath
from bayesvm.selection.search import (SearchOptions, SearchStep, _describe, climb_end, default_starts, resolution,
                                      screen_candidates)
from bayesvm.selection.search_selection import select_by_search


def _subsample(name, n, seed=0):
    data = load_dataset(name)
    X, _, y, _ = train_test_split(data.X, data.y, train_size=n, stratify=data.y, random_state=seed)
    return X, y


def _tight_ep(x, X, y, template):
    return ep_naive_evidence_and_gradient(
        jnp.asarray(x), jnp.asarray(X), jnp.asarray(y, dtype=jnp.float64), template, zero_sites(X.shape[0]),
        tol=1e-11, log_z_tol=0.0, max_iter=3000,
    )


@pytest.mark.parametrize(
    "name, template, hyper",
    [
        ("breast_cancer", RBF(), (1.0, 10.0, 1.0, 5.0)),
        ("breast_cancer", RBF(), (10.0, 100.0, 0.1, 2.0)),  # large C k0, short length scale: most points marginal
        ("ionosphere", RBF(), (0.3, 1000.0, 1.0, 10.0)),  # small C, large amplitude
        ("pima", Polynomial(degree=2), (1.0, 1.0, 1.0, 0.1)),
    ],
)
def test_ep_gradient_matches_finite_differences(name, template, hyper):
    X, y = _subsample(name, 60)
    x = np.log(hyper)
    with float64_scope():
        result = _tight_ep(x, X, y, template)
        assert bool(result.converged)
        h = 1e-5
        numeric = []
        for j in range(4):
            step = np.zeros(4)
            step[j] = h
            numeric.append((float(_tight_ep(x + step, X, y, template).value)
                            - float(_tight_ep(x - step, X, y, template).value)) / (2 * h))
    np.testing.assert_allclose(np.asarray(result.gradient), numeric, rtol=1e-5, atol=1e-5)


def test_warm_start_reaches_the_same_fixed_point_in_fewer_sweeps():
    X, y = _subsample("breast_cancer", 60)
    x0, x1 = np.log([1.0, 10.0, 1.0, 5.0]), np.log([1.3, 14.0, 0.8, 5.5])
    with float64_scope():
        Xj, yj = jnp.asarray(X), jnp.asarray(y, dtype=jnp.float64)
        sites = ep_naive_evidence_and_gradient(jnp.asarray(x0), Xj, yj, RBF(), zero_sites(60)).sites
        cold = ep_naive_evidence_and_gradient(jnp.asarray(x1), Xj, yj, RBF(), zero_sites(60), tol=1e-8)
        warm = ep_naive_evidence_and_gradient(jnp.asarray(x1), Xj, yj, RBF(), sites, tol=1e-8)
    assert bool(cold.converged) and bool(warm.converged)
    assert abs(float(warm.value) - float(cold.value)) < 1e-6
    assert int(warm.n_iter) < int(cold.n_iter)


def test_nearby_sizes_share_the_search_programs_and_padding_changes_nothing():
    """n = 57 and 59 both run padded to 64 points: one compilation each for EP and the path's reweighting (at an
    anchor's own point and away from it), and the padded ln Q(D) is EP's at full tolerance (``ep_log_evidence``,
    the same program from cold sites)."""
    from bayesvm.inference.ep import _padded_label_run, ep_log_evidence
    from bayesvm.normalization.path import _reweighted

    X, y = _subsample("breast_cancer", 59)
    x = np.log([1.0, 10.0, 1.0, 5.0])
    template = RBF()
    before = _padded_label_run._cache_size(), _reweighted._cache_size()
    with float64_scope(), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", BayesvmWarning)
        for n in (57, 59):
            search = _tight_ep(x, X[:n], y[:n], template)
            path = NormalizationPath(jnp.asarray(X[:n]), template, key=0)
            path.estimate(x)
            assert not path.estimate(x + 0.01).anchored  # the anchor's own point and a reweighted one: one program
            kernel = template.replace(**kernel_hyperparameters_at(template, x))
            reference = ep_log_evidence(kernel(X[:n]), y[:n], float(np.exp(x[0])), tol=1e-11)
            assert search.sites.precision.shape == (n,)
            assert abs(float(search.value) - float(reference.log_z)) < 1e-7
    after = _padded_label_run._cache_size(), _reweighted._cache_size()
    assert after[0] - before[0] <= 1 and after[1] - before[1] <= 1


def test_path_normalization_matches_fresh_tempered_smc_on_real_data():
    """ln N(D) reweighted from an anchor 0.2-0.5 log units away agrees with independent tempered SMC there."""
    X, _ = _subsample("pima", 100)
    template = RBF()
    x0 = np.log([1.0, 5.0, 1.0, 3.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", BayesvmWarning)
        with float64_scope():
            path = NormalizationPath(jnp.asarray(X), template, key=1)
            path.estimate(x0)
            reweighted = 0
            for move in ([0.1, 0.0, 0.0, 0.0], [0.0, 0.2, -0.2, 0.1], [-0.3, 0.3, 0.3, -0.3]):
                x = x0 + np.asarray(move)
                estimate = path.estimate(x)
                reweighted += not estimate.anchored
                C = float(np.exp(x[0]))
                kernel = template.replace(**kernel_hyperparameters_at(template, x))
                reference = annealed_log_normalization(kernel, C, 100, X, route="product", key=7)
                assert reference.runs_agree
                assert abs(estimate.value - reference.value) <= max(1.0, 3 * np.hypot(estimate.se, reference.se))
    assert reweighted >= 1


def test_path_gradient_is_the_gradient_of_its_estimate():
    X, _ = _subsample("breast_cancer", 60)
    x0 = np.log([1.0, 10.0, 1.0, 5.0])
    with float64_scope():
        path = NormalizationPath(jnp.asarray(X), RBF(), key=0)
        estimate = path.estimate(x0)
        h = 1e-5
        numeric = []
        for j in range(4):
            step = np.zeros(4)
            step[j] = h
            numeric.append((path.estimate(x0 + step).value - path.estimate(x0 - step).value) / (2 * h))
    assert path.n_anchors == 1
    np.testing.assert_allclose(estimate.gradient, numeric, rtol=1e-4, atol=1e-4)


def test_where_an_anchor_stops_serving_the_path_hands_over_to_the_next_continuously_with_an_exact_gradient():
    """Two anchors on a line in ln C, the older one's value raised by a nat (as if its runs had all missed the same
    mass): where the newer anchor's effective sample size falls through the serving threshold, switching from one
    anchor to the other would make ln N(D) jump by about a nat and a line search bisect onto the jump. The blend
    must be continuous there, its gradient must match central finite differences where both anchors share the
    point, and it must lie between the two anchors' own estimates."""
    from bayesvm.normalization.path import MIN_ESS_FRACTION, _path_estimate

    X, _ = _subsample("breast_cancer", 60)
    x0, direction = np.log([1.0, 10.0, 1.0, 5.0]), np.array([1.0, 0.0, 0.0, 0.0])
    with float64_scope(), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", BayesvmWarning)
        path = NormalizationPath(jnp.asarray(X), RBF(), key=0)
        path.estimate(x0)
        step = next(s for s in np.arange(0.05, 1.0, 0.05) if path.estimate(x0 + s * direction).anchored)
        x1 = x0 + step * direction
        path.anchors[0] = path.anchors[0]._replace(value=path.anchors[0].value + 1.0)

        def at(s):
            return x1 + s * (x0 - x1)

        def reweighted(anchor, s):
            return path._reweight(anchor, at(s))

        def fraction(anchor, s):
            return float(reweighted(anchor, s).ess) / anchor.z.shape[0]

        newer, older = path.anchors[1], path.anchors[0]
        low, high = 0.0, 1.0  # the newer anchor's fraction falls from about 1 at x1 to below the threshold at x0
        assert fraction(newer, low) > MIN_ESS_FRACTION > fraction(newer, high)
        for _ in range(40):
            middle = 0.5 * (low + high)
            low, high = (middle, high) if fraction(newer, middle) >= MIN_ESS_FRACTION else (low, middle)
        assert fraction(older, high) > MIN_ESS_FRACTION  # the older anchor serves where the newer stops
        inside, outside = path.estimate(at(low)), path.estimate(at(high))
        own = [_path_estimate(a, reweighted(a, low), anchored=False).value for a in (newer, older)]
        assert own[1] - own[0] > 0.5  # switching anchors here would jump by this much
        assert abs(inside.value - outside.value) < 1e-3

        s = next(s for s in np.linspace(0.0, 1.0, 41) if 0.3 < fraction(newer, s) < 0.45)
        x = at(s)
        estimate = path.estimate(x)
        blended = [_path_estimate(a, reweighted(a, s), anchored=False).value for a in (newer, older)]
        assert min(blended) + 0.05 < estimate.value < max(blended) - 0.05
        h = 1e-5
        numeric = [(path.estimate(x + h * e).value - path.estimate(x - h * e).value) / (2 * h) for e in np.eye(4)]
    assert path.n_anchors == 2
    np.testing.assert_allclose(estimate.gradient, numeric, rtol=1e-4, atol=1e-4)


@pytest.fixture(scope="module")
def demo_selection():
    X, y = _subsample("breast_cancer", 60)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", BayesvmWarning)
        selection = bayesvm.select_hyperparameters(X, y)
    return X, y, selection


def test_search_answer_passes_its_checks_and_beats_its_starts(demo_selection):
    X, y, selection = demo_selection
    assert selection.report.trusted
    first_of_each_start = [next(s for s in selection.search.steps if s.start == i) for i in range(2)]
    assert selection.best_value >= max(s.log_evidence for s in first_of_each_start) - 3 * selection.best_se
    # the answer is where the search ended, inside the default bounds
    space = SearchSpace.default(X, RBF())
    kernel = selection.best_kernel
    x = coordinates_of(selection.best["C"], kernel)
    assert np.all(x >= space.lower - 1e-9) and np.all(x <= space.upper + 1e-9)


def test_path_normalization_along_the_search_matches_tempered_smc(demo_selection):
    """Points the search visited: its ln N(D) against fresh tempered SMC, within a nat (or 3 se)."""
    X, y, selection = demo_selection
    visited = [s for s in selection.search.steps if np.isfinite(s.log_evidence)]
    checked = 0
    for step in visited[:: max(1, len(visited) // 4)]:
        C, kernel = selection.search.hyperparameters(step)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", BayesvmWarning)
            reference = annealed_log_normalization(kernel, C, X.shape[0], X, route="product", key=11)
        if not reference.runs_agree:  # a reference whose own runs disagree settles nothing
            continue
        checked += 1
        assert abs(step.log_normalization - reference.value) <= max(
            1.0, 3 * np.hypot(step.log_normalization_se, reference.se)
        )
    assert checked >= 3  # the test compared the path at several points, not none


def test_fixed_and_selected_estimators_report_the_same_evidence(demo_selection):
    X, y, selection = demo_selection
    best = selection.best
    fixed = bayesvm.BayesianSVC(C=best["C"], amplitude=best["amplitude"], offset=best["offset"],
                                length_scale=best["length_scale"]).fit(X, y)
    assert fixed.log_evidence_ == pytest.approx(selection.best_value, abs=1e-6)
    evidence = bayesvm.log_evidence(X, y, C=best["C"], kernel=selection.best_kernel)
    assert evidence.total == pytest.approx(selection.best_value, abs=1e-6)


def test_fixed_hyperparameters_are_held_by_the_search():
    X, y = _subsample("breast_cancer", 60)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", BayesvmWarning)
        selection = bayesvm.select_hyperparameters(X, y, grid={"C": 2.0, "length_scale": 4.0})
    assert selection.best["C"] == pytest.approx(2.0)
    assert selection.best["length_scale"] == pytest.approx(4.0)


def test_search_rejects_a_grid_of_several_values():
    X, y = _subsample("breast_cancer", 40)
    with pytest.raises(ValueError, match="one positive value"):
        bayesvm.select_hyperparameters(X, y, grid={"C": [1.0, 2.0]})
    with pytest.raises(ValueError, match="unknown hyperparameters"):
        bayesvm.select_hyperparameters(X, y, grid={"gamma": 1.0})


def _search(X, y, options, starts=None, space=None):
    template = RBF()
    space = SearchSpace.default(X, template) if space is None else space
    starts = default_starts(space, X, template) if starts is None else starts
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", BayesvmWarning)
        return select_by_search(training_data(X, y), template, space=space, starts=starts, options=options)


def test_a_search_whose_loose_ep_fails_at_both_starts_recovers_through_the_fallbacks():
    """The crash of a default fit: the search's loose EP loop fails at both starts, every point is infeasible.

    One sweep from cold sites cannot converge, so without fallbacks nothing can be evaluated (the old
    behaviour, an error); with them the same search ends where the default one does.
    """
    X, y = _subsample("breast_cancer", 60, seed=3)
    broken = SearchOptions(ep_max_iter=1, max_iter=3)
    with pytest.raises(RuntimeError, match="could not be evaluated"):
        _search(X, y, dataclasses.replace(broken, ep_fallbacks=(), max_screen=1))
    recovered = _search(X, y, broken)
    reference = _search(X, y, SearchOptions(max_iter=3))
    assert np.isfinite(recovered.best_value) and recovered.report.naive_converged
    # every evaluation needed a fallback: more sweeps than one per point
    assert all(s.ep_sweeps > 1 for s in recovered.search.steps)
    assert recovered.best_value == pytest.approx(reference.best_value, abs=max(0.5, 3 * reference.best_se))


def test_the_search_stops_once_its_steps_are_below_what_the_evidence_resolves():
    """By default a start stops once three iterations together gained less than the target standard error of
    ln N(D): it ends sooner than a search without that rule, at an evidence as high within that error. The
    evaluations are deterministic, so the first start's are a prefix of the other search's."""
    X, y = _subsample("pima", 100)
    default = _search(X, y, SearchOptions())
    tight = _search(X, y, SearchOptions(stall=0))
    first = [sum(s.start == 0 for s in selection.search.steps) for selection in (default, tight)]
    assert first[0] < first[1]
    target = resolution(100)
    assert default.report.trusted and default.best_value >= tight.best_value - max(3 * target, 3 * tight.best_se)


def test_the_screen_moves_a_start_that_cannot_be_evaluated_and_says_so():
    """An infeasible start is moved, not fatal: with repeated inputs the prior is singular, its factor needs a
    jitter, and at amplitude 1e12 that jitter's noise swamps the margin (the path reports the point unresolved).
    The repeated inputs are nudged by 1e-9: exact duplicates collapse onto one latent, which no jitter needs."""
    X, y = _subsample("breast_cancer", 50, seed=4)
    X, y = np.vstack([X, X[:10] + 1e-9]), np.concatenate([y, y[:10]])
    template = RBF()
    default = SearchSpace.default(X, template)
    upper = default.upper.copy()
    upper[1] = np.log(1e12)
    space = SearchSpace(default.lower, upper)
    start = default_starts(default, X, template)[0]
    start[1] = np.log(1e12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", BayesvmWarning)
        selection = select_by_search(
            training_data(X, y), template, space=space, starts=start[None], options=SearchOptions(max_iter=3))
    first = selection.search.steps[0]
    assert not np.isfinite(first.log_evidence) and np.allclose(first.x, start)
    assert "start moved to" in selection.search.messages[0]
    assert np.isfinite(selection.best_value)


def test_a_climb_that_gains_less_than_the_resolution_ends_where_it_started():
    """A climb's end is its best point only where it rose above its start by more than the evidence resolves; a
    start that could not be evaluated never counts."""
    def climb(*values):
        return [SearchStep(start=0, x=np.full(4, float(i)), log_evidence=v, log_normalization=0.0, log_naive=v,
                           log_normalization_se=0.1, ess=100.0, ep_sweeps=1, factorizations=1, anchored=False,
                           seconds=0.0) for i, v in enumerate(values)]

    flat = climb(-10.0, -9.95, -9.9)
    assert climb_end(flat, resolution=0.13) is flat[0]
    rising = climb(-10.0, -9.5, -9.8)
    assert climb_end(rising, resolution=0.13) is rising[1]
    moved = climb(-np.inf, -9.0, -8.95)
    assert climb_end(moved, resolution=0.13) is moved[2]


def test_screen_candidates_stay_in_the_box_and_keep_fixed_coordinates():
    space = SearchSpace(np.log([0.1, 1.0, 0.5, 2.0]), np.log([10.0, 50.0, 0.5, 8.0]))
    start = np.log([1.0, 40.0, 0.5, 7.0])
    candidates = screen_candidates(space, start, 8)
    assert 0 < len(candidates) <= 8
    for c in candidates:
        assert np.all(c >= space.lower - 1e-12) and np.all(c <= space.upper + 1e-12)
        assert c[2] == pytest.approx(np.log(0.5))
        assert not np.allclose(c, start)
    assert len({tuple(np.round(c, 12)) for c in candidates}) == len(candidates)


def _search_whose_first_check_fails(monkeypatch, failed: dict, options: SearchOptions, warning: str):
    """A search on 60 breast-cancer rows whose best end point's fresh evidence comes back 50 nats higher with the
    report's fields ``failed`` replaced; returns the selection and the C of every point checked, in order."""
    import bayesvm.selection.search_selection as search_module

    real = search_module.check_point
    calls = []

    def first_failed(data, C, kernel, *args, **kwargs):
        evidence, report, reference = real(data, C, kernel, *args, **kwargs)
        calls.append(C)
        if len(calls) == 1:
            return dataclasses.replace(evidence, total=evidence.total + 50.0), report._replace(**failed), reference
        return evidence, report, reference

    monkeypatch.setattr(search_module, "check_point", first_failed)
    X, y = _subsample("breast_cancer", 60, seed=5)
    template = RBF()
    space = SearchSpace.default(X, template)
    with pytest.warns(UntrustedEvidenceWarning, match=warning):
        selection = select_by_search(training_data(X, y), template, space=space,
                                     starts=default_starts(space, X, template), options=options)
    return selection, calls


def test_a_higher_point_that_fails_its_checks_is_reported_not_dropped_silently(monkeypatch):
    """The answer is the best verified end point; a higher one whose checks failed (its ln N(D) runs disagreed) must
    be named in a warning."""
    selection, calls = _search_whose_first_check_fails(monkeypatch, {"runs_agree": False}, SearchOptions(max_iter=3),
                                                       "returned point is the best verified one")
    assert len(calls) == 2 and selection.report.trusted and selection.best["C"] == pytest.approx(calls[1])


def test_a_clearly_higher_point_whose_fresh_evidence_is_sound_is_returned_though_the_search_path_disagreed(
        monkeypatch):
    """Where only the search's own ln N(D) disagrees with a fresh one whose runs agree (EP converged), the fresh ln P(D)
    stands: a point 50 nats above the first fully verified one is the answer, with the warning that names the
    disagreement, not a verified point far below it."""
    selection, calls = _search_whose_first_check_fails(monkeypatch, {"normalization_agrees": False},
                                                       SearchOptions(max_iter=3, refinements=0),
                                                       "disagree at the selected point")
    assert len(calls) == 2 and not selection.report.normalization_agrees
    assert selection.best["C"] == pytest.approx(calls[0])


def test_where_the_search_and_a_fresh_ln_n_disagree_the_warning_says_the_evidence_may_be_overstated():
    """The moons fit's answer (420 rows): the search's ln N(D) -59.25 against a fresh, trusted -56.93 +- 0.14, which
    runs with more temperatures put 1.2-2.1 nats higher (documentation: normalisation, "What to trust"). One warning,
    with both values, that names the disagreement and says that ln P(D) may be overstated beyond its standard
    error."""
    from bayesvm.selection.trust import TrustReport, warn_untrusted

    report = TrustReport(search_log_normalization=-59.25, reference_log_normalization=-56.93, reference_se=0.14,
                         runs_agree=True, normalization_agrees=False, naive_converged=True)
    with pytest.warns(bayesvm.UntrustedEvidenceWarning) as record:
        warn_untrusted(report, 0.897, 117.5)
    message = str(record[0].message)
    assert len(record) == 1 and "-59.25" in message and "-56.93 +- 0.14" in message
    assert "disagree" in message and "overstated by more than its standard error" in message
    assert "evidence_budget" in message


def test_refining_the_path_drops_the_anchor_a_fresh_estimate_contradicts_and_keeps_the_others():
    """An anchor whose runs agreed while all missing the same mass (here: shifted 5 nats low) misleads the path
    around it; a refinement at a point it serves replaces it, and the path then matches an independent tempered-SMC
    estimate there. An anchor the refinement agrees with stays."""
    X, _ = _subsample("breast_cancer", 60)
    x0, x1 = np.log([1.0, 10.0, 1.0, 5.0]), np.log([1.1, 11.0, 1.0, 5.2])
    with float64_scope(), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", BayesvmWarning)
        path = NormalizationPath(jnp.asarray(X), RBF(), key=0)
        assert path.estimate(x0).anchored
        honest = path.estimate(x1).value
        path.anchors[0] = path.anchors[0]._replace(value=path.anchors[0].value - 5.0)
        assert path.estimate(x1).value == pytest.approx(honest - 5.0)
        refined = path.refine(x1, tolerance=1.0)
        assert refined.anchored and refined.runs_agree and len(path.anchors) == 1 and path.n_anchors == 2
        again = path.refine(x1, tolerance=1.0)  # agrees with the first refinement: both kept
        assert len(path.anchors) == 2 and path.n_refinements == 2
        C, kernel = float(np.exp(x1[0])), RBF().replace(**kernel_hyperparameters_at(RBF(), x1))
        reference = annealed_log_normalization(kernel, C, 60, X, route="product", key=11)
    assert reference.runs_agree
    for estimate in (refined, again, path.estimate(x1)):
        assert abs(estimate.value - reference.value) <= max(1.0, 3 * np.hypot(estimate.se, reference.se))


def test_a_path_anchored_on_the_checks_particles_matches_fresh_estimates_nearby():
    """The selection's check keeps its tempered-SMC particles (theta, as its last resampling left them) without
    changing its value, and the path re-anchored on them (moved at the target, then whitened) serves points a step
    away: their reweighted ln N(D) must match fresh tempered SMC there, which fails if the particles were taken in
    the wrong coordinates (whitened by the wrong factor, or EP's start's z taken for theta)."""
    from bayesvm.evidence.log_evidence import evidences_at, training_normalization

    X, y = _subsample("breast_cancer", 60, seed=4)
    data = training_data(X, y)
    x = np.log([1.0, 10.0, 1.0, 5.0])
    C, kernel = float(np.exp(x[0])), RBF().replace(**kernel_hyperparameters_at(RBF(), x))
    with float64_scope(), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", BayesvmWarning)
        kept = training_normalization(data, C, kernel, random_state=3, keep_particles=True)
        plain = evidences_at(data, C, kernel, random_state=3)[0]
        result = kept.diagnostics["annealing"]
        assert kept.value == plain.log_normalization and kept.se == plain.log_normalization_se
        assert result.particles.shape == (result.n_runs, result.n_particles, 64)  # 60 inputs padded to 64
        path = NormalizationPath(jnp.asarray(X), RBF(), key=0)
        refined = path.refine(x, tolerance=1.0, reference=result)
        assert refined.anchored and refined.value == pytest.approx(kept.value, abs=1e-12) and path.n_anchors == 0
        for step in ([0.0, 0.3, 0.0, 0.0], [0.2, 0.0, 0.0, -0.2]):
            near = x + np.array(step)
            estimate = path.estimate(near)
            assert not estimate.anchored and path.n_anchors == 0
            C_near, kernel_near = float(np.exp(near[0])), RBF().replace(**kernel_hyperparameters_at(RBF(), near))
            fresh = annealed_log_normalization(kernel_near, C_near, 60, X, route="product", key=17)
            assert fresh.runs_agree
            assert abs(estimate.value - fresh.value) <= max(0.3, 3 * np.hypot(estimate.se, fresh.se))


def test_a_refinement_whose_own_runs_disagree_leaves_the_path_as_it_was(monkeypatch):
    """A new anchor whose runs disagree is likely low itself: it must neither drop the anchors it seems to
    contradict nor join the path (where its point would read as unresolvable)."""
    from bayesvm.normalization.annealing import shift
    from bayesvm.normalization.path import Annealed, FullPathPrior

    X, _ = _subsample("breast_cancer", 60)
    x0, x1 = np.log([1.0, 10.0, 1.0, 5.0]), np.log([1.1, 11.0, 1.0, 5.2])
    real = FullPathPrior.anneal
    with float64_scope(), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", BayesvmWarning)
        path = NormalizationPath(jnp.asarray(X), RBF(), key=0)
        assert path.estimate(x0).anchored
        before = path.estimate(x1)

        def disagreeing(self, x, key, budget, role):  # runs that disagree, 10 nats below the path
            annealed = real(self, x, key, budget, role)
            result = dataclasses.replace(shift(annealed.result, -10.0), ess=1.0)
            return Annealed(result, annealed.z, annealed.aux)

        monkeypatch.setattr(FullPathPrior, "anneal", disagreeing)
        anchors = list(path.anchors)
        refined = path.refine(x1, tolerance=1.0)
        assert not refined.runs_agree and refined.value < before.value - 5.0
        assert path.anchors == anchors and path.n_refinements == 1 and path.n_anchors == 2
        assert path.estimate(x1).value == before.value


def test_an_anchor_whose_runs_disagree_serves_its_own_point_without_annealing_again(monkeypatch):
    """Tempered SMC at an anchor's own point would repeat its random numbers and its verdict; a disagreeing anchor's
    weights are too uneven to serve by the effective-sample-size rule, so the point (or one within 1e-6) is served
    by the same-point rule, while 1e-3 away the path anneals again."""
    from scipy.special import logsumexp as log_sum_exp

    from bayesvm.normalization.path import Annealed, FullPathPrior

    X, _ = _subsample("breast_cancer", 60)
    real = FullPathPrior.anneal

    def disagreeing(self, x, key, budget, role):  # one run carries the estimate: the runs disagree
        annealed = real(self, x, key, budget, role)
        log_z = annealed.result.log_z_runs - np.where(np.arange(annealed.result.n_runs) == 0, 0.0, 20.0)
        value = float(log_sum_exp(log_z) - np.log(log_z.size))
        result = dataclasses.replace(annealed.result, log_z_runs=log_z, value=value, ess=1.0)
        return Annealed(result, annealed.z, annealed.aux)

    monkeypatch.setattr(FullPathPrior, "anneal", disagreeing)
    x0 = np.log([1.0, 10.0, 1.0, 5.0])
    with float64_scope(), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", BayesvmWarning)
        path = NormalizationPath(jnp.asarray(X), RBF(), key=0)
        first = path.estimate(x0)
        again, nudged = path.estimate(x0.copy()), path.estimate(x0 + 5e-7)
        assert path.n_anchors == 1
        further = path.estimate(x0 + np.array([0.0, 0.0, 0.0, 1e-3]))
    assert first.anchored and not first.runs_agree
    assert not again.anchored and not again.runs_agree and again.value == first.value
    assert not nudged.runs_agree and abs(nudged.value - first.value) < 1e-3
    assert further.anchored and path.n_anchors == 2


def _one_start_ascent(X, y, template, options: SearchOptions):
    """An evidence ascent over the default box that has climbed from the first default start."""
    from bayesvm.selection.search import EvidenceAscent

    space, data = SearchSpace.default(X, template), training_data(X, y)
    return EvidenceAscent.from_starts(data.X, data.Y, template, space=space,
                                      starts=default_starts(space, X, template)[:1], options=options)


def _anchors_lying_low(monkeypatch, offset: float = -3.0) -> None:
    """Make every anchor with fewer slice moves than the check's (the search's anchor plan) agree ``offset`` nats
    off (runs that have not mixed at each temperature agree while missing the same mass)."""
    from bayesvm.normalization.annealing import shift
    from bayesvm.normalization.path import Annealed, FullPathPrior

    real = FullPathPrior.anneal

    def lying_low(self, x, key, budget, role):
        annealed = real(self, x, key, budget, role)
        if annealed is None or role != "anchor":
            return annealed
        return Annealed(shift(annealed.result, offset), annealed.z, annealed.aux)

    monkeypatch.setattr(FullPathPrior, "anneal", lying_low)


def test_a_search_misled_by_anchors_that_lie_low_is_refined_until_its_checks_pass(monkeypatch):
    """Anchors of the search's budget that agree while lying low (simulated: 3 nats low wherever they take fewer
    slice moves than the check) make the check at the answer fail (the search's ln N(D) and a
    fresh one disagree). With refinements the path is re-anchored at that point with the check's moves, the
    search climbs again, and the answer passes its checks with the evidence of a search that was never misled."""
    X, y = _subsample("breast_cancer", 60, seed=2)
    honest = _search(X, y, SearchOptions(max_iter=5))
    _anchors_lying_low(monkeypatch)
    misled = _search(X, y, SearchOptions(max_iter=5, refinements=0))
    refined = _search(X, y, SearchOptions(max_iter=5))
    assert honest.report.trusted
    assert misled.report.runs_agree and not misled.report.normalization_agrees
    assert refined.report.trusted and any(m.startswith("refined at") for m in refined.search.messages)
    assert len(refined.search.ends) > len(misled.search.ends)
    assert refined.best_value == pytest.approx(honest.best_value, abs=max(1.0, 3 * np.hypot(refined.best_se,
                                                                                            honest.best_se)))


def test_after_a_refinement_the_anchors_take_the_checks_moves_and_the_new_one_its_particles(monkeypatch):
    """What actually ran at each anchor: before a refinement the search's 4 runs and 3 moves per temperature; the
    refinement's anchor the check's 16 runs and moves; later anchors the search's runs with the check's moves."""
    from bayesvm.normalization.budget import EvidenceBudget
    from bayesvm.normalization.path import FullPathPrior

    X, y = _subsample("breast_cancer", 60, seed=2)
    template, ran = RBF(), []
    real = FullPathPrior.anneal

    def recorded(self, x, key, budget, role):
        annealed = real(self, x, key, budget, role)
        if annealed is not None:
            ran.append((annealed.result.n_runs, annealed.result.n_mcmc_steps))
        return annealed

    monkeypatch.setattr(FullPathPrior, "anneal", recorded)
    space = SearchSpace.default(X, template)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", BayesvmWarning)
        ascent = _one_start_ascent(X, y, template, SearchOptions(max_iter=2, refinements=1))
        searched = len(ran)
        end = ascent.result().ends[0].x
        ascent.refine(end, 1.0)
        ascent.path.estimate(space.clip(end + np.array([0.0, -1.5, 0.0, 1.5])))  # far from every anchor
    budget = EvidenceBudget()
    moves, runs = budget.moves(60), budget.anchor_runs
    assert moves > budget.anchor_moves
    assert searched >= 1 and all(r == runs and m == budget.anchor_moves for r, m in ran[:searched])
    assert ran[searched] == (budget.n_runs, moves)
    assert ran[-1] == (runs, moves) and len(ran) > searched + 1


def test_where_the_refined_climb_cannot_move_its_end_is_judged_by_the_one_fresh_check_already_made(monkeypatch):
    """With every coordinate fixed the climb after a refinement ends where it began: the point's fresh evidence,
    computed once, is tested again against the refined path's ln N(D), which is the check's own (the path
    re-anchored on the check's particles, with no tempered SMC of its own there), and passes, without a second fresh
    estimate."""
    import bayesvm.selection.search_selection as search_module

    X, y = _subsample("breast_cancer", 60, seed=2)
    template = RBF()
    x = np.log([1.0, 10.0, 1.0, float(np.median(pairwise_distances(X)))])
    space = SearchSpace.default(X, template)
    for i, value in enumerate(x):
        space = space.fix(i, value)
    real, calls = search_module.check_point, []

    def counted(*args, **kwargs):
        calls.append(args[1])
        return real(*args, **kwargs)

    monkeypatch.setattr(search_module, "check_point", counted)
    _anchors_lying_low(monkeypatch)
    misled = _search(X, y, SearchOptions(refinements=0), starts=x[None], space=space)
    refined = _search(X, y, SearchOptions(), starts=x[None], space=space)
    assert not misled.report.normalization_agrees and refined.report.trusted
    assert refined.search.n_anchors == misled.search.n_anchors  # no tempered SMC at the refinement
    assert refined.report.search_log_normalization == pytest.approx(refined.report.reference_log_normalization, abs=1e-12)
    assert refined.search.messages == ("all coordinates fixed", f"refined at {_describe(x)}: all "
                                       "coordinates fixed")
    assert len(calls) == 2  # one fresh check per selection
    assert refined.best_value == pytest.approx(misled.best_value)  # the same fresh evidence at the same point
