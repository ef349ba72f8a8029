"""Tests for bayesvm.plotting: every figure renders with Agg and holds the expected artists.

References are independent of the plotting code: the prior sampler against
scikit-learn's kernels (empirical covariance), grey levels against the
closed form of Q(y|theta), maxima against numpy's argmax.
"""

import io

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.collections import PolyCollection, QuadMesh
from matplotlib.layout_engine import ConstrainedLayoutEngine
from sklearn.gaussian_process import kernels as skk

from bayesvm import plotting as bp
from bayesvm.kernels import RBF, Exponential, Polynomial


@pytest.fixture(autouse=True)
def _no_show_and_close(monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("plotting functions must not call plt.show()")

    monkeypatch.setattr(plt, "show", fail)
    yield
    plt.close("all")


def grey_level_reference(theta, C):
    """(Q(-1) + (1 - nu) / 2) from Q(y|theta) = kappa exp(-C max(0, 1 - y theta)), kappa = 1/(1+e^{-2C})."""
    kappa = 1.0 / (1.0 + np.exp(-2.0 * C))
    q_plus = kappa * np.exp(-C * np.maximum(0.0, 1.0 - theta))
    q_minus = kappa * np.exp(-C * np.maximum(0.0, 1.0 + theta))
    return q_minus + (1.0 - (q_plus + q_minus)) / 2.0


def assert_renders_inside(fig):
    """Saves as PNG and every Axes (labels, ticks, titles, legends) and figure legend lies inside the figure."""
    assert isinstance(fig, plt.Figure)
    assert isinstance(fig.get_layout_engine(), ConstrainedLayoutEngine)
    fig.savefig(io.BytesIO(), format="png")
    renderer = fig.canvas.get_renderer()
    frame = fig.bbox
    for artist in [*fig.axes, *fig.legends]:
        box = artist.get_tightbbox(renderer)
        assert box.x0 >= frame.x0 - 1 and box.y0 >= frame.y0 - 1, artist
        assert box.x1 <= frame.x1 + 1 and box.y1 <= frame.y1 + 1, artist


def legend_texts(ax):
    legend = ax.get_legend()
    assert legend is not None
    return [t.get_text() for t in legend.get_texts()]


# ---------------------------------------------------------------------------
# prior samples


def test_unit_square_grid_is_in_image_order():
    x, X = bp.unit_square_grid(5)
    np.testing.assert_allclose(x, np.linspace(0, 1, 5))
    img = X.reshape(5, 5, 2)
    for i in range(5):
        for j in range(5):
            np.testing.assert_allclose(img[i, j], [x[j], x[i]])


@pytest.mark.parametrize(
    "kernel, reference",
    [
        (RBF(length_scale=0.3, amplitude=2.0, offset=0.5), 2.0 * skk.RBF(0.3) + skk.ConstantKernel(0.5)),
        (Exponential(length_scale=0.5, amplitude=1.5, offset=0.2),
         1.5 * skk.Matern(length_scale=0.5, nu=0.5) + skk.ConstantKernel(0.2)),
    ],
)
def test_sample_prior_covariance_matches_sklearn_kernel(kernel, reference):
    _, X = bp.unit_square_grid(3)
    theta = bp.sample_prior(kernel, X, n_samples=20000, random_state=1)
    assert theta.shape == (20000, 9)
    K = reference(X)
    # standard error of an empirical covariance entry: sqrt((K_ii K_jj + K_ij^2) / S) <= 0.025 here
    np.testing.assert_allclose(np.cov(theta, rowvar=False), K, atol=0.12)
    np.testing.assert_allclose(theta.mean(axis=0), 0.0, atol=0.1)


def test_sample_prior_uses_common_random_numbers_across_amplitudes():
    _, X = bp.unit_square_grid(8)
    kernel = RBF(length_scale=0.2, amplitude=1.0, offset=0.0)
    small = bp.sample_prior(kernel, X, 2, random_state=7)
    large = bp.sample_prior(kernel.replace(amplitude=4.0), X, 2, random_state=7)
    np.testing.assert_allclose(large, 2.0 * small, rtol=1e-10, atol=1e-12)


def test_sample_prior_handles_rank_deficient_polynomial_kernel():
    _, X = bp.unit_square_grid(8)  # 64 points, Gram matrix of rank <= 10 for degree 3 in 2-D
    theta = bp.sample_prior(Polynomial(degree=3, offset=0.0), X, 3, random_state=0)
    assert np.all(np.isfinite(theta))


@pytest.mark.parametrize("C", [0.3, 2.0, 20.0])
def test_label_grey_level_matches_closed_form(C):
    theta = np.linspace(-4, 4, 81)
    np.testing.assert_allclose(bp.label_grey_level(theta, C), grey_level_reference(theta, C), rtol=1e-12, atol=1e-14)
    assert bp.label_grey_level(0.0, C) == pytest.approx(0.5)


def test_plot_prior_sample_pixels_agree_with_theta():
    kernel, C, r = RBF(length_scale=0.2, amplitude=4.0, offset=0.0), 20.0, 8
    fig = bp.plot_prior_sample(kernel, C, resolution=r, random_state=3)
    assert_renders_inside(fig)
    (ax,) = fig.axes
    (image,) = ax.images
    grey = np.asarray(image.get_array())
    assert grey.shape == (r, r)
    assert image.get_cmap().name == "gray" and image.get_clim() == (0.0, 1.0)
    _, X = bp.unit_square_grid(r)
    theta = bp.sample_prior(kernel, X, 1, random_state=3)[0].reshape(r, r)
    np.testing.assert_allclose(grey, grey_level_reference(theta, C), atol=1e-12)
    # large C: beyond the margins the pixel is black (+1) or white (-1); inside the gap grey
    assert np.any(theta > 1.2) and np.any(theta < -1.2)
    assert np.all(grey[theta > 1.2] < 0.01)
    assert np.all(grey[theta < -1.2] > 0.99)
    assert np.all(np.abs(grey[np.abs(theta) < 0.5] - 0.5) < 0.01)
    # orientation: the rendered colour at data point (x1, x2) = (x[j], x[i]) is grey[i, j]
    x, _ = bp.unit_square_grid(r)
    fig.canvas.draw()
    rgba = np.asarray(fig.canvas.buffer_rgba())
    for i, j in [(1, 1), (1, r - 2), (r - 2, 2), (r // 2, r // 2 + 1)]:
        col, row = ax.transData.transform((x[j], x[i]))
        rendered = rgba[round(rgba.shape[0] - row), round(col), 0] / 255.0
        assert rendered == pytest.approx(grey[i, j], abs=0.05)
    assert ax.get_xlabel() and ax.get_ylabel()
    assert len(legend_texts(ax)) == 3


def test_plot_prior_sample_draws_into_given_axes():
    fig, ax = plt.subplots(layout="constrained")
    assert bp.plot_prior_sample(RBF(length_scale=0.3), 1.0, ax=ax, resolution=8) is fig
    assert len(ax.images) == 1


def test_plot_prior_grid_layout_and_titles():
    kernels = {"OU": Exponential(length_scale=0.3), "RBF short": RBF(length_scale=0.1), "poly": Polynomial(degree=2)}
    fig = bp.plot_prior_grid(kernels, Cs=2.0, amplitudes=[0.5, 5.0], resolution=8)
    assert_renders_inside(fig)
    assert len(fig.axes) == 6
    for k, ax in enumerate(fig.axes):
        row, col = divmod(k, 2)
        assert ax.images[0].get_array().shape == (8, 8)
        assert list(kernels)[row] in ax.get_title()
        assert f"= {[0.5, 5.0][col]:g}" in ax.get_title()
    assert all(ax.get_xlabel() for ax in fig.axes[-2:])
    assert all(ax.get_ylabel() for ax in fig.axes[::2])
    (legend,) = fig.legends
    assert len(legend.get_texts()) == 3


def test_plot_prior_grid_pairs_Cs_with_amplitudes_and_names_kernels_from_a_list():
    fig = bp.plot_prior_grid([RBF(length_scale=0.2)], Cs=[1.0, 4.0], amplitudes=[4.0, 1.0], resolution=8)
    titles = [ax.get_title() for ax in fig.axes]
    assert "RBF(length_scale=0.2)" in titles[0]
    assert "$C$ = 1, $k_0$ = 4" in titles[0] and "$C$ = 4, $k_0$ = 1" in titles[1]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"kernels": [], "Cs": 1.0}, "empty"),
        ({"kernels": [RBF()], "Cs": [1.0, 2.0], "amplitudes": [1.0, 2.0, 3.0]}, "equal length"),
        ({"kernels": [RBF()], "Cs": [1.0, -2.0]}, "C must be finite and > 0"),
        ({"kernels": ["rbf"], "Cs": 1.0}, "bayesvm kernel"),
    ],
)
def test_plot_prior_grid_rejects_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        bp.plot_prior_grid(**kwargs, resolution=4)


