"""Tables rendered from ``benchmarks/results/*.json`` when the site is built: a mkdocs hook (mkdocs.yml ``hooks:``).

A page asks for a table with an HTML comment on lines of its own (the files may wrap)::

    <!-- table: VIEW from FILE -->
    <!-- table: VIEW from FILE, FILE, ... -->

FILE is a name in ``benchmarks/results/``, VIEW a function of :data:`VIEWS`, called with the files' contents in the
marker's order. The marker becomes the view's Markdown table and, after it, a line per file naming the file, the
commit it was measured at, its command, its machine and its date as far as the file's ``provenance`` records them
(:func:`source_line`). A marker that names a missing file or an unknown view, or that a view cannot render, fails
the build. Nothing here imports mkdocs, JAX or bayesvm: the tests import this file to render every marker
(tests/test_results_pages.py), and the README's numbers are checked against the same functions.
"""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"

#: a marker: ``<!-- table: VIEW from FILE[, FILE ...] -->`` on lines of its own (the files may wrap)
MARKER = re.compile(r"^[ \t]*<!--[ \t]*table:[ \t]*(?P<view>\w+)[ \t]+from\s+(?P<files>[^>]+?)\s*-->[ \t]*$", re.M)
#: anything that starts like a marker: each must be a whole marker
MARKER_START = re.compile(r"<!--[ \t]*table:")

#: how a data set is named in the tables
NAMES = {"thirteen": "13 inputs, 3 categorical features", "breast_cancer": "breast cancer", "pima": "Pima",
         "digits_even_odd": "digits even/odd", "digits_3v8": "digits 3 vs 8", "synth_test": "synth.te"}


# ---------------------------------------------------------------------------
# the files and their provenance


def load(name: str) -> dict:
    """The contents of ``benchmarks/results/NAME``."""
    path = RESULTS / name
    if not path.is_file():
        raise FileNotFoundError(f"benchmarks/results/{name} does not exist")
    return json.loads(path.read_text())


def _machine(machine) -> str:
    if not isinstance(machine, dict):
        return "machine not recorded"
    parts = [machine.get("platform")]
    if machine.get("cpu"):
        parts.append(machine["cpu"])
    if machine.get("cpu_count"):
        parts.append(f"{machine['cpu_count']} CPUs")
    devices = machine.get("jax_devices")
    if machine.get("jax_backend") or devices:
        parts.append("JAX " + " ".join(filter(None, [machine.get("jax_backend"),
                                                     devices and "(" + ", ".join(devices) + ")"])))
    if not machine.get("platform"):
        parts[0] = "platform not recorded"
    return ", ".join(parts)


def source_line(name: str, data: dict) -> str:
    """``benchmarks/results/NAME``: its commit, command, machine and date, as far as its provenance records them."""
    p = data.get("provenance") or {}
    if p.get("commit"):
        commit = f"measured at commit `{p['commit'][:7]}`" + (" with uncommitted changes" if p.get("dirty") else "")
    else:
        commit = "commit measured not recorded"
    if p.get("committed_in"):
        commit += f", committed in `{p['committed_in']['commit'][:7]}` ({p['committed_in']['date']})"
    if p.get("command"):
        command = f"`{p['command']}`" + (" (as the docs name it)" if p.get("command_source") == "docs" else "")
    else:
        command = "command not recorded"
    date = f"run {p['date']}" if p.get("date") else "date not recorded"
    return f"`benchmarks/results/{name}`: {commit}; {command}; {_machine(p.get('machine'))}; {date}."


# ---------------------------------------------------------------------------
# markers


def markers(markdown: str) -> list[tuple[str, list[str]]]:
    """(view, files) of every marker on a page; a malformed one raises ValueError."""
    found = [(m.group("view"), [f.strip() for f in m.group("files").split(",")]) for m in MARKER.finditer(markdown)]
    if len(MARKER_START.findall(markdown)) != len(found):
        raise ValueError("a table marker is malformed: write <!-- table: VIEW from FILE[, FILE ...] --> on a line "
                         "of its own")
    return found


