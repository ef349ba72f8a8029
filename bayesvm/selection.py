"""Hyperparameter selection by maximising the evidence (theory: "Why C and k0 need the evidence").

The grid is parametrised by the quantities the MAP solution actually depends
on. With K = k0 (base + r), r = k_b / k0 the offset ratio, substitute
a = b / k0 in the dual

    max_a sum_i a_i - 1/2 a^T Y K Y a,   0 <= a_i <= C

to get  (1/k0) [ sum_i b_i - 1/2 b^T Y (base + r) Y b ],  0 <= b_i <= C k0.

So b, the dual solution for the kernel ``base + r`` with box P = C k0, is the
same for every (C, k0) with C k0 = P, and

    alpha(C, k0) = b / k0 = b C / P,   theta = (base + r)(b * y)   (unchanged).

One batched MAP solve per (shape, r, P) therefore serves a whole line of C
values (k0 = P / C). How the evidence is evaluated on a block of (P, C) cells
at one (shape, r) depends on the approximation:

* ``"ep"`` (the default for ln Q(D); an option for ln N(D)): EP needs no MAP solve but
  a run per cell, about a dozen O(n^3) iterations
  (:func:`bayesvm.ep.ep_log_z_batch`, one batch per block). Where EP does not
  converge the cell is NaN (left out of the argmax) and the selection says
  how many there were.
* ``"laplace"``: the Laplace-style terms along every line from the one solve
  (cheap, but far too optimistic where many points are marginal; theory:
  "Where the Laplace form breaks").
* ``"prior"`` normalisation: one set of unit-amplitude prior draws per shape
  (one Cholesky) with common random numbers across every (r, P, C).
* ``"annealed"`` normalisation (the default): tempered SMC over the training
  inputs (route "product", the integral EP computes) at every cell with a
  screening budget (``_SCREEN_ANNEALING``, about 6x cheaper than the full
  one), from one prior factor per (shape, r) scaled by sqrt(k0), cell by
  cell. Running the cells of a block as one batch (same random numbers, one
  momentum product per move) was tried and dropped: on a 2-core CPU it saved
  nothing on eight ordinary cells and made a selection on digits 3 vs 8 2.6x
  slower, since a batch runs as many temperatures as its slowest cell (a
  median of 1 but up to 61 per cell there). A cell whose screening runs
  disagree is left out (NaN): its value would be biased low, i.e. its
  evidence biased high. A single SMC path along C at fixed C k0 (one run per
  line, the sampler's version of the line structure) was tried and dropped:
  it took as many steps as separate runs at every cell (19 against 22 at
  n = 100, 33 against 33 at n = 400) and drifted 1 nat low at the far end.
* ``"sampled"`` ln Q(D): one evaluation per cell.

Checking EP's ln N(D). EP treats the factors nu(theta_i) one at a time. Where
the prior is much wider than the margin and strongly correlated (C -> 0 with a
huge amplitude and length scale) each factor is nearly constant under its
cavity, EP settles near the factorised value sum_i ln E[nu(theta_i)] and
misses the rare event that every theta_i lies inside the margin together,
which carries N(D): on an equicorrelated prior, -17.7 against -6.86 by
quadrature (tests/test_ep.py); on synth at n = 100, up to 53 nats below tempered
SMC at the cells the selection ran into (the documentation's selection benchmark). It
also fails at ordinary settings on larger data where nu's two modes at
theta = +-1 matter: on Pima, 17 nats low at C = 1, amplitude 1 (n = 280) and
51 at amplitude 0.3 (n = 537). That error makes the evidence run away into
the cells where it is worst. So every argmax the
selection acts on (before each grid extension, after refinement) is checked
against the annealed estimate of the same integral
(:func:`bayesvm.annealing.annealed_log_normalization`, route "product"); where
they disagree by more than ``NORMALIZATION_TOLERANCE`` nats (or three standard
errors), the annealed value replaces EP's at that cell, and the argmax is taken
again, up to ``max_checks`` checks. With ``normalization="annealed"`` the
same checks re-estimate the screening value with the full budget. A check
whose own runs disagree (effective number of runs below half of them: on
nearly constant priors far wider than the margin even the full budget is
biased low by a few nats there) cannot settle the cell: it is left out of
the maximisation (NaN). The checks are kept in ``EvidenceSurface.checks``
and disagreements and exclusions are reported with warnings.

The posterior at the optimum. With ``approximation="ep"`` every argmax the
selection acts on must also be a point where EP's posterior (label sites, the
full tolerance: what ``BayesianSVC`` predicts with) converges. In the
small-C, huge-amplitude, long-length-scale corner its sites can keep moving
while ln Z has settled: on one 175-point split of Ripley's synth the evidence
peaked at C = 0.024, k0 = 1.3e10, l = 92, about 35 nats above the interior,
where the full annealed check of ln N(D) agreed and was reliable, yet the
posterior mean kept drifting (3000 iterations) and the held-out error was
0.51 (the documentation's selection benchmark, fourth run). Such a cell
is left out (its ln Q(D) NaN) and the argmax taken again, at most
``max_checks`` tests; the breast-cancer demo's corner optimum (C = 0.0027,
k0 = 3.7e9) converges in 119 iterations and predicts well, so the corner as
such is not excluded.

Amplitudes float64 cannot resolve. The prior covariance k0 (base + r) is
rounded at about eps k0 (1 + r) per entry, and sums and factorisations over
n points make that n eps k0 (1 + r) in theta^2 units. Once this reaches the
margin scale (``MARGIN_RESOLUTION`` = 1e-2 against |theta| <= 1) no
computation here means anything (EP, the sampler and the solver all see the
margin through rounding noise), so cells with k0 above
1e-2 / (n eps (1 + r)) (5.6e11 at n = 40, 5.6e10 at n = 400 for r = 1) are
left out and the selection says so. The selection ran there on Ripley's synth
before (amplitudes 1e13 to 1e15; the documentation's selection benchmark).

Surfaces are arrays of shape ``(n_shape, n_offset_ratio, n_C_k0, n_C)``.

Local refinement. The evidence surface is not smooth enough to trust
gradients: the Laplace-style form has kinks wherever a point enters or
leaves the marginal set (the regularised determinant keeps it continuous,
the raw one does not even do that), and EP values carry the small error of
its stopping rule (up to a few 1e-2 nats). The refinement is a derivative-free
shrinking pattern search in log coordinates: around the current best point
it evaluates every combination of {x e^-h, x, x e^h} on the axes the grid
varies, moves to the best, halves h (starting at half the grid spacing) and
repeats. It only compares values, so kinks do not mislead it, and it stays
within the cells next to the grid optimum.

Grid edges. The Laplace-style evidence is far too optimistic in the
large-amplitude, short-length-scale corner (theory: "Where the Laplace form breaks"), and maximisation
runs into it; any evidence can also peak outside a grid that is too narrow. When the grid optimum sits on the edge of an axis that the
grid varies, the selection warns (:class:`GridEdgeWarning`) and extends that
axis by ``extend_points`` steps of its own log spacing, at most
``max_extensions`` times; if the optimum is still on an edge it warns once
more and records the axes in ``EvidenceSurface.at_edge``, or raises
(``on_edge="raise"``). It never returns an edge optimum silently.

Reference: P. Sollich, "Bayesian methods for support vector machines:
evidence and predictive class probabilities", Machine Learning 46 (2002).
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.model_selection import StratifiedKFold

from . import _linalg
from ._precision import float64
from ._validation import check_inputs, check_kernel, check_labels
from .annealing import AnnealingResult, annealed_log_normalization, prior_factor
from .ep import ep_log_evidence, ep_log_z_batch
from .evidence import APPROXIMATIONS, LAPLACE_MARGINAL_SHARE, Evidence, naive_evidence
from .kernels import Kernel, gram_matrix, make_kernel
from .laplace import DETERMINANTS, NaiveEvidenceTerms, laplace_factor, laplace_log_naive_evidence
from .hyperparameters import SearchSpace, max_amplitude, pairwise_distances
from .posterior import Posterior
from .search import default_starts, select_by_search
from .trust import NORMALIZATION_TOLERANCE
from .normalization import (
    NormalizationEstimate,
    log_normalization_from_draws,
    normalization_inputs,
    prior_draws,
)
from .solver import DualSolution, MapSVM, solve_dual_batch

Array = jax.Array

__all__ = [
    "METHODS",
    "NORMALIZATIONS",
    "SHAPE_PARAMETERS",
    "AXES",
    "GridEdgeWarning",
    "DegenerateSelectionWarning",
    "NormalizationCheck",
    "Grid",
    "EvidenceSurface",
    "default_grid",
    "select_hyperparameters",
]

METHODS = ("search", "grid", "cv")
#: ln N(D) estimators of the grid: the two over the training inputs, and plain prior sampling over stand-in inputs
NORMALIZATIONS = ("annealed", "ep", "prior")
#: the kernel's shape hyperparameter searched by the grid (None: the family has none)
SHAPE_PARAMETERS: dict[str, str | None] = {
    "rbf": "length_scale",
    "exponential": "length_scale",
    "polynomial": "gamma",
    "linear": None,
}
#: surface axes, in array order
AXES = ("shape", "offset_ratio", "C_k0", "C")
#: pairwise distances for the default length scales are taken on at most this many points
_MAX_DISTANCE_POINTS = 500
#: data sets smaller than this get the small default grid (fast for tiny problems)
_SMALL_PROBLEM = 100
#: points per line evaluated at once by the prior-sampling normalisation (bounds memory at S x M x this)
_NORMALIZATION_BATCH = 4
#: MAP solves are batched in chunks of this size (the refinement's 3-point pattern is one chunk)
_SOLVE_BATCH = 3
#: EP runs are batched in chunks of this size (one compilation per problem size and site family)
_EP_BATCH = 3
#: tempered SMC budget for ln N(D) on every grid cell (a screen, about 6x cheaper than the defaults of
#: annealed_log_expectation, which the checks at the argmax use)
_SCREEN_ANNEALING = {"n_particles": 64, "n_runs": 8, "n_mcmc_steps": 3}
#: a selection is flagged as degenerate when no training point's plug-in P(y = +1) is further than this from 1/2
_DEGENERATE_MARGIN = 0.1


class NormalizationCheck(NamedTuple):
    """The surface's ln N(D) at one grid point against a full annealed estimate of the same integral.

    ``point`` holds the surface coordinates (``shape``, ``offset_ratio``,
    ``C_k0``, ``C``); ``surface`` is the value the surface had there (EP's, or
    the screening annealed run's); ``agreed`` is
    |surface - annealed| <= max(tolerance, 3 se); ``reliable`` says the full
    run's independent runs agree (effective number of runs at least half of
    them; below that the annealed value is biased low and its se is not to be
    trusted). Where the check is unreliable the cell is left out of the
    maximisation (NaN); where it disagrees the surface carries the annealed value.
    """

    point: dict
    surface: float
    annealed: float
    annealed_se: float
    agreed: bool
    reliable: bool

    def correction(self) -> tuple[float, float] | None:
        """(ln N(D), se) the surface must carry at this cell instead of its own value, or None."""
        if not self.reliable:
            return np.nan, np.nan
        return None if self.agreed else (self.annealed, self.annealed_se)


class GridEdgeWarning(UserWarning):
    """The evidence optimum lies on the edge of the hyperparameter grid."""


class DegenerateSelectionWarning(RuntimeWarning):
    """The selected hyperparameters give near-constant class probabilities on the training data."""


# ---------------------------------------------------------------------------
# the grid


@dataclass(frozen=True)
class Grid:
    """A product grid over (shape, offset ratio k_b/k0, C k0, C), all strictly positive.

    ``shape`` holds the kernel's shape parameter (``length_scale`` or
    ``gamma``; the single placeholder value 1 for the linear kernel). k0 = C_k0 / C
    and k_b = offset_ratio * k0 at each point.
    """

    shape: np.ndarray
    offset_ratio: np.ndarray
    C_k0: np.ndarray
    C: np.ndarray

    def __post_init__(self):
        for name in AXES:
            values = np.atleast_1d(np.asarray(getattr(self, name), dtype=np.float64))
            if values.ndim != 1 or values.size == 0:
                raise ValueError(f"grid axis {name!r} must be a non-empty 1-D sequence; got shape {values.shape}")
            if not np.all(np.isfinite(values)) or np.any(values <= 0):
                raise ValueError(f"grid axis {name!r} must hold finite values > 0; got {values.tolist()}")
            if np.unique(values).size != values.size:
                raise ValueError(f"grid axis {name!r} has repeated values: {values.tolist()}")
            object.__setattr__(self, name, np.sort(values))

    @property
    def axes(self) -> tuple[np.ndarray, ...]:
        return tuple(getattr(self, name) for name in AXES)

    @property
    def shape_of_surface(self) -> tuple[int, ...]:
        return tuple(a.size for a in self.axes)

    def replace(self, **axes) -> "Grid":
        return Grid(**{name: axes.get(name, getattr(self, name)) for name in AXES})


def _kernel_template(kernel) -> Kernel:
    if isinstance(kernel, str):
        return make_kernel(kernel)
    return check_kernel(kernel)


def _shape_name(template: Kernel) -> str | None:
    return SHAPE_PARAMETERS[template.name]


@float64
def default_grid(X, kernel="rbf") -> Grid:
    """Default grid derived from the data.

    * length scale (RBF, exponential): 4 values (3 for fewer than 100 points),
      log-spaced from half the 10% quantile to twice the 90% quantile of the
      pairwise distances (on at most 500 points);
    * gamma (polynomial): 1 / (d * mean feature variance) times 10^[-1, 1];
    * C k0: 10^-1 .. 10^3 (5 values, one a decade; 4 for small problems);
    * C: 10^-1 .. 10^1.5 (5 values; 4 for small problems);
    * offset ratio k_b / k0: 1 (held fixed; pass an ``offset_ratio`` axis to
      select the offset too -- each value costs one more set of solves).
    """
    X = check_inputs(X)
    template = _kernel_template(kernel)
    small = X.shape[0] < _SMALL_PROBLEM
    name = _shape_name(template)
    if name == "length_scale":
        d = pairwise_distances(X, max_points=_MAX_DISTANCE_POINTS)
        lo, hi = (np.quantile(d, [0.1, 0.9]) if d.size else (1.0, 1.0))
        shape = np.geomspace(0.5 * lo, 2.0 * hi, 3 if small else 4)
    elif name == "gamma":
        scale = 1.0 / (X.shape[1] * max(float(np.mean(np.var(X, axis=0))), np.finfo(float).tiny))
        shape = scale * np.geomspace(0.1, 10.0, 3 if small else 4)
    else:
        shape = np.array([1.0])  # placeholder: the family has no shape parameter
    return Grid(
        shape=shape,
        offset_ratio=np.array([1.0]),
        C_k0=np.geomspace(0.1, 1e3, 4 if small else 5),
        C=np.geomspace(0.1, 10**1.5, 4 if small else 5),
    )


def _resolve_grid(grid, X, template: Kernel) -> Grid:
    """A :class:`Grid` from ``None``, a Grid, or a mapping that overrides some default axes."""
    if isinstance(grid, Grid):
        return grid
    defaults = default_grid(X, template)
    if grid is None:
        return defaults
    if not isinstance(grid, Mapping):
        raise ValueError(f"grid must be None, a Grid or a mapping of axis name -> values; got {type(grid).__name__}")
    shape_name = _shape_name(template)
    accepted = {"C", "C_k0", "offset_ratio", "shape"} | ({shape_name} if shape_name else set())
    unknown = set(grid) - accepted
    if unknown:
        raise ValueError(f"unknown grid axes {sorted(unknown)} for the {template.name} kernel; accepted: {sorted(accepted)}")
    axes = {("shape" if key == shape_name else key): value for key, value in grid.items()}
    if shape_name is None and "shape" in axes:
        raise ValueError(f"the {template.name} kernel has no shape parameter to put on a grid")
    return defaults.replace(**axes)


# ---------------------------------------------------------------------------
# evaluation of blocks of the surface


class _Block(NamedTuple):
    """Surface values on (C_k0, C) for one (shape, offset ratio); arrays of shape (nP, nC)."""

    naive: np.ndarray
    naive_se: np.ndarray
    terms: NaiveEvidenceTerms | None  # the Laplace-style parts (None for the other approximations)
    normalization: NormalizationEstimate


@partial(jax.jit, static_argnames=("size", "determinant"))
def _laplace_lines(Kt, y, P, C, solution: DualSolution, size: int, determinant: str) -> NaiveEvidenceTerms:
    """Laplace-style ln Q(D) for every (P_b, C_c) from the solutions on box P (batched over b).

    For C k0 = P: alpha = b C / P, K = Kt P / C, theta unchanged (module docstring).
    """

    def at(P_b, sol_b, C_c):
        scale = C_c / P_b
        sol = sol_b._replace(alpha=sol_b.alpha * scale)
        K = Kt / scale
        return laplace_log_naive_evidence(K, y, C_c, sol, laplace_factor(K, sol, C_c, size), determinant)

    def line(P_b, sol_b):
        return jax.lax.map(lambda C_c: at(P_b, sol_b, C_c), C)

    return jax.vmap(line)(P, solution)


def _laplace_block(problem: "_Problem", shape, ratio, P, C):
    """All lines at once: one batched Laplace evaluation per (shape, offset ratio)."""
    solution = problem.solutions(shape, ratio, P)
    Kt = problem.base(shape) + ratio
    size = _linalg.buffer_size(int(jnp.max(jnp.sum(solution.marginal, axis=-1))), Kt.shape[0])
    terms = _laplace_lines(Kt, problem.y, jnp.asarray(P), jnp.asarray(C), solution, size, problem.determinant)
    terms = NaiveEvidenceTerms(*(np.asarray(t) for t in terms))
    return terms.value, np.zeros_like(terms.value), terms


def _pointwise_naive_block(problem: "_Problem", shape, ratio, P, C):
    """Any approximation of :func:`bayesvm.evidence.naive_evidence`, point by point (from the cached solves)."""
    value, se = np.empty((len(P), len(C))), np.empty((len(P), len(C)))
    for k, c in itertools.product(range(len(P)), range(len(C))):
        fit = problem.map_svm(shape, ratio, P[k], float(C[c]), np.array([-1, 1]))
        value[k, c], se[k, c], *_ = naive_evidence(fit, problem.approximation, determinant=problem.determinant,
                                                  random_state=problem.random_state)
    return value, se, None


@jax.jit
def _prior_lines(draws, ratio, P, C, n) -> NormalizationEstimate:
    amplitude = (P[:, None] / C[None, :]).ravel()
    C_flat = jnp.broadcast_to(C[None, :], (P.shape[0], C.shape[0])).ravel()

    def at(args):
        a, c = args
        return log_normalization_from_draws(draws, a, ratio * a, c, n)

    out = jax.lax.map(at, (amplitude, C_flat), batch_size=_NORMALIZATION_BATCH)
    return jax.tree_util.tree_map(lambda v: v.reshape(P.shape[0], C.shape[0]), out)


def _prior_block(problem: "_Problem", shape, ratio, P, C) -> NormalizationEstimate:
    estimate = _prior_lines(problem.draws(shape), ratio, jnp.asarray(P), jnp.asarray(C), problem.n)
    return NormalizationEstimate(*(np.asarray(v) for v in estimate))


def _annealed_normalization_block(problem: "_Problem", shape, ratio, P, C) -> NormalizationEstimate:
    """ln N(D) by tempered SMC over the training inputs (route "product"), cell by cell, with the screening budget.

    A cell whose runs disagree (effective number of runs below half of them:
    the value is biased low, its se unreliable) is NaN, as are cells the
    problem cannot resolve (:meth:`_Problem.resolvable`).
    """
    size = (len(P), len(C))
    out = {name: np.full(size, np.nan) for name in ("value", "se", "ess")}
    for i, j in zip(*np.nonzero(problem.resolvable(ratio, P, C))):
        result = problem.annealed_normalization(shape, ratio, P[i], C[j], screen=True)
        out["value"][i, j] = result.value if result.runs_agree else np.nan
        out["se"][i, j], out["ess"][i, j] = result.se, result.ess
    n_samples = np.full(size, float(_SCREEN_ANNEALING["n_particles"] * _SCREEN_ANNEALING["n_runs"]))
    return NormalizationEstimate(n_samples=n_samples, **out)


def _ep_values(problem: "_Problem", shape, ratio, P, C, sites: str) -> np.ndarray:
    """ln Z by EP on the (P, C) block (prior K = Kt P / C); NaN where EP did not converge (counted, reported).

    The cells go in chunks of a fixed size (the last one padded by repetition),
    so grid, extension slabs, refinement and the final point share one
    compilation per problem size.
    """
    resolvable = problem.resolvable(ratio, P, C)
    P, C = np.meshgrid(np.asarray(P, dtype=np.float64), np.asarray(C, dtype=np.float64), indexing="ij")
    scales, Cs = (P / C)[resolvable], C[resolvable]
    Kt = problem.base(shape) + ratio
    y = problem.y if sites == "labels" else None
    log_z, converged = np.empty(Cs.size), np.empty(Cs.size, dtype=bool)
    for start in range(0, Cs.size, _EP_BATCH):
        cells = np.minimum(np.arange(start, start + _EP_BATCH), Cs.size - 1)
        batch = ep_log_z_batch(Kt, jnp.asarray(scales[cells]), jnp.asarray(Cs[cells]), y, sites=sites)
        kept = slice(0, min(_EP_BATCH, Cs.size - start))
        log_z[start : start + _EP_BATCH] = np.asarray(batch.log_z)[kept]
        converged[start : start + _EP_BATCH] = np.asarray(batch.converged)[kept]
    problem.unconverged[sites] += int(np.sum(~converged))
    values = np.full(P.shape, np.nan)
    values[resolvable] = np.where(converged, log_z, np.nan)
    return values


def _ep_block(problem: "_Problem", shape, ratio, P, C):
    value = _ep_values(problem, shape, ratio, P, C, "labels")
    return value, np.zeros_like(value), None


def _ep_normalization_block(problem: "_Problem", shape, ratio, P, C) -> NormalizationEstimate:
    """ln N(D) ~= ln E[prod_i nu(theta_i)] over the training inputs (theory: "The single-draw identity"), by EP."""
    value = _ep_values(problem, shape, ratio, P, C, "nu")
    zeros = np.zeros_like(value)
    return NormalizationEstimate(value=value, se=zeros, ess=np.full_like(value, np.inf), n_samples=zeros)


#: ln Q(D) on lines of C: (problem, shape, offset ratio, P, C) -> (value, se, terms or None), each (nP, nC).
#: "laplace" and "ep" are evaluated in one batch per block; "sampled" falls back to one evaluation per point.
_NAIVE_ESTIMATORS: dict[str, Callable] = {"laplace": _laplace_block, "ep": _ep_block}
#: ln N(D) estimators whose value at every argmax is checked against a full annealed run (module docstring)
_CHECKED = ("ep", "annealed")
#: ln N(D) on lines of C: (problem, shape, offset ratio, P, C) -> NormalizationEstimate of (nP, nC) arrays
_NORMALIZATION_ESTIMATORS: dict[str, Callable] = {
    "prior": _prior_block,
    "ep": _ep_normalization_block,
    "annealed": _annealed_normalization_block,
}


@dataclass
class _Problem:
    """The data and options of one selection, with per-shape caches (Gram base, prior draws, solves)."""

    X: np.ndarray
    y: np.ndarray  # -1/+1
    template: Kernel
    approximation: str
    determinant: str
    normalization: str
    n_samples: int
    inputs: np.ndarray
    random_state: int
    #: at most this many full annealed checks of the surface's ln N(D) (module docstring)
    max_checks: int = 0
    #: EP runs that did not converge, by site family (their surface values are NaN)
    unconverged: dict = field(default_factory=lambda: {"labels": 0, "nu": 0})
    #: full annealed checks of the surface's ln N(D), by :func:`_cell_key`
    checks: dict = field(default_factory=dict)
    #: keys of the cells left out because float64 cannot resolve their amplitude (:meth:`resolvable`)
    unresolvable: set = field(default_factory=set)
    #: whether EP's posterior converges at the candidate optima tested, by :func:`_cell_key`
    posterior_tests: dict = field(default_factory=dict)
    _annealed: dict = field(default_factory=dict)
    _bases: dict = field(default_factory=dict)
    _draws: dict = field(default_factory=dict)
    _factors: dict = field(default_factory=dict)
    _solutions: dict = field(default_factory=dict)

    @property
    def n(self) -> int:
        return self.X.shape[0]

    def kernel(self, shape, amplitude, offset) -> Kernel:
        changes = {"amplitude": float(amplitude), "offset": float(offset)}
        name = _shape_name(self.template)
        if name is not None:
            changes[name] = float(shape)
        return self.template.replace(**changes)

    def base(self, shape) -> Array:
        """The unit-amplitude, zero-offset Gram matrix of the training inputs at this shape."""
        if shape not in self._bases:
            self._bases[shape] = gram_matrix(self.kernel(shape, 1.0, 0.0), jnp.asarray(self.X))
        return self._bases[shape]

    def prior_factor(self, shape, ratio) -> Array:
        """:func:`prior_factor` of the unit-amplitude prior ``base + ratio`` (times sqrt(k0) for amplitude k0)."""
        if (shape, ratio) not in self._factors:
            self._factors[(shape, ratio)] = prior_factor(self.base(shape) + ratio)
        return self._factors[(shape, ratio)]

    def draws(self, shape):
        if shape not in self._draws:
            kernel = self.kernel(shape, 1.0, 0.0)
            self._draws[shape] = prior_draws(kernel, self.inputs, n_samples=self.n_samples, random_state=self.random_state)
        return self._draws[shape]

    def solutions(self, shape, ratio, P) -> DualSolution:
        """Dual solutions on kernel base + ratio with boxes P (batched; solves only the missing ones)."""
        missing = [p for p in P if (shape, ratio, p) not in self._solutions]
        Kt = self.base(shape) + ratio
        # fixed batch size (the last chunk padded by repetition): one compilation per problem size
        for start in range(0, len(missing), _SOLVE_BATCH):
            chunk = missing[start : start + _SOLVE_BATCH]
            boxes = chunk + chunk[-1:] * (_SOLVE_BATCH - len(chunk))
            batch = solve_dual_batch(jnp.broadcast_to(Kt, (_SOLVE_BATCH, *Kt.shape)), self.y, jnp.asarray(boxes))
            for i, p in enumerate(chunk):
                self._solutions[(shape, ratio, p)] = jax.tree_util.tree_map(lambda v, i=i: v[i], batch)
        return jax.tree_util.tree_map(lambda *v: jnp.stack(v), *(self._solutions[(shape, ratio, p)] for p in P))

    def block(self, shape, ratio, P, C) -> _Block:
        naive = _NAIVE_ESTIMATORS.get(self.approximation, _pointwise_naive_block)
        normalization = _NORMALIZATION_ESTIMATORS[self.normalization]
        value, se, terms = naive(self, shape, ratio, P, C)
        estimate = normalization(self, shape, ratio, P, C)
        resolvable = self.resolvable(ratio, P, C)
        value = np.where(resolvable, value, np.nan)
        estimate = estimate._replace(value=np.where(resolvable, estimate.value, np.nan))
        self.unresolvable.update(_cell_key(shape, ratio, P[i], C[j]) for i, j in zip(*np.nonzero(~resolvable)))
        for (i, p), (j, c) in itertools.product(enumerate(P), enumerate(C)):
            key = _cell_key(shape, ratio, p, c)
            check = self.checks.get(key)
            if check is not None and check.correction() is not None:
                estimate.value[i, j], estimate.se[i, j] = check.correction()
            if self.posterior_tests.get(key) is False:
                value[i, j] = np.nan
        return _Block(value, se, terms, estimate)

    def max_amplitude(self, ratio) -> float:
        """The largest amplitude k0 at which float64 resolves the margin at this n
        (:func:`bayesvm.hyperparameters.max_amplitude`)."""
        return max_amplitude(self.n, ratio)

    def resolvable(self, ratio, P, C) -> np.ndarray:
        """(len(P), len(C)) mask of the cells whose amplitude P / C float64 can resolve."""
        return np.divide.outer(np.asarray(P, dtype=np.float64), np.asarray(C, dtype=np.float64)) <= self.max_amplitude(ratio)

    def annealed_normalization(self, shape, ratio, P, C, *, screen: bool) -> AnnealingResult:
        """ln N(D) at one cell by tempered SMC over the training inputs (route "product"; cached).

        ``screen``: the cheap budget of every grid cell (seed ``random_state + 1``),
        else the sampler's defaults (seed ``random_state``), as in the checks.
        """
        key = (_cell_key(shape, ratio, P, C), screen)
        if key not in self._annealed:
            amplitude = P / C
            kernel = self.kernel(shape, amplitude, ratio * amplitude)
            chol = np.sqrt(amplitude) * self.prior_factor(shape, ratio)
            options = _SCREEN_ANNEALING if screen else {}
            with warnings.catch_warnings():  # a low run ESS shows up as a large se, which the checks absorb
                warnings.simplefilter("ignore", RuntimeWarning)
                seed = self.random_state + (1 if screen else 0)
                self._annealed[key] = annealed_log_normalization(
                    kernel, C, self.n, self.X, route="product", chol=chol, key=seed, **options
                )
        return self._annealed[key]

    def check_normalization(self, point: dict, value: float) -> NormalizationCheck:
        """The full annealed ln N(D) at ``point`` against the surface's ``value`` there (cached)."""
        key = _point_key(point)
        if key not in self.checks:
            result = self.annealed_normalization(*(point[name] for name in AXES), screen=False)
            agreed = abs(value - result.value) <= max(NORMALIZATION_TOLERANCE, 3.0 * result.se)
            self.checks[key] = NormalizationCheck(dict(point), float(value), float(result.value),
                                                  float(result.se), bool(agreed), result.runs_agree)
        return self.checks[key]

    def can_check(self) -> bool:
        return self.normalization in _CHECKED and len(self.checks) < self.max_checks

    def posterior_converges(self, point: dict) -> bool:
        """Whether EP's posterior (label sites, full tolerance: what ``BayesianSVC`` predicts with) converges
        at ``point`` (cached)."""
        key = _point_key(point)
        if key not in self.posterior_tests:
            amplitude = point["C_k0"] / point["C"]
            K = amplitude * (self.base(point["shape"]) + point["offset_ratio"])
            self.posterior_tests[key] = bool(ep_log_evidence(K, self.y, point["C"]).converged)
        return self.posterior_tests[key]

    def can_test_posterior(self) -> bool:
        return self.approximation == "ep" and len(self.posterior_tests) < self.max_checks

    def map_svm(self, shape, ratio, P, C, classes) -> MapSVM:
        """The fitted MAP SVM at one point, from the cached solve (alpha rescaled by C / P)."""
        solution = self.solutions(shape, ratio, [P])
        solution = jax.tree_util.tree_map(lambda v: v[0], solution)
        solution = solution._replace(alpha=solution.alpha * (C / P))
        kernel = self.kernel(shape, P / C, ratio * P / C)
        return MapSVM(X=self.X, y=self.y, classes=classes, kernel=kernel, C=float(C), solution=solution)


