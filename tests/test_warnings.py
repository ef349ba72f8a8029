"""The package's warnings: its own classes, exported, raised with a category a user can filter, naming a remedy, at
the line that called into the package.

Cheap by design: the class hierarchy, a static scan of every warning raised in ``bayesvm/``, a few real triggers, and
the line warnings are attributed to, through functions run as the package's own and at a few public entry points on
30 points.
"""

from __future__ import annotations

import ast
import functools
import inspect
import linecache
import sys
import types
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bayesvm
from bayesvm import _warnings, exceptions
from bayesvm._validation import training_data
from bayesvm.calibration import fit_soft_logistic
from bayesvm.evidence import approximations
from bayesvm.inference import ep as ep_module
from bayesvm.selection import search_priors, subsample
from bayesvm.selection.select import GridEstimators, GridOptions
from bayesvm.selection.search_priors import prior_for
from bayesvm.selection.subsample import selection_subset

PACKAGE = Path(bayesvm.__file__).parent


#: the package's warning classes: those of bayesvm.exceptions and the two the selection defines
WARNING_CLASSES = {name: getattr(exceptions, name) for name in exceptions.__all__} | {
    "GridEdgeWarning": bayesvm.GridEdgeWarning,
    "DegenerateSelectionWarning": bayesvm.DegenerateSelectionWarning,
}


@pytest.mark.parametrize("name", sorted(WARNING_CLASSES))
def test_every_warning_class_is_exported_and_a_bayesvm_warning(name):
    cls = WARNING_CLASSES[name]
    assert name in bayesvm.__all__ and getattr(bayesvm, name) is cls
    assert issubclass(cls, bayesvm.BayesvmWarning) and inspect.getdoc(cls)


def test_the_exported_warnings_are_exactly_the_package_classes():
    exported = {name for name in bayesvm.__all__ if name != "plotting" and inspect.isclass(getattr(bayesvm, name))
                and issubclass(getattr(bayesvm, name), Warning)}
    assert exported == set(WARNING_CLASSES)


def test_convergence_warning_is_also_scikit_learns():
    from sklearn.exceptions import ConvergenceWarning

    assert issubclass(bayesvm.ConvergenceWarning, ConvergenceWarning)
    assert issubclass(bayesvm.EvidenceBudgetWarning, bayesvm.UntrustedEvidenceWarning)


def _warn_calls(path: Path):
    """(line, function, category expression or None) of every ``warnings.warn(...)`` and ``warn_user(...)`` call in
    the file."""
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "warnings":
            assert all(alias.name != "warn" for alias in node.names), f"{path}: import warnings, call warnings.warn"
        if not isinstance(node, ast.Call):
            continue
        if (isinstance(node.func, ast.Attribute) and node.func.attr == "warn"
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "warnings"):
            function = "warnings.warn"
        elif isinstance(node.func, ast.Name) and node.func.id == "warn_user":
            function = "warn_user"
        else:
            continue
        category = node.args[1] if len(node.args) > 1 else next(
            (k.value for k in node.keywords if k.arg == "category"), None)
        yield node.lineno, function, category


def _package_files():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(PACKAGE).as_posix(), path


def test_every_warning_the_package_raises_names_one_of_its_classes():
    """Statically: every warning is raised by warn_user with a category, and it is one of the package's classes (not
    a bare RuntimeWarning or UserWarning, which a user could not filter apart from everyone else's)."""
    bad, calls = [], 0
    for relative, path in _package_files():
        for line, function, category in _warn_calls(path):
            if function == "warnings.warn":
                if relative != "_warnings.py":
                    bad.append(f"bayesvm/{relative}:{line}: warnings.warn (raise it by warn_user, which finds the "
                               "caller's line)")
                continue
            calls += 1
            # a class by name, or a choice between two of them
            names = [c.id if isinstance(c, ast.Name) else None
                     for c in ((category.body, category.orelse) if isinstance(category, ast.IfExp) else (category,))]
            if not all(name in WARNING_CLASSES for name in names):
                shown = "no category" if category is None else ast.unparse(category)
                bad.append(f"bayesvm/{relative}:{line}: {shown}")
    assert calls > 20  # the scan sees the package's calls
    assert not bad, "warnings raised otherwise than by warn_user with one of the package's classes:\n" + "\n".join(bad)