def test_plot_prior_functions_1d_lines_margins_and_gap():
    kernel, C = RBF(length_scale=0.2), 1.5
    fig = bp.plot_prior_functions_1d(kernel, C, n_samples=4, resolution=50, random_state=2)
    assert_renders_inside(fig)
    (ax,) = fig.axes
    assert len(ax.lines) == 4 + 3  # samples, two margins, theta = 0
    theta = bp.sample_prior(kernel, np.linspace(0, 1, 50)[:, None], 4, random_state=2)
    for line, sample in zip(ax.lines[:4], theta):
        np.testing.assert_allclose(line.get_ydata(), sample)
    margins = sorted(line.get_ydata()[0] for line in ax.lines[4:])
    assert margins == [-1.0, 0.0, 1.0]
    texts = legend_texts(ax)
    assert len(texts) == 4
    dont_know = 1.0 - 2.0 * np.exp(-C) / (1.0 + np.exp(-2.0 * C))
    assert any(f"{dont_know:.2f}" in t for t in texts)
    assert ax.get_xlabel() and ax.get_ylabel()


def test_plot_prior_rejects_bad_resolution_and_C():
    with pytest.raises(ValueError, match="resolution"):
        bp.plot_prior_sample(RBF(), 1.0, resolution=1)
    with pytest.raises(ValueError, match="C must be"):
        bp.plot_prior_functions_1d(RBF(), 0.0)
    with pytest.raises(ValueError, match="single kernel"):
        bp.plot_prior_sample(RBF(length_scale=np.array([0.1, 0.2])), 1.0)


