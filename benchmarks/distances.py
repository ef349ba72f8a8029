"""Cost of the pairwise distances: the direct differences of ``bayesvm.kernels.scaled_squared_distances`` against
the expansion |a|^2 + |b|^2 - 2 a.b (centred on the mean of X1, as bayesvm computed them before).

For each (n1, n2) in 250 x 250, 2000 x 2000, 13000 x 200 and d in 2, 10, 30, on one core: the median seconds of
the squared distances with one length scale per feature (ARD) and of their vector-Jacobian product in the length
scales (what the evidence's gradient computes), and the compiled program's temporary memory against the
n1 n2 d float64 numbers of an (n1, n2, d) array. Prints a markdown table; ``--quick`` runs the smallest size only.
"""

from __future__ import annotations

import argparse

from _common import add_standard_arguments, markdown_table, median_time, pin_one_core

SIZES = ((250, 250), (2000, 2000), (13000, 200))
FEATURES = (2, 10, 30)


def main() -> None:
    args = add_standard_arguments(argparse.ArgumentParser(description=__doc__), out=None, seed=0,
                                  quick="the 250 x 250 size only").parse_args()
    pin_one_core()
    import jax
    import jax.numpy as jnp
    import numpy as np

    from bayesvm._precision import float64_scope
    from bayesvm.kernels import scaled_squared_distances

    def expansion(X1, X2, length_scale):
        A, B = X1 / length_scale, X2 / length_scale
        centre = jnp.mean(A, axis=0)
        A, B = A - centre, B - centre
        return jnp.maximum(jnp.sum(A * A, axis=1)[:, None] + jnp.sum(B * B, axis=1)[None, :] - 2.0 * A @ B.T, 0.0)

    def programs(distances):
        forward = jax.jit(distances)
        gradient = jax.jit(lambda X1, X2, l, g: jax.vjp(lambda l: distances(X1, X2, l), l)[1](g)[0])
        return forward, gradient

    arms = {"direct": programs(scaled_squared_distances), "expansion": programs(expansion)}
    rng = np.random.default_rng(args.seed)
    rows = []
    with float64_scope():
        for n1, n2 in SIZES[:1] if args.quick else SIZES:
            for d in FEATURES:
                X1, X2 = rng.normal(size=(n1, d)), rng.normal(size=(n2, d))
                l, g = rng.uniform(0.5, 2.0, d), rng.normal(size=(n1, n2))
                row = [f"{n1} x {n2}", d]
                for forward, gradient in arms.values():
                    for program, inputs in ((forward, (X1, X2, l)), (gradient, (X1, X2, l, g))):
                        jax.block_until_ready(program(*inputs))
                        row.append(f"{1e3 * median_time(lambda: program(*inputs), 5):.1f}")
                forward, gradient = arms["direct"]
                temporary = max(p.lower(*inputs).compile().memory_analysis().temp_size_in_bytes
                                for p, inputs in ((forward, (X1, X2, l)), (gradient, (X1, X2, l, g))))
                row.append(f"{temporary / 1e6:.1f} / {n1 * n2 * d * 8 / 1e6:.0f}")
                rows.append(row)
    print(markdown_table(["n1 x n2", "d", "direct ms", "direct VJP ms", "expansion ms", "expansion VJP ms",
                          "direct temp MB / (n1, n2, d) MB"], rows))


if __name__ == "__main__":
    main()