class _Surface(NamedTuple):
    """The evidence surface on a grid (arrays of the grid's surface shape)."""

    naive: np.ndarray
    naive_se: np.ndarray
    log_normalization: np.ndarray
    log_normalization_se: np.ndarray
    normalization_ess: np.ndarray
    n_marginal: np.ndarray

    @property
    def total(self) -> np.ndarray:
        return self.naive - self.log_normalization

    @property
    def total_se(self) -> np.ndarray:
        return np.hypot(self.naive_se, self.log_normalization_se)


def _evaluate(problem: _Problem, grid: Grid, progress) -> _Surface:
    """Every block of the grid: one batched solve per (shape, offset ratio)."""
    out = {name: np.empty(grid.shape_of_surface) for name in _Surface._fields}
    blocks = list(itertools.product(enumerate(grid.shape), enumerate(grid.offset_ratio)))
    for done, ((i, shape), (j, ratio)) in enumerate(blocks, start=1):
        block = problem.block(float(shape), float(ratio), [float(p) for p in grid.C_k0], grid.C)
        out["naive"][i, j] = block.naive
        out["naive_se"][i, j] = block.naive_se
        out["log_normalization"][i, j] = block.normalization.value
        out["log_normalization_se"][i, j] = block.normalization.se
        out["normalization_ess"][i, j] = block.normalization.ess
        out["n_marginal"][i, j] = np.sum(problem.solutions(float(shape), float(ratio), [float(p) for p in grid.C_k0]).marginal,
                                         axis=-1)[:, None]
        if progress is not None:
            progress(done, len(blocks))
    return _Surface(**out)


