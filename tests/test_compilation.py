"""The package's compiled programs: the opt-in persistent compilation cache (off on import, on when asked, read back
by a later process), cheaper XLA options for small problems, and no programs of their own between them."""

import os
import re
import subprocess
import sys

import pytest

from bayesvm.compilation import default_cache_directory, enable_compilation_cache

# a fresh process computes a Gram matrix (one of the package's compiled programs) on 20 points and reports JAX's
# own count of persistent-cache hits
_COMPUTE_AND_COUNT_HITS = """
import sys
import jax
from jax import monitoring
hits = []
monitoring.register_event_listener(lambda event, **kw: hits.append(event) if event.endswith("/cache_hits") else None)
import numpy as np
import bayesvm
from bayesvm.kernels import gram_matrix
print("dir on import:", jax.config.jax_compilation_cache_dir)
bayesvm.enable_compilation_cache(sys.argv[1])
X = np.random.default_rng(0).normal(size=(20, 2))
gram_matrix(bayesvm.RBF(amplitude=1.0, length_scale=1.0, offset=1.0), X)
print("hits:", len(hits))
"""


def _fresh_process(directory) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("JAX_COMPILATION_CACHE")}
    done = subprocess.run([sys.executable, "-c", _COMPUTE_AND_COUNT_HITS, str(directory)], capture_output=True,
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


# ---------------------------------------------------------------------------
# the package's programs: cheaper XLA options for small problems on the CPU


def test_cheap_options_go_to_small_programs_of_their_own():
    import jax
    import numpy as np

    from bayesvm.compilation import CHEAP_COMPILATION_MAX_ELEMENTS, _cheap_to_compile

    assert jax.default_backend() != "cpu" or _cheap_to_compile((np.zeros((256, 256)), 1.0), {"kind": "rbf"})
    assert not _cheap_to_compile((np.zeros(CHEAP_COMPILATION_MAX_ELEMENTS + 1),), {})
    seen = []
    jax.jit(lambda x: seen.append(_cheap_to_compile((x,), {})) or x)(np.zeros(3))
    assert seen == [False]  # traced into the caller's program: JAX takes compiler options on the outermost jit only


def test_only_the_programs_a_fit_runs_a_few_times_compile_at_level_0():
    """Level 0 compiles about three times faster but runs the compiled loops 1.3-3x slower: it pays only for
    programs that run once or twice per fit, never for those the search runs at every step."""
    import jax
    import numpy as np

    from bayesvm import compilation, posterior
    from bayesvm.inference import ep, ep_gradient, ep_posterior
    from bayesvm.normalization import path, smc
    from bayesvm.solver import dual

    rarely = compilation.RARELY_RUN_COMPILER_OPTIONS
    assert rarely["xla_backend_optimization_level"] == 0
    assert {**rarely, "xla_backend_optimization_level": 1} == compilation.CPU_COMPILER_OPTIONS
    for program in (dual._ascend_jit, dual._finish_jit, ep._padded_nu_run, ep_posterior.ep_predict,
                    posterior.averaged_probability):
        assert program.small_cpu_compiler_options == rarely, program.__name__
    # EP with label sites is one program for the search (every step), the checks and the posterior
    for program in (ep._padded_label_run, ep_gradient._gram_vjp, smc.smc_runs, path._reweighted, path._log_f):
        assert program.small_cpu_compiler_options == compilation.CPU_COMPILER_OPTIONS, program.__name__
    # up to the default's selection subsample of 500 points (padded to 512)
    gram, bound = np.zeros((512, 512)), compilation.RARELY_RUN_MAX_ELEMENTS
    assert jax.default_backend() != "cpu" or compilation._cheap_to_compile((gram,), {}, bound)
    assert not compilation._cheap_to_compile((gram,), {})
    assert not compilation._cheap_to_compile((np.zeros((513, 512)),), {}, bound)


def test_numpy_and_device_arguments_share_one_program():
    """jax.jit compiles a NumPy argument and a device array of the same shape as two programs; the package's jit
    puts NumPy arguments on the device first, so they share one."""
    import jax
    import numpy as np

    from bayesvm.compilation import jit

    @jit
    def double(a, b):
        return 2.0 * a + b

    host = np.arange(6.0).reshape(2, 3)
    with jax.enable_x64(True):
        expected = np.asarray(double(host, np.float64(1.0)))
        again = double(jax.device_put(host), jax.device_put(np.float64(1.0)))
        plain = jax.jit(lambda a, b: 2.0 * a + b)  # a function of its own: jax.jit of the same one shares its cache
        plain(host, np.float64(1.0)), plain(jax.device_put(host), jax.device_put(np.float64(1.0)))
    assert np.array_equal(np.asarray(again), expected) and np.array_equal(expected, 2.0 * host + 1.0)
    assert double._cache_size() == 1
    assert plain._cache_size() == 2  # what the wrapper avoids


def test_a_package_function_runs_inside_the_callers_transformations():
    import jax
    import numpy as np

    from bayesvm.kernels import RBF, gram_matrix

    X = np.random.default_rng(0).normal(size=(12, 2))
    kernel = RBF(amplitude=2.0, length_scale=0.7, offset=0.5)
    direct = np.asarray(gram_matrix(kernel, X))
    with jax.enable_x64(True):
        assert np.allclose(jax.jit(lambda X: gram_matrix(kernel, X))(X), direct)
        assert np.allclose(jax.vmap(lambda X: gram_matrix(kernel, X))(np.stack([X, X])), direct)


def test_the_cheap_options_leave_eps_values_as_xlas_defaults_give_them(monkeypatch):
    """EP's ln Q(D), posterior and predictor from the program compiled with the package's CPU options (LLVM's
    level 1) against the same program compiled with XLA's defaults (``jax.jit`` of the undecorated function)."""
    import jax
    import numpy as np

    from bayesvm.inference import ep
    from bayesvm.kernels import RBF, gram_matrix

    rng = np.random.default_rng(1)
    X = rng.normal(size=(40, 3))
    y = np.where(X[:, 0] + 0.5 * rng.normal(size=40) > 0, 1.0, -1.0)
    with jax.enable_x64(True):
        K = gram_matrix(RBF(amplitude=3.0, length_scale=1.2, offset=1.0), X)
        cheap = ep.ep_log_evidence(K, y, 2.0)
        monkeypatch.setattr(ep, "_padded_label_run", jax.jit(ep._padded_label_run.__wrapped__))
        default = ep.ep_log_evidence(K, y, 2.0)
    assert bool(cheap.converged) and bool(default.converged)
    for a, b in zip(jax.tree_util.tree_leaves(cheap), jax.tree_util.tree_leaves(default)):
        assert np.allclose(a, b, rtol=1e-9, atol=1e-11)


# ---------------------------------------------------------------------------
# the host-side code between the package's programs compiles nothing of its own

# a fresh process fits BayesianSVC on 40 points and predicts, and lists every program JAX compiled (its compile log)
_FIT_AND_LIST_PROGRAMS = """
import logging, re, sys
import jax
jax.config.update("jax_log_compiles", True)
if sys.argv[1:]:  # the tests' persistent cache: a program read back from it is still logged as compiling
    jax.config.update("jax_compilation_cache_dir", sys.argv[1])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
compiled = []
class Programs(logging.Handler):
    def emit(self, record):
        found = re.match(r"Compiling jit\\((\\w+)\\) with global shapes and types \\((.*?)\\)\\. ", record.getMessage())
        if found:
            compiled.append(found.groups())
for name in ("jax._src.interpreters.pxla", "jax._src.dispatch"):
    logging.getLogger(name).addHandler(Programs())
    logging.getLogger(name).setLevel(logging.DEBUG)
import importlib, pkgutil
import numpy as np
import bayesvm
package_programs = set()
for module in pkgutil.walk_packages(bayesvm.__path__, "bayesvm."):
    for value in vars(importlib.import_module(module.name)).values():
        if hasattr(value, "_cache_size"):  # a function compiled by bayesvm.compilation.jit
            package_programs.add(value.__name__)
rng = np.random.default_rng(0)
X = rng.normal(size=(40, 2))
y = np.where(X[:, 0] + 0.5 * rng.normal(size=40) > 0, 1, 0)
bayesvm.BayesianSVC(random_state=0).fit(X, y).predict_proba(X)
for name, shapes in compiled:
    print(("package" if name in package_programs else "other") + "|" + name + "|" + shapes)
"""


def test_a_fit_compiles_the_packages_programs_and_next_to_nothing_else():
    """Called eagerly, a jax.numpy operation (a pad, a slice, ``jnp.asarray`` of a NumPy array, a key split)
    compiles a one-operation program of its own for every shape it meets: 24 of the 41 programs of a first fit
    before the host-side code kept to NumPy. What may remain is a PRNG key's seeding (a scalar program or two)."""
    import jax

    env = {key: value for key, value in os.environ.items() if not key.startswith("JAX_COMPILATION_CACHE")}
    cache = jax.config.jax_compilation_cache_dir
    done = subprocess.run([sys.executable, "-c", _FIT_AND_LIST_PROGRAMS, *([cache] if cache else [])],
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    programs = [line.split("|", 2) for line in done.stdout.splitlines() if line.count("|") >= 2]
    package = {name for kind, name, _ in programs if kind == "package"}
    assert {"smc_runs", "_padded_label_run", "_reweighted"} <= package  # the log was read
    others = [(name, shapes) for kind, name, shapes in programs if kind == "other"]
    scalar = re.compile(r"ShapedArray\(\w+\[\](, weak_type=True)?\),?")
    seeding = [(name, shapes) for name, shapes in others
               if name in ("_threefry_seed", "stage") and scalar.fullmatch(shapes.strip())]
    assert [program for program in others if program not in seeding] == []
    assert len(seeding) <= 2
