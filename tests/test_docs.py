"""The documentation site builds with ``mkdocs build --strict`` (broken links, bad API references fail)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mkdocs")
pytest.importorskip("material")
pytest.importorskip("mkdocstrings_handlers.python")

ROOT = Path(__file__).resolve().parents[1]

# subprocess runs of whole scripts: the slower tier (pytest -m slow), not the default test command
pytestmark = pytest.mark.slow


def test_docs_build_strict(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stdout}\n{result.stderr}"
    for page in ("index.html", "theory/index.html", "api/index.html", "examples/toy_evidence/index.html"):
        assert (tmp_path / "site" / page).is_file(), f"{page} was not built"
    api = (tmp_path / "site" / "api" / "index.html").read_text()
    assert "fit_map" in api and "log_evidence" in api, "the API page lacks the docstrings of fit_map / log_evidence"
