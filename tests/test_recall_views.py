"""Recall views: figures and HTML built from records, model and script text escaped
everywhere, error bars that are the Wilson intervals, the report notebook executed
through ``workbench report`` into offline HTML, and the world explorer notebook
executed under papermill."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_recall_world import SCRIPTED, legal_script, recall_study, run_cell
from workbench.stats import wilson

XSS = "<script>window.__xss=1</script>"


def xss_world(tmp_path: Path):  # noqa: ANN201
    """A scripted world whose answers and script text carry markup."""
    script = legal_script()
    script["turns"][8]["content"] = f"Dr. Amara Osei {XSS} confirmed availability."
    agents = {**SCRIPTED, "paralegal": {"script": ["Noted.", f"ok {XSS}", f"{XSS} July 8, 2026"]}}
    path = recall_study(tmp_path, [{"condition": "authors-shown", "agents": agents}], scripts=[script])
    return run_cell(path, 0, [0])[0]


def test_everything_model_or_script_written_is_escaped(tmp_path: Path) -> None:
    from workbench.worlds.recall.views import context_html, retrieval_ranks, statements_html, turn_timeline

    o = xss_world(tmp_path)
    for html in (context_html(o.world), statements_html(o.world, o.steps)):
        assert XSS not in html and "&lt;script&gt;" in html
    for fig in (turn_timeline(o.world), retrieval_ranks(o.world)):
        text = json.dumps(fig.to_plotly_json())
        assert XSS not in text
    assert "&lt;script&gt;" in json.dumps(turn_timeline(o.world).to_plotly_json())


def test_accuracy_figure_error_bars_are_wilson(tmp_path: Path) -> None:
    from workbench.worlds.recall.metrics import recall_frame
    from workbench.worlds.recall.views import accuracy_figure

    path = recall_study(tmp_path, [{"condition": "naive"}, {"condition": "lightweight"}])
    worlds = [o.world for i in range(2) for o in run_cell(path, i, range(4))]
    frame = recall_frame(worlds)
    fig = accuracy_figure(frame)
    bars = {t.name: t for t in fig.data}
    assert set(bars) == {"authority_collapse", "belief_asymmetry", "memory_anchoring"}
    ac = bars["authority_collapse"]
    assert list(ac.x) == ["naive", "lightweight"]
    for cond, y, plus, minus in zip(ac.x, ac.y, ac.error_y.array, ac.error_y.arrayminus):
        sub = frame[(frame["condition"] == cond) & (frame["failure_mode"] == "authority_collapse")]
        k, n = int(sub["correct"].sum()), len(sub)
        low, high = wilson(k, n)
        assert (y, y + plus, y - minus) == pytest.approx((k / n, high, low))
    assert "SIMULATED" in fig.layout.title.text


def test_report_and_explorer_notebooks_execute(tmp_path: Path) -> None:
    from workbench.params import load_study
    from workbench.publish.html import external_references
    from workbench.publish.notebooks import execute
    from workbench.publish.report import make_report
    from workbench.study import run_study

    script = legal_script()
    agents = {**SCRIPTED, "paralegal": {"script": ["Noted.", "Noted.", f"{XSS} July 8, 2026"]}}
    path = recall_study(tmp_path, [{"condition": "naive"}, {"condition": "lightweight"},
                                   {"condition": "naive", "agents": agents, "label": "xss probe"}],
                        scripts=[script], worlds=3)
    out = tmp_path / "run"
    run_study(load_study(path), out, progress=False)
    report = make_report(out, timeout_s=300, max_timelines=2)
    html = report.read_text(encoding="utf-8")
    assert "Recall study" in html and "authority_collapse" in html and "SIMULATED" in html
    assert XSS not in html and not external_references(html)
    executed = execute("recall_world", tmp_path / "world.ipynb", {
        "study": str(path), "script_id": "legal_test_01", "condition": "lightweight-invalidation",
        "model": "sim-recall/careful", "repetition": 1}, timeout_s=300)
    nb = json.loads(executed.read_text(encoding="utf-8"))
    outputs = json.dumps([c.get("outputs") for c in nb["cells"] if c["cell_type"] == "code"])
    assert "legal_test_01" in outputs and "Traceback" not in outputs


def test_judge_value_and_memory_tables_escape_answers_and_show_per_cell(tmp_path: Path) -> None:
    """The report's judge, given-value and memory tables, built from hand-written records
    (a judge that disagrees with exact match on a paraphrase and a near miss: a bare
    accepted number that exact match finds with another unit; answers
    carrying markup): every answer escaped, one row per cell and judge."""
    from tests.test_recall_scoring import recall, world
    from workbench.records import RunRecords
    from workbench.worlds.recall.views import RecallReport

    truth = ["5 mg"]
    judged = world("J", [recall(10, "authority_collapse", "F1", truth, f"{XSS} five mg", True, judge=True),
                         recall(11, "authority_collapse", "F1", ["5"], f"{XSS} 5 mg/kg", False, judge=False),
                         recall(12, "memory_anchoring", "F1", truth, "7 mg", False, judge=False)],
                   condition="lightweight", cell={"scoring": "judge"},
                   memory_log=[{"op": "add", "turn": 3, "source": "reply", "origin": "reply", "author_role": "paralegal",
                                "authority": 0.4, "namespace": None, "fact_id": "F1", "text": f"{XSS} 7 mg",
                                "entry": None, "refused": True, "refused_by": "m1", "removed": []}],
                   conflicts=[{"turn": 3, "type": "lower-authority", "action": "refused"}])
    plain = world("N", [recall(10, "authority_collapse", "F1", truth, "5 mg", True)], condition="naive",
                  memory_log=[{"op": "add", "turn": 0, "source": "initial_fact", "author_role": "record",
                               "authority": 1.0, "namespace": None, "fact_id": "F1", "text": "5 mg",
                               "entry": {"entry_id": "m0"}, "refused": False, "refused_by": None, "removed": []}])
    r = RecallReport(RunRecords(dir=tmp_path, manifest={}, worlds=[judged, plain], steps={}, problems=[]))
    sections = r.sections()
    assert all(sections[k].applies for k in ("judges", "values", "memory"))
    agree = r.tables["judge_agreement"]
    assert sorted(zip(agree["condition"], agree["judge"])) == [("lightweight", "judge"), ("lightweight", "rule"),
                                                               ("naive", "rule")]
    for name in ("judge_agreement", "judge_disagreements", "given_values", "failed_recalls", "memory", "recalls"):
        html = r.table(name).data
        assert XSS not in html, name
    dis = r.table("judge_disagreements").data
    assert "&lt;script&gt;" in dis and "paraphrase" in dis and "near miss" in dis
    mem = r.table("memory").data
    assert "lower-authority refused" in mem and "None in any cell" in mem and "writes reply" in mem
    failed = r.tables["failed_recalls"]
    assert list(failed["answer"]) == [f"{XSS} 5 mg/kg", "7 mg"] and "&lt;script&gt;" in r.table("failed_recalls").data


def test_context_html_shows_matched_partial_score_rule_judge_and_the_value_given() -> None:
    from tests.test_recall_scoring import recall, story
    from workbench.worlds.recall.views import context_html

    w = story()
    w["recalls"] = [recall(10, "belief_asymmetry", "F1", ["July 22, 2026"], f"{XSS} My diary says July 8, 2026.",
                           False),
                    recall(15, "belief_asymmetry", "F1", ["July 22, 2026"], "22 July 2026", True, judge=True)]
    html = context_html(w)
    assert XSS not in html and "&lt;script&gt;" in html
    assert "Value given: stale (date:2026-07-08" in html and "said before by associate, record" in html
    assert "matched none, partial score 0.0" in html  # July 8 is another date: no credit for July and 2026
    assert "matched July 22, 2026" not in html
    assert "rule judge correct (paraphrase)" in html


def test_a_hedged_recall_shows_as_hedged_in_the_context_and_the_timeline() -> None:
    """An answer giving the superseded date and the accepted one, recorded correct by the
    exact rule: the views score it again from the record and show it hedged."""
    from tests.test_recall_scoring import recall, story
    from workbench.worlds.recall.views import context_html, turn_timeline

    w = story()
    w["recalls"] = [recall(10, "belief_asymmetry", "F1", ["July 22, 2026"], "July 8, 2026 or July 22, 2026", True)]
    w["turns"] = [*w["turns"], {"turn": 10, "role": "associate", "content": "When is it due?", "fact_id": None,
                                "is_recall": True, "write_to_memory": False, "reply": "July 8, 2026 or July 22, 2026"}]
    html = context_html(w)
    assert ">hedged</span>" in html and "Value given: hedged (date:2026-07-08" in html
    assert "exact match true (matched July 22, 2026" in html
    names = {t.name for t in turn_timeline(w).data}
    assert "recall-hedged" in names and "recall-right" not in names
