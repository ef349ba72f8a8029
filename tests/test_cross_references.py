"""Every cross-reference in the package and its documentation resolves.

* The Sphinx roles of the package's docstrings and comments (``:func:`...```, ``:class:``, ``:meth:``, ``:mod:``,
  ``:attr:``, ``:data:``, ``:exc:``) name importable objects. Names that are not fully qualified resolve as
  docs/_griffe_roles.py resolves them for the site: in the scope of the object whose docstring holds them (its class,
  then its module, whose imports count), with ``~`` and leading dots dropped and ``title <target>`` read as the
  target.
* The file paths they name (``benchmarks/...``, ``docs/...``, ``tests/...``, ``examples/...``, ``bayesvm/...``)
  exist, and so do those of the documentation pages and the README (from the repository's root or, for a page's
  relative link, from the page's folder; a result file ``benchmarks/results/NAME...`` where a script
  ``benchmarks/NAME.py`` writes it; ``COMMIT:path`` names a file of an old commit and is not checked).
  CHANGELOG.md is left out: it records each change as the repository stood on its date, scripts since removed
  included.
* Their section references, ``theory: "Heading"`` and ``documentation: page, "Heading"``, name a heading (or a bold
  paragraph lead) of docs/theory.md or of that page (a page by its file name or its title in mkdocs.yml), and
  ``CHANGELOG.md, DATE`` a date of the changelog.
* The documentation's API references, ``::: bayesvm.x`` directives, ``[text][bayesvm.x]`` autorefs and code spans
  that name ``bayesvm.x.y``, are importable objects.

Static: the sources are parsed, the modules imported; nothing is compiled.
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.util
import io
import pkgutil
import re
import tokenize
from pathlib import Path

import pytest

import bayesvm

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

ROLE = re.compile(r":(?:py:)?(?P<role>func|class|mod|meth|attr|data|exc|obj|const|type):`(?P<body>[^`]+)`")
EXPLICIT = re.compile(r"^(?P<title>.+?)\s*<(?P<target>[^>]+)>$")
PLACEHOLDER = re.compile(r"\b[A-Z]{3,}\b")
PATH = re.compile(r"(?<![\w./$~:-])(?:\.\./)*(?P<path>(?:benchmarks|docs|tests|examples|bayesvm)/[\w.*/-]*[\w*])")
THEORY = re.compile(r"theory:\s*(?P<names>\"[^\"]+\"(?:\s*(?:,|and)\s*\"[^\"]+\")*)")
DOCUMENTATION = re.compile(r"documentation:\s*(?P<page>[a-z][a-z -]*[a-z])"
                           r"(?:,\s*(?P<sections>\"[^\"]+\"(?:\s*(?:,|and)\s*\"[^\"]+\")*))?")
CHANGELOG_DATE = re.compile(r"CHANGELOG\.md,\s*(?P<date>\d{4}-\d{2}-\d{2})")
HEADING = re.compile(r"^#{1,6}\s+(?P<text>.+?)\s*$", re.M)
BOLD_LEAD = re.compile(r"^\s*(?:[*-]\s+)?\*\*(?P<text>[^*]+?)[.:]?\*\*", re.M)
DIRECTIVE = re.compile(r"^:::\s+(?P<target>\S+)", re.M)
AUTOREF = re.compile(r"\[(?P<text>[^\]]+)\]\[(?P<target>[^\]]*)\]")
NAV_ENTRY = re.compile(r'^\s*-\s*(?P<title>"[^"]+"|[^:"]+):\s*(?P<page>\S+\.md)\s*$', re.M)
CODE_NAME = re.compile(r"`(?P<target>bayesvm(?:\.\w+)+)(?:\([^`]*\))?`")


# ---------------------------------------------------------------------------------------------------------------
# what the package says
# ---------------------------------------------------------------------------------------------------------------

def _module_names() -> list[str]:
    names = ["bayesvm"]
    names += [info.name for info in pkgutil.walk_packages(bayesvm.__path__, "bayesvm.")]
    return sorted(names)


MODULES = _module_names()


def _source(module: str) -> tuple[Path, str]:
    spec = importlib.util.find_spec(module)
    path = Path(spec.origin)
    return path, path.read_text()


def _texts(module: str) -> list[tuple[int, str, tuple[str, ...]]]:
    """Every docstring-like string (module, class, function, attribute docstrings) and every comment of a module,
    with its line and its scope: the names of the classes and functions around it, outermost first."""
    _, source = _source(module)
    tree = ast.parse(source)
    scopes: list[tuple[int, int, tuple[str, ...]]] = []
    texts = []

    def visit(node, scope):
        for child in ast.iter_child_nodes(node):
            inner = scope
            if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                inner = (*scope, child.name)
                scopes.append((child.lineno, child.end_lineno, inner))
            if (isinstance(child, ast.Expr) and isinstance(child.value, ast.Constant)
                    and isinstance(child.value.value, str)):
                texts.append((child.lineno, child.value.value, scope))
            visit(child, inner)

    visit(tree, ())
    # a comment over consecutive lines is one text: a reference may run on from one line to the next
    comments: list[list] = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            line, text = token.start[0], token.string.lstrip("#:").strip()
            if comments and comments[-1][1] == line - 1:
                comments[-1][1:] = [line, f"{comments[-1][2]} {text}"]
            else:
                comments.append([line, line, text])
    for first, _, text in comments:
        around = [s for s in scopes if s[0] <= first <= s[1]]
        scope = max(around, key=lambda s: len(s[2]))[2] if around else ()
        texts.append((first, text, scope))
    return texts


def _import(dotted: str):
    """The object a fully qualified name names: the longest importable module prefix, then attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            obj = _member(obj, name)
        return obj
    raise LookupError(dotted)


