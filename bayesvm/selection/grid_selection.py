"""Evidence selection on a grid: evaluate the surface block by block, check the argmax, extend, refine.

Each block is one (shape, offset ratio) of the grid: its (C k0, C) cells go
to the approximations of :mod:`bayesvm.evidence.approximations` as one batch of
:class:`~bayesvm.evidence.approximations.Cells`, with screening settings (EP stops once
ln Z has settled to 1e-3 nats; tempered SMC has a search anchor's plan, 4 runs of
128 particles with 3 moves per temperature, well below the check's, on the check's
compiled sampler). Cells whose estimate is not to be trusted (EP not
converged, SMC runs disagreeing, too few effective prior draws) and cells
whose amplitude float64 cannot resolve (k0 above
:func:`bayesvm.hyperparameters.max_amplitude`: rounding in the prior
covariance reaches the margin |theta| <= 1) are left out (NaN) and counted.

Every argmax the selection acts on passes the checks of
:mod:`bayesvm.selection.grid_checks` first. Grid edges: when the optimum sits on the
edge of an axis the grid varies, the selection warns (:class:`GridEdgeWarning`)
and extends that axis by ``extend_points`` steps of its own log spacing, at
most ``max_extensions`` times, then warns once more (or raises with
``on_edge="raise"``); it never returns an edge optimum silently.

Local refinement: a derivative-free shrinking pattern search in log
coordinates around the grid optimum (every combination of
{x e^-h, x, x e^h} on the varied axes, h starting at half the grid spacing
and halving each round). It only compares values, so the kinks of the
Laplace-style form and the stopping noise of EP do not mislead it.

Reference: P. Sollich, "Bayesian methods for support vector machines:
evidence and predictive class probabilities", Machine Learning 46 (2002).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import NamedTuple

import jax
import numpy as np

from .._warnings import warn_user
from ..evidence.approximations import STAND_IN_ESTIMATORS, Cells, Estimate, naive_estimator, normalization_estimator
from ..evidence.log_evidence import LAPLACE_MARGINAL_SHARE, Evidence
from ..exceptions import UntrustedEvidenceWarning
from .grid import AXES, Grid, GridEdgeWarning, edge_axes, extended, grid_argument
from .grid_checks import GridChecks, cell_key, warn_degenerate
from ..hyperparameters import max_amplitude
from ..kernels import Kernel, gram_matrix
from ..normalization.budget import EvidenceBudget
from ..normalization.draws import GRID_PRIOR_DRAWS
from ..inference.laplace import NaiveEvidenceTerms
from ..solver.dual import DualSolution, MapSVM, solve_dual_boxes
from .surface import EvidenceSurface

__all__ = ["GridOptions", "GridProblem", "select_on_grid"]

#: boxes per compiled batch of dual solves (the last batch padded by repetition: one compilation per n)
_SOLVE_BATCH = 3
#: the screening settings of the surface's EP runs and tempered-SMC ln N(D) (module docstring); a sampled
#: ln Q(D) keeps its full budget (it is the reference, not a screen)
_SCREEN_EP = {"tol": 1e-4, "log_z_tol": 1e-3}
_SCREEN_BUDGET = EvidenceBudget()  # at role="anchor"


@dataclass(frozen=True)
class GridOptions:
    """How the grid selection handles the surface (module docstring).

    refine, refine_rounds: the local pattern search; max_extensions,
    extend_points, on_edge ("warn" or "raise"): grid edges; max_checks: at
    most this many full checks of ln N(D), and as many tests of EP's
    posterior, at the argmax (0 turns them off).
    """

    refine: bool = True
    refine_rounds: int = 2
    max_extensions: int = 3
    extend_points: int = 2
    on_edge: str = "warn"
    max_checks: int = 8

    def __post_init__(self):
        if self.on_edge not in ("warn", "raise"):
            raise ValueError(f"on_edge must be 'warn' or 'raise'; got {self.on_edge!r}")
        for name, minimum in (("refine_rounds", 0), ("max_extensions", 0), ("max_checks", 0), ("extend_points", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
                raise ValueError(f"{name} must be an integer >= {minimum}; got {value!r}")


class Surface(NamedTuple):
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

    def with_value(self, index: tuple, **values) -> "Surface":
        """A copy with new values at one cell (e.g. ``naive=np.nan``)."""
        arrays = {name: getattr(self, name).copy() for name in values}
        for name, value in values.items():
            arrays[name][index] = value
        return self._replace(**arrays)


@dataclass
class GridProblem:
    """The data, the estimators and the caches of one grid selection.

    ``inputs`` are the inputs of the ln N(D) integral (the training inputs, or
    stand-in inputs for the estimators that use them).
    """

    X: np.ndarray
    y: jax.Array  # -1/+1
    template: Kernel
    approximation: str
    normalization: str
    checks: GridChecks
    inputs: np.ndarray
    random_state: int = 0
    determinant: str = "regularized"
    n_samples: int = GRID_PRIOR_DRAWS
    unconverged: dict = field(default_factory=lambda: {"ln Q(D)": 0, "ln N(D)": 0})
    unresolvable: set = field(default_factory=set)
    _bases: dict = field(default_factory=dict)
    _solutions: dict = field(default_factory=dict)

    @property
    def n(self) -> int:
        return self.X.shape[0]

    def kernel(self, point: dict) -> Kernel:
        amplitude = point["C_k0"] / point["C"]
        changes = {"amplitude": amplitude, "offset": point["offset_ratio"] * amplitude}
        if self.template.shape_parameter is not None:
            changes[self.template.shape_parameter] = point["shape"]
        return self.template.replace(**changes)

    def base(self, shape: float, inputs: np.ndarray | None = None) -> jax.Array:
        """The unit-amplitude, zero-offset Gram matrix at this shape (of the training inputs by default)."""
        X = self.X if inputs is None else inputs
        key = (shape, X is self.X)
        if key not in self._bases:
            kernel = self.kernel({"shape": shape, "offset_ratio": 0.0, "C_k0": 1.0, "C": 1.0})
            self._bases[key] = gram_matrix(kernel, X)
        return self._bases[key]

    def cells(self, shape, ratio, amplitude, C, *, naive: bool) -> Cells:
        """The cells on the inputs of ln Q(D) (``naive``) or of ln N(D)."""
        if naive or self.normalization not in STAND_IN_ESTIMATORS:
            return Cells.at(self.base(shape), ratio, amplitude, C, y=self.y if naive else None)
        return Cells.at(self.base(shape, self.inputs), ratio, amplitude, C, n=self.n)

    def point_cells(self, point: dict, *, naive: bool) -> Cells:
        return self.cells(point["shape"], point["offset_ratio"], point["C_k0"] / point["C"], point["C"], naive=naive)

    def solutions(self, shape, ratio, P) -> DualSolution:
        """Dual solutions on the kernel base + ratio with boxes P (batched; solves only the missing ones)."""
        missing = [p for p in P if (shape, ratio, p) not in self._solutions]
        Kt = self.base(shape) + ratio
        for start in range(0, len(missing), _SOLVE_BATCH):
            chunk = missing[start : start + _SOLVE_BATCH]
            boxes = chunk + chunk[-1:] * (_SOLVE_BATCH - len(chunk))
            # host-side: slicing and stacking device arrays would compile a program per shape
            batch = jax.tree_util.tree_map(np.asarray, solve_dual_boxes(Kt, self.y, boxes))
            for i, p in enumerate(chunk):
                self._solutions[(shape, ratio, p)] = jax.tree_util.tree_map(lambda v, i=i: v[i], batch)
        return jax.tree_util.tree_map(lambda *v: np.stack(v), *(self._solutions[(shape, ratio, p)] for p in P))

    def map_svm(self, point: dict, classes) -> MapSVM:
        """The fitted MAP SVM at one point, from the cached solve on its box (alpha rescaled by C / P)."""
        P, C = point["C_k0"], point["C"]
        solution = jax.tree_util.tree_map(lambda v: v[0], self.solutions(point["shape"], point["offset_ratio"], [P]))
        solution = solution._replace(alpha=solution.alpha * (C / P))
        return MapSVM(X=self.X, y=self.y, classes=classes, kernel=self.kernel(point), C=float(C), solution=solution)

    def _screened(self, estimator, cells: Cells, count: str) -> Estimate:
        estimate = estimator(cells)
        self.unconverged[count] += int(np.sum(~estimate.trusted))
        return estimate

    def block(self, shape: float, ratio: float, P: list, C: np.ndarray) -> Surface:
        """The surface on the (C k0, C) cells of one (shape, offset ratio), with the checks' corrections."""
        size = (len(P), len(C))
        amplitude = np.divide.outer(np.asarray(P, dtype=np.float64), np.asarray(C, dtype=np.float64))
        C_cells = np.broadcast_to(C, size)
        resolvable = amplitude <= max_amplitude(self.n, ratio)
        values = {name: np.full(size, np.nan) for name in ("naive", "naive_se", "log_normalization",
                                                            "log_normalization_se", "normalization_ess")}
        if np.any(resolvable):
            a, c = amplitude[resolvable], C_cells[resolvable]
            naive = self._screened(naive_estimator(self.approximation, determinant=self.determinant,
                                                   key=self.random_state, **_SCREEN_EP),
                                   self.cells(shape, ratio, a, c, naive=True), "ln Q(D)")
            norm = self._screened(normalization_estimator(self.normalization, key=self.random_state,
                                                          n_samples=self.n_samples, budget=_SCREEN_BUDGET,
                                                          role="anchor", **_SCREEN_EP),
                                  self.cells(shape, ratio, a, c, naive=False), "ln N(D)")
            values["naive"][resolvable] = np.where(naive.trusted, naive.value, np.nan)
            values["naive_se"][resolvable] = naive.se
            values["log_normalization"][resolvable] = np.where(norm.trusted, norm.value, np.nan)
            values["log_normalization_se"][resolvable] = norm.se
            values["normalization_ess"][resolvable] = norm.diagnostics.get("ess", np.full(a.size, np.inf))
        for i, j in zip(*np.nonzero(~resolvable)):
            self.unresolvable.add(cell_key({"shape": shape, "offset_ratio": ratio, "C_k0": P[i], "C": C[j]}))
        for i, j in itertools.product(range(len(P)), range(len(C))):
            key = cell_key({"shape": shape, "offset_ratio": ratio, "C_k0": P[i], "C": C[j]})
            correction = self.checks.normalization_correction(key)
            if correction is not None:
                values["log_normalization"][i, j], values["log_normalization_se"][i, j] = correction
            if self.checks.posterior_failed(key):
                values["naive"][i, j] = np.nan
        n_marginal = np.broadcast_to(np.sum(self.solutions(shape, ratio, P).marginal, axis=-1)[:, None], size)
        return Surface(n_marginal=np.asarray(n_marginal, dtype=np.float64), **values)