# ---------------------------------------------------------------------------
# evidence


def _evidence_curves(n=9):
    C = np.logspace(-1, 1, n)
    total = -10.0 - (np.log(C) - 0.3) ** 2
    norm = -5.0 - np.log1p(C)
    return C, total + norm, norm, total


def test_plot_evidence_curve_full():
    C, naive, norm, total = _evidence_curves()
    se = np.full_like(C, 0.3)
    fig = bp.plot_evidence_curve(C, naive, norm, total, se_naive=se, se_normalization=se, se_total=se, true_C=1.2)
    assert_renders_inside(fig)
    (ax,) = fig.axes
    assert ax.get_xscale() == "log"
    assert len(ax.lines) == 5  # three curves, the maximum, the true C
    assert sum(isinstance(c, PolyCollection) for c in ax.collections) == 3
    assert len(legend_texts(ax)) == 5
    marker = ax.lines[3]
    assert marker.get_xdata()[0] == C[np.argmax(total)]
    assert marker.get_ydata()[0] == np.max(total)
    band = ax.collections[2].get_paths()[0].vertices
    assert band[:, 1].max() == pytest.approx(np.max(total) + 0.3)
    assert ax.get_xlabel() and ax.get_ylabel()
    assert r"$C\,k_0$" in ax.get_xlabel()  # a thin space: "$C k_0$" renders as "Ck0"


def test_plot_evidence_curve_minimal_sorts_and_skips_nan():
    C, naive, norm, total = _evidence_curves()
    perm = np.random.default_rng(0).permutation(C.size)
    total = total.copy()
    total[np.argmax(total)] = np.nan
    fig = bp.plot_evidence_curve(C[perm], naive[perm], norm[perm], total[perm])
    (ax,) = fig.axes
    assert len(ax.lines) == 4 and not ax.collections
    assert np.all(np.diff(ax.lines[0].get_xdata()) > 0)
    assert ax.lines[3].get_ydata()[0] == np.nanmax(total)


def test_plot_evidence_curve_rejects_mismatched_lengths():
    C, naive, norm, total = _evidence_curves()
    with pytest.raises(ValueError, match="total has 8 entries"):
        bp.plot_evidence_curve(C, naive, norm, total[:-1])
    with pytest.raises(ValueError, match="log axis"):
        bp.plot_evidence_curve(-C, naive, norm, total)


