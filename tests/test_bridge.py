"""ln N(D) bridged from a nearby anchor's particles (bayesvm.normalization.bridge) and its use along the search path.

References are independent computations: plain Monte Carlo over theta from
the prior on tiny problems (exact and low-rank prior), an identity (a bridge
to the anchor's own point changes nothing), and fresh tempered SMC from the
prior with another seed on real data.
"""

import dataclasses
import warnings

import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.model_selection import train_test_split

from bayesvm._precision import float64_scope
from bayesvm.datasets import load_dataset
from bayesvm.hyperparameters import kernel_hyperparameters_at
from bayesvm.kernels import RBF
from bayesvm.low_rank import low_rank_prior
from bayesvm.normalization.annealing import annealed_log_normalization
from bayesvm.normalization.bridge import annealed_bridge
from bayesvm.normalization.low_rank import LowRankPathPrior
from bayesvm.normalization.path import FullPathPrior, NormalizationPath, _linear_form

X_TINY = np.linspace(-2.0, 2.0, 10)[:, None]
Z_TINY = np.array([[-1.0], [0.0], [1.0]])
#: tempered SMC at the anchor and along the bridge: larger than the path's default, for a sharper comparison
BUDGET = {"n_particles": 256, "n_runs": 16, "n_mcmc_steps": 5}


def nu_np(theta, C):
    """nu(theta) = kappa(C) [exp(-C l(theta)) + exp(-C l(-theta))], written out independently."""
    kappa = 1.0 / (1.0 + np.exp(-2.0 * C))
    return kappa * (np.exp(-C * np.maximum(0.0, 1.0 - theta)) + np.exp(-C * np.maximum(0.0, 1.0 + theta)))


def _kernel(x):
    return RBF().replace(**kernel_hyperparameters_at(RBF(), jnp.asarray(x)))


def _plain_monte_carlo(x, prior_kind, draws=1_000_000, seed=0):
    """ln E[prod_i nu(theta_i)] over theta from the prior at x (exact, or low-rank with its noise), and its error."""
    rng = np.random.default_rng(seed)
    kernel, C = _kernel(x), float(np.exp(x[0]))
    if prior_kind == "exact":
        K = np.asarray(kernel(jnp.asarray(X_TINY)))
        theta = rng.multivariate_normal(np.zeros(len(X_TINY)), K, size=draws, method="eigh")
    else:
        V, d = (np.asarray(a) for a in low_rank_prior(kernel, jnp.asarray(X_TINY), jnp.asarray(Z_TINY), "fitc"))
        theta = rng.standard_normal((draws, V.shape[1])) @ V.T + rng.standard_normal((draws, len(d))) * np.sqrt(d)
    f = np.prod(nu_np(theta, C), axis=1)
    return np.log(np.mean(f)), np.std(f) / (np.sqrt(draws) * np.mean(f))


def _path_prior(prior_kind):
    X = jnp.asarray(X_TINY)
    return FullPathPrior.of(X, RBF()) if prior_kind == "exact" else LowRankPathPrior(X, jnp.asarray(Z_TINY), RBF())


def _bridge(prior, x_from, x_to, key=3):
    """Anchor at x_from (tempered SMC from the prior), then the bridge to x_to."""
    anchor = prior.anneal(np.asarray(x_from), 0, BUDGET)
    runs = anchor.result.n_runs
    w = jnp.reshape(anchor.z, (runs, -1, anchor.z.shape[-1]))
    A, params, _ = prior.form_at(np.asarray(x_to))
    bridged = annealed_bridge(prior.log_sum, w, anchor.result.log_z_runs,
                              _linear_form(prior, jnp.asarray(x_from), anchor.aux), (A, params), key=key,
                              n_mcmc_steps=BUDGET["n_mcmc_steps"])
    return anchor.result, bridged


@pytest.mark.parametrize("prior_kind", ["exact", "low-rank"])
def test_a_bridge_matches_plain_monte_carlo_at_the_new_point(prior_kind):
    """Ten inputs: the anchor at x_a, the bridge to x_b about one log unit away in C, amplitude and length scale."""
    x_a = np.log([2.0, 4.0, 0.3, 0.8])
    x_b = np.log([0.8, 10.0, 0.3, 1.5])
    prior = _path_prior(prior_kind)
    with float64_scope():
        _, bridged = _bridge(prior, x_a, x_b)
    reference, reference_se = _plain_monte_carlo(x_b, prior_kind)
    latents = prior.X.shape[0] if prior_kind == "exact" else len(Z_TINY) + 1  # padded inputs; inducing + offset
    assert bridged.runs_agree and bridged.n_temperatures >= 2
    assert bridged.particles.shape == (BUDGET["n_runs"], BUDGET["n_particles"], latents)
    assert abs(bridged.value - reference) < 4 * np.hypot(bridged.se, reference_se) + 0.01, (bridged, reference)


def test_a_bridge_to_the_anchor_itself_returns_the_anchor_runs():
    """f(w; x_b) / f(w; x_a) = 1 at x_b = x_a: one step, every run's ln Z unchanged."""
    x = np.log([1.0, 3.0, 0.3, 1.0])
    with float64_scope():
        anchor, bridged = _bridge(_path_prior("exact"), x, x)
    assert bridged.n_temperatures == 1
    np.testing.assert_allclose(bridged.log_z_runs, anchor.log_z_runs, rtol=0.0, atol=1e-12)


def _pima(n):
    data = load_dataset("pima")
    X, _, _, _ = train_test_split(data.X, data.y, train_size=n, stratify=data.y, random_state=0)
    return X


def test_the_path_bridges_where_the_first_round_disagrees_and_matches_fresh_smc(monkeypatch):
    """Where the prior's first round disagrees (forced here), the new anchor comes from the bridge; its value agrees
    with independent tempered SMC from the prior, and nearby points reweight it."""
    X = _pima(100)
    anneal = FullPathPrior.anneal

    def first_round_disagrees(self, x, key, annealing, *, first_round=False):
        annealed = anneal(self, x, key, annealing, first_round=first_round)
        if first_round and len(calls) > 0:
            annealed = annealed._replace(result=dataclasses.replace(annealed.result, ess=1.0))
        calls.append(first_round)
        return annealed

    calls = []
    monkeypatch.setattr(FullPathPrior, "anneal", first_round_disagrees)
    x0 = np.log([1.0, 5.0, 1.0, 3.0])
    x1 = x0 + np.array([0.4, 0.8, 0.0, -0.5])  # beyond the reweighting radius of 0.5
    with float64_scope(), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        path = NormalizationPath(jnp.asarray(X), RBF(), key=1)
        path.estimate(x0)
        monkeypatch.setattr("bayesvm.normalization.path._MAX_ANCHOR_DISTANCE", 0.5)
        estimate = path.estimate(x1)
        nearby = path.estimate(x1 + 0.05)
        reference = annealed_log_normalization(_kernel(x1), float(np.exp(x1[0])), 100, X, route="product", key=7)
    assert [a.bridged for a in path.anchors] == [False, True] and path.n_bridges == 1
    assert estimate.anchored and estimate.runs_agree and not nearby.anchored
    assert reference.runs_agree
    assert abs(estimate.value - reference.value) <= max(0.5, 3 * np.hypot(estimate.se, reference.se))