def _cell_key(shape, ratio, P, C) -> tuple:
    """A grid cell's identity: its log coordinates to 9 decimals (robust to the rounding of exp(log(x))
    in the refinement; an offset ratio of 0 maps to ln of the smallest positive float)."""
    return tuple(np.round(np.log(np.maximum([shape, ratio, P, C], np.finfo(float).tiny)), 9).tolist())


def _point_key(point: dict) -> tuple:
    return _cell_key(*(point[name] for name in AXES))


def _point(grid: "Grid", index: tuple[int, ...]) -> dict:
    return {name: float(axis[i]) for name, axis, i in zip(AXES, grid.axes, index)}


def _checked_argmax(problem: "_Problem", grid: "Grid", surface: "_Surface") -> tuple[int, ...]:
    """The argmax of ln P(D), once EP's posterior converges there and the surface's ln N(D) there has passed
    the full annealed check.

    A cell whose posterior does not converge is left out (its ln Q(D) set to
    NaN in place); a cell whose check fails gets the full annealed value, or
    NaN where that is unreliable. The argmax is taken again, until one passes
    or the budgets are spent (module docstring).
    """
    while True:
        index = _argmax(surface.total)
        point = _point(grid, index)
        if _point_key(point) not in problem.posterior_tests and problem.can_test_posterior():
            if not problem.posterior_converges(point):
                surface.naive[index] = np.nan
                continue
        if _point_key(point) in problem.checks or not problem.can_check():
            return index  # checked (EP agreed, or the cell carries the annealed value), or out of budget
        check = problem.check_normalization(point, float(surface.log_normalization[index]))
        if check.correction() is None:
            return index
        surface.log_normalization[index], surface.log_normalization_se[index] = check.correction()


