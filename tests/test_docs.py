"""The documentation site builds with ``mkdocs build --strict`` (broken links, bad API references fail),
with no network, and its math is rendered by the KaTeX copy shipped in ``docs/vendor/katex``."""

import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mkdocs")
pytest.importorskip("material")
pytest.importorskip("mkdocstrings_handlers.python")

ROOT = Path(__file__).resolve().parents[1]
KATEX = ROOT / "docs" / "vendor" / "katex"

# subprocess runs of whole scripts: the slower tier (pytest -m slow), not the default test command
pytestmark = pytest.mark.slow

# loaded first by the build's interpreter (sitecustomize): every socket connection fails, so a build that
# needs the network fails too
NO_NETWORK = '''
import socket


def _refuse(*args, **kwargs):
    raise OSError("network access is disabled for this documentation build")


socket.socket.connect = _refuse
socket.socket.connect_ex = _refuse
socket.create_connection = _refuse
socket.getaddrinfo = _refuse
'''

# every formula of the built site through the shipped KaTeX: a formula it cannot parse is listed
RENDER = '''
const katex = require(process.argv[process.argv.length - 1]);
const formulas = JSON.parse(require("fs").readFileSync(0, "utf8"));
const failed = [];
for (const [tex, display] of formulas) {
  try { katex.renderToString(tex, { displayMode: display, throwOnError: true }); }
  catch (err) { failed.push(tex.slice(0, 80) + " -- " + String(err.message).slice(0, 120)); }
}
console.log(JSON.stringify(failed));
'''

MATH = re.compile(r'<(span|div) class="arithmatex">(.*?)</\1>', re.S)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("docs")
    (tmp / "sitecustomize.py").write_text(NO_NETWORK)
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1",
           "PYTHONPATH": os.pathsep.join([str(tmp), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp / "site")],
        cwd=ROOT, capture_output=True, text=True, timeout=300, env=env,
    )
    assert result.returncode == 0, f"mkdocs build --strict (no network) failed:\n{result.stdout}\n{result.stderr}"
    return tmp / "site"


def test_docs_build_strict(site):
    for page in ("index.html", "theory/index.html", "api/index.html", "examples/toy_evidence/index.html"):
        assert (site / page).is_file(), f"{page} was not built"
    api = (site / "api" / "index.html").read_text()
    assert "fit_map" in api and "log_evidence" in api, "the API page lacks the docstrings of fit_map / log_evidence"


def test_docs_load_nothing_from_the_network(site):
    for page in site.rglob("*.html"):
        text = page.read_text()
        remote = re.findall(r'<(?:script|link)[^>]*(?:src|href)="(?:https?:)?//[^"]*"', text)
        assert not remote, f"{page.relative_to(site)} loads {remote[:3]}"
    theory = (site / "theory" / "index.html").read_text()
    for script in ("vendor/katex/katex.min.js", "vendor/katex/contrib/auto-render.min.js", "javascripts/katex.js"):
        assert script in theory, f"the theory page does not load {script}"
        assert (site / script).is_file(), f"{script} is not in the built site"
    assert "vendor/katex/katex.min.css" in theory
    fonts = re.findall(r"url\((fonts/[^)]+\.woff2)\)", (site / "vendor/katex/katex.min.css").read_text())
    assert fonts and all((site / "vendor/katex" / font).is_file() for font in fonts), "KaTeX's fonts are missing"


def test_docs_math_renders_with_the_shipped_katex(site):
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is needed to run KaTeX outside a browser")
    formulas = []
    for page in site.rglob("*.html"):
        for tag, body in MATH.findall(page.read_text()):
            tex = html.unescape(body).strip()
            opening, closing = (r"\[", r"\]") if tag == "div" else (r"\(", r"\)")
            assert tex.startswith(opening) and tex.endswith(closing), f"unexpected math markup in {page}: {tex[:60]}"
            formulas.append((tex[2:-2], tag == "div"))
    assert len(formulas) > 100, f"only {len(formulas)} formulas found: is arithmatex still on?"
    result = subprocess.run([node, "-e", RENDER, str(KATEX / "katex.min.js")], input=json.dumps(formulas),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    failed = json.loads(result.stdout)
    assert not failed, f"{len(failed)} of {len(formulas)} formulas do not render:\n" + "\n".join(failed[:20])
