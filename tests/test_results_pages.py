"""The documentation's numbers come from ``benchmarks/results/*.json``, and a stale one fails here.

* Every table marker (``<!-- table: VIEW from FILE -->``, rendered by docs/_tables.py when the site is built) names
  files that exist and a known view, and renders.
* Every result file a page or the README quotes exists (a glob: at least one file).
* Every result file records its provenance (commit, command, machine, date).
* The README's and the home page's numbers (:data:`QUOTES`) are the ones their files hold.

No JAX, no mkdocs: the renderers are plain Python.
"""

import importlib.util
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
PAGES = sorted((ROOT / "docs").rglob("*.md"))

_spec = importlib.util.spec_from_file_location("docs_tables", ROOT / "docs" / "_tables.py")
tables = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tables)

#: pages that must render at least one table from a file (a marker the pattern no longer sees fails here)
GENERATED = {"calibration.md", "internals.md", "speed.md", "large-data.md", "normalisation.md", "solver-benchmark.md"}


def _prose(text: str) -> str:
    """A page without its fenced code blocks (commands there name output files, not results)."""
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


# ---------------------------------------------------------------------------
# markers


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_marker_names_files_and_a_view_and_renders(page):
    text = page.read_text()
    found = tables.markers(text)
    if page.name in GENERATED:
        assert found, f"{page.name} has no table marker"
    for view, files in found:
        assert view in tables.VIEWS, f"{page.name}: unknown view {view!r}"
        for name in files:
            assert (RESULTS / name).is_file(), f"{page.name}: benchmarks/results/{name} does not exist"
        rendered = tables.render(view, files)
        assert "\n| " in "\n" + rendered and "Rendered from `benchmarks/results/" in rendered
    assert "<!-- table:" not in tables.render_page(text)


def test_a_wrong_marker_fails():
    with pytest.raises(ValueError, match="malformed"):
        tables.markers("<!-- table: cold_start -->\n")
    with pytest.raises(ValueError, match="unknown table view"):
        tables.render_page("<!-- table: no_such_view from cold_start.json -->\n")
    with pytest.raises(FileNotFoundError, match="no_such_file.json"):
        tables.render_page("<!-- table: cold_start from no_such_file.json -->\n")


def test_a_rendered_table_names_its_source():
    text = tables.render("cold_start", ["cold_start.json"])
    provenance = json.loads((RESULTS / "cold_start.json").read_text())["provenance"]
    assert provenance["commit"][:7] in text and provenance["command"] in text


# ---------------------------------------------------------------------------
# quoted files


def _quoted(text: str) -> set[str]:
    return {m.removeprefix("benchmarks/results/") for m in re.findall(r"[\w./*-]+\.json", _prose(text))}


