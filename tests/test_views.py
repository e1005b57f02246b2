"""Views from records: the step timeline, the store at step k, transcripts and the
per-cell figures and tables. One small run (scripted worlds whose every step is
known, plus simulated cells) is built once; the expected values are worked out
by hand from the scripts, or from the records independently of the views."""
from __future__ import annotations

import json
import math
import re

import pandas as pd
import pytest
import yaml

from tests.conftest import study_dict
from workbench.metrics.contrasts import ContrastSpec, Units, compare_run_sets, contrast_table
from workbench.metrics.design import design_of_records
from workbench.routes import is_simulated_label  # scripted agents are simulated too
from workbench.stats import newcombe, wilson
from workbench.views import esc_html, esc_plot, forest_figure, rate_styler
from workbench.views.escape import as_text
from workbench.views.markup import escape
from workbench.worlds.stigmergy.frames import agent_frame, reply_frame, units, validity_frame, world_frame
from workbench.worlds.stigmergy.tables import attrition_table, exposure_lags, exposure_then_read
from workbench.worlds.stigmergy.views import (
    attrition_figure,
    e1_interaction_figure,
    exposure_then_read_figure,
    per_cell_table,
    step_timeline,
    store_at_step,
    store_slider,
    transcript_html,
    transcripts_html,
)
from workbench.worlds.stigmergy.views.timeline import ARROW, EXPOSURE, OP_COLOURS, OP_SYMBOLS

W = '{"op":"write","key":"$own_key","value":$own_value}'
R = '{"op":"read","key":"$partner_key"}'
J = '{"op":"submit","answer":$joint_answer}'
A = '{"op":"submit","answer":$answer}'
L = '{"op":"list"}'
EVIL_VALUE = "<script>alert(1)</script>"
EVIL_KEY = "<img src=x onerror=alert(2)>"
EVIL_VALUE_ESC = "&lt;script&gt;alert(1)&lt;/script&gt;"
EVIL_KEY_ESC = "&lt;img src=x onerror=alert(2)&gt;"
BAD_REPLY = "not json <b>bold</b> " + "z" * 400  # invalid under both rules, and longer than the hover cut
PROSE = 'Sure, here it is: {"op":"submit","answer":$answer}'

# The "evil" world, by hand (async clock; latencies solo_1 0.7, pair_a 1.0, solo_2 1.3, pair_b 1.5):
#  t0.7 solo_1 write result(v1) | t1.0 pair_a write own | t1.3 solo_2 write result(v2)
#  t1.4 solo_1 write result(v3) | t1.5 pair_b write own | t2.0 pair_a write EVIL_KEY=EVIL_VALUE
#  t2.1 solo_1 submit right     | t2.6 solo_2 read result (solo_1's v3: cross-agent, not strict)
#  t3.0 pair_b invalid reply    | t3.0 pair_a list (exposure) | t3.9 solo_2 submit 0 (wrong)
#  t4.0 pair_a read partner's   | t4.5 pair_b list (exposure) | t5.0 pair_a submit joint
#  t6.0 pair_b read EVIL_KEY    | t7.5 pair_b read partner's  | t9.0 pair_b submit joint
EVIL_AGENTS = {
    "solo_1": {"script": ['{"op":"write","key":"result","value":$answer}',
                          '{"op":"write","key":"result","value":$answer}', A], "latency_s": 0.7},
    "pair_a": {"script": [W, '{"op":"write","key":"' + EVIL_KEY + '","value":"' + EVIL_VALUE + '"}', L, R, J],
               "latency_s": 1.0},
    "solo_2": {"script": ['{"op":"write","key":"result","value":1}', '{"op":"read","key":"result"}',
                          '{"op":"submit","answer":0}'], "latency_s": 1.3},
    "pair_b": {"script": [W, BAD_REPLY, L, '{"op":"read","key":"' + EVIL_KEY + '"}', R, J], "latency_s": 1.5},
}
EVIL_OPS = ["write", "write", "write", "write", "write", "write", "submit", "read", "invalid", "list", "submit",
            "read", "list", "submit", "read", "read", "submit"]