def evaluate(problem: GridProblem, grid: Grid, progress=None) -> Surface:
    """Every block of the grid, one (shape, offset ratio) at a time."""
    out = {name: np.empty(grid.shape_of_surface) for name in Surface._fields}
    blocks = list(itertools.product(enumerate(grid.shape), enumerate(grid.offset_ratio)))
    for done, ((i, shape), (j, ratio)) in enumerate(blocks, start=1):
        block = problem.block(float(shape), float(ratio), [float(p) for p in grid.C_k0], grid.C)
        for name in Surface._fields:
            out[name][i, j] = getattr(block, name)
        if progress is not None:
            progress(done, len(blocks))
    return Surface(**out)


def argmax(values: np.ndarray) -> tuple[int, ...]:
    if not np.any(np.isfinite(values)):
        raise ValueError("the criterion is not finite anywhere on the grid")
    finite = np.where(np.isfinite(values), values, -np.inf)
    return tuple(int(i) for i in np.unravel_index(np.argmax(finite), values.shape))


def checked_argmax(problem: GridProblem, grid: Grid, surface: Surface) -> tuple[tuple[int, ...], Surface]:
    """The argmax of ln P(D) once EP's posterior converges there and its ln N(D) has passed the full check,
    and the surface with what the checks found (a cell left out, or carrying the full value)."""
    checks = problem.checks
    while True:
        index = argmax(surface.total)
        point = grid.point(index)
        key = cell_key(point)
        if checks.wants_posterior_test(key) and not checks.test_posterior(point, problem.point_cells(point, naive=True)):
            surface = surface.with_value(index, naive=np.nan)
            continue
        if not checks.wants_normalization_check(key):
            return index, surface  # checked, or out of budget
        # the checked estimators integrate over the training inputs, as the full check does
        cell = problem.point_cells(point, naive=False)
        correction = checks.check_normalization(point, cell, float(surface.log_normalization[index])).correction()
        if correction is None:
            return index, surface
        surface = surface.with_value(index, log_normalization=correction[0], log_normalization_se=correction[1])


