"""How far a default fit travels: the bayesvm modules whose code runs, and how deep its bayesvm frames nest.

A newcomer follows a fit through the package; this counts what they would have to read. ``sys.setprofile`` sees
every Python call of the first default ``BayesianSVC().fit`` of 80 breast-cancer rows in this (fresh) process,
with the package's compilation cache off (``BAYESVM_NO_CACHE=1``: a program loaded from the cache is not traced), so
the Python code that JAX traces counts, and then of a second fit in the same process (host code only: the traced
programs are reused). The package's float64 and jit wrappers (``bayesvm/_precision.py``, ``bayesvm/compilation.py``)
are left out of both counts, and so are frames of other libraries between the package's own.

Targets, each printed as met or missed: the first fit runs code in at most 16 bayesvm modules, with bayesvm frames
nested at most 15 deep. Usage::

    python benchmarks/fit_hops.py          # writes benchmarks/results/fit_hops.json (--out)
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

from _common import RESULTS, add_standard_arguments, breast_cancer_split, markdown_table, write_json

MAX_MODULES = 16
MAX_DEPTH = 15
#: the wrappers every call passes through: counted neither as modules nor as frames
WRAPPERS = ("_precision.py", "compilation.py")


class HopCounter:
    """A profile function that records the bayesvm modules entered and the deepest nesting of bayesvm frames."""

    def __init__(self, package: Path):
        self.package = str(package) + "/"
        self.modules: set[str] = set()
        self.depth = 0
        self.deepest: list[str] = []

    def _ours(self, frame) -> str | None:
        filename = frame.f_code.co_filename
        if not filename.startswith(self.package):
            return None
        module = filename[len(self.package):]
        return None if module in WRAPPERS else module

    def __call__(self, frame, event, arg):
        if event != "call":
            return
        module = self._ours(frame)
        if module is None:
            return
        self.modules.add(module)
        chain = []
        while frame is not None:
            if (name := self._ours(frame)) is not None:
                chain.append(f"{name}:{frame.f_code.co_name}")
            frame = frame.f_back
        if len(chain) > self.depth:
            self.depth, self.deepest = len(chain), chain[::-1]


def counted_fit(X, y) -> HopCounter:
    import bayesvm

    counter = HopCounter(Path(bayesvm.__file__).resolve().parent)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bayesvm.BayesvmWarning)
        sys.setprofile(counter)
        try:
            bayesvm.BayesianSVC().fit(X, y)
        finally:
            sys.setprofile(None)
    return counter


def main() -> None:
    os.environ["BAYESVM_NO_CACHE"] = "1"  # before bayesvm is imported: every program is traced in this process
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_standard_arguments(parser, out=RESULTS / "fit_hops.json")
    args = parser.parse_args()
    X, _, y, _ = breast_cancer_split(80, args.seed)
    fits = {"first fit (traced code included)": counted_fit(X, y), "second fit (host code)": counted_fit(X, y)}
    rows = [[name, len(c.modules), c.depth] for name, c in fits.items()]
    print(markdown_table(["fit", "bayesvm modules", "deepest bayesvm frames"], rows))
    first = fits["first fit (traced code included)"]
    targets = [("modules", len(first.modules), MAX_MODULES), ("depth", first.depth, MAX_DEPTH)]
    for name, value, limit in targets:
        print(f"{'MET   ' if value <= limit else 'MISSED'} first fit: {name} {value} (target at most {limit})")
    print("\ndeepest chain of the first fit:\n  " + "\n  ".join(first.deepest))
    write_json(args.out, {
        "rows": 80, "seed": args.seed,
        "fits": {name: {"modules": sorted(c.modules), "depth": c.depth, "deepest": c.deepest}
                 for name, c in fits.items()},
        "targets": [{"name": name, "value": value, "limit": limit, "met": value <= limit}
                    for name, value, limit in targets],
    })


if __name__ == "__main__":
    main()