def test_plot_evidence_heatmap():
    x, y = np.logspace(-1, 2, 7), np.linspace(0.1, 1.0, 5)
    Z = -((np.log(x)[None, :] - 1.0) ** 2) - 4.0 * (y[:, None] - 0.6) ** 2
    Z[0, 0] = np.nan
    fig = bp.plot_evidence_heatmap(x, y, Z, x_label="C k0", y_label="length scale", log_x=True)
    assert_renders_inside(fig)
    ax, cbar = fig.axes
    mesh = next(c for c in ax.collections if isinstance(c, QuadMesh))
    assert np.shape(mesh.get_array()) == (5, 7)
    assert ax.get_xscale() == "log" and ax.get_yscale() == "linear"
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("C k0", "length scale")
    assert cbar.get_ylabel() == "log evidence (nats)"
    i, j = np.unravel_index(np.nanargmax(Z), Z.shape)
    (star,) = ax.lines
    assert (star.get_xdata()[0], star.get_ydata()[0]) == (x[j], y[i])
    # the legend says which coordinate is which, with the axis names the function was given
    assert legend_texts(ax) == [f"maximum: C k0 = {x[j]:.3g}, length scale = {y[i]:.3g}"]
    # cells centred on the values: geometric midpoints on the log axis
    xlim = ax.get_xlim()
    assert xlim[0] == pytest.approx(x[0] / np.sqrt(x[1] / x[0]))


def test_plot_evidence_heatmap_without_marker_and_bad_input():
    x, y = np.arange(1.0, 4.0), np.arange(1.0, 3.0)
    fig = bp.plot_evidence_heatmap(x, y, np.zeros((2, 3)), x_label="a", y_label="b", mark_max=False)
    assert not fig.axes[0].lines and fig.axes[0].get_legend() is None
    with pytest.raises(ValueError, match="shape"):
        bp.plot_evidence_heatmap(x, y, np.zeros((3, 2)), x_label="a", y_label="b")
    with pytest.raises(ValueError, match="strictly increasing"):
        bp.plot_evidence_heatmap(x[::-1], y, np.zeros((2, 3)), x_label="a", y_label="b")


# ---------------------------------------------------------------------------
# probabilities with error bars


def test_plot_probability_1d():
    rng = np.random.default_rng(0)
    x = rng.permutation(np.linspace(-2, 2, 30))
    p = 1.0 / (1.0 + np.exp(-2.0 * x))
    X_train = rng.uniform(-2, 2, 12)
    y_train = np.array(["a", "b"] * 6)
    fig = bp.plot_probability_1d(x, p, 0.9 * p + 0.05, 0.8 * p, np.minimum(1.2 * p, 1.0), p_true=p,
                                 X_train=X_train, y_train=y_train)
    assert_renders_inside(fig)
    (ax,) = fig.axes
    assert len(ax.lines) == 5  # true, MAP, averaged, two training rugs
    assert len(ax.collections) == 1
    assert len(legend_texts(ax)) == 6
    true_line = ax.lines[0]
    np.testing.assert_allclose(true_line.get_xdata(), np.sort(x))
    np.testing.assert_allclose(true_line.get_ydata(), 1.0 / (1.0 + np.exp(-2.0 * np.sort(x))))
    rug_plus, rug_minus = ax.lines[3:]
    np.testing.assert_allclose(np.sort(rug_plus.get_xdata()), np.sort(X_train[y_train == "b"]))
    assert set(rug_plus.get_ydata()) == {1.0} and set(rug_minus.get_ydata()) == {0.0}
    assert ax.get_xlabel() and ax.get_ylabel()


def test_plot_probability_1d_minimal_and_bad_input():
    x = np.linspace(0, 1, 5)
    fig = bp.plot_probability_1d(x, x, x, x, x)
    assert len(fig.axes[0].lines) == 2 and len(legend_texts(fig.axes[0])) == 3
    with pytest.raises(ValueError, match="p_upper has 4 entries"):
        bp.plot_probability_1d(x, x, x, x, x[:4])
    with pytest.raises(ValueError, match="together"):
        bp.plot_probability_1d(x, x, x, x, x, X_train=x)