def render(view: str, files: list[str]) -> str:
    """The Markdown a marker becomes: the view's table, a blank line and a line per file naming its source."""
    if view not in VIEWS:
        raise ValueError(f"unknown table view {view!r} (known: {', '.join(sorted(VIEWS))})")
    data = [load(name) for name in files]
    table = VIEWS[view](*data)
    sources = "<br>\n".join(source_line(name, d) for name, d in zip(files, data))
    return f"{table}\n\nRendered from {sources}\n"


def render_page(markdown: str) -> str:
    """A page's Markdown with every marker replaced by its table."""
    markers(markdown)
    return MARKER.sub(lambda m: render(m.group("view"), [f.strip() for f in m.group("files").split(",")]),
                      markdown)


def on_page_markdown(markdown, page, config, files):  # the mkdocs hook
    try:
        return render_page(markdown)
    except (OSError, ValueError, KeyError, TypeError) as error:
        from mkdocs.exceptions import PluginError

        raise PluginError(f"{page.file.src_path}: {error}") from error


def on_serve(server, config, builder):  # mkdocs serve: a new result file rebuilds the pages
    server.watch(str(RESULTS))


# ---------------------------------------------------------------------------
# formatting


def table(header: list[str], rows: list[list]) -> str:
    """A Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join("" if c is None else str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def median(values):
    return statistics.median(list(values))


def f1(x):
    return f"{x:.1f}"


def f2(x):
    return f"{x:.2f}"


def f3(x):
    return f"{x:.3f}"


def span(values, fmt=f1) -> str:
    """'lo-hi' of values, each formatted."""
    values = list(values)
    return f"{fmt(min(values))}-{fmt(max(values))}"


def count(n) -> str:
    """An integer with thousands separators; a float that is an integer as one."""
    return f"{int(n):,}" if float(n).is_integer() else f"{n:g}"


def count_or_none(n) -> str:
    return "none" if n == 0 else f"{n:g}"


def name(dataset: str) -> str:
    return NAMES.get(dataset, dataset)


# ---------------------------------------------------------------------------
# facts: the numbers the views and the README quote


def fit_cost_facts(data: dict) -> dict:
    """From ``benchmarks/fit_cost.py``'s JSON: ratios (grid search + Platt's time over ours), seconds, NLL, checks."""
    fits = data["fits"]
    ratios = [f["ratio"] for f in fits]
    first = [f for f in fits if f["split"] == 0]
    later = [f for f in fits if f["split"] > 0]
    worst = min(fits, key=lambda f: f["ratio"])
    worst_later = min(later, key=lambda f: f["ratio"]) if later else None
    return {
        "fits": len(fits),
        "median_ratio": median(ratios), "worst_ratio": min(ratios),
        "median_ratio_first": median(f["ratio"] for f in first) if first else None,
        "median_ratio_later": median(f["ratio"] for f in later) if later else None,
        "worst": worst, "worst_later": worst_later,
        "median_s": median(f["ours"]["seconds"] for f in fits),
        "median_s_grid": median(f["grid_platt"]["seconds"] for f in fits),
        "faster": sum(f["ratio"] > 1 for f in fits),
        "mean_nll": statistics.fmean(f["ours"]["nll"] for f in fits),
        "mean_nll_grid": statistics.fmean(f["grid_platt"]["nll"] for f in fits),
        "mean_nll_gpc": statistics.fmean(f["gpc"]["nll"] for f in fits) if all("gpc" in f for f in fits) else None,
        "better_than_grid": sum(f["ours"]["nll"] < f["grid_platt"]["nll"] for f in fits),
        "better_than_gpc": sum(f["ours"]["nll"] < f["gpc"]["nll"] for f in fits if "gpc" in f),
        "gpc_s": [f["gpc"]["seconds"] for f in fits if "gpc" in f],
        "trusted": sum(bool(f["ours"]["trusted"]) for f in fits),
        "raised": sum(f["ours"].get("nll") is None or "error" in f["ours"] for f in fits),
    }


def cold_start_medians(data: dict, n: str | None = None) -> dict:
    """arm -> {field: median over the processes} of ``benchmarks/cold_start.py``'s JSON (its one size, or n)."""
    runs = data["runs"][n or next(iter(data["runs"]))]
    return {arm: {key: median(p[key] for p in processes) for key in processes[0]} | {"processes": processes}
            for arm, processes in runs.items()}