EVIL_CROSS_READS = 4  # solo_2's collision read, pair_a's partner read, pair_b's EVIL_KEY and partner reads
FAILS_AGENTS = {"pair_a": {"script": [W, L]}, "pair_b": {"script": [W]}, "solo_1": {"script": [A]},
                "solo_2": {"script": [A]}}
PROSE_AGENTS = {"pair_a": {"script": [PROSE]}, "pair_b": {"script": [A]}, "solo_1": {"script": [A]},
                "solo_2": {"script": [A]}}
GARBAGE_AGENTS = {"pair_a": {"script": ["no json here", A]}, "pair_b": {"script": [A]}, "solo_1": {"script": [A]},
                  "solo_2": {"script": [A]}}
SIM = "sim/diligent"
SIM_CELLS = [{"model": SIM, "condition": c, "clauses": cl, "label": f"sim {c} {cl}"}
             for c in ("store", "private") for cl in ("both", "persist-only")]
SIM_CELLS += [{"model": SIM, "condition": "no-store", "label": "sim no-store"},
              {"model": SIM, "condition": "prepopulated", "label": "sim prepopulated"},
              {"model": "sim/clause-follower", "condition": "store", "label": "follower store"}]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    from workbench.params import load_study
    from workbench.records import load_run
    from workbench.study import run_study

    root = tmp_path_factory.mktemp("views")
    cells = [{"model": "scripted", "agents": EVIL_AGENTS, "validity": "none", "label": "evil"},
             {"model": "scripted", "agents": FAILS_AGENTS, "label": "fails"},
             {"model": "scripted", "agents": PROSE_AGENTS, "label": "prose", "parser": "lenient"},
             {"model": "scripted", "agents": GARBAGE_AGENTS, "label": "garbage"}]
    spec = study_dict(name="views", worlds_per_cell=3, cells=cells + SIM_CELLS)
    path = root / "study.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    run_study(load_study(path), root / "out", progress=False)
    return load_run(root / "out")


def world_of(run, label: str) -> tuple[dict, list[dict]]:
    w = next(w for w in run.worlds if w["cell_label"] == label)
    return w, run.steps[w["world_id"]]


@pytest.fixture(scope="module")
def frames(run):
    return world_frame(run), agent_frame(run)


def strings(obj) -> list[str]:
    """Every string inside a figure's JSON (decoded, so that JSON's own \\u003c
    escaping cannot hide a raw '<')."""
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [s for v in obj.values() for s in strings(v)]
    if isinstance(obj, list):
        return [s for v in obj for s in strings(v)]
    return []


def step_traces(fig) -> dict[str, object]:
    return {t.name: t for t in fig.data if t.meta == "step"}


# -- timeline --------------------------------------------------------------------
def test_the_scripted_world_ran_as_worked_out_by_hand(run):
    w, steps = world_of(run, "evil")
    assert [(s["op"] or {}).get("op", "invalid") if s["valid"] else "invalid" for s in steps] == EVIL_OPS
    assert sum(1 for s in steps if s["valid"] and s["op"]["op"] == "read" and s["effect"]["cross_agent"]) \
        == EVIL_CROSS_READS