def _argmax(values: np.ndarray) -> tuple[int, ...]:
    finite = np.where(np.isfinite(values), values, -np.inf)
    if not np.any(np.isfinite(values)):
        raise ValueError("the criterion is not finite anywhere on the grid")
    return tuple(int(i) for i in np.unravel_index(np.argmax(finite), values.shape))


def _edge_axes(index: tuple[int, ...], grid: Grid) -> list[tuple[str, str]]:
    """(axis, side) for every varied axis on whose edge ``index`` lies."""
    edges = []
    for name, i, axis in zip(AXES, index, grid.axes):
        if axis.size > 1 and i == 0:
            edges.append((name, "low"))
        elif axis.size > 1 and i == axis.size - 1:
            edges.append((name, "high"))
    return edges


def _extended(axis: np.ndarray, side: str, points: int) -> np.ndarray:
    """``axis`` extended by ``points`` steps of its own log spacing at the end ``side``."""
    if side == "low":
        step = axis[1] / axis[0]
        return np.concatenate([axis[0] * step ** -np.arange(points, 0, -1), axis])
    step = axis[-1] / axis[-2]
    return np.concatenate([axis, axis[-1] * step ** np.arange(1, points + 1)])


# ---------------------------------------------------------------------------
# result


@dataclass(frozen=True, eq=False)
class EvidenceSurface:
    """The result of :func:`select_hyperparameters`.

    Arrays are indexed ``[shape, offset_ratio, C_k0, C]`` (see :data:`AXES`).
    For ``method="grid"``: ``naive`` ln Q(D), ``log_normalization``
    ln N(D), ``total`` ln P(D) with their standard errors, the effective
    sample size of the normalisation and the marginal counts. For
    ``method="cv"``: ``cv_error`` (the k-fold error rate; the C axis is the
    single value 1, since the MAP solution depends on C and k0 only through
    C k0, cross-validation cannot separate them).

    ``index`` is the argmax of the stored criterion; ``best`` the selected
    hyperparameters after refinement (``C``, ``amplitude``, ``offset`` and the
    shape parameter), ``best_value``/``best_se`` the criterion there,
    ``evidence`` the full :class:`~bayesvm.evidence.Evidence` at the optimum
    (evidence method), ``refinement`` the points the local search visited,
    ``extensions`` the grid extensions made and ``at_edge`` the axes on whose
    edge the optimum still lies, ``checks`` the full annealed checks of the
    surface's ln N(D) (:class:`NormalizationCheck`; the surface carries the
    annealed value where a check disagreed, NaN where it was unreliable).
    """

    method: str
    kernel_name: str
    shape_name: str | None
    grid: Grid
    index: tuple[int, ...]
    best: dict
    best_value: float
    best_se: float
    best_kernel: Kernel
    naive: np.ndarray | None = None
    naive_se: np.ndarray | None = None
    log_normalization: np.ndarray | None = None
    log_normalization_se: np.ndarray | None = None
    normalization_ess: np.ndarray | None = None
    n_marginal: np.ndarray | None = None
    cv_error: np.ndarray | None = None
    evidence: Evidence | None = None
    approximation: str | None = None
    normalization: str | None = None
    refinement: tuple[dict, ...] = ()
    extensions: tuple[tuple[str, str], ...] = ()
    at_edge: tuple[str, ...] = ()
    checks: tuple[NormalizationCheck, ...] = ()

    @property
    def total(self) -> np.ndarray | None:
        return None if self.naive is None else self.naive - self.log_normalization

    @property
    def total_se(self) -> np.ndarray | None:
        return None if self.naive is None else np.hypot(self.naive_se, self.log_normalization_se)

    @property
    def values(self) -> np.ndarray:
        """The criterion maximised: ln P(D), or minus the CV error rate."""
        return self.total if self.method == "grid" else -self.cv_error

    @property
    def best_C(self) -> float:
        return float(self.best["C"])

    def plot_curve(self, *, true_C: float | None = None, ax=None):
        """ln Q(D), ln N(D) and ln P(D) against C on the line of the optimum (Sollich 2002, Fig. 2)."""
        if self.method != "grid":
            raise ValueError("plot_curve needs an evidence surface; the CV error does not depend on C at fixed C k0")
        from .plotting import plot_evidence_curve

        i, j, k, _ = self.index
        line = (i, j, k, slice(None))
        return plot_evidence_curve(
            self.grid.C,
            self.naive[line],
            self.log_normalization[line],
            self.total[line],
            se_naive=self.naive_se[line],
            se_normalization=self.log_normalization_se[line],
            se_total=self.total_se[line],
            true_C=true_C,
            ax=ax,
        )

    def plot_heatmap(self, *, ax=None):
        """The criterion over (C k0, shape parameter), maximised over the other axes."""
        from .plotting import plot_evidence_heatmap

        profile = np.max(np.where(np.isfinite(self.values), self.values, -np.inf), axis=(1, 3))
        profile = np.where(np.isfinite(profile), profile, np.nan)
        label = "ln P(D), max over C and k_b/k0" if self.method == "grid" else "-(CV error rate)"
        if self.shape_name is None:
            return plot_evidence_heatmap(
                self.grid.C_k0, self.grid.offset_ratio, np.max(self.values, axis=(0, 3)),
                x_label="C k0", y_label="k_b / k0", log_x=True, log_y=True, colorbar_label=label, ax=ax,
            )
        return plot_evidence_heatmap(
            self.grid.C_k0, self.grid.shape, profile,
            x_label="C k0", y_label=self.shape_name, log_x=True, log_y=True, colorbar_label=label, ax=ax,
        )

    def to_dict(self) -> dict:
        """Everything as plain JSON-serialisable Python (lists, floats, strings; NaN/inf become None)."""

        def plain(value):
            if value is None:
                return None
            array = np.asarray(value, dtype=np.float64)
            return np.where(np.isfinite(array), array, np.nan).tolist() if array.ndim else _finite_or_none(array)

        out = {
            "method": self.method,
            "kernel": self.kernel_name,
            "shape_name": self.shape_name,
            "approximation": self.approximation,
            "normalization": self.normalization,
            "axes": {name: plain(axis) for name, axis in zip(AXES, self.grid.axes)},
            "index": list(self.index),
            "best": {key: _finite_or_none(value) for key, value in self.best.items()},
            "best_value": _finite_or_none(self.best_value),
            "best_se": _finite_or_none(self.best_se),
            "refinement": [{key: _finite_or_none(v) for key, v in point.items()} for point in self.refinement],
            "extensions": [list(e) for e in self.extensions],
            "at_edge": list(self.at_edge),
            "checks": [{**c._asdict(), "point": dict(c.point)} for c in self.checks],
        }
        for name in ("naive", "naive_se", "log_normalization", "log_normalization_se", "normalization_ess",
                     "total", "total_se", "n_marginal", "cv_error"):
            out[name] = _nan_to_none(plain(getattr(self, name)))
        if self.evidence is not None:
            ev = self.evidence
            out["evidence"] = {
                "total": ev.total, "total_se": ev.total_se, "naive": ev.naive,
                "log_normalization": ev.log_normalization, "log_normalization_se": ev.log_normalization_se,
                "normalization_ess": ev.normalization_ess, "n_marginal": ev.n_marginal, "n": ev.n,
                "terms": None if ev.terms is None else {name: float(getattr(ev.terms, name)) for name in ev.terms._fields},
            }
        return out


