"""What the SVM's Gaussian-process prior says before any data is seen.

Writes two figures (Sollich 2002, Fig. 1):

* ``prior_samples_grid.png``: one draw theta of the GP prior on the unit
  square for several kernels (rows) and (C, k0) settings (columns), shown as
  the label distribution it induces: black = label +1, white = label -1,
  grey = "don't know" (1 - nu(theta)), largest in the gap |theta| < 1.
* ``prior_samples_1d.png``: sample functions theta(x) on [0, 1] for an RBF
  and an Ornstein-Uhlenbeck kernel with the margins theta = +-1 marked.

Usage::

    python examples/prior_samples.py [--out DIR] [--quick]

``--quick`` (or the environment variable BAYESVM_QUICK=1) uses coarse grids
so the script runs in a few seconds (for CI).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from bayesvm import plotting  # noqa: E402
from bayesvm.kernels import RBF, Exponential, Polynomial  # noqa: E402

#: the kernel families compared in the grid (no offset, so the pictures show the shape alone)
KERNELS = {
    "OU, $l$ = 0.1": Exponential(length_scale=0.1, offset=0.0),
    "RBF, $l$ = 0.1": RBF(length_scale=0.1, offset=0.0),
    "RBF, $l$ = 0.3": RBF(length_scale=0.3, offset=0.0),
    "polynomial, degree 3": Polynomial(degree=3, gamma=0.5, coef0=0.5, offset=0.0),
}
#: (C, k0) per column: a small amplitude shows wide grey gaps, a large C narrows them
COLUMNS = ((2.0, 1.0), (2.0, 10.0), (10.0, 1.0))


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent, help="folder for the PNGs")
    parser.add_argument("--quick", action="store_true", help="coarse grids, for CI (also BAYESVM_QUICK=1)")
    args = parser.parse_args(argv)
    args.quick = args.quick or os.environ.get("BAYESVM_QUICK", "") not in ("", "0")
    return args


def kernel_grid_figure(resolution: int):
    """The kernel comparison grid, the same standard normals in every panel (common random numbers)."""
    Cs, amplitudes = zip(*COLUMNS)
    fig = plotting.plot_prior_grid(KERNELS, Cs=Cs, amplitudes=amplitudes, resolution=resolution, random_state=1)
    fig.suptitle("One GP prior draw per panel: black = label +1, white = label $-1$, grey = don't know")
    return fig


def sample_functions_figure(resolution: int):
    """Five prior sample functions for an RBF and an OU kernel, side by side."""
    fig, axes = plt.subplots(1, 2, figsize=(13.0, 4.0), sharey=True, layout="constrained")
    for kernel, ax in zip((RBF(length_scale=0.1, offset=0.0), Exponential(length_scale=0.1, offset=0.0)), axes):
        plotting.plot_prior_functions_1d(kernel, C=2.0, n_samples=5, ax=ax, resolution=resolution, random_state=2)
        ax.get_legend().remove()
    axes[1].legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize="small")
    axes[1].set_ylabel("")
    return fig


def main(argv=None) -> list[Path]:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    figures = {
        "prior_samples_grid.png": kernel_grid_figure(resolution=16 if args.quick else 48),
        "prior_samples_1d.png": sample_functions_figure(resolution=60 if args.quick else 300),
    }
    written = []
    for name, fig in figures.items():
        path = plotting.save_figure(fig, args.out / name)
        written.append(path)
        print(f"wrote {path}")
    return written


if __name__ == "__main__":
    main()