def test_timeline_has_one_marker_per_step_coloured_by_operation(run):
    w, steps = world_of(run, "evil")
    fig = step_timeline(w, steps)
    traces = step_traces(fig)
    assert list(traces) == ["list", "read", "write", "submit", "invalid", "failed"]
    assert sum(len(t.x) for t in traces.values()) == len(steps) == len(EVIL_OPS)
    seqs = sorted(seq for t in traces.values() for seq in t.customdata)
    assert seqs == list(range(len(steps)))
    for name, t in traces.items():
        assert t.marker.color == OP_COLOURS[name]
        assert sorted(t.customdata) == [i for i, op in enumerate(EVIL_OPS) if op == name]
    assert len(set(OP_COLOURS.values())) == len(OP_COLOURS)
    # lanes: one per agent, labelled slot · role, y of each marker = its agent's lane
    lanes = list(fig.layout.yaxis.ticktext)
    assert len(lanes) == 4 and all(re.fullmatch(r"agent-\d · (pair_a|pair_b|solo_1|solo_2)", x) for x in lanes)
    by_seq = {s["seq"]: s for s in steps}
    for t in traces.values():
        for x, y, seq in zip(t.x, t.y, t.customdata):
            assert x == by_seq[seq]["t_done"]
            assert lanes[y].startswith(by_seq[seq]["agent"] + " ·")
    # the world's title names it, its form and joint answer
    title = fig.layout.title.text
    assert w["world_id"] in title and w["tasks"]["form"] in title and str(w["joint_answer"]) in title


def test_invalid_reply_and_failed_call_have_their_own_symbols(run):
    w, steps = world_of(run, "evil")
    inv = step_traces(step_timeline(w, steps))["invalid"]
    assert list(inv.customdata) == [8] and inv.marker.symbol == OP_SYMBOLS["invalid"]
    assert OP_SYMBOLS["invalid"] not in {OP_SYMBOLS[k] for k in ("list", "read", "write", "submit")}
    assert "invalid reply under lenient" in inv.hovertext[0]
    fw, fsteps = world_of(run, "fails")
    failed = step_traces(step_timeline(fw, fsteps))["failed"]
    assert len(failed.x) == 1 and failed.customdata[0] == fsteps[-1]["seq"]
    assert "script exhausted" in failed.hovertext[0]


def test_cross_agent_reads_are_arrows_from_the_write_they_read(run):
    w, steps = world_of(run, "evil")
    fig = step_timeline(w, steps)
    arrows = [a for a in fig.layout.annotations if a.name == ARROW]
    assert len(arrows) == EVIL_CROSS_READS
    assert all(a.axref == "x" and a.ayref == "y" and a.showarrow for a in arrows)
    lanes = list(fig.layout.yaxis.ticktext)
    role = {i: lab.split(" · ")[1] for i, lab in enumerate(lanes)}
    got = sorted((a.ax, role[a.ay], a.x, role[a.y]) for a in arrows)
    # (write time, writer) -> (read time, reader), from the hand trace above
    assert got == [(1.0, "pair_a", 7.5, "pair_b"), (1.4, "solo_1", 2.6, "solo_2"), (1.5, "pair_b", 4.0, "pair_a"),
                   (2.0, "pair_a", 6.0, "pair_b")]
    # reads with no write step behind them (found nothing, own value, seeded) draw nothing
    pw, psteps = world_of(run, "sim prepopulated")
    seeded = [s for s in psteps if s["valid"] and s["op"]["op"] == "read" and s["effect"].get("seeded")]
    assert seeded, "the prepopulated world should have seeded reads"
    cross = sum(1 for s in psteps if s["valid"] and s["op"]["op"] == "read" and s["effect"].get("cross_agent"))
    assert len([a for a in step_timeline(pw, psteps).layout.annotations if a.name == ARROW]) == cross


def test_exposures_are_ringed_and_submissions_marked_right_or_wrong(run):
    w, steps = world_of(run, "evil")
    fig = step_timeline(w, steps)
    ring = next(t for t in fig.data if t.meta == EXPOSURE)
    assert sorted(ring.x) == [3.0, 4.5]
    # a world whose first lists see an empty store: only the exposing lists are ringed
    sw, ssteps = world_of(run, "sim store both")
    lists = [s for s in ssteps if s["valid"] and s["op"]["op"] == "list"]
    exposing = [s for s in lists if s["effect"]["exposure"]]
    assert 0 < len(exposing) < len(lists)
    ring = next(t for t in step_timeline(sw, ssteps).data if t.meta == EXPOSURE)
    assert sorted(zip(ring.x, ring.y)) == sorted(
        (s["t_done"], sorted(a["agent"] for a in sw["agents"]).index(s["agent"])) for s in exposing)
    sub = step_traces(fig)["submit"]
    marks = dict(zip(sub.customdata, sub.text))
    assert marks == {6: "✓", 10: "✗", 13: "✓", 16: "✓"}