def agreement_facts(data: dict) -> dict:
    """From an agreement map: points, trusted, errors of the trusted values against their references, seconds."""
    rows = data["rows"]
    trusted = [r for r in rows if r["trusted"]]
    measured = [r for r in trusted if r.get("error") is not None]
    errors = [abs(r["error"]) for r in measured]
    untrusted = [r for r in rows if not r["trusted"] and r.get("error") is not None]
    seconds = sorted(r["seconds"] for r in rows)
    return {"points": len(rows), "trusted": len(trusted), "share": len(trusted) / len(rows),
            "median_error": median(errors), "worst_error": max(errors),
            "beyond": sum(abs(r["error"]) > r["n"] / 1000 for r in measured),
            "untrusted_referenced": len(untrusted),
            "untrusted_covered": sum(abs(r["error"]) <= 2 * r["default_se"] for r in untrusted),
            "median_s": median(seconds),
            # the 90th percentile, linear between order statistics (numpy's default)
            "p90_s": _quantile(seconds, 0.9), "sizes": sorted({r["n"] for r in rows})}


def _quantile(ordered: list[float], q: float) -> float:
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def multiclass_facts(data: dict) -> dict:
    rows = data["multiclass"]["rows"]
    return {"rows": rows, "ours_s": [r["ours"]["seconds"] for r in rows],
            "grid_s": [r["grid_platt"]["seconds"] for r in rows], "gpc_s": [r["gpc"]["seconds"] for r in rows],
            "ours_nll": [r["ours"]["nll"] for r in rows], "grid_nll": [r["grid_platt"]["nll"] for r in rows],
            "gpc_nll": [r["gpc"]["nll"] for r in rows]}


def subsample_size_of(data: dict) -> str:
    """The subsample a fit_cost run selected on, from its recorded arguments."""
    arguments = data["arguments"]
    if "selection_size" not in arguments:  # the run predates --selection-size: the default was then 500 rows
        return "500 (the default then)"
    size = arguments["selection_size"]
    return "250 (the default)" if size is None else str(size)


# ---------------------------------------------------------------------------
# views: one per kind of table