@pytest.mark.parametrize("page", PAGES + [ROOT / "README.md"], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_quoted_result_file_exists(page):
    for name in _quoted(page.read_text()):
        if "/" in name:  # a path outside benchmarks/results
            continue
        assert list(RESULTS.glob(name)), f"{page.name} quotes benchmarks/results/{name}, which does not exist"


def test_every_result_file_records_its_provenance():
    for path in sorted(RESULTS.glob("*.json")):
        provenance = json.loads(path.read_text()).get("provenance")
        assert isinstance(provenance, dict), f"{path.name} has no provenance"
        assert {"commit", "command", "machine", "date"} <= set(provenance), f"{path.name}: {provenance}"
        if provenance["commit"] is None:  # backfilled: at least the commit that brought it into git
            assert provenance.get("committed_in", {}).get("commit"), f"{path.name}: no commit at all"


# ---------------------------------------------------------------------------
# the README's and the home page's numbers


def _fit_cost_nll(data):
    f = tables.fit_cost_facts(data)
    return [f"mean {f['mean_nll']:.3f}", f"better than grid search + Platt on {f['better_than_grid']} of {f['fits']}",
            f"than GPC on {f['better_than_gpc']}", f"mean {f['mean_nll_grid']:.3f}", f"mean {f['mean_nll_gpc']:.3f}"]


def _fit_cost_time(data):
    f = tables.fit_cost_facts(data)
    return [f"median {f['median_s']:.1f} s", f"**{1 / f['median_ratio']:.1f}x slower**",
            f"{1 / f['worst_ratio']:.0f}x on the worst", f"faster on {f['faster']} of {f['fits']}",
            f"median {f['median_s_grid']:.1f} s", f"{min(f['gpc_s']):.2f}-{max(f['gpc_s']):.1f} s"]


def _multiclass(data):
    m = tables.multiclass_facts(data)
    return [f"NLL {tables.span(m['ours_nll'], tables.f3)}; {tables.span(m['ours_s'])} s",
            f"NLL {tables.span(m['grid_nll'], tables.f3)}; {tables.span(m['grid_s'])} s",
            f"NLL {tables.span(m['gpc_nll'], tables.f2)}; {tables.span(m['gpc_s'])} s"]


def _cold_start(data):
    arms = tables.cold_start_medians(data)
    n = next(iter(data["runs"]))
    return [f"{n} rows", f"{arms['bayesvm, empty cache']['process_s']:.1f} s with an empty compilation cache",
            f"{arms['bayesvm, cache read']['process_s']:.1f} s for a second process",
            f"| {arms['grid+Platt']['process_s']:.1f} s |"]


def _adult_20000_seconds(data):
    runs = [r for r in data["adult_20000"] if r["size"] == 500]
    return [f"{min(r['seconds'] for r in runs):.0f}-{max(r['seconds'] for r in runs):.0f} s",
            f"{runs[0]['size']}-row subsample"]


def _fit_cost_checks(data):
    f = tables.fit_cost_facts(data)
    return [f"Passed on {f['trusted']} of {f['fits']}"]


def _agreement_points(data):
    a = tables.agreement_facts(data)
    return [f"trusted at {a['trusted']} of {a['points']}"]


def _home_cost(data):
    f = tables.fit_cost_facts(data)
    return [f"**median {f['median_ratio']:.2f}**", f"worst {f['worst_ratio']:.2f}", f"faster on {f['faster']} of "
            f"{f['fits']} fits", f"held-out NLL {f['mean_nll']:.3f} against {f['mean_nll_grid']:.3f} (GP classifier "
            f"{f['mean_nll_gpc']:.3f})", f"pass on {f['trusted']} of {f['fits']}"]


def _home_first_fit(data):
    arms = tables.cold_start_medians(data)
    n = next(iter(data["runs"]))
    second = next(t for t in data["targets"] if t["target"] == "second process / grid+Platt's")
    return [f"({n} rows", f"{arms['bayesvm, empty cache']['process_s']:.1f} s with an empty compilation cache",
            f"{arms['bayesvm, cache read']['process_s']:.1f} s against {arms['grid+Platt']['process_s']:.1f} s",
            f"**{second['value']:.2f}x**"]


def _home_multiclass(data):
    m = tables.multiclass_facts(data)
    return [f"held-out NLL {tables.span(m['ours_nll'], tables.f3)} against {tables.span(m['grid_nll'], tables.f3)}",
            f"(GP classifier {tables.span(m['gpc_nll'], tables.f2)})", f"against {tables.span(m['grid_s'])} s"]


def _home_agreement(data):
    a = tables.agreement_facts(data)
    return [f"{a['trusted']} of {a['points']} points ({100 * a['share']:.1f}%", f"a median {a['median_error']:.3f} "
            f"nats", f"{a['beyond']} beyond n / 1000 nats (worst {a['worst_error']:.2f})"]


#: (page, text that picks out one table row, paragraph or list item of it, result file, what that must say
#: according to the file)
QUOTES = [
    ("README.md", "| held-out NLL, 13 sets", "fit_cost.json", _fit_cost_nll),
    ("README.md", "| time, those 26 fits", "fit_cost.json", _fit_cost_time),
    ("README.md", "| four classes, 400 rows", "fit_cost_multiclass.json", _multiclass),
    ("README.md", "| a first fit in a fresh process", "cold_start.json", _cold_start),
    ("README.md", "| 20,000 adult rows", "subsample_size_study.json", _adult_20000_seconds),
    ("README.md", "**The checks at the answer.**", "fit_cost.json", _fit_cost_checks),
    ("README.md", "points of the default search box", "agreement_map_400_fixed_budget.json", _agreement_points),
    ("docs/index.md", "| Cost and held-out NLL against grid search + Platt", "fit_cost.json", _home_cost),
    ("docs/index.md", "| A first fit in a fresh process", "cold_start.json", _home_first_fit),
    ("docs/index.md", "| ln N(D), the default", "agreement_map_400_fixed_budget.json", _home_agreement),
    ("docs/index.md", "| Four classes", "fit_cost_multiclass.json", _home_multiclass),
]


def _units(text: str) -> list[str]:
    """A page's table rows, paragraphs and list items, each on one line (wrapped lines joined)."""
    units: list[str] = []
    joining = False
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("|"):
            units += [stripped] if stripped else []
            joining = False
        elif joining and not re.match(r"([-*]|\d+\.) ", stripped):
            units[-1] += " " + stripped
        else:
            units.append(stripped)
            joining = True
    return units


def quote_failures(page_text: str, where: str, data: dict, expected) -> list[str]:
    """What a page's row, paragraph or list item that contains ``where`` says that its file does not (empty:
    nothing)."""
    units = [unit for unit in _units(page_text) if where in unit]
    if len(units) != 1:
        return [f"{len(units)} rows or paragraphs contain {where!r}: update QUOTES in tests/test_results_pages.py"]
    return [f"{where!r} should say {text!r}" for text in expected(data) if text not in units[0]]


@pytest.mark.parametrize("page, where, name, expected", QUOTES, ids=[f"{q[0]}:{q[1]}:{q[2]}" for q in QUOTES])
def test_quoted_numbers_are_those_of_their_files(page, where, name, expected):
    data = tables.load(name)
    assert quote_failures((ROOT / page).read_text(), where, data, expected) == [], f"{page} against {name}"


def test_a_stale_quote_fails():
    readme = (ROOT / "README.md").read_text()
    data = tables.load("fit_cost.json")
    assert quote_failures(readme, "| held-out NLL, 13 sets", data, _fit_cost_nll) == []
    # a number the file does not hold
    assert quote_failures(readme.replace("mean 0.296", "mean 0.297"), "| held-out NLL, 13 sets", data,
                          _fit_cost_nll)
    # a file whose numbers moved
    data["fits"][0]["ours"]["nll"] += 0.1
    assert quote_failures(readme, "| held-out NLL, 13 sets", data, _fit_cost_nll)