def test_hover_shows_step_op_key_effect_and_the_reply_cut_short(run):
    w, steps = world_of(run, "evil")
    traces = step_traces(step_timeline(w, steps))
    read = traces["read"]
    hover = dict(zip(read.customdata, read.hovertext))[15]
    assert "step 15" in hover and "op: read" in hover and "key: R_" in hover
    assert "cross_agent" in hover and "reply: {&quot;" not in hover and 'reply: {"op":"read"' in hover
    inv = traces["invalid"].hovertext[0]
    reply = inv.split("reply: ", 1)[1]
    assert reply.startswith("not json &lt;b&gt;bold&lt;/b&gt;") and reply.endswith("…")
    assert 280 < len(reply.replace("&lt;", "<").replace("&gt;", ">")) <= 300


# -- the store ----------------------------------------------------------------------
def last_versions(world: dict, store_seq_max: float = math.inf) -> dict:
    out = {}
    for e in world["store_log"]:
        if e["seq"] <= store_seq_max:
            out[(e["namespace"], e["key"])] = (e["value"], e["author"], e["version"], e["seq"])
    return out


def as_dict(frame: pd.DataFrame) -> dict:
    return {(r.namespace, r.key): (r.value, r.author, r.version, r.store_seq) for r in frame.itertuples()}


@pytest.mark.parametrize("label", ["evil", "sim prepopulated", "sim private both", "fails"])
def test_store_at_the_end_is_the_store_log_s_last_versions(run, label):
    w, steps = world_of(run, label)
    final = store_at_step(w, steps, steps[-1]["seq"])
    assert as_dict(final) == last_versions(w)
    assert as_dict(store_at_step(w, steps, None)) == last_versions(w)
    assert list(final["namespace"] + "/" + final["key"]) == sorted(final["namespace"] + "/" + final["key"])


def test_store_at_every_intermediate_step(run):
    w, steps = world_of(run, "evil")
    assert store_at_step(w, steps, -1).empty
    k2 = store_at_step(w, steps, 2)  # solo_1's result v1, pair_a's own key, then solo_2's result v2
    a = next(x for x in w["agents"] if x["role"] == "pair_a")
    solo_2 = next(x for x in w["agents"] if x["role"] == "solo_2")["agent"]
    # store seq: 1 solo_1's write, 2 pair_a's write, 3 solo_2's write (the store counts every operation)
    assert as_dict(k2) == {("shared", "result"): (1, solo_2, 2, 3),
                           ("shared", a["task"]["own_key"]): (a["task"]["own_value"], a["agent"], 1, 2)}
    assert list(k2["key"]) == [a["task"]["own_key"], "result"] and list(k2["step"]) == [1, 2]
    # every k, against the log: entries written by steps up to k (store seq from the write's effect)
    for s in steps:
        upto = [x["effect"]["seq"] for x in steps if x["seq"] <= s["seq"] and x["valid"] and x["op"]["op"] == "write"]
        assert as_dict(store_at_step(w, steps, s["seq"])) == last_versions(w, max(upto, default=0))
    pw, psteps = world_of(run, "sim prepopulated")
    start = store_at_step(pw, psteps, -1)
    assert len(start) == 2 and set(start["author"]) == {"environment"} and start["step"].isna().all()