def speed_verdict(fit_cost, agreement, cold_start, duplicates, log_evidence, multiclass) -> str:
    """docs/speed.md's verdict: each target, what was measured and whether it was met."""
    f = fit_cost_facts(fit_cost)
    a = agreement_facts(agreement)
    worst, later = f["worst"], f["worst_later"]
    rows = [[
        "worst fit at most 3x grid search + Platt's time (ratio at least 0.33)",
        f"worst ratio **{f2(f['worst_ratio'])}** ({worst['dataset']}, split {worst['split']}: "
        f"{f1(worst['ours']['seconds'])} s against {f1(worst['grid_platt']['seconds'])} s, "
        f"{f1(worst['ours']['compile_s'])} s of it compiling)"
        + (f"; worst of the later splits {f2(later['ratio'])} ({later['dataset']}, {f1(later['ours']['seconds'])} s "
           f"against {f1(later['grid_platt']['seconds'])} s)" if later else ""),
        verdict(f["worst_ratio"] >= 1 / 3)]]
    rows.append([
        "median fit at least as fast (ratio at least 1)",
        f"median **{f2(f['median_ratio'])}** ({f2(f['median_ratio_later'])} over the later splits, "
        f"{f2(f['median_ratio_first'])} over the first); ours {f1(f['median_s'])} s median, grid search + Platt "
        f"{f1(f['median_s_grid'])} s; faster on {f['faster']} of {f['fits']} fits",
        verdict(f["median_ratio"] >= 1) + ("" if f["median_ratio"] >= 1 else
                                           f" ({f1(1 / f['median_ratio'])}x slower at the median)")])
    rows.append([
        "mean held-out NLL no worse than grid search + Platt's; no fit raises",
        f"mean NLL **{f3(f['mean_nll'])}**; grid search + Platt {f3(f['mean_nll_grid'])}, GPC "
        f"{f3(f['mean_nll_gpc'])}; " + ("no fit raised" if not f["raised"] else f"{f['raised']} fits raised"),
        verdict(f["mean_nll"] <= f["mean_nll_grid"] and not f["raised"])])
    rows.append(["the check at the answer passes on at least 95% of fits", f"**{f['trusted']} of {f['fits']}**",
                 verdict(f["trusted"] >= 0.95 * f["fits"])])
    rows.append([
        "agreement map at 400 rows: at least 98% trusted within its targets",
        f"{a['trusted']} of {a['points']} points trusted ({100 * a['share']:.1f}%), {a['beyond']} trusted values "
        f"beyond n / 1000 nats; a median {f1(a['median_s'])} s per value "
        "([normalisation](normalisation.md#what-to-trust))",
        verdict(a["share"] >= 0.98)])
    rows += _cold_start_verdict(cold_start)
    rows += _duplicates_verdict(duplicates)
    seconds = [r["seconds"] for r in log_evidence["log_evidence"]["rows"]]
    trusted = sum(bool(r["trusted"]) for r in log_evidence["log_evidence"]["rows"])
    rows.append([
        "`log_evidence` on 560 rows: median at most 3 s",
        f"median **{f1(median(seconds))} s** ({span(seconds)} s) over {len(seconds)} settings, {trusted} of "
        f"{len(seconds)} trusted ([below](#log_evidence-alone))",
        verdict(median(seconds) <= 3) + ("" if median(seconds) <= 3 else f" ({median(seconds) / 3:.0f}x)")])
    m = multiclass_facts(multiclass)
    parts = [f"{f1(r['ours']['seconds'])} s against {f1(r['grid_platt']['seconds'])} s for the process's "
             f"{'first' if i == 0 else 'second' if i == 1 else f'fit {i + 1}'} fit ({f2(r['ratio'])})"
             for i, r in enumerate(m["rows"])]
    met = [r["ratio"] >= 1 / 3 for r in m["rows"]]
    rows.append([
        "four classes at 400 rows within 3x of grid search + Platt (digits 0-3, `--multiclass`)",
        ", ".join(parts) + f"; NLL {span(m['ours_nll'], f3)} against {span(m['grid_nll'], f3)} (GPC "
        f"{span(m['gpc_nll'], f2)}, {span(m['gpc_s'])} s)",
        verdict(all(met)) if all(met) or not any(met) else
        "; ".join(f"{verdict(ok)} on the {'first' if i == 0 else 'second' if i == 1 else f'fit {i + 1}'}"
                  for i, ok in enumerate(met))])
    return table(["target", "measured", "verdict"], rows)


def verdict(met: bool) -> str:
    return "met" if met else "**missed**"


def _cold_start_verdict(data: dict) -> list[list]:
    arms = cold_start_medians(data)
    n = next(iter(data["runs"]))
    empty, read, grid = arms["bayesvm, empty cache"], arms["bayesvm, cache read"], arms["grid+Platt"]
    targets = {t["target"]: t for t in data["targets"]}
    first = targets["first process, empty cache (s)"]
    second = targets["second process / grid+Platt's"]
    rows = [[
        f"a first fit in a fresh process with an empty compilation cache, 150-200 rows: at most {first['bound']:g} s",
        f"{f1(empty['process_s'])} s at {n} rows ({span(p['process_s'] for p in empty['processes'])} s over "
        f"{len(empty['processes'])} processes; {f1(arms['bayesvm, no cache']['process_s'])} s without the cache; "
        f"importing {span(p['import_s'] for p in empty['processes'])} s), {empty['programs_compiled']:g} of the "
        "package's programs compiled and written",
        ("met at the median" if first["met"] else verdict(False))
        + " ([below](#a-first-fit-in-a-fresh-process))"]]
    rows.append([
        f"a second process on the machine (the cache filled), 150-200 rows: at most {second['bound']:g}x grid search "
        "+ Platt's process",
        f"{f1(read['process_s'])} s ({span(p['process_s'] for p in read['processes'])} s; importing "
        f"{f1(read['import_s'])} s, the fit {f1(read['fit_s'])} s, {read['programs_loaded']:g} programs loaded, "
        f"{count_or_none(read['programs_compiled'])} of the package's compiled) against {f1(grid['process_s'])} s: "
        f"**{second['value']:.2f}x**",
        verdict(second["met"])])
    return rows


