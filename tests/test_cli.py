"""The `bayesvm` command: demo, select on a CSV, JSON/plot output, one-line errors."""

import io
import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

from bayesvm._cli_report import ProgressBar
from bayesvm.cli import main, read_csv

SMALL = ["--method", "grid", "--n-samples", "200", "--no-refine"]


def write_csv(path, X, y, names=None, target="label"):
    names = names or [f"x{j}" for j in range(X.shape[1])]
    lines = [",".join([*names, target])]
    lines += [",".join([*(repr(float(v)) for v in row), str(label)]) for row, label in zip(X, y)]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def toy():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(40, 2))
    y = np.where(X[:, 0] - 0.3 * X[:, 1] + 0.4 * rng.normal(size=40) > 0, "spam", "ham")
    return X, y


@pytest.mark.slow
def test_select_csv_prints_table_and_writes_json_and_plot(tmp_path, toy, capsys):
    X, y = toy
    data = write_csv(tmp_path / "toy.csv", X, y)
    out_json, out_png = tmp_path / "result.json", tmp_path / "evidence.png"
    code = main(["select", str(data), "--target", "label", "--json", str(out_json), "--plot", str(out_png),
                 "--cv", "--folds", "4", *SMALL])
    assert code == 0
    printed = capsys.readouterr().out
    for text in ("selected hyperparameters", "ln P(D)", "length_scale", "training set", "4-fold CV error"):
        assert text in printed
    payload = json.loads(out_json.read_text())
    best = payload["evidence"]["best"]
    assert best["amplitude"] * best["C"] == pytest.approx(best["C_k0"])
    assert payload["n"] == 40 and payload["cv"]["method"] == "cv"
    total = np.array(payload["evidence"]["total"], dtype=float)
    index = tuple(payload["evidence"]["index"])
    assert np.nanargmax(total) == np.ravel_multi_index(index, total.shape)  # no refinement: the surface's best cell
    # its evidence takes ln N(D) from the check there, which agreed with the screen's (within its tolerance)
    assert payload["evidence"]["best_value"] == pytest.approx(total[index], abs=1.0)
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_select_takes_three_classes_and_reports_each_problem(tmp_path, capsys):
    """Three classes: one search over the summed evidence, each class's evidence against the rest in the report
    and the JSON, and the summed ln P(D) equal to the per-class values' sum."""
    rng = np.random.default_rng(5)
    centres = np.array([[0.0, 2.0], [2.0, -1.0], [-2.0, -1.0]])
    labels = np.repeat(np.array(["red", "green", "blue"]), 12)
    X = centres[np.repeat(np.arange(3), 12)] + rng.normal(size=(36, 2))
    data = write_csv(tmp_path / "three.csv", X, labels)
    out_json = tmp_path / "three.json"
    assert main(["select", str(data), "--target", "label", "--json", str(out_json), "-q"]) == 0
    printed = capsys.readouterr().out
    for text in ("summed over 3 one-vs-rest problems", "class red against the rest", "ln N(D) (shared"):
        assert text in printed
    evidence = json.loads(out_json.read_text())["evidence"]
    assert evidence["classes"] == ["blue", "green", "red"]
    assert sum(evidence["log_evidence_per_class"]) == pytest.approx(evidence["log_evidence"])


def test_select_with_ard_reports_one_length_scale_per_feature(tmp_path, toy, capsys):
    X, y = toy
    data = write_csv(tmp_path / "toy.csv", X, y)
    out_json = tmp_path / "ard.json"
    assert main(["select", str(data), "--target", "label", "--ard", "--json", str(out_json), "-q"]) == 0
    assert "length_scale per feature" in capsys.readouterr().out
    best = json.loads(out_json.read_text())["evidence"]["best"]
    assert len(best["length_scale"]) == 2 and min(best["length_scale"]) > 0


def test_select_with_gpc_prints_both_evidences_and_the_preferred_model(tmp_path, toy, capsys):
    """--gpc: the GP classifier selected on the same rows, its ln P(D) printed and written beside the SVM's, and the
    model the evidence prefers by the rule likelihood="auto" applies."""
    from bayesvm import BayesianSVC
    from bayesvm.selection.probit import evidence_prefers_probit

    X, y = toy
    data = write_csv(tmp_path / "toy.csv", X, y)
    out_json = tmp_path / "result.json"
    assert main(["select", str(data), "--target", "label", "--gpc", "--json", str(out_json), "-q"]) == 0
    printed = capsys.readouterr().out
    payload = json.loads(out_json.read_text())
    hinge = (payload["evidence"]["log_evidence"], payload["evidence"]["log_evidence_se"])
    probit = payload["gpc"]["log_evidence"]
    assert f"ln P(D) {probit:.3f}" in printed and "the evidence prefers" in printed
    prefers = evidence_prefers_probit(hinge, (probit, 0.0))
    assert ("prefers    the GP classifier" in printed) == prefers
    # the same value as the estimator's GP classifier on the same (standardised) rows
    standardised = (X - X.mean(axis=0)) / X.std(axis=0)
    assert BayesianSVC(likelihood="probit").fit(standardised, y).log_evidence_ == pytest.approx(probit, abs=1e-6)