def _member(obj, name: str):
    """``getattr``, and for classes also their declared fields (dataclass and NamedTuple fields without a default,
    annotated attributes), which griffe lists as members."""
    try:
        return getattr(obj, name)
    except AttributeError:
        pass
    if isinstance(obj, type):
        for klass in obj.__mro__:
            if name in getattr(klass, "__annotations__", {}):
                return klass.__annotations__[name]
    raise LookupError(name)


def _scope_objects(module: str, scope: tuple[str, ...]) -> list:
    """The namespaces a name is looked up in, innermost first: the enclosing classes (functions have no namespace
    of their own to look in), then the module."""
    root = importlib.import_module(module)
    chain, obj = [root], root
    for name in scope:
        try:
            obj = getattr(obj, name)
        except AttributeError:
            break
        chain.append(obj)
    return [o for o in reversed(chain) if isinstance(o, type)] + [root]


def _role_target(body: str) -> str:
    explicit = EXPLICIT.match(body.strip())
    target = explicit["target"] if explicit else body.strip()
    return target.lstrip("~.").removesuffix("()")


def _resolve_role(module: str, scope: tuple[str, ...], target: str) -> None:
    head, _, rest = target.partition(".")
    if head != "bayesvm":
        for namespace in _scope_objects(module, scope):
            try:
                obj = _member(namespace, head)
            except LookupError:
                continue
            for name in rest.split(".") if rest else []:
                obj = _member(obj, name)
            return
    _import(target)


def _role_failures(module: str) -> list[str]:
    path, _ = _source(module)
    failures = []
    for line, text, scope in _texts(module):
        for match in ROLE.finditer(text):
            target = _role_target(match["body"])
            try:
                _resolve_role(module, scope, target)
            except LookupError:
                where = ".".join((module, *scope))
                failures.append(f"{path.relative_to(ROOT)}:{line} ({where}): {match.group(0)}")
    return failures


@pytest.mark.parametrize("module", MODULES)
def test_the_roles_of_the_docstrings_and_comments_resolve(module):
    failures = _role_failures(module)
    assert not failures, "cross-references that name nothing:\n" + "\n".join(failures)


# ---------------------------------------------------------------------------------------------------------------
# file paths
# ---------------------------------------------------------------------------------------------------------------

def _exists(path: str, folder: Path = ROOT) -> bool:
    """A path names a file or folder of the repository, from its root or from ``folder`` (a page's relative link);
    a ``*`` matches as in a glob. A result file of a benchmark script exists once the script has run: a missing
    ``benchmarks/results/NAME.json`` counts where a script ``benchmarks/SCRIPT.py`` has a name NAME starts with."""
    for base in dict.fromkeys((ROOT, folder)):
        if any(base.glob(path)) if "*" in path else (base / path).exists():
            return True
    parts = Path(path).parts
    if parts[:2] == ("benchmarks", "results") and len(parts) == 3:
        return any(parts[2].startswith(script.stem) for script in (ROOT / "benchmarks").glob("[!_]*.py"))
    return False


def _missing_paths(text: str, folder: Path = ROOT) -> list[str]:
    """The paths a text names that do not exist (``NAME``, ``FILE``, ...: a placeholder, not a path)."""
    missing = []
    for match in PATH.finditer(text):
        path = match["path"].rstrip(".")
        if not PLACEHOLDER.search(path) and not _exists(path, folder):
            missing.append(path)
    return missing


def _pages() -> list[Path]:
    return sorted(DOCS.glob("*.md")) + sorted((DOCS / "examples").glob("*.md")) + [ROOT / "README.md"]


def test_the_package_names_files_that_exist():
    missing = []
    for module in MODULES:
        path, _ = _source(module)
        for line, text, _ in _texts(module):
            missing += [f"{path.relative_to(ROOT)}:{line}: {p}" for p in _missing_paths(text)]
    assert not missing, "paths in docstrings and comments that do not exist:\n" + "\n".join(missing)