def test_store_slider_has_a_step_per_step_matching_store_at_step(run):
    w, steps = world_of(run, "evil")
    fig = store_slider(w, steps)
    assert not fig.frames  # slider steps carry their own tables: nothing to auto-play
    ui = fig.layout.sliders[0]
    assert [s.label for s in ui.steps] == ["start"] + [str(s["seq"]) for s in steps]
    assert ui.active == len(steps) and {s.method for s in ui.steps} == {"update"}
    for s in ui.steps:
        k = -1 if s.label == "start" else int(s.label)
        table = store_at_step(w, steps, k)
        (cells,) = s.args[0]["cells.values"]
        assert list(cells[1]) == [esc_plot(x) for x in table["key"]]
        assert list(cells[2]) == [esc_plot(x) for x in table["value"]]
        assert list(cells[3]) == list(table["author"])
        assert list(map(int, cells[4])) == list(table["version"])
        assert s.args[1]["title.text"].startswith("store of " + w["world_id"])
    assert [list(c) for c in fig.data[0].cells.values] == [list(c) for c in ui.steps[-1].args[0]["cells.values"][0]]
    # the row written at step 5 (pair_a's write of EVIL_KEY) is highlighted in that step's table
    (fill,) = ui.steps[6].args[0]["cells.fill.color"]
    keys = list(ui.steps[6].args[0]["cells.values"][0][1])
    assert fill[0][keys.index(EVIL_KEY_ESC)] != "white" and fill[0].count("white") == len(keys) - 1


# -- escaping --------------------------------------------------------------------------
def test_escape_helpers():
    assert esc_plot('a&<b>"') == 'a&amp;&lt;b&gt;"'
    assert esc_plot("x\ny") == "x<br>y" and esc_plot("x\ny", newlines=False) == "x⏎y"
    assert esc_plot("<" * 10, 5) == "&lt;" * 4 + "…"
    assert esc_html('<a href="x">&') == "&lt;a href=&quot;x&quot;&gt;&amp;"
    assert esc_plot({"v": "<i>"}) == '{"v": "&lt;i&gt;"}'


def test_model_and_store_text_is_escaped_in_transcripts(run):
    w, steps = world_of(run, "evil")
    html = transcripts_html(w, steps)
    for raw in (EVIL_VALUE, EVIL_KEY, "<b>bold</b>"):
        assert raw not in html
    assert "&lt;b&gt;bold&lt;/b&gt;" in html
    assert EVIL_VALUE.replace("<", "&lt;").replace(">", "&gt;") in html  # the read's result, escaped
    assert EVIL_KEY_ESC in html and EVIL_VALUE_ESC in html
    assert not re.search(r"<(script|img|link|iframe|object|embed)\b", html, re.IGNORECASE)
    assert "http://" not in html and "https://" not in html and "url(" not in html
    assert html.count("<details") == html.count("</details>") and html.count("<details") >= 4


def test_model_and_store_text_is_escaped_in_figures(run):
    w, steps = world_of(run, "evil")
    for fig in (step_timeline(w, steps), store_slider(w, steps)):
        texts = strings(json.loads(fig.to_json()))
        assert not any(EVIL_VALUE in t or EVIL_KEY in t or "<b>bold" in t for t in texts)
        assert any(EVIL_VALUE_ESC in t for t in texts)
        assert any(EVIL_KEY_ESC in t for t in texts)
        assert not any(re.search(r"<(script|img)\b", t, re.IGNORECASE) for t in texts)
    hover = [h for t in step_timeline(w, steps).data if t.meta == "step" for h in t.hovertext]
    assert any("&lt;b&gt;bold&lt;/b&gt;" in h for h in hover)


def test_transcript_holds_the_whole_conversation_in_order(run):
    w, steps = world_of(run, "evil")
    b = next(a for a in w["agents"] if a["role"] == "pair_b")
    html = transcript_html(w, steps, b["agent"])
    mine = [s for s in steps if s["agent"] == b["agent"]]
    # escaped as the template escapes (markupsafe: an apostrophe is &#39;)
    pieces = [str(escape(b["system_prompt"])), str(escape(b["task_text"]))]
    for s in mine:
        pieces.append(str(escape(s["reply"]["text"])))
        if s["result"] is not None:
            pieces.append(str(escape(as_text(s["result"]))))
    pos = 0
    for p in pieces:
        found = html.find(p, pos)
        assert found >= 0, p[:60]
        pos = found + len(p)
    assert "Error:" in html  # the invalid reply's result
    with pytest.raises(KeyError):
        transcript_html(w, steps, "agent-9")


