"""Every example script runs in its quick mode and writes its figures."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# subprocess runs of whole scripts: the slower tier (pytest -m slow), not the default test command
pytestmark = pytest.mark.slow

EXAMPLES = {
    "prior_samples.py": ["prior_samples_grid.png", "prior_samples_1d.png"],
    "toy_evidence.py": ["toy_evidence.png"],
    "select_hyperparameters.py": ["select_hyperparameters.png"],
    "compare_platt.py": ["compare_platt.png"],
}


@pytest.mark.parametrize("script", sorted(EXAMPLES))
def test_example_runs_quick_and_writes_png(script, tmp_path):
    env = {**os.environ, "BAYESVM_QUICK": "1", "MPLBACKEND": "Agg"}
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / script), "--out", str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, f"{script} failed:\n{result.stdout}\n{result.stderr}"
    for name in EXAMPLES[script]:
        png = tmp_path / name
        assert png.is_file(), f"{script} did not write {name}"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"{name} is not a PNG"


def test_toy_evidence_sampler_seed_table(tmp_path):
    """--sampler-seeds repeats a sampling estimator on the same data: one table row per seed, and a summary."""
    env = {**os.environ, "BAYESVM_QUICK": "1", "MPLBACKEND": "Agg"}
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "toy_evidence.py"), "--out", str(tmp_path),
         "--evidence", "ep-prior", "--sampler-seeds", "2"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    rows = [line for line in result.stdout.splitlines() if line.startswith("| 0 |") or line.startswith("| 1 |")]
    assert len(rows) == 2
    assert "distinct maximum(s) over 2 sampler seeds" in result.stdout