@pytest.mark.parametrize("page", _pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_documentation_names_files_that_exist(page):
    missing = _missing_paths(page.read_text(), page.parent)
    assert not missing, f"paths in {page.relative_to(ROOT)} that do not exist: {missing}"


# ---------------------------------------------------------------------------------------------------------------
# sections of the documentation
# ---------------------------------------------------------------------------------------------------------------

def _normal(text: str) -> str:
    """A heading as prose names it: no markup, no section number, no anchor, lower case, single spaces."""
    text = re.sub(r"\{#[^}]*\}", "", text)
    text = re.sub(r"\\[a-z]+", " ", text)
    text = re.sub(r"[`$*_{}\\]", "", text)
    text = re.sub(r"^\d+(\.\d+)*\.?\s+", "", text.strip())
    return " ".join(text.lower().split()).rstrip(".:")


@functools.cache
def _headings(page: Path) -> frozenset[str]:
    """A page's headings and the bold leads of its paragraphs, as prose names them."""
    text = page.read_text()
    return frozenset(_normal(m["text"]) for pattern in (HEADING, BOLD_LEAD) for m in pattern.finditer(text))


def _page_titles() -> dict[str, Path]:
    """Each page by its file name (hyphens as spaces) and by its title in mkdocs.yml's navigation."""
    titles = {p.stem.replace("-", " "): p for p in DOCS.glob("*.md")}
    for match in NAV_ENTRY.finditer((ROOT / "mkdocs.yml").read_text()):
        titles[_normal(match["title"].strip('"'))] = DOCS / match["page"]
    return titles


def _section_failures(text: str, titles: dict[str, Path]) -> list[str]:
    text = " ".join(text.split())
    theory = _headings(DOCS / "theory.md")
    failures = []
    for match in THEORY.finditer(text):
        for name in re.findall(r"\"([^\"]+)\"", match["names"]):
            if _normal(name) not in theory:
                failures.append(f'theory: "{name}"')
    for match in DOCUMENTATION.finditer(text):
        page = titles.get(_normal(match["page"]))
        if page is None:
            failures.append(f"documentation: {match['page']} (no such page)")
        else:
            for name in re.findall(r"\"([^\"]+)\"", match["sections"] or ""):
                if _normal(name) not in _headings(page):
                    failures.append(f'documentation: {match["page"]}, "{name}" (no such section)')
    dates = _headings(ROOT / "CHANGELOG.md")
    failures += [f"CHANGELOG.md, {m['date']} (no such date)" for m in CHANGELOG_DATE.finditer(text)
                 if m["date"] not in dates]
    return failures


def test_the_package_names_sections_that_exist():
    titles = _page_titles()
    failures = []
    for module in MODULES:
        path, _ = _source(module)
        for line, text, _ in _texts(module):
            failures += [f"{path.relative_to(ROOT)}:{line}: {f}" for f in _section_failures(text, titles)]
    assert not failures, "section references that name no section:\n" + "\n".join(failures)


# ---------------------------------------------------------------------------------------------------------------
# the documentation's API references
# ---------------------------------------------------------------------------------------------------------------

def _api_references(text: str) -> list[str]:
    targets = [m["target"] for m in DIRECTIVE.finditer(text)]
    for match in AUTOREF.finditer(text):
        target = match["target"] or match["text"].strip("`")
        if target.startswith("bayesvm"):
            targets.append(target)
    targets += [m["target"] for m in CODE_NAME.finditer(text)]
    return targets


@pytest.mark.parametrize("page", _pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_documentation_names_objects_that_exist(page):
    missing = []
    for target in _api_references(page.read_text()):
        try:
            _import(target)
        except LookupError:
            missing.append(target)
    assert not missing, f"API references in {page.relative_to(ROOT)} that name nothing: {missing}"


# ---------------------------------------------------------------------------------------------------------------
# the checks themselves
# ---------------------------------------------------------------------------------------------------------------

def test_a_broken_reference_is_found():
    assert _missing_paths("see benchmarks/integrand_speed.py and benchmarks/fit_cost.py") == [
        "benchmarks/integrand_speed.py"]
    with pytest.raises(LookupError):
        _resolve_role("bayesvm.normalization.path", (), _role_target(":class:`~.ep_started.RoutedEstimate`"))
    with pytest.raises(LookupError):
        _import("bayesvm.normalization.ep_started.RoutedEstimate")
    _resolve_role("bayesvm.normalization.budget", ("EvidenceBudget", "plan"), "annealed_log_expectation")
    _resolve_role("bayesvm.normalization.budget", (), "EvidenceBudget.ceiling")
    titles = _page_titles()
    assert _section_failures('(theory: "The normalisation factor"; documentation: speed, "Selection on a '
                             'subsample")', titles) == []
    assert _section_failures('(documentation: speed, "The first fit")', titles) != []
    assert _section_failures('(theory: "No such\n    section")', titles) != []
    assert _section_failures("(CHANGELOG.md, 2026-11-28)", titles) == []
    assert _section_failures("(CHANGELOG.md, 2026-02-30)", titles) != []
    assert _api_references("::: bayesvm.kernels\n[the budget][bayesvm.EvidenceBudget], `bayesvm.log_evidence(X)`") \
        == ["bayesvm.kernels", "bayesvm.EvidenceBudget", "bayesvm.log_evidence"]