def _finite_or_none(value):
    value = float(value)
    return value if np.isfinite(value) else None


def _nan_to_none(nested):
    if isinstance(nested, list):
        return [_nan_to_none(v) for v in nested]
    return None if isinstance(nested, float) and not np.isfinite(nested) else nested


# ---------------------------------------------------------------------------
# selection


@float64
def select_hyperparameters(
    X,
    y,
    *,
    kernel="rbf",
    grid=None,
    method: str = "search",
    refine: bool = True,
    refine_rounds: int = 2,
    approximation: str = "ep",
    determinant: str = "regularized",
    normalization: str = "annealed",
    normalization_inputs_from="training",
    n_samples: int = 1000,
    max_inputs: int = 300,
    max_extensions: int = 3,
    extend_points: int = 2,
    on_edge: str = "warn",
    max_checks: int = 8,
    cv: int = 5,
    random_state: int = 0,
    progress: Callable[[int, int], None] | None = None,
) -> EvidenceSurface:
    """Choose C, the amplitude k0, the kernel's shape and the offset k_b.

    Parameters
    ----------
    X, y : training inputs and two-valued labels.
    kernel : family name (``"rbf"``, ``"exponential"``, ``"polynomial"``,
        ``"linear"``) or a kernel whose static settings (e.g. polynomial
        degree) are kept; its continuous hyperparameters are searched.
    grid : None (:func:`default_grid`), a :class:`Grid`, or a mapping
        overriding some default axes: ``"C"``, ``"C_k0"``, ``"offset_ratio"``
        and the shape parameter (``"length_scale"``/``"gamma"`` or ``"shape"``).
        A single-valued axis is held fixed.
    method : ``"search"`` (default: maximise ln P(D) by quasi-Newton ascent
        with exact gradients, :mod:`bayesvm.search`; returns a
        :class:`~bayesvm.search.SearchSelection`; ``grid`` may only hold
        single values, which fix those hyperparameters), ``"grid"`` (maximise
        ln P(D) over the grid, returns an :class:`EvidenceSurface`: for
        surfaces and heat maps) or ``"cv"`` (minimise the
        stratified ``cv``-fold error rate over (shape, offset ratio, C k0);
        no refinement or extension: the error rate is piecewise constant).
    refine, refine_rounds : the local pattern search around the grid optimum
        (module docstring).
    approximation, determinant : ln Q(D): ``"ep"`` (default), ``"laplace"``
        or ``"sampled"`` (see :func:`bayesvm.evidence.log_evidence`).
        ``"ep"`` and ``"laplace"`` are evaluated a block at a time (module
        docstring), ``"sampled"`` point by point (slow: a check, not a default).
    normalization, normalization_inputs_from, n_samples, max_inputs :
        ln N(D) estimator and its settings: ``"annealed"`` (default:
        tempered SMC over the training inputs at every cell with a screening
        budget, module docstring; biased low where its runs disagree, which
        leaves such cells out), ``"ep"`` (faster on small problems, but wrong
        by tens of nats where the latents are correlated: in the C -> 0,
        large-amplitude corner and at ordinary settings on Pima; the checks
        correct it at the argmax only), ``"prior"`` (plain sampling, biased
        low at realistic n; ``normalization_inputs_from``, ``n_samples`` and
        ``max_inputs`` apply to it only).
    max_extensions, extend_points, on_edge : grid-edge handling
        (``on_edge="warn"`` or ``"raise"``; module docstring).
    max_checks : with ``normalization="annealed"`` or ``"ep"``, at most this
        many full annealed checks of the surface's ln N(D) at the argmax
        (module docstring; 0 turns them off, which lets EP's known failure, or
        a low-biased screening estimate, steer the selection); with
        ``approximation="ep"`` also at most this many tests that EP's
        posterior converges at the argmax.
    random_state : seed of the normalisation draws and the CV folds.
    progress : called as ``progress(done, total)`` after each batched solve.
    """
    X = check_inputs(X)
    y_pm, classes = check_labels(y, X.shape[0])
    template = _kernel_template(kernel)
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}; got {method!r}")
    if approximation not in APPROXIMATIONS:
        raise ValueError(f"approximation must be one of {APPROXIMATIONS}; got {approximation!r}")
    if determinant not in DETERMINANTS:
        raise ValueError(f"determinant must be one of {DETERMINANTS}; got {determinant!r}")
    if normalization not in NORMALIZATIONS:
        raise ValueError(f"normalization must be one of {NORMALIZATIONS}; got {normalization!r}")
    if on_edge not in ("warn", "raise"):
        raise ValueError(f"on_edge must be 'warn' or 'raise'; got {on_edge!r}")
    for value, name in ((refine_rounds, "refine_rounds"), (max_extensions, "max_extensions"), (max_checks, "max_checks")):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
            raise ValueError(f"{name} must be an integer >= 0; got {value!r}")
    if isinstance(extend_points, bool) or not isinstance(extend_points, (int, np.integer)) or extend_points < 1:
        raise ValueError(f"extend_points must be an integer >= 1; got {extend_points!r}")
    if method == "search":
        space = _search_space(X, template, grid)
        return select_by_search(X, y, template, space=space, starts=default_starts(space, X, template),
                                random_state=random_state, progress=progress)
    grid = _resolve_grid(grid, X, template)
    inputs = normalization_inputs(X, normalization_inputs_from, max_inputs=max_inputs, random_state=random_state)
    problem = _Problem(
        X=X, y=jnp.asarray(y_pm), template=template, approximation=approximation, determinant=determinant,
        normalization=normalization, n_samples=int(n_samples), inputs=inputs, random_state=random_state,
        max_checks=int(max_checks),
    )
    if method == "cv":
        return _select_by_cv(problem, grid, classes, cv, random_state, progress)
    return _select_by_evidence(problem, grid, classes, refine, refine_rounds, max_extensions, extend_points,
                               on_edge, progress)