def test_newtons_iteration_cap_is_a_convergence_warning_naming_max_iter():
    rng = np.random.default_rng(0)
    Z = np.column_stack([rng.normal(size=50), np.ones(50)])
    t = (rng.uniform(size=50) < 0.5).astype(float)
    with pytest.warns(bayesvm.ConvergenceWarning, match="max_iter"):
        fit_soft_logistic(Z, t, np.zeros(2), max_iter=1)


def test_the_automatic_subsample_is_a_subsample_warning_naming_selection_size(monkeypatch):
    data = training_data(np.random.default_rng(0).normal(size=(30, 2)), np.arange(30) % 2)
    monkeypatch.setattr(subsample, "DEFAULT_SELECTION_SIZE", 10)
    with pytest.warns(bayesvm.SubsampleWarning, match="selection_size=None") as record:
        selection_subset(data, "auto")
    assert len(record) == 1 and str(record[0].message).count(".") <= 2  # short: one or two sentences
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.simplefilter("ignore", bayesvm.BayesvmWarning)  # one filter silences the package's warnings
        selection_subset(data, "auto")


def test_the_automatic_low_rank_prior_is_a_low_rank_warning_naming_inducing(monkeypatch):
    X = np.random.default_rng(0).normal(size=(30, 2))
    monkeypatch.setattr(search_priors, "AUTO_INDUCING_ABOVE", 20)
    monkeypatch.setattr(search_priors, "DEFAULT_INDUCING", 5)
    with pytest.warns(bayesvm.LowRankWarning, match="inducing=None"):
        prior = prior_for(X, "auto")
    assert prior.n_inducing == 5


# ---------------------------------------------------------------------------
# The line a warning is attributed to: the one that called into the package

#: functions run as the package's own code: their frames' file lies in the package's folder
_NESTING = '''
import importlib

from bayesvm._warnings import warn_user
from bayesvm.exceptions import BayesvmWarning


def warned(x):
    warn_user("raised deep inside the package", BayesvmWarning)
    return x


def public(through, x):
    return through(warned)(x)


def importing(name):
    return importlib.import_module(name)
'''


@pytest.fixture
def nesting(monkeypatch):
    """The functions of ``_NESTING``, as the package's module ``bayesvm._nesting`` (new ones for each test: a
    jax.jit of them traces again)."""
    module = types.ModuleType("bayesvm._nesting")
    exec(compile(_NESTING, str(PACKAGE / "_nesting.py"), "exec"), module.__dict__)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    return module


def _outside_decorator(function):
    """A decorator from outside the package, as a user's or another library's."""

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        return function(*args, **kwargs)

    return wrapper


def _warned_lines(record) -> set[str]:
    """The source lines the package's warnings in ``record`` are attributed to, each a line of this file."""
    warned = [w for w in record if issubclass(w.category, bayesvm.BayesvmWarning)]
    assert warned and all(w.filename == __file__ for w in warned), [(w.filename, w.lineno) for w in warned]
    return {linecache.getline(w.filename, w.lineno).strip() for w in warned}


@pytest.mark.parametrize("through", [lambda function: function, _outside_decorator, jax.vmap, jax.jit],
                         ids=["direct", "decorator", "vmap", "jit"])
def test_a_warning_points_past_the_frames_of_other_code_between_the_packages_own(nesting, through):
    """caller -> package -> a decorator or JAX transformation from outside it -> package -> warn_user: the caller's
    line, not the wrapper's, though the wrapper lies outside the package too (here, in the caller's file)."""
    with pytest.warns(bayesvm.BayesvmWarning, match="deep inside") as record:
        nesting.public(through, jnp.zeros(2))
    assert _warned_lines(record) == {"nesting.public(through, jnp.zeros(2))"}


def test_a_warning_raised_while_a_module_is_imported_points_past_the_import_system(nesting, monkeypatch, tmp_path):
    """caller -> package -> importlib -> a module's top level -> package -> warn_user: warnings.warn passes over the
    import system's own frames when it counts, and so must the stack level found."""
    (tmp_path / "warns_on_import.py").write_text("from bayesvm._nesting import warned\n\nwarned(0.0)\n")
    monkeypatch.syspath_prepend(tmp_path)
    with pytest.warns(bayesvm.BayesvmWarning, match="deep inside") as record:
        nesting.importing("warns_on_import")
    assert _warned_lines(record) == {'nesting.importing("warns_on_import")'}