def test_select_by_search_reports_the_work_and_the_checks(tmp_path, toy, capsys):
    X, y = toy
    data = write_csv(tmp_path / "toy.csv", X, y)
    out_json = tmp_path / "result.json"
    assert main(["select", str(data), "--target", "label", "--json", str(out_json)]) == 0
    printed = capsys.readouterr().out
    for text in ("quasi-Newton ascent", "evaluations", "checks at the answer", "time per phase"):
        assert text in printed
    payload = json.loads(out_json.read_text())["evidence"]
    assert payload["method"] == "search"
    best = payload["best"]
    assert best["amplitude"] * best["C"] == pytest.approx(best["C_k0"])
    assert payload["log_evidence"] == pytest.approx(payload["log_naive_evidence"] - payload["log_normalization"])
    assert payload["work"]["evaluations"] == len(payload["path"]) > 0
    # the answer's ln P(D) is at least that of every point the search visited (up to the estimates' noise)
    visited = [step["log_evidence"] for step in payload["path"] if step["log_evidence"] is not None]
    assert payload["log_evidence"] >= max(visited) - 1.0
    assert main(["select", str(data), "--target", "label", "--plot", str(tmp_path / "x.png")]) == 2
    assert "--method grid" in capsys.readouterr().err


def test_select_on_a_subsample_says_so(tmp_path, toy, capsys):
    X, y = toy
    data = write_csv(tmp_path / "toy.csv", X, y)
    out_json = tmp_path / "result.json"
    assert main(["select", str(data), "--target", "label", "--selection-size", "20", "--json", str(out_json),
                 "-q"]) == 0
    assert "stratified random subsample of 20 of its 40 rows" in capsys.readouterr().out
    assert json.loads(out_json.read_text())["n"] == 20


