"""Reports that say what was found (issue 39): the headline of the published report
puts every declared contrast in words with its numbers, sums each up (which arm is
higher, by how much with its interval, p, over how many paired worlds), and lists
the comparisons it cannot estimate with the reason; the recall headline has words
too; and a quantity has one name, in the report and in the terminal alike."""
from __future__ import annotations

import html
import math
import re

import pandas as pd
import pytest

from tests.conftest import ROOT
from workbench.metrics.contrasts import DIFF, Estimability, P
from workbench.params import load_study
from workbench.views.run_report import HIGHER, LOWER, NOT_ESTIMABLE, UNCLEAR, contrast_findings, findings_context

FINDINGS = re.compile(r'<div class="wb-findings[^"]*">(.*?)</div>', re.DOTALL)


def _text(fragment: str) -> str:
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", fragment))).strip()


def _items(block: str, css: str) -> dict[str, str]:
    """The list ``ul.css`` of a findings block: bold name → the rest of its item, as text."""
    found = re.search(rf'<ul class="{css}">(.*?)</ul>', block, re.DOTALL)
    items = re.findall(r"<li><b>(.*?)</b>: (.*?)</li>", found.group(1), re.DOTALL) if found else []
    return {_text(name): _text(rest) for name, rest in items}


def _findings(report: str) -> dict[str, dict[str, str]]:
    """The headline's findings block (the first), by part: the summary and the not-estimable
    list (name → sentence), and every contrast in words (name → its paragraph and lines)."""
    blocks = FINDINGS.findall(report)
    assert blocks, "no findings block in the report"
    block = blocks[0]
    every = block[block.index('class="wb-every"'):] if 'class="wb-every"' in block else ""
    pairs = re.findall(r"<p><b>(.*?)</b> \((.*?)\)</p>\s*<ul>(.*?)</ul>", every, re.DOTALL)
    return {"summary": _items(block, "wb-found-list"), "not estimable": _items(block, "wb-not-estimable-list"),
            "every": {_text(name): f"{_text(head)} | {_text(lines)}" for name, head, lines in pairs}}


@pytest.fixture(scope="module")
def reports(shipped_report) -> dict[str, str]:
    return {name: shipped_report(params).read_text(encoding="utf-8")
            for name, params in (("demo", "params/demo.yaml"), ("recall", "params/recall-smoke.yaml"))}


def test_every_declared_contrast_of_the_demo_is_in_words_with_its_numbers(reports):
    parts = _findings(reports["demo"])
    declared = [c["name"] for c in load_study(ROOT / "params" / "demo.yaml").contrasts]
    assert len(declared) == 4
    assert sorted(parts["every"]) == sorted(declared)  # every declared contrast written out, one paragraph each
    for name, said in parts["every"].items():
        assert said.startswith("cross-agent access, "), said  # the metric's name, never its code
        assert re.search(r"\d+/\d+ ", said), f"{name!r} has no numbers: {said[:200]}"
    assert parts["every"]["store vs no-store"].count("exact McNemar p = ") == 4  # one line per matched pair
    assert sorted(parts["summary"]) == ["re-check clause", "shared vs private", "store vs no-store"]
    for said in parts["summary"].values():
        assert re.search(r"(higher|lower) with \S+ than with \S+", said), said
        assert re.search(r"[+-]\d+ pp \[[+-]?\d+, [+-]?\d+\]", said), f"no difference with its interval: {said}"
        assert re.search(r"p = [\d.e-]+", said) and re.search(r"\d+ paired worlds", said), said
    assert parts["summary"]["store vs no-store"].startswith(
        "cross-agent access higher with store than with no-store in 3 of 4 matched pairs of cells")
    assert "not clearly different between store and no-store" in parts["summary"]["store vs no-store"]
    assert parts["summary"]["re-check clause"].startswith(
        "cross-agent access lower with persist-only than with both, -65 pp [-82, -38], p = 0.000244")


def test_a_contrast_that_cannot_be_estimated_is_listed_after_with_its_reason(reports):
    parts = _findings(reports["demo"])
    assert list(parts["not estimable"]) == ["strict vs lenient parser"]
    assert parts["not estimable"]["strict vs lenient parser"].startswith(
        "strict has no valid worlds; 20 pair(s) lost to attrition (model=sim/prose-first; condition=store")
    assert "not estimable: strict has no valid worlds" in parts["every"]["strict vs lenient parser"]
    block = FINDINGS.search(reports["demo"]).group(1)  # type: ignore[union-attr]
    assert block.index('class="wb-found"') < block.index('class="wb-not-estimable"') < block.index('class="wb-every"')


def test_the_recall_headline_says_what_was_found(reports):
    report = reports["recall"]
    parts = _findings(report[report.index('id="headline"'):])
    assert {"lightweight vs naive", "baseline vs naive"} <= set(parts["summary"])
    for name in ("lightweight vs naive", "baseline vs naive"):
        assert re.match(r"recall accuracy (higher with|lower with|not clearly different between) ",
                        parts["summary"][name]), parts["summary"][name]
        assert re.search(r"\d+ paired recalls", parts["summary"][name])
        assert re.search(r"\d+/\d+ · \d+ % vs naive \d+/\d+ · \d+ %; difference [+-]\d+ pp",
                         parts["every"][name]), parts["every"][name]
    assert set(parts["summary"]) | set(parts["not estimable"]) == set(parts["every"])