def _copies_target(data: dict) -> tuple[float, list[dict], list[dict]]:
    """The bound of 'rows x k within B x of once', and the records that meet it and those that do not."""
    met = {t["target"].split(":")[0]: t["met"] for t in data["targets"] if "rows x" in t["target"]}
    bound = float(re.search(r"within ([\d.]+)x", next(t["target"] for t in data["targets"]
                                                      if "rows x" in t["target"])).group(1))
    records = data["records"]
    return bound, [r for r in records if met[r["dataset"]]], [r for r in records if not met[r["dataset"]]]


def _duplicates_verdict(data: dict) -> list[list]:
    first = data["records"][0]
    bound, met, missed = _copies_target(data)
    ratios = [r["copies_ratio"] for r in data["records"]]
    return [[
        f"repeated rows: {first['distinct_inputs']} distinct inputs no slower than grid search + Platt; every row "
        f"{data['copies']} times within {bound:g}x of once",
        f"{f1(first['ours']['seconds'])} s against {f1(first['grid+Platt']['seconds'])} s; "
        f"{span(ratios, f2).replace('-', 'x-')}x over {len(ratios)} sets ([below](#repeated-rows))",
        verdict(first["ours"]["seconds"] <= first["grid+Platt"]["seconds"])
        + ("" if not missed else f"; **missed** on {len(missed)} of {len(ratios)} sets")]]


def subsample_lever(*runs) -> str:
    """docs/speed.md: fit_cost runs at several subsample sizes, a row each."""
    rows = []
    for data in runs:
        f = fit_cost_facts(data)
        rows.append([subsample_size_of(data), f2(f["median_ratio"]), f2(f["median_ratio_later"]),
                     f2(f["worst_ratio"]), f"{f1(f['median_s'])} s", f3(f["mean_nll"]),
                     f"{f['trusted']} of {f['fits']}", (data["provenance"].get("commit") or "")[:7],
                     f2(data["environment"]["loadavg"][0])])
    return table(["subsample", "median ratio", "over the later splits", "worst", "median fit", "mean NLL",
                  "checks passed", "commit", "load average at the end"], rows)


def duplicates(data: dict) -> str:
    """docs/speed.md: the sets with repeated rows, each fitted cold and warm, its rows k times, grid search + Platt."""
    k = data["copies"]
    rows = [[name(r["dataset"]), count(r["n_train"]), count(r["distinct_inputs"]), count(r["collapsed_rows"]),
             f1(r["ours, cold"]["seconds"]), f1(r["ours"]["seconds"]), f1(r["ours, rows x k"]["seconds"]),
             f2(r["copies_ratio"]), f2(r["copies_ratio_per_evaluation"]), f1(r["grid+Platt"]["seconds"]),
             f3(r["ours"]["nll"]), f3(r["grid+Platt"]["nll"])] for r in data["records"]]
    return table(["set", "training rows", "distinct inputs", "distinct (input, label)", "ours s (cold)", "ours s",
                  f"rows x {k} s", f"ratio x {k}", "per evaluation", "grid + Platt s", "NLL ours",
                  "NLL grid + Platt"], rows)


def duplicates_targets(data: dict) -> str:
    """docs/speed.md: the repeated-rows targets."""
    first = data["records"][0]
    bound, met, missed = _copies_target(data)
    k = data["copies"]

    def listed(records):
        return ", ".join(f"{f2(r['copies_ratio'])}x ({name(r['dataset'])})" for r in records)

    measured = "; ".join(filter(None, [listed(met) and f"{listed(met)} within", listed(missed) and
                                       f"{listed(missed)} not"]))
    fast = first["ours"]["seconds"] <= first["grid+Platt"]["seconds"]
    return table(["target", "measured", "verdict"], [
        [f"the {first['distinct_inputs']}-input set no slower than grid search + Platt",
         f"{f1(first['ours']['seconds'])} s against {f1(first['grid+Platt']['seconds'])} s "
         f"({f1(first['ours, cold']['seconds'])} s with the first fit's loading)", verdict(fast)],
        [f"every row {k} times within {bound:g}x of the rows once", measured,
         "met" if not missed else f"**missed** on {len(missed)} of {len(data['records'])}"]])