def _probability_grid():
    gx, gy = np.linspace(-1, 1, 9), np.linspace(-1, 1, 7)
    theta = gx[None, :] + 0.3 * gy[:, None]
    return gx, gy, 1.0 / (1.0 + np.exp(-3.0 * theta)), 0.3 * np.exp(-theta**2)


def test_plot_probability_2d_two_panels():
    gx, gy, P, W = _probability_grid()
    X = np.array([[-0.5, 0.0], [0.5, 0.2], [0.8, -0.5]])
    fig = bp.plot_probability_2d(gx, gy, P, band_width=W, X_train=X, y_train=[-1, 1, 1])
    assert_renders_inside(fig)
    assert len(fig.axes) == 4  # two panels and their colour bars
    prob_ax, width_ax, *colour_bars = fig.axes  # colour bars are added after both panels
    assert (prob_ax.get_title(), width_ax.get_title()) == ("class probability", "error-bar width")
    for ax, values in [(prob_ax, P), (width_ax, W)]:
        mesh = next(c for c in ax.collections if isinstance(c, QuadMesh))
        np.testing.assert_allclose(np.asarray(mesh.get_array()).reshape(P.shape), values)
        assert len(legend_texts(ax)) == 3  # P = 0.5 contour, y = +1, y = -1
        assert ax.get_xlabel() and ax.get_ylabel()
    # the 0.5 contour crosses theta = 0, i.e. x1 = -0.3 x2
    contour = next(c for c in prob_ax.collections if hasattr(c, "levels"))
    assert list(contour.levels) == [0.5]
    vertices = np.concatenate([p.vertices for p in contour.get_paths()])
    np.testing.assert_allclose(vertices[:, 0], -0.3 * vertices[:, 1], atol=0.02)
    assert all(bar.get_ylabel() for bar in colour_bars)


def test_plot_probability_2d_single_panel_into_given_axes_and_bad_input():
    gx, gy, P, W = _probability_grid()
    fig, ax = plt.subplots(layout="constrained")
    assert bp.plot_probability_2d(gx, gy, P, ax=ax) is fig
    assert len(fig.axes) == 2
    with pytest.raises(ValueError, match="pair of Axes"):
        bp.plot_probability_2d(gx, gy, P, band_width=W, ax=ax)
    with pytest.raises(ValueError, match=r"shape \(len\(grid_y\), len\(grid_x\)\)"):
        bp.plot_probability_2d(gx, gy, P.T)


# ---------------------------------------------------------------------------
# reliability


def _reliability_curve(p, y, n_bins=5):
    """Independent uniform-bin reliability curve (mean predicted, observed frequency, counts)."""
    edges = np.linspace(0, 1, n_bins + 1)
    which = np.clip(np.searchsorted(edges, p, side="right") - 1, 0, n_bins - 1)
    counts = np.bincount(which, minlength=n_bins).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.bincount(which, p, n_bins) / counts
        freq = np.bincount(which, y, n_bins) / counts
    return mean, freq, counts


def test_plot_reliability():
    rng = np.random.default_rng(0)
    p = rng.uniform(0, 1, 400)
    y = (rng.uniform(0, 1, 400) < p).astype(float)
    sharp = np.clip(p * 0.5, 0, 0.59)  # leaves the top two bins empty
    curves = {"identity": _reliability_curve(p, y), "shrunk": _reliability_curve(sharp, y)}
    fig = bp.plot_reliability(curves)
    assert_renders_inside(fig)
    diagram, hist = fig.axes
    assert len(legend_texts(diagram)) == 3
    diagonal, *curve_lines = diagram.lines[:1] + [c.lines[0] for c in diagram.containers]
    np.testing.assert_allclose(diagonal.get_xydata(), [[0, 0], [1, 1]])
    assert len(curve_lines[0].get_xdata()) == 5 and len(curve_lines[1].get_xdata()) == 3
    np.testing.assert_allclose(curve_lines[1].get_ydata(), curves["shrunk"][1][:3])
    heights = [patch.get_height() for patch in hist.patches]
    assert len(heights) == 5 + 3
    np.testing.assert_allclose(heights[:5], curves["identity"][2] / 400)
    assert_no_overlap(bar_extents(hist))
    assert diagram.get_ylabel() and hist.get_xlabel() and hist.get_ylabel()