# -- per-cell figures and tables -------------------------------------------------------
@pytest.fixture(scope="module")
def design(run):
    return design_of_records(run)


def test_exposure_figure_counts_equal_the_table(run, frames, design):
    wf, af = frames
    table = exposure_then_read(wf, af, design)
    assert table["worlds:n"].sum() > 0 and table["worlds:k"].sum() > 0
    fig = exposure_then_read_figure(wf, af, design)
    bars = {t.meta: t for t in fig.data}
    shown = table[table["worlds:n"] > 0]
    assert list(bars["exposed"].y) == shown["worlds:n"].tolist()
    assert list(bars["read_after"].y) == shown["worlds:k"].tolist()
    # one bar per cell, labelled by the cell's own label (never a pooled model · condition)
    assert list(bars["exposed"].x) == [esc_plot(lab + (" (simulated)" if is_simulated_label(str(m)) else ""))
                                       for lab, m in zip(shown["cell_label"], shown["cell_id"].map(
                                           design.frame["model"]))]
    assert len(set(bars["exposed"].x)) == len(shown)
    lags = exposure_lags(af)
    assert sorted(bars["lags"].y) == sorted(lags["steps_exposure_to_read"].astype(float))
    # independently of the table: valid exposed worlds with a read after exposure, per cell
    v = wf[wf["valid"] & wf["exposure"]]
    assert sum(bars["read_after"].y) == int(v["exposed_then_read_world"].sum())
    none = wf.assign(exposure=False)
    assert not [t for t in exposure_then_read_figure(none, af, design).data]


def test_per_cell_table_has_one_row_per_cell_and_tags_simulated_rows(frames, design):
    wf, _ = frames
    html = per_cell_table(wf, design).to_html()
    for cid, g in wf.groupby("cell_id"):
        v = g[g["valid"]]
        k, n = int(v["cross_agent_access"].sum()), len(v)
        label = esc_html(design.label(cid))
        row = re.search(r">" + re.escape(label) + r"</td>.*?<td[^>]*>(\d+/\d+)</td>", html, re.S)
        assert row and row.group(1) == f"{k}/{n}", cid
    assert html.count("<tr>") - 1 == len(design.cells)
    assert "sim/diligent [simulated]" in html and "scripted [simulated]" in html  # scripted agents are simulated
    assert "100.0%" in html and "simulated behaviour, not real models" in html


def test_rate_styler_formats_rates_intervals_and_escapes():
    lo, hi = wilson(3, 4)
    table = pd.DataFrame({"model": ["sim/x", "<b>m</b>"], "condition": ["store", "store"], "metric": "m",
                          "k": [3, 0], "n": [4, 0], "k/n": ["3/4", "0/0"], "rate": [0.75, float("nan")],
                          "low": [lo, float("nan")], "high": [hi, float("nan")], "all": ["3/5", "0/1"]})
    html = rate_styler(table).to_html()
    assert "3/4" in html and "0/0" in html and "75.0%" in html
    assert f"[{100 * lo:.1f}%, {100 * hi:.1f}%]" in html
    assert "&lt;b&gt;m&lt;/b&gt;" in html and "<b>m</b>" not in html
    assert html.count("[simulated]") == 1 + 1  # the sim row's tag and the caption
    assert "linear-gradient" in html  # the rate bar