def cold_start(data: dict) -> str:
    """docs/speed.md: a first fit per fresh process, medians over the processes of each arm."""
    labels = {"bayesvm, no cache": "`BayesianSVC()`, `BAYESVM_NO_CACHE=1`",
              "bayesvm, empty cache": "the same, an empty cache (compiles and writes)",
              "bayesvm, cache read": "a second process, reading it", "grid+Platt": "grid search + Platt",
              "bayesvm, 5-fold CV": "`BayesianSVC()`, 5-fold cross-validation",
              "grid+Platt, 5-fold CV": "grid search + Platt, 5-fold cross-validation"}
    sizes = list(data["runs"])
    rows = []
    for n in sizes:
        for arm, m in cold_start_medians(data, n).items():
            jax = "compilations" in m
            rows.append(([n] if len(sizes) > 1 else []) + [
                labels.get(arm, arm), f1(m["process_s"]), f1(m["import_s"]), f1(m["fit_s"]),
                f"{m['compilations']:g}" if jax else "", f"{m['programs_loaded']:g}" if jax else "",
                f1(m["compile_s"]) if jax else ""])
    return table((["n"] if len(sizes) > 1 else []) + ["arm", "process s", "import s", "fit s", "compiled", "loaded",
                                                       "XLA s"], rows)


def every_row_against_subsample(full: dict, subsample: dict) -> str:
    """docs/large-data.md: a search on every row against the default's subsample and grid search + Platt."""
    runs = {r["seed"]: r for r in subsample["runs"]}
    size = {r["size"] for r in subsample["runs"]}
    rows = [[s["seed"], f"{s['full']['seconds']:.0f} s, NLL {f3(s['full']['nll'])}",
             f"{runs[s['seed']]['seconds']:.0f} s, NLL {f3(runs[s['seed']]['nll'])}",
             f"{f1(s['svc']['seconds'])} s, NLL {f3(s['svc']['nll'])}"] for s in full["splits"]]
    return table(["split", "every row (`selection_size=None`)",
                  f"{'/'.join(map(str, sorted(size)))}-row subsample (the default when measured)",
                  "grid search + Platt"], rows)


def subsample_size(study: dict, subsample: dict, full: dict) -> str:
    """docs/large-data.md: held-out NLL per split against the subsample's size; the 500-row runs and grid search
    + Platt where a file holds them (adult, 1,000 rows), a dash where none does."""
    sizes = sorted({r["size"] for r in study["rows"]})
    sets = list(dict.fromkeys(r["set"] for r in study["rows"]))

    def nlls(rows):
        return " / ".join(f3(r["nll"]) for r in sorted(rows, key=lambda r: r.get("split", r.get("seed"))))

    extra = {"adult": (nlls(subsample["runs"]), nlls([s["svc"] | {"seed": s["seed"]} for s in full["splits"]]))}
    rows = [[name(s)] + [nlls([r for r in study["rows"] if r["set"] == s and r["size"] == size]) for size in sizes]
            + list(extra.get(s, ("-", "-"))) for s in sets]
    big = study.get("adult_20000", [])
    by_size = {size: [r for r in big if r["size"] == size] for size in sizes + [500]}
    rows.append(["adult, 20,000 rows (cold s)"] + [
        f"{nlls(by_size[size])}; {span((r['seconds'] for r in by_size[size]), lambda x: f'{x:.0f}')} s"
        if by_size[size] else "" for size in sizes + [500]] + ["-"])
    return table(["set"] + [f"{size} rows" for size in sizes] + ["500 rows (the default when measured)",
                                                                  "grid search + Platt"], rows)


def agreement_map(data: dict) -> str:
    """docs/normalisation.md: the default ln N(D) against its references over the search's default box."""
    a = agreement_facts(data)
    return table(["points", "trusted", "trusted values: median / worst \\|error\\|, beyond target",
                  "untrusted within 2 of their errors", "seconds per value: median, 90th percentile"], [[
                      a["points"], f"**{a['trusted']} ({100 * a['share']:.1f}%)**",
                      f"{f3(a['median_error'])} / {f2(a['worst_error'])} nats, {a['beyond']}",
                      f"{a['untrusted_covered']} of {a['untrusted_referenced']}",
                      f"{f1(a['median_s'])}, {f1(a['p90_s'])}"]])