def _search_space(X, template: Kernel, grid) -> SearchSpace:
    """The search's bounds, with the hyperparameters that ``grid`` pins to one value held fixed."""
    space = SearchSpace.default(X, template)
    if grid is None:
        return space
    if not isinstance(grid, Mapping):
        raise ValueError("with method='search', grid must be a mapping of hyperparameter -> one value (to fix it)")
    shape_name = template.shape_parameter
    accepted = {"C", "C_k0", "offset_ratio"} | ({shape_name} if shape_name else set())
    unknown = set(grid) - accepted
    if unknown:
        raise ValueError(f"unknown hyperparameters {sorted(unknown)} for the {template.name} kernel; accepted: "
                         f"{sorted(accepted)}")
    values = {}
    for name, value in grid.items():
        value = np.atleast_1d(np.asarray(value, dtype=np.float64))
        if value.size != 1 or not np.isfinite(value[0]) or value[0] <= 0:
            raise ValueError(f"with method='search', grid[{name!r}] must be one positive value (it fixes "
                             f"{name}); got {value.tolist()}. Use method='grid' to evaluate a grid")
        values[name] = float(value[0])
    if "C_k0" in values and "C" not in values:
        raise ValueError("C_k0 can only be fixed together with C")
    if "C" in values:
        space = space.fix(0, np.log(values["C"]))
    if "C_k0" in values:
        space = space.fix(1, np.log(values["C_k0"] / values["C"]))
    if "offset_ratio" in values:
        space = space.fix(2, np.log(values["offset_ratio"]))
    if shape_name in values:
        space = space.fix(3, np.log(values[shape_name]))
    return space