def test_e1_interaction_plot_has_a_line_per_group_of_matched_cells(frames, design):
    wf, _ = frames
    fig = e1_interaction_figure(wf, design)
    # a line joins cells that differ in clauses alone; the scripted cells differ in scripts too
    sim_lines = [t for t in fig.data if "model=sim/diligent" in t.name]
    assert sorted(t.name.rsplit(" · ", 1)[-1] for t in sim_lines) == ["private", "shared"]
    for t in fig.data:
        cells = [c for c in design.cells if all(str(design.frame.at[c, f]) == v for f, v in
                                                zip([f for f in design.varying if f not in ("condition", "clauses")],
                                                    t.meta[:-1])) and design.level(c, "condition") == t.meta[-1]]
        assert [cd[0] for cd in t.customdata] == [design.level(c, "clauses") for c in cells]
        assert [round(x) for x in t.x] == [["both", "persist-only"].index(design.level(c, "clauses")) for c in cells]
        for _x, y, up, down, cid in zip(t.x, t.y, t.error_y.array, t.error_y.arrayminus, cells):
            v = wf[(wf["cell_id"] == cid) & wf["valid"]]
            k, n = int(v["cross_agent_access"].sum()), len(v)
            if n == 0:
                assert math.isnan(y)
                continue
            lo, hi = wilson(k, n)
            assert y == pytest.approx(k / n) and y + up == pytest.approx(hi) and y - down == pytest.approx(lo)
    for t in sim_lines:
        assert [cd[0] for cd in t.customdata] == ["both", "persist-only"] and "(simulated)" in t.name
    offsets = {round(t.x[0], 6) for t in fig.data}  # set apart sideways: no line hides another
    assert len(offsets) == len(fig.data)


def _units(rows: list[dict]) -> Units:
    return Units(frame=pd.DataFrame(rows), pair_on=("world_index",), metric="m", seed="seed")


def test_contrasts_match_newcombe_and_mcnemar_on_hand_picked_counts():
    from workbench.metrics.design import design_of

    cells = {"a0": {"model": "a", "condition": "no-store"}, "a1": {"model": "a", "condition": "store"},
             "b0": {"model": "b", "condition": "no-store"}, "b1": {"model": "b", "condition": "store"},
             "c1": {"model": "c", "condition": "store"}, "c2": {"model": "c", "condition": "private"}}
    design = design_of([{"cell_id": c, "cell": spec} for c, spec in cells.items()])

    def worlds(cid, outcomes, invalid=()):
        return [{"cell_id": cid, "world_index": i, "seed": 100 + i, "valid": i not in invalid, "m": bool(o)}
                for i, o in enumerate(outcomes)]

    rows = (worlds("a0", [1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1], invalid={10, 11, 12})
            + worlds("a1", [1, 1, 1, 1, 1, 1, 1, 0, 0, 0]) + worlds("b0", [0] * 5)
            + worlds("b1", [1] * 6, invalid={5}) + worlds("c1", [1, 0, 0, 0]) + worlds("c2", [1] * 4))
    t = contrast_table(_units(rows), design, [ContrastSpec("store effect", "condition", ("no-store", "store"))])
    assert list(zip(t["A cell"], t["B cell"])) == [("a0", "a1"), ("b0", "b1")]  # c has no no-store cell
    for (a, b), (kb, nb, ka, na) in {("a0", "a1"): (7, 10, 2, 10), ("b0", "b1"): (5, 5, 0, 5)}.items():
        r = t[(t["A cell"] == a) & (t["B cell"] == b)].iloc[0]
        diff, low, high = newcombe(kb, nb, ka, na)
        assert (r["difference (B−A)"], r["low"], r["high"]) == pytest.approx((diff, low, high))
        assert r["B k/n"] == f"{kb}/{nb}" and r["A k/n"] == f"{ka}/{na}"
    a = t.iloc[0]  # pairs 0..9 valid in both: discordant 5 (B only); a0's 10..12 have no partner: unpaired
    assert (a["pairs"], a["only A"], a["only B"], a["lost pairs"], a["unpaired"]) == (10, 0, 5, 0, 3)
    assert a["p (exact McNemar)"] == pytest.approx(2 * 0.5 ** 5)
    b = t.iloc[1]  # b1's world 5 is invalid and b0 has no world 5: never a pair, so unpaired (not lost)
    assert (b["pairs"], b["only B"], b["lost pairs"], b["unpaired"]) == (5, 5, 0, 1)
    fig = forest_figure(t)
    assert list(fig.data[0].x) == pytest.approx([0.5, 1.0])
    assert "condition: store vs no-store" in fig.data[0].y[0] and "model=a" in fig.data[0].y[0]
    assert "no multiple-comparison correction" in t.attrs["title"]
    holm = contrast_table(_units(rows), design, [ContrastSpec("s", "condition", ("no-store", "store"))], holm=True)
    ps = holm["p (exact McNemar)"].tolist()
    lo, hi = sorted(range(2), key=ps.__getitem__)
    expected = [0.0, 0.0]
    expected[lo] = min(1.0, 2 * ps[lo])
    expected[hi] = max(expected[lo], min(1.0, ps[hi]))
    assert holm["p (Holm)"].tolist() == pytest.approx(expected)
    assert "Holm-adjusted" in holm.attrs["title"]