def solver_convergence(now: dict, before: dict) -> str:
    """docs/solver-benchmark.md: converged solves by C max K(x, x), now and before, at the first size."""
    edges = [(None, 1e2, "below 1e2"), (1e2, 1e3, "1e2-1e3"), (1e3, 1e4, "1e3-1e4"), (1e4, None, "above 1e4")]
    n = now["summaries"][0]["n"]

    def within(record, low, high):
        v = record["box_variance"]
        return record["n"] == n and (low is None or v >= low) and (high is None or v < high)

    rows = []
    for low, high, label in edges:
        here = [r for r in now["records"] if within(r, low, high)]
        earlier = [r for r in before["records"] if within(r, low, high)]
        rows.append([label, len(here), sum(r["converged"] for r in here), sum(r["converged"] for r in earlier)])
    return table(["C max K(x, x) (box times the largest prior variance)", f"points ({n:,} rows)", "converged",
                  "converged before"], rows)


#: the views a marker may name
def fit_hops(data: dict) -> str:
    """docs/internals.md: the bayesvm modules a default fit runs code in and the depth of its bayesvm frames."""
    target = {t["name"]: f"at most {t['limit']}: {verdict(t['met'])}" for t in data["targets"]}
    rows = [[name, len(fit["modules"]), fit["depth"]] for name, fit in data["fits"].items()]
    rows.append([f"target (first fit, {data['rows']} rows)", target["modules"], target["depth"]])
    return table(["fit", "bayesvm modules", "deepest bayesvm frames"], rows)


def calibration_ranks(data: dict) -> str:
    """docs/calibration.md: each method's average rank over the data sets per metric (1 = best), sorted by their
    mean."""
    ranks = data["average_ranks"]
    labels = next(iter(data["datasets"].values()))["labels"]
    metrics = list(ranks)
    rows = [[labels[m], *(f"{ranks[k][m]:.2f}" for k in metrics),
             f"{statistics.fmean(ranks[k][m] for k in metrics):.2f}"] for m in labels]
    rows.sort(key=lambda row: float(row[-1]))
    return table(["method", *(k.upper() if k in ("nll", "ece") else k.capitalize() for k in metrics), "mean"], rows)


def calibration_datasets(data: dict) -> str:
    """docs/calibration.md: per data set, each method's mean +- standard deviation over the splits and, in brackets,
    the rank of the mean among the methods (1 = best)."""
    parts = []
    for name, result in data["datasets"].items():
        settings, kernel = result["settings"], result["splits"][0]["kernel"]
        parts.append(f"### {name}\n\nn={settings['n_samples']}, d={settings['n_features']}, RBF length scale "
                     f"{kernel['length_scale']:.2f}, C={result['splits'][0]['C']:g}, {result['seconds']:.0f} s\n")
        rows = [[result["labels"][m], *(f"{result['mean'][k][m]:.4f} +- {result['std'][k][m]:.4f} "
                                        f"({result['ranks'][k][m]:g})" for k in result["metrics"])]
                for m in result["methods"]]
        parts.append(table(["method", "NLL", "Brier", "ECE (10 bins)", "error"], rows) + "\n")
    return "\n".join(parts).rstrip()


def reference_normalization(data: dict) -> str:
    """docs/normalisation.md: bayesvm's default ln N(D) (two seeds) beside an independent long reference."""
    rows = []
    for p in data["points"]:
        seeds = "; ".join(f"{e['value']:.2f} +- {e['se']:.2f} ({'trusted' if e['trusted'] else 'untrusted'}, "
                          f"{e['value'] - p['value']:+.2f})" for e in p.get("bayesvm", []))
        rows.append([p["C"], f"{p['k0']:g}", f"{p['length_scale']:g}", f"{p['value']:.3f} +- {p['se']:.3f}", seeds])
    return table(["C", "k0 = k_b", "length scale", f"reference ({data['temperatures']:,} temperatures)",
                  "default, seeds 0 and 1 (minus the reference)"], rows)


VIEWS = {view.__name__: view for view in (reference_normalization, calibration_datasets, calibration_ranks, speed_verdict, subsample_lever, duplicates, duplicates_targets, cold_start,
                                         every_row_against_subsample, subsample_size, agreement_map,
                                         solver_convergence, fit_hops)}