def _extend(problem, grid: Grid, surface: Surface, name: str, side: str, points: int, progress):
    """Extend one axis and evaluate only the new slab of the surface."""
    axis_number = AXES.index(name)
    new_axis = extended(getattr(grid, name), side, points)
    new_values = new_axis[:points] if side == "low" else new_axis[-points:]
    slab = evaluate(problem, grid.replace(**{name: new_values}), progress)
    parts = (slab, surface) if side == "low" else (surface, slab)
    merged = Surface(*(np.concatenate([p[f] for p in parts], axis=axis_number) for f in range(len(Surface._fields))))
    return grid.replace(**{name: new_axis}), merged


def _refine(problem, grid: Grid, point: dict, value: float, rounds: int):
    """Shrinking derivative-free pattern search in log coordinates around ``point`` (module docstring)."""
    steps = {name: 0.5 * float(np.mean(np.diff(np.log(axis)))) for name, axis in zip(AXES, grid.axes) if axis.size > 1}
    history = []
    for _ in range(rounds if steps else 0):
        local = Grid(**{name: np.exp(np.log(point[name]) + np.array([-1.0, 0.0, 1.0]) * steps[name]) if name in steps
                        else np.array([point[name]]) for name in AXES})
        index, surface = checked_argmax(problem, local, evaluate(problem, local))
        if surface.total[index] > value:
            point, value = local.point(index), float(surface.total[index])
        history.append({**point, "total": value})
        steps = {name: 0.5 * h for name, h in steps.items()}
    return point, value, history


