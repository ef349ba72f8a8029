"""The opt-in persistent compilation cache: off on import, on when asked, and read back by a later process."""

import os
import subprocess
import sys

import pytest

from bayesvm.compilation import default_cache_directory, enable_compilation_cache

# a fresh process fits the MAP SVM on 20 points and reports JAX's own count of persistent-cache hits
_FIT_AND_COUNT_HITS = """
import sys
import jax
from jax import monitoring
hits = []
monitoring.register_event_listener(lambda event, **kw: hits.append(event) if event.endswith("/cache_hits") else None)
import numpy as np
import bayesvm
print("dir on import:", jax.config.jax_compilation_cache_dir)
bayesvm.enable_compilation_cache(sys.argv[1])
rng = np.random.default_rng(0)
X = rng.normal(size=(20, 2))
y = np.where(X[:, 0] > 0, 1, -1)
bayesvm.fit_map(X, y, C=1.0, kernel=bayesvm.RBF(amplitude=1.0, length_scale=1.0, offset=1.0))
print("hits:", len(hits))
"""


def _fresh_process(directory) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("JAX_COMPILATION_CACHE")}
    done = subprocess.run([sys.executable, "-c", _FIT_AND_COUNT_HITS, str(directory)], capture_output=True,
                          text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    return dict(line.split(": ", 1) for line in done.stdout.splitlines() if ": " in line)


def test_a_second_process_reads_the_programs_the_first_one_wrote(tmp_path):
    first = _fresh_process(tmp_path / "cache")
    assert first["dir on import"] == "None"  # importing bayesvm does not turn the process-wide cache on
    assert int(first["hits"]) == 0
    assert any((tmp_path / "cache").iterdir()), "nothing was written to the cache"
    second = _fresh_process(tmp_path / "cache")
    assert int(second["hits"]) >= 1


def test_directory_defaults_to_the_xdg_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_cache_directory() == tmp_path / "bayesvm" / "jax"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert default_cache_directory().parts[-3:] == (".cache", "bayesvm", "jax")


def test_bad_settings_are_refused(tmp_path):
    file = tmp_path / "not-a-directory"
    file.write_text("")
    with pytest.raises(ValueError, match="must be a directory"):
        enable_compilation_cache(file)
    with pytest.raises(ValueError, match="min_compile_seconds"):
        enable_compilation_cache(tmp_path, min_compile_seconds=-1.0)