@pytest.mark.parametrize(
    "content, args, message",
    [
        (None, ["missing.csv", "--target", "label"], "file not found"),
        ("a,b,label\n1,2,x\n3,4,y\n", ["--target", "nope"], "column 'nope' not found"),
        ("a,b,label\n1,two,x\n3,4,y\n", ["--target", "label"], "not numeric"),
        ("a,b,label\n1,nan,x\n3,4,y\n", ["--target", "label"], "missing, NaN"),
        ("a,b,label\n1,,x\n3,4,y\n", ["--target", "label"], "missing, NaN"),
        ("a,b,label\n1,2,x\n3,4,x\n", ["--target", "label"], "one class"),
        ("a,b,label\n1,2,x\n3,4,y\n", ["--target", "label", "--ard", "--kernel", "linear"], "needs --kernel rbf"),
        ("a,b,label\n1,2,x\n3,4,y\n5,6,z\n", ["--target", "label", "--method", "grid"], "take two classes"),
        ("a,b,label\n1,2,x\n3,4,y\n", [], "--target COLUMN is required"),
        ("a,b,label\n1,2,x\n3,4,y\n", ["--target", "label", "--selection-size", "half"], "--selection-size must be"),
        ("a,b,label\n1,2,x\n3,4,y\n", ["--target", "label", "--selection-size", "1"], "selection_size must be"),
        ("a,b,label\n1,2,x\n3,4,y\n", ["--target", "label", "--method", "grid", "--selection-size", "10"],
         "--selection-size works with the search"),
        ("a,b,label\n1,2,x\n3,4,y\n", ["--target", "label", "--method", "grid", "--max-checks", "-1"], "max_checks must be an integer >= 0"),
        ("a,b,label\n1,2,x\n3,4,y\n", ["--target", "label", "--weight", "w"], "weight column 'w' not found"),
        ("a,b,w,label\n1,2,1,x\n3,4,-0.5,y\n", ["--target", "label", "--weight", "w"],
         "weight column 'w' has 1 negative value(s) (the first on line 3); weights must be >= 0"),
        ("a,b,w,label\n1,2,one,x\n3,4,1,y\n", ["--target", "label", "--weight", "w"],
         "weight column 'w' is not numeric"),
        ("a,b,w,label\n1,2,,x\n3,4,1,y\n", ["--target", "label", "--weight", "w"], "missing, NaN or infinite"),
        ("a,b,w,label\n1,2,inf,x\n3,4,1,y\n", ["--target", "label", "--weight", "w"], "missing, NaN or infinite"),
        ("a,b,w,label\n1,2,0,x\n3,4,0,y\n", ["--target", "label", "--weight", "w"], "is 0 on every row"),
        ("a,b,label\n1,2,x\n3,4,y\n", ["--target", "label", "--weight", "label"], "name the same column"),
        ("w,label\n1,x\n2,y\n", ["--target", "label", "--weight", "w"], "no feature columns besides 'w' and 'label'"),
    ],
)
def test_bad_input_gives_one_line_error(tmp_path, capsys, content, args, message):
    argv = ["select"]
    if content is not None:
        path = tmp_path / "data.csv"
        path.write_text(content)
        argv.append(str(path))
    else:
        argv.append(str(tmp_path / args[0]))
        args = args[1:]
    assert main([*argv, *args]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bayesvm: error:") and message in lines[0]
    assert "Traceback" not in captured.err


def test_weight_refused_with_demo(capsys):
    assert main(["select", "--demo", "--weight", "w"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bayesvm: error:") and "--weight" in err and "--demo" in err and len(err.splitlines()) == 1


def test_weight_column_is_not_a_feature_and_standardises_as_repeated_rows(tmp_path, toy):
    """The weight column is read as weights, not as a feature; the features are standardised by the weighted mean
    and standard deviation: a column of 2s standardises as the file with every row twice."""
    from bayesvm.cli import _load_data, build_parser

    X, y = toy
    weighted = write_csv(tmp_path / "weighted.csv", np.column_stack([X, np.full(len(y), 2.0)]), y,
                         names=["x0", "x1", "w"])
    X_read, y_read, names, weights = read_csv(str(weighted), "label", "w")
    assert names == ["x0", "x1"] and X_read.shape == (40, 2) and np.array_equal(X_read, X)
    assert np.array_equal(y_read, y) and np.array_equal(weights, np.full(40, 2.0))
    assert read_csv(str(weighted), "label")[2] == ["x0", "x1", "w"]  # without --weight it is a feature
    twice = write_csv(tmp_path / "twice.csv", np.repeat(X, 2, axis=0), np.repeat(y, 2))
    parse = build_parser().parse_args
    X_w, _, w, source = _load_data(parse(["select", str(weighted), "--target", "label", "--weight", "w"]), "")
    X_2, _, no_weights, _ = _load_data(parse(["select", str(twice), "--target", "label"]), "")
    assert no_weights is None and "row weights 'w'" in source
    np.testing.assert_allclose(X_w, X_2[::2], atol=1e-12)


def test_select_with_a_weight_column_of_2s_is_every_row_twice(tmp_path, capsys):
    """--weight: a column of 2s gives the selection of the file with every row repeated (the same distinct rows, each
    of weight 2), and the report's weighted class totals and accuracy are those of the repeated rows."""
    rng = np.random.default_rng(7)
    X = rng.normal(size=(16, 2))
    y = np.where(X[:, 0] + 0.5 * rng.normal(size=16) > 0, "spam", "ham")
    weighted = write_csv(tmp_path / "weighted.csv", np.column_stack([X, np.full(16, 2.0)]), y, names=["x0", "x1", "w"])
    twice = write_csv(tmp_path / "twice.csv", np.repeat(X, 2, axis=0), np.repeat(y, 2))
    results = {}
    for name, argv in (("weighted", [str(weighted), "--weight", "w"]), ("twice", [str(twice)])):
        out_json = tmp_path / f"{name}.json"
        assert main(["select", *argv, "--target", "label", "--no-standardize", "--json", str(out_json), "-q"]) == 0
        printed = capsys.readouterr().out
        accuracy = next(line for line in printed.splitlines() if line.strip().startswith("accuracy"))
        results[name] = json.loads(out_json.read_text()), printed, float(accuracy.split()[-1])
    (weighted_json, weighted_out, weighted_accuracy), (twice_json, twice_out, twice_accuracy) = (
        results["weighted"], results["twice"])
    assert "2 features" in weighted_out and "accuracy (weighted)" in weighted_out
    assert weighted_json["n"] == 16 and weighted_json["total_weight"] == 32.0 and twice_json["n"] == 32
    assert weighted_accuracy == twice_accuracy
    n_spam = int(np.sum(y == "spam"))
    assert f"{2 * n_spam} / {2 * (16 - n_spam)}" in weighted_out and f"{2 * n_spam} / {2 * (16 - n_spam)}" in twice_out
    for key in ("log_evidence", "log_naive_evidence", "log_normalization"):
        assert weighted_json["evidence"][key] == pytest.approx(twice_json["evidence"][key], rel=1e-9, abs=1e-9)
    for key in ("C", "amplitude", "offset", "length_scale"):
        assert weighted_json["evidence"]["best"][key] == pytest.approx(twice_json["evidence"]["best"][key], rel=1e-9)


def test_demo_prints_evidence_and_error_bar_table(capsys):
    assert main(["demo", "--n-test", "5"]) == 0
    out = capsys.readouterr().out
    assert "ln P(D)" in out and "P_avg" in out and "error bar" in out
    assert "a stratified 150-point subsample, 5 of the other 419 points shown" in out  # select --demo's split
    rows = [line for line in out.splitlines() if line.strip().startswith(("+1", "-1")) and "[" in line]
    assert len(rows) == 5
    for row in rows:
        true, theta, sigma, p_map, p_avg = (float(v) for v in row.split()[:5])
        lower, upper = (float(v) for v in row.split("[")[1].rstrip("]").split(","))
        assert sigma >= 0 and lower <= p_map <= upper
        assert (p_map >= 0.5) == (theta >= 0) == (p_avg >= 0.5)


def test_demo_refuses_no_held_out_points(capsys):
    assert main(["demo", "--n-test", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bayesvm: error: --n-test must be a positive number") and "Traceback" not in err


def test_select_demo_scores_held_out_points(capsys, monkeypatch):
    from sklearn.model_selection import train_test_split

    from bayesvm import cli
    from bayesvm.datasets import load_dataset

    monkeypatch.setattr(cli, "_DEMO_TRAIN", 40)  # the real demo trains on 150 points (about a minute)
    assert main(["select", "--demo"]) == 0
    out = capsys.readouterr().out
    data = load_dataset("breast_cancer")
    assert "a stratified 40-point training subsample" in out and f"held-out points ({len(data.y) - 40};" in out
    reported = float(next(line for line in out.splitlines() if line.strip().startswith("error ")).split()[-1])
    # the same split by hand: well under the error of predicting the majority class
    _, _, _, y_test = train_test_split(data.X, data.y, train_size=40, stratify=data.y, random_state=0)
    assert reported < 0.5 * min(np.mean(y_test == 1), np.mean(y_test == -1))


def test_console_script_runs_as_a_subprocess(tmp_path, toy):
    X, y = toy
    data = write_csv(tmp_path / "toy.csv", X, y)
    exe = shutil.which("bayesvm")
    command = [exe] if exe else [sys.executable, "-c", "import sys; from bayesvm.cli import main; sys.exit(main())"]
    done = subprocess.run([*command, "select", str(data), "--target", "nope"], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 2
    assert done.stderr.strip().startswith("bayesvm: error: column 'nope' not found")


def test_help_lists_the_commands(capsys):
    with pytest.raises(SystemExit) as exit_status:
        main(["--help"])
    out = capsys.readouterr().out
    assert exit_status.value.code == 0 and all(name in out for name in ("demo", "select", "compare"))


def test_compare_csv_prints_table_and_writes_json_and_plot(tmp_path, toy, capsys):
    X, y = toy
    data = write_csv(tmp_path / "toy.csv", X, y)
    out_json, out_png = tmp_path / "compare.json", tmp_path / "reliability.png"
    code = main(["compare", str(data), "--target", "label", "--splits", "2", "--C", "2",
                 "--json", str(out_json), "--plot", str(out_png)])
    assert code == 0
    printed = capsys.readouterr().out.lower()
    for method in ("platt scaling", "isotonic", "bayesian svm, map plug-in", "bayesian svm, averaged"):
        assert method in printed
    payload = json.loads(out_json.read_text())
    assert payload["source"].startswith(str(data))
    assert out_png.stat().st_size > 10_000


def test_compare_bad_input_gives_one_line_error(tmp_path, toy, capsys):
    X, y = toy
    data = write_csv(tmp_path / "toy.csv", X, y)
    assert main(["compare", str(data), "--target", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bayesvm: error:") and "column 'nope' not found" in err and len(err.splitlines()) == 1


def test_progress_in_a_log_is_a_few_lines_and_quiet_is_silent():
    log = io.StringIO()  # not a terminal
    bar = ProgressBar("evidence", stream=log)
    for done in range(1, 501):
        bar(done, 500)
    lines = log.getvalue().splitlines()
    assert "\r" not in log.getvalue()
    assert 2 <= len(lines) <= 3 and lines[-1].startswith("evidence: 100%") and "500/500" in lines[-1]

    quiet = io.StringIO()
    bar = ProgressBar("evidence", quiet=True, stream=quiet)
    for done in range(1, 11):
        bar(done, 10)
    assert quiet.getvalue() == ""
