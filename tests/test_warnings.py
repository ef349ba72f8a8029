"""The package's warnings: its own classes, exported, raised with a category a user can filter, naming a remedy.

Cheap by design (no evidence is computed): the class hierarchy, a static scan of every ``warnings.warn`` call in
``bayesvm/`` and a few real triggers that need no JAX program.
"""

from __future__ import annotations

import ast
import inspect
import warnings
from pathlib import Path

import numpy as np
import pytest

import bayesvm
from bayesvm import exceptions
from bayesvm._validation import training_data
from bayesvm.calibration import fit_soft_logistic
from bayesvm.selection import search_priors, subsample
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
    """(line, category expression or None) of every ``warnings.warn(...)`` call in the file."""
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "warnings":
            assert all(alias.name != "warn" for alias in node.names), f"{path}: import warnings, call warnings.warn"
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "warn"
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "warnings"):
            category = node.args[1] if len(node.args) > 1 else next(
                (k.value for k in node.keywords if k.arg == "category"), None)
            yield node.lineno, category


def _package_files():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(PACKAGE).as_posix(), path


def test_every_warning_the_package_raises_names_one_of_its_classes():
    """Statically: every warnings.warn call passes a category, and it is one of the package's classes (not a bare
    RuntimeWarning or UserWarning, which a user could not filter apart from everyone else's)."""
    bad, calls = [], 0
    for relative, path in _package_files():
        for line, category in _warn_calls(path):
            calls += 1
            # a class by name, or a choice between two of them
            names = [c.id if isinstance(c, ast.Name) else None
                     for c in ((category.body, category.orelse) if isinstance(category, ast.IfExp) else (category,))]
            if not all(name in WARNING_CLASSES for name in names):
                shown = "no category" if category is None else ast.unparse(category)
                bad.append(f"bayesvm/{relative}:{line}: {shown}")
    assert calls > 20  # the scan sees the package's calls
    assert not bad, "warnings raised without one of the package's classes:\n" + "\n".join(bad)


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