def _row(contrast: str, a_kn: str, b_kn: str, diff: float, low: float, high: float, **extra) -> dict:
    return {"contrast": contrast, "factor": "condition", "A": "no-store", "B": "store", "held fixed": extra.pop(
        "held", "model=m"), "A k/n": a_kn, "B k/n": b_kn, DIFF: diff, "low": low, "high": high,
            "pairs": extra.pop("pairs", 20), P: extra.pop("p", 0.01), "lost pairs": extra.pop("lost", 0), **extra}


def test_directions_and_reasons_read_from_the_table_alone():
    """The words are a function of the contrast table: the interval's side of zero gives the
    direction, and a row the rule rejects says which arm fails it and how."""
    t = pd.DataFrame([
        _row("up", "2/20", "15/20", 0.65, 0.38, 0.82, estimable=True),
        _row("down", "15/20", "2/20", -0.65, -0.82, -0.38, estimable=True),
        _row("flat", "5/20", "6/20", 0.05, -0.2, 0.3, estimable=True, p=0.8),
        _row("empty", "0/0", "20/20", math.nan, math.nan, math.nan, estimable=False, pairs=0, lost=20),
        _row("thin", "1/4", "3/4", 0.5, -0.1, 0.8, estimable=False, pairs=4),
    ])
    found = {f.contrast: f for f in contrast_findings(t, "worlds", Estimability())}
    assert [found[c].direction for c in ("up", "down", "flat", "empty", "thin")] == [
        HIGHER, LOWER, UNCLEAR, NOT_ESTIMABLE, NOT_ESTIMABLE]
    assert found["empty"].reason == "no-store has no valid worlds; 20 pair(s) lost to attrition"
    assert "no-store has 4 valid worlds, fewer than the 10" in found["thin"].reason
    assert "store has 4 valid worlds" in found["thin"].reason
    declared = [{"name": "vocabulary words", "factor": "vocabulary", "levels": ["named", "withheld"]}]
    ctx = findings_context(t, "cross-agent access", "worlds", Estimability(), declared)
    assert [s["name"] for s in ctx["summary"]] == ["up", "down", "flat"]
    assert [s["name"] for s in ctx["not_estimable"]] == ["empty", "thin", "vocabulary words"]
    assert "differ in vocabulary (withheld vs named) and nothing else" in ctx["not_estimable"][-1]["text"]
    assert ctx["summary"][0]["text"] == ("cross-agent access higher with store than with no-store, +65 pp [+38, +82], "
                                         "p = 0.01; 20 paired worlds.")
    assert "not clearly different" in ctx["summary"][2]["text"]
    assert [len(d["lines"]) for d in ctx["details"]] == [1, 1, 1, 1, 1]


def test_the_terminal_summary_uses_the_reports_names():
    from workbench.records import load_run
    from workbench.worlds.stigmergy.labels import LABELS
    from workbench.worlds.stigmergy.summary import summary_text

    records = load_run(ROOT / "tests" / "fixtures" / "record-bytes")
    header = summary_text(records.worlds).splitlines()[0]
    for metric in ("cross_agent_access", "strict_cross_agent_access", "joint_success", "pair_write"):
        assert LABELS[metric] in header, (metric, header)
    assert "coordinated" not in header and " joint " not in f" {header} ".replace("joint success", "")


def test_an_interval_that_leaves_out_zero_is_no_finding_when_the_paired_test_does_not_reject():
    """Small samples: Newcombe's interval can leave out 0 while the exact paired McNemar
    test (what the report tests with) does not reject; the words then say no clear difference."""
    import pandas as pd

    from workbench.metrics.contrasts import DIFF, P
    from workbench.views.run_report import HIGHER, UNCLEAR, contrast_findings

    row = {"contrast": "c", "factor": "condition", "A": "naive", "B": "lightweight", "held fixed": "",
           "A k/n": "1/9", "B k/n": "6/9", DIFF: 0.56, "low": 0.10, "high": 0.78, P: 0.0625, "pairs": 9,
           "lost pairs": 0, "estimable": True}
    (f,) = contrast_findings(pd.DataFrame([row]))
    assert f.direction == UNCLEAR
    (g,) = contrast_findings(pd.DataFrame([{**row, P: 0.03}]))
    assert g.direction == HIGHER


def test_a_contrast_declared_with_its_own_metric_is_said_in_that_metrics_words():
    """A declared contrast with ``metric:`` (the collusion study's warm-up, in colluded_from_start)
    is summed up, headed and titled in its own metric's words, not the table's."""
    from workbench.views.run_report import RunReport

    t = pd.DataFrame([_row("memory", "10/10", "1/10", -0.9, -0.98, -0.49, estimable=True, metric="ever_colluded"),
                      _row("warm-up", "0/10", "6/10", 0.6, 0.2, 0.83, estimable=True, metric="colluded_from_start")])
    t.attrs["metric"] = "ever_colluded"
    ctx = findings_context(t, "ever colluded", "trajectories", Estimability())
    said = {s["name"]: s["text"] for s in ctx["summary"]}
    assert said["memory"].startswith("ever colluded lower") and said["warm-up"].startswith("colluded from start higher")
    assert [d["head"].split(",")[0] for d in ctx["details"]] == ["ever colluded", "colluded from start"]
    title = RunReport.headline_title(None, t, "ever colluded")  # type: ignore[arg-type]
    assert title == "ever colluded, memory, warm-up (in colluded from start)"