def _select_by_evidence(problem, grid, classes, refine, refine_rounds, max_extensions, extend_points, on_edge,
                        progress) -> EvidenceSurface:
    surface = _evaluate(problem, grid, progress)
    extensions = []
    for _ in range(max_extensions):
        edges = _edge_axes(_checked_argmax(problem, grid, surface), grid)
        if not edges:
            break
        warnings.warn(
            f"the evidence optimum is on the grid edge ({', '.join(f'{a} {s}' for a, s in edges)}); "
            f"extending the grid by {extend_points} point(s) there",
            GridEdgeWarning,
            stacklevel=4,
        )
        for name, side in edges:
            grid, surface = _extend(problem, grid, surface, name, side, extend_points, progress)
            extensions.append((name, side))
    index = _checked_argmax(problem, grid, surface)
    at_edge = tuple(name for name, _ in _edge_axes(index, grid))
    if at_edge:
        message = (
            f"the evidence optimum is still on the grid edge along {', '.join(at_edge)} after {len(extensions)} "
            "extension(s): the maximum may lie outside the grid, or the evidence may run away there (EP's ln N(D) "
            "fails towards C -> 0 with a huge amplitude and length scale, where only the annealed checks "
            "(EvidenceSurface.checks, max_checks) correct it; the Laplace-style form: towards large amplitude and "
            "short length scale, where most points are marginal)"
        )
        if on_edge == "raise":
            raise ValueError(message + "; widen the grid or fix those hyperparameters")
        warnings.warn(message, GridEdgeWarning, stacklevel=4)
    point = _point(grid, index)
    value = float(surface.total[index])
    history = []
    if refine:
        point, value, history = _refine(problem, grid, point, value, refine_rounds)
    fit = problem.map_svm(point["shape"], point["offset_ratio"], point["C_k0"], point["C"], classes)
    evidence = _evidence_at(problem, point, fit)
    _warn_unconverged(problem)
    _warn_unresolvable(problem)
    _warn_checks(problem, point)
    _warn_posterior_tests(problem, point)
    _warn_degenerate(fit)
    if problem.approximation == "laplace" and evidence.n_marginal > LAPLACE_MARGINAL_SHARE * problem.n:
        warnings.warn(
            f"at the selected hyperparameters {evidence.n_marginal} of {problem.n} points are marginal: the "
            "Laplace-style evidence is too optimistic there and its maximum lands in the wrong place "
            "(measured on six data sets of 80 points, its maximum lost 3-26 nats of sampled evidence); use "
            "approximation='ep' (the default)",
            RuntimeWarning,
            stacklevel=4,
        )
    return EvidenceSurface(
        method="grid", kernel_name=problem.template.name, shape_name=_shape_name(problem.template), grid=grid,
        index=index, best=_hyperparameters(problem, point), best_value=evidence.total, best_se=evidence.total_se,
        best_kernel=fit.kernel, naive=surface.naive, naive_se=surface.naive_se,
        log_normalization=surface.log_normalization, log_normalization_se=surface.log_normalization_se,
        normalization_ess=surface.normalization_ess, n_marginal=surface.n_marginal, evidence=evidence,
        approximation=problem.approximation, normalization=problem.normalization, refinement=tuple(history),
        extensions=tuple(extensions), at_edge=at_edge, checks=tuple(problem.checks.values()),
    )


def _warn_degenerate(fit: MapSVM) -> None:
    """Warn when the chosen hyperparameters make the predicted class probabilities nearly constant.

    Judged on what ``BayesianSVC`` predicts by default: the averaged
    probability under EP's posterior of theta (:class:`bayesvm.posterior.Posterior`),
    at the training inputs. The MAP plug-in P(+1 | theta*) = sigmoid(C g(theta*))
    is not the test: at C -> 0 with a huge amplitude the MAP outputs stay O(1)
    and every plug-in probability is near 1/2, while the posterior spreads
    theta over the prior's scale and can still predict well (breast cancer,
    150 training points: C = 0.0027, k0 = 3.7e9, held-out NLL 0.12).
    """
    with warnings.catch_warnings():  # an unconverged EP run is reported by the estimator that predicts with it
        warnings.simplefilter("ignore", RuntimeWarning)
        probability = Posterior.from_fit(fit, "ep").predict_proba(fit.X)
    spread = float(np.max(np.abs(np.asarray(probability) - 0.5)))
    if spread < _DEGENERATE_MARGIN:
        warnings.warn(
            f"the selected hyperparameters (C = {fit.C:.3g}, amplitude = {float(fit.kernel.amplitude):.3g}) give "
            f"near-constant class probabilities: every training point's predicted P(y = +1) (EP posterior) is "
            f"within {spread:.3f} of 1/2. The evidence is running into its C -> 0, large-amplitude limit, where "
            "the probabilities carry no information; fix C or bound the grid (grid={'C': ...}), or compare with "
            "method='cv'",
            DegenerateSelectionWarning,
            stacklevel=5,
        )


def _warn_unconverged(problem: _Problem) -> None:
    failures = {"labels": "ln Q(D)", "nu": "ln N(D)"}
    counts = [f"{problem.unconverged[sites]} of {name}" for sites, name in failures.items() if problem.unconverged[sites]]
    if counts:
        warnings.warn(
            f"EP did not converge at some grid points ({', '.join(counts)} evaluations); they are left out of "
            "the maximisation (NaN on the surface)",
            RuntimeWarning,
            stacklevel=5,
        )


def _warn_unresolvable(problem: _Problem) -> None:
    if problem.unresolvable:
        warnings.warn(
            f"{len(problem.unresolvable)} grid point(s) have an amplitude beyond what float64 resolves at n = "
            f"{problem.n} (k0 > {problem.max_amplitude(1.0):.2g} for offset ratio 1: rounding in the prior covariance "
            "reaches the margin |theta| <= 1); they are left out of the maximisation (NaN on the surface)",
            RuntimeWarning,
            stacklevel=5,
        )