def test_where_every_frame_is_the_packages_a_warning_points_at_the_outermost(nesting, monkeypatch):
    """As where a module of the package runs as a script."""
    monkeypatch.setattr(_warnings, "_PACKAGE", "")  # every file lies in the package
    outermost = sys._getframe()
    while outermost.f_back is not None:
        outermost = outermost.f_back
    with pytest.warns(bayesvm.BayesvmWarning, match="deep inside") as record:
        nesting.warned(0.0)
    assert [(w.filename, w.lineno) for w in record] == [(outermost.f_code.co_filename, outermost.f_lineno)]


@pytest.fixture(scope="module")
def noise():
    """30 points with random labels."""
    rng = np.random.default_rng(2)
    return rng.normal(size=(30, 2)), np.where(rng.uniform(size=30) > 0.5, 1, -1)


def test_the_solvers_warning_points_at_the_callers_line(noise):
    X, y = noise
    wide = bayesvm.RBF(2.0, amplitude=1e5, offset=1e5)  # a wide prior: one coordinate step leaves the dual unsolved
    with pytest.warns(bayesvm.ConvergenceWarning, match="max_iter") as record:
        bayesvm.fit_map(X, y, kernel=wide, max_iter=1)
    assert _warned_lines(record) == {"bayesvm.fit_map(X, y, kernel=wide, max_iter=1)"}


def test_the_evidences_warnings_point_at_the_callers_line(noise):
    X, y = noise
    kernel = bayesvm.RBF(0.05, amplitude=100.0, offset=1.0)  # a short length scale on noise: most points marginal
    with pytest.warns(bayesvm.UntrustedEvidenceWarning) as record:
        bayesvm.log_evidence(X, y, kernel=kernel, approximation="laplace", normalization="prior", n_samples=500)
        bayesvm.log_normalization(kernel=kernel, C=1.0, n=300, inputs=X, method="prior", n_samples=500)  # few draws
    assert _warned_lines(record) == {
        'bayesvm.log_evidence(X, y, kernel=kernel, approximation="laplace", normalization="prior", n_samples=500)',
        'bayesvm.log_normalization(kernel=kernel, C=1.0, n=300, inputs=X, method="prior", n_samples=500)  # few draws',
    }


def test_the_estimators_warnings_point_at_the_callers_line(noise, monkeypatch):
    """Through fit's decorators (the package's float64 around scikit-learn's _fit_context) and the evidence_
    property, which computes the evidence at fixed hyperparameters when first read."""
    X, y = noise
    monkeypatch.setattr(ep_module, "EP_LOOPS", ((0.5, 1),))  # one EP iteration: EP does not converge
    monkeypatch.setattr(approximations, "EP_LOOPS", ((0.5, 1),))
    model = bayesvm.BayesianSVC(C=1.0, amplitude=30.0, offset=30.0, length_scale=6.0)
    with pytest.warns(bayesvm.ConvergenceWarning, match="EP for") as record:
        model.fit(X, y)
        model.evidence_
    assert _warned_lines(record) == {"model.fit(X, y)", "model.evidence_"}


def test_the_selections_warnings_point_at_the_callers_line(noise):
    X, y = noise
    grid = {"length_scale": [1.5], "C_k0": [1e-4, 2e-4], "C": [1.0], "offset_ratio": [1.0]}  # the optimum on an edge
    estimators = GridEstimators(approximation="laplace", normalization="prior", n_samples=500)
    options = GridOptions(refine=False, max_extensions=0)
    with pytest.warns((bayesvm.GridEdgeWarning, bayesvm.DegenerateSelectionWarning)) as record:
        bayesvm.select_hyperparameters(X, y, grid=grid, method="grid", estimators=estimators, options=options)
    assert {w.category for w in record} == {bayesvm.GridEdgeWarning, bayesvm.DegenerateSelectionWarning}
    assert _warned_lines(record) == {
        'bayesvm.select_hyperparameters(X, y, grid=grid, method="grid", estimators=estimators, options=options)'}