def evidence_at(problem: GridProblem, point: dict, fit: MapSVM) -> Evidence:
    """The evidence at the selected point by the full estimators of :func:`bayesvm.log_evidence`; ln N(D) is the
    full check's where one ran."""
    naive = naive_estimator(problem.approximation, determinant=problem.determinant,
                            key=problem.random_state)(problem.point_cells(point, naive=True)).at(0)
    check = problem.checks.normalization_checks.get(cell_key(point))
    if check is not None and check.reliable:
        name, norm = "annealed", Estimate(check.annealed, check.annealed_se, True, {})
    else:
        name = problem.normalization
        norm = normalization_estimator(name, key=problem.random_state, n_samples=problem.n_samples)(
            problem.point_cells(point, naive=False)).at(0)
    terms = naive.diagnostics.get("terms")
    return Evidence(
        total=naive.value - norm.value, total_se=float(np.hypot(naive.se, norm.se)), naive=naive.value,
        naive_se=naive.se, terms=None if terms is None else NaiveEvidenceTerms(**terms),
        log_normalization=norm.value, log_normalization_se=norm.se,
        normalization_ess=float(norm.diagnostics.get("ess", np.inf)), n_marginal=int(fit.marginal.sum()),
        approximation=problem.approximation, determinant=problem.determinant, normalization=name, fit=fit,
        naive_converged=naive.trusted, normalization_trusted=norm.trusted,
    )


def _extend_at_edges(problem, grid, surface, options: GridOptions, progress):
    """Extend the grid while the checked optimum lies on an edge (at most ``max_extensions`` times)."""
    extensions = []
    for _ in range(options.max_extensions):
        index, surface = checked_argmax(problem, grid, surface)
        edges = edge_axes(index, grid)
        if not edges:
            break
        warn_user(f"the evidence optimum is on the grid edge ({', '.join(f'{a} {s}' for a, s in edges)}); "
                  f"extending the grid by {options.extend_points} point(s) there (options=GridOptions("
                  "extend_points=..., max_extensions=...))", GridEdgeWarning)
        for name, side in edges:
            grid, surface = _extend(problem, grid, surface, name, side, options.extend_points, progress)
            extensions.append((name, side))
    index, surface = checked_argmax(problem, grid, surface)
    at_edge = tuple(name for name, _ in edge_axes(index, grid))
    if at_edge:
        message = (
            f"the evidence optimum is still on the grid edge along {', '.join(at_edge)} after {len(extensions)} "
            "extension(s): the maximum may lie outside the grid, or the evidence runs away there (theory: "
            "\"Hyperparameter selection\")"
        )
        remedy = f"; widen those axes or fix them ({grid_argument(at_edge)})"
        if options.on_edge == "raise":
            raise ValueError(message + remedy)
        warn_user(message + remedy, GridEdgeWarning)
    return grid, surface, index, tuple(extensions), at_edge