def bar_extents(hist):
    """{method: [(x0, x1), ...]} of the histogram bars, from the labelled bar containers."""
    return {c.get_label(): [(bar.get_x(), bar.get_x() + bar.get_width()) for bar in c] for c in hist.containers}


def assert_no_overlap(extents):
    """No two bars (of the same or of different methods) share any x-range of positive width."""
    spans = sorted(span for spans in extents.values() for span in spans)
    for (_, right), (left, _) in zip(spans, spans[1:]):
        assert left >= right - 1e-12, spans


def test_plot_reliability_histogram_bars_stand_side_by_side():
    """Methods whose bins have nearly equal means (and neighbouring bins with close means) overlap nowhere."""
    rng = np.random.default_rng(1)
    n_bins = 10
    names = ["Bayesian SVM", "Platt", "isotonic", "beta"]
    curves = {}
    for k, name in enumerate(names):
        # means near the right edge of one bin and the left edge of the next, shifted a little per method
        mean = np.clip(np.arange(n_bins) / n_bins + np.where(np.arange(n_bins) % 2, 0.01, 0.095) + 0.001 * k, 0, 1)
        counts = rng.integers(1, 50, n_bins).astype(float)
        curves[name] = (mean, np.clip(mean + 0.05, 0, 1), counts)
    fig = bp.plot_reliability(curves, bins=n_bins)
    assert_renders_inside(fig)
    diagram, hist = fig.axes
    extents = bar_extents(hist)
    assert list(extents) == names
    assert_no_overlap(extents)
    width = 1.0 / n_bins
    for k, name in enumerate(names):
        mean, _, counts = curves[name]
        assert len(extents[name]) == n_bins
        for b, (x0, x1) in enumerate(extents[name]):
            # inside its bin, in the k-th of len(names) equal slots of the bin's inner 80%
            assert b * width <= x0 < x1 <= (b + 1) * width
            assert x0 == pytest.approx(b * width + 0.1 * width + k * 0.8 * width / len(names))
            assert x1 - x0 == pytest.approx(0.8 * width / len(names))
        heights = [bar.get_height() for bar in hist.containers[k]]
        np.testing.assert_allclose(heights, counts / counts.sum())
    for bars, curve in zip(hist.containers, diagram.containers):  # bars take the colour of their method's curve
        assert matplotlib.colors.same_color(bars.patches[0].get_facecolor(), curve.lines[0].get_color())


def test_plot_reliability_merges_bins_sharing_a_cell_and_takes_edges():
    curve = (np.array([0.02, 0.08, 0.55]), np.array([0.0, 0.1, 0.5]), np.array([5.0, 15.0, 20.0]))
    fig = bp.plot_reliability({"a": curve, "b": curve}, bins=[0.0, 0.5, 1.0])
    _, hist = fig.axes
    extents = bar_extents(hist)
    assert [len(v) for v in extents.values()] == [2, 2]
    assert_no_overlap(extents)
    np.testing.assert_allclose([bar.get_height() for bar in hist.containers[0]], [0.5, 0.5])
    with pytest.raises(ValueError, match="bins must be"):
        bp.plot_reliability({"a": curve}, bins=[0.5, 0.2])
    with pytest.raises(ValueError, match="bins must be"):
        bp.plot_reliability({"a": curve}, bins=0)


def test_plot_reliability_single_axes_and_bad_input():
    fig, ax = plt.subplots(layout="constrained")
    curve = (np.array([0.2, 0.8]), np.array([0.25, 0.7]), np.array([10, 12]))
    assert bp.plot_reliability({"a": curve}, ax=ax) is fig
    assert len(fig.axes) == 1 and ax.get_xlabel() and ax.get_ylabel()
    with pytest.raises(ValueError, match="non-empty dict"):
        bp.plot_reliability({})
    with pytest.raises(ValueError, match="must be \\(mean_predicted"):
        bp.plot_reliability({"a": (1, 2)})


def test_save_figure_writes_the_file_and_closes_the_figure(tmp_path):
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    path = bp.save_figure(fig, tmp_path / "line.png")
    assert path == tmp_path / "line.png" and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not plt.fignum_exists(fig.number)