def test_forest_plot_of_compare_run_sets(run, design):
    ua = units(run)
    fb = ua.frame.copy()
    target = next(c for c in design.cells if design.label(c) == "sim private both")
    fb.loc[fb["cell_id"] == target, "cross_agent_access"] = True
    ub = Units(frame=fb, pair_on=ua.pair_on, metric=ua.metric, seed=ua.seed)
    comparison = compare_run_sets(ua, design, ub, design)
    assert (comparison["status"] == "matched").all() and len(comparison) == len(design.cells)
    fig = forest_figure(comparison, label="cell")
    (t,) = fig.data
    est = comparison[comparison["difference (B−A)"].notna()]
    assert list(t.y) == [esc_plot(x) for x in est["cell"]]
    assert list(t.x) == pytest.approx(est["difference (B−A)"].tolist())
    i = list(t.y).index("sim private both")
    assert t.x[i] == pytest.approx(1.0)
    assert t.x[i] + t.error_x.array[i] == pytest.approx(est["high"].iloc[i])
    assert t.x[i] - t.error_x.arrayminus[i] == pytest.approx(est["low"].iloc[i])
    row = comparison.set_index("cell").loc["sim private both"]
    assert row["pairs"] == 3 and row["only B"] == 3 and row["p (exact McNemar)"] == pytest.approx(0.25)


def test_attrition_bars_split_every_cell_s_worlds(run, design):
    att = attrition_table(validity_frame(run), reply_frame(run), design)
    fig = attrition_figure(att)
    parts = {t.name: list(t.y) for t in fig.data}
    assert list(parts) == ["valid under both rules", "invalid under strict only", "invalid under both rules",
                           "failed calls"]
    totals = [sum(p[i] for p in parts.values()) for i in range(len(att))]
    assert totals == att["worlds"].tolist()
    by_cell = {lab: {name: parts[name][i] for name in parts} for i, lab in enumerate(att["cell_label"])}
    assert by_cell["prose"]["invalid under strict only"] == 3
    assert by_cell["garbage"]["invalid under both rules"] == 3
    assert by_cell["fails"]["failed calls"] == 3
    assert by_cell["sim store both"]["valid under both rules"] == 3
    rows = att.set_index("cell_label")
    assert rows.loc["fails", "failure causes"].startswith("infrastructure: script exhausted") and \
        rows.loc["fails", "failure causes"].endswith(": 3")
    assert rows.loc["prose", "strict: prose-wrapped"] == 3 and rows.loc["prose", "lenient: prose-wrapped"] == 0
    assert rows.loc["garbage", "strict: bad JSON"] == 3 and rows.loc["garbage", "lenient: bad JSON"] == 3
    # the evil cell is valid under validity none, and lost under any-agent (pair_b's bad reply)
    assert rows.loc["evil", "valid (lenient, none)"] == 3 and rows.loc["evil", "valid (lenient, any-agent)"] == 0