def select_on_grid(problem: GridProblem, grid: Grid, classes, options: GridOptions, progress=None) -> EvidenceSurface:
    """Evaluate, extend at edges, check, refine; the evidence and the warnings at the selected point."""
    grid, surface, index, extensions, at_edge = _extend_at_edges(problem, grid, evaluate(problem, grid, progress),
                                                                 options, progress)
    point, value, history = grid.point(index), float(surface.total[index]), []
    if options.refine:
        point, value, history = _refine(problem, grid, point, value, options.refine_rounds)
    fit = problem.map_svm(point, classes)
    evidence = evidence_at(problem, point, fit)
    _warn_left_out(problem)
    problem.checks.warn(point)
    warn_degenerate(fit)
    if problem.approximation == "laplace" and evidence.n_marginal > LAPLACE_MARGINAL_SHARE * problem.n:
        warn_user(
            f"at the selected hyperparameters {evidence.n_marginal} of {problem.n} points are marginal, where the "
            "Laplace-style evidence is too optimistic and its maximum misplaced; use "
            "estimators=GridEstimators(approximation='ep') (the default)", UntrustedEvidenceWarning,
        )
    return EvidenceSurface(
        method="grid", kernel_name=problem.template.name, shape_name=problem.template.shape_parameter, grid=grid,
        index=index, best=hyperparameters(problem.template, point), best_value=evidence.total,
        best_se=evidence.total_se, best_kernel=fit.kernel, naive=surface.naive, naive_se=surface.naive_se,
        log_normalization=surface.log_normalization, log_normalization_se=surface.log_normalization_se,
        normalization_ess=surface.normalization_ess, n_marginal=surface.n_marginal, evidence=evidence,
        approximation=problem.approximation, normalization=problem.normalization, refinement=tuple(history),
        extensions=extensions, at_edge=at_edge, checks=tuple(problem.checks.normalization_checks.values()),
    )


def _warn_left_out(problem: GridProblem) -> None:
    """Report the cells left out of the maximisation: untrusted estimates and amplitudes float64 cannot resolve."""
    counts = [f"{count} of {name}" for name, count in problem.unconverged.items() if count]
    if counts:
        warn_user(
            f"the {problem.approximation} / {problem.normalization} estimates could not be trusted at some grid "
            f"points ({', '.join(counts)} evaluations) and are left out of the maximisation (NaN on the surface); "
            "if they lie near the optimum, narrow the grid away from them (grid={'C': ..., 'C_k0': ...})",
            UntrustedEvidenceWarning,
        )
    if problem.unresolvable:
        warn_user(
            f"{len(problem.unresolvable)} grid point(s) have an amplitude beyond what float64 resolves at n = "
            f"{problem.n} (k0 = C_k0 / C > {max_amplitude(problem.n, 1.0):.2g} at offset ratio 1) and are left out "
            "of the maximisation (NaN on the surface); keep C_k0 / C below that (grid={'C': ..., 'C_k0': ...})",
            UntrustedEvidenceWarning,
        )


def hyperparameters(template: Kernel, point: dict) -> dict:
    """The selected hyperparameters: C, amplitude, offset, C k0, offset ratio and the shape parameter."""
    amplitude = point["C_k0"] / point["C"]
    out = {"C": point["C"], "amplitude": amplitude, "offset": point["offset_ratio"] * amplitude,
           "C_k0": point["C_k0"], "offset_ratio": point["offset_ratio"]}
    if template.shape_parameter is not None:
        out[template.shape_parameter] = point["shape"]
    return out