def _warn_checks(problem: _Problem, point: dict) -> None:
    """Report the surface's ln N(D) failures found by the annealed checks, and a selected point left unchecked."""
    unreliable = [c for c in problem.checks.values() if not c.reliable]
    if unreliable:
        warnings.warn(
            f"ln N(D) could not be estimated reliably at {len(unreliable)} of {len(problem.checks)} checked "
            "point(s) (the annealing runs disagree: a prior far wider than the margin and nearly constant over "
            "the data, where every estimator fails); they were left out of the maximisation (NaN on the surface)",
            RuntimeWarning,
            stacklevel=5,
        )
    failed = [c for c in problem.checks.values() if c.reliable and not c.agreed]
    name = {"ep": "EP's", "annealed": "the screening annealed"}.get(problem.normalization)
    if failed:
        worst = max(failed, key=lambda c: abs(c.annealed - c.surface))
        warnings.warn(
            f"{name} ln N(D) disagreed with the full annealed estimate at {len(failed)} of {len(problem.checks)} "
            f"checked point(s), by up to {abs(worst.annealed - worst.surface):.1f} nats (at C = "
            f"{worst.point['C']:.3g}, C k0 = {worst.point['C_k0']:.3g}: {worst.surface:.1f} against "
            f"{worst.annealed:.1f} +- {worst.annealed_se:.1f}); the full values replace the surface's there "
            "(EvidenceSurface.checks)",
            RuntimeWarning,
            stacklevel=5,
        )
    if problem.normalization in _CHECKED and problem.max_checks > 0 and _point_key(point) not in problem.checks:
        warnings.warn(
            f"the check budget (max_checks={problem.max_checks}) ran out before {name} ln N(D) at the selected "
            "point could be checked against the full annealed estimate; raise max_checks",
            RuntimeWarning,
            stacklevel=5,
        )


def _warn_posterior_tests(problem: _Problem, point: dict) -> None:
    """Report the candidate optima left out because EP's posterior does not converge there, and a selected
    point left untested."""
    failed = [key for key, converged in problem.posterior_tests.items() if not converged]
    if failed:
        warnings.warn(
            f"EP's posterior did not converge at {len(failed)} of {len(problem.posterior_tests)} candidate "
            "optimum(s) (its sites keep moving, so the class probabilities cannot be computed there; seen in the "
            "small-C, huge-amplitude, long-length-scale corner); they were left out of the maximisation",
            RuntimeWarning,
            stacklevel=5,
        )
    if problem.approximation == "ep" and problem.max_checks > 0 and _point_key(point) not in problem.posterior_tests:
        warnings.warn(
            f"the test budget (max_checks={problem.max_checks}) ran out before EP's posterior at the selected point "
            "was tested for convergence; raise max_checks",
            RuntimeWarning,
            stacklevel=5,
        )


def _extend(problem, grid: Grid, surface: _Surface, name: str, side: str, points: int, progress):
    """Extend one axis and evaluate only the new slab of the surface."""
    axis_number = AXES.index(name)
    old = getattr(grid, name)
    new_axis = _extended(old, side, points)
    new_values = new_axis[:points] if side == "low" else new_axis[-points:]
    slab = _evaluate(problem, grid.replace(**{name: new_values}), progress)
    parts = (slab, surface) if side == "low" else (surface, slab)
    merged = _Surface(*(np.concatenate([p[f] for p in parts], axis=axis_number) for f in range(len(_Surface._fields))))
    return grid.replace(**{name: new_axis}), merged


def _refine(problem, grid: Grid, point: dict, value: float, rounds: int):
    """Shrinking derivative-free pattern search in log coordinates around ``point`` (module docstring)."""
    steps = {}
    for name, axis in zip(AXES, grid.axes):
        if axis.size > 1:
            steps[name] = 0.5 * float(np.mean(np.diff(np.log(axis))))
    history = []
    for _ in range(rounds):
        if not steps:
            break
        candidates = {
            name: (np.exp(np.log(point[name]) + np.array([-1.0, 0.0, 1.0]) * steps[name]) if name in steps
                   else np.array([point[name]]))
            for name in AXES
        }
        local = Grid(**candidates)
        surface = _evaluate(problem, local, None)
        index = _checked_argmax(problem, local, surface)
        if surface.total[index] > value:
            point = _point(local, index)
            value = float(surface.total[index])
        history.append({**point, "total": value})
        steps = {name: 0.5 * h for name, h in steps.items()}
    return point, value, history


def _evidence_at(problem: _Problem, point: dict, fit: MapSVM) -> Evidence:
    block = problem.block(point["shape"], point["offset_ratio"], [point["C_k0"]], np.array([point["C"]]))
    terms = None if block.terms is None else NaiveEvidenceTerms(*(np.asarray(t)[0, 0] for t in block.terms))
    norm = NormalizationEstimate(*(np.asarray(v)[0, 0] for v in block.normalization))
    naive, naive_se = float(block.naive[0, 0]), float(block.naive_se[0, 0])
    return Evidence(
        total=naive - float(norm.value),
        total_se=float(np.hypot(naive_se, norm.se)),
        naive=naive,
        naive_se=naive_se,
        terms=terms,
        log_normalization=float(norm.value),
        log_normalization_se=float(norm.se),
        normalization_ess=float(norm.ess),
        n_marginal=int(fit.marginal.sum()),
        approximation=problem.approximation,
        determinant=problem.determinant,
        normalization=_cell_normalization(problem, point),
        fit=fit,
    )


def _cell_normalization(problem: _Problem, point: dict) -> str:
    """The estimator behind a cell's ln N(D): the selection's, or "annealed" where a check replaced EP's."""
    check = problem.checks.get(_point_key(point))
    return "annealed" if check is not None and check.correction() is not None else problem.normalization


def _hyperparameters(problem: _Problem, point: dict) -> dict:
    amplitude = point["C_k0"] / point["C"]
    out = {"C": point["C"], "amplitude": amplitude, "offset": point["offset_ratio"] * amplitude,
           "C_k0": point["C_k0"], "offset_ratio": point["offset_ratio"]}
    name = _shape_name(problem.template)
    if name is not None:
        out[name] = point["shape"]
    return out


# ---------------------------------------------------------------------------
# cross-validation on the same grid


def _cv_errors(problem: _Problem, grid: Grid, folds, progress) -> np.ndarray:
    """Stratified k-fold misclassification rate over (shape, offset ratio, C k0)."""
    errors = np.zeros(grid.shape_of_surface[:3])
    y = np.asarray(problem.y)
    blocks = list(itertools.product(enumerate(grid.shape), enumerate(grid.offset_ratio)))
    total = len(blocks) * len(folds)
    done = 0
    for (i, shape), (j, ratio) in blocks:
        Kt = problem.base(float(shape)) + ratio
        for train, test in folds:
            K_train = Kt[np.ix_(train, train)]
            batch = solve_dual_batch(
                jnp.broadcast_to(K_train, (grid.C_k0.size, *K_train.shape)), y[train], jnp.asarray(grid.C_k0)
            )
            theta = np.asarray(Kt[np.ix_(test, train)] @ (batch.alpha * y[train]).T)  # (n_test, nP)
            predicted = np.where(theta >= 0, 1.0, -1.0)
            errors[i, j] += np.sum(predicted != y[test][:, None], axis=0)
            done += 1
            if progress is not None:
                progress(done, total)
    return errors / problem.n


def _select_by_cv(problem, grid: Grid, classes, cv, random_state, progress) -> EvidenceSurface:
    grid = grid.replace(C=np.array([1.0]))
    splitter = StratifiedKFold(n_splits=cv, shuffle=True, random_state=random_state)
    folds = list(splitter.split(problem.X, np.asarray(problem.y)))
    error = _cv_errors(problem, grid, folds, progress)
    index = (*_argmax(-error), 0)
    at_edge = tuple(name for name, _ in _edge_axes(index, grid))
    if at_edge:
        warnings.warn(
            f"the cross-validation optimum is on the grid edge along {', '.join(at_edge)}; widen the grid",
            GridEdgeWarning,
            stacklevel=4,
        )
    point = {name: float(axis[i]) for name, axis, i in zip(AXES, grid.axes, index)}
    best = _hyperparameters(problem, point)
    return EvidenceSurface(
        method="cv", kernel_name=problem.template.name, shape_name=_shape_name(problem.template), grid=grid,
        index=index, best=best, best_value=-float(error[index[:3]]), best_se=float("nan"),
        best_kernel=problem.kernel(point["shape"], best["amplitude"], best["offset"]),
        cv_error=error[..., None], at_edge=at_edge,
    )
