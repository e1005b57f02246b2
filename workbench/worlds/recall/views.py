"""Figures and HTML of the recall world, all read from records: accuracy by failure
mode and condition with Wilson error bars, a world's turn timeline, the retrieval
ranks of each recall, and what was in each recalling agent's context.

Script and model text is data: every such string is escaped for plotly
(:mod:`workbench.views.escape`) and by the templates (``recall_*.html``) for HTML. :class:`RecallReport` is what
``notebooks/recall_analysis.ipynb`` calls; ``notebooks/recall_world.ipynb`` calls
:mod:`workbench.explorers.recall`, which draws with these views."""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from workbench.views.escape import as_text, esc_plot, plot_lines
from workbench.views.markup import render
from workbench.views.readable import readable_html, show_figure
from workbench.views.run_report import RunReport, Section
from workbench.worlds.recall.metrics import MODES, accuracy_table, condition_differences, metric_tables, recall_frame

MODE_COLOURS = {"belief_asymmetry": "#1f77b4", "authority_collapse": "#d62728", "memory_anchoring": "#2ca02c",
                "all": "#7f7f7f"}
SIM_NOTE = "SIMULATED behaviour, not real models"


def _simulated_world(world: dict[str, Any]) -> bool:
    from workbench.routes import is_simulated_world

    return is_simulated_world(world)


# -- accuracy -----------------------------------------------------------------------------
def accuracy_figure(frame: pd.DataFrame, title: str = "Recall accuracy by failure mode and condition") -> go.Figure:
    """Grouped bars: conditions on x, one bar per failure mode, 95% Wilson error bars,
    one row per model setting (recalls of valid worlds)."""
    from workbench.worlds.recall.spec import CONDITIONS

    t = accuracy_table(frame, ["model", "variant", "failure_mode", "condition"])
    settings = [] if t.empty else list(dict.fromkeys(zip(t["model"], t["variant"])))
    fig = make_subplots(rows=max(1, len(settings)), cols=1, shared_xaxes=True, vertical_spacing=0.08,
                        subplot_titles=[esc_plot(m + (f" ({v})" if v else ""), 90) for m, v in settings] or None)
    for row, (model, variant) in enumerate(settings, 1):
        sub = t[(t["model"] == model) & (t["variant"] == variant)]
        order = [c for c in CONDITIONS if c in set(sub["condition"])]
        for mode in MODES:
            m = sub[sub["failure_mode"] == mode].set_index("condition").reindex(order)
            if m["n"].isna().all():
                continue
            fig.add_trace(go.Bar(
                x=order, y=m["rate"], name=mode, legendgroup=mode, showlegend=row == 1,
                marker_color=MODE_COLOURS[mode],
                error_y={"type": "data", "symmetric": False, "array": (m["high"] - m["rate"]).tolist(),
                         "arrayminus": (m["rate"] - m["low"]).tolist()},
                hovertext=[plot_lines([esc_plot(mode), esc_plot(c), f"{k} ({lo:.0%}–{hi:.0%})"])
                           if isinstance(k, str) else "" for c, k, lo, hi in
                           zip(order, m["k/n"], m["low"].fillna(0), m["high"].fillna(0))],
                hoverinfo="text"), row=row, col=1)
        fig.update_yaxes(range=[0, 1.05], tickformat=".0%", title_text="accuracy", row=row, col=1)
    sim = bool(len(frame)) and bool(frame["simulated"].all())
    fig.update_layout(barmode="group", height=260 + 240 * max(1, len(settings)),
                      title={"text": esc_plot(title) + (f"<br><sup>{SIM_NOTE}</sup>" if sim else "")},
                      legend={"title": {"text": "failure mode"}})
    return fig


# -- one world ----------------------------------------------------------------------------
def turn_timeline(world: dict[str, Any]) -> go.Figure:
    """Turns on x, roles on y: statements, memory writes (with invalidations) and
    recalls (green right, orange hedged, red wrong; re-scored from the record by the
    current rules); hover shows the text, escaped.

    A write is what the memory log holds, not what the script asked for: in a world
    without shared memory (``isolated``, ``baseline``) a turn the script marks for
    memory wrote nothing, and a marker there would show a write that never happened.
    The subtitle names the condition and what its agents had instead of memory."""
    from workbench.worlds.recall.outcomes import rescore, world_statements

    roles = ["user"] + [a["role"] for a in world["agents"] if a["agent"] != "judge"]
    writes: dict[int, list[dict[str, Any]]] = {}
    for e in world["memory_log"]:
        writes.setdefault(e["turn"], []).append(e)
    recalls = {r["turn"]: r for r in world["recalls"]}
    statements = world_statements(world)
    retrieval = world.get("retrieval") or {}
    memory = retrieval.get("memory", True)
    condition = (world.get("cell") or {}).get("condition")
    xs: dict[str, list[Any]] = {k: [] for k in ("statement", "write", "write refused", "recall-right", "recall-hedged",
                                                "recall-wrong", "invalidation")}
    ys: dict[str, list[Any]] = {k: [] for k in xs}
    hover: dict[str, list[str]] = {k: [] for k in xs}
    for t in world["turns"]:
        lines = [f"turn {t['turn']} · {esc_plot(t['role'])}"]
        if t["is_recall"]:
            r = recalls.get(t["turn"], {})
            scored = rescore(world, r, statements) if r else None
            key = ("recall-right" if scored and scored.correct else "recall-hedged" if scored and scored.hedged
                   else "recall-wrong")
            lines += [f"[{esc_plot(r.get('failure_mode'))}] {esc_plot(r.get('query'), 120)}",
                      f"answer: {esc_plot(r.get('answer'), 160)}",
                      f"expected: {esc_plot(' | '.join(r.get('ground_truth', [])), 120)}"]
        else:
            logged = writes.get(t["turn"], [])
            key = ("write" if any(not e["refused"] for e in logged) else "write refused" if logged else "statement")
            for e in logged:
                lines.append(f"memory += {esc_plot(e['text'], 160)}" + (" (refused)" if e["refused"] else ""))
            if t.get("write_to_memory") and not memory:
                lines.append(f"not written: no shared memory in condition {esc_plot(condition)}")
            if t.get("reply"):
                lines.append(f"reply: {esc_plot(t['reply'], 120)}")
        xs[key].append(t["turn"])
        ys[key].append(t["role"])
        hover[key].append(plot_lines(lines))
        for e in writes.get(t["turn"], []):
            for x in e["removed"]:
                xs["invalidation"].append(t["turn"])
                ys["invalidation"].append(x["author_role"] if x["author_role"] in roles else "user")
                hover["invalidation"].append(plot_lines([f"turn {t['turn']}: removed entry {x['entry_id']} by "
                                                         f"{esc_plot(x['author_role'])}", esc_plot(x["text"], 160)]))
    style = {"statement": ("circle-open", "#7f7f7f", 10), "write": ("square", "#ff7f0e", 11),
             "write refused": ("square-open", "#ff7f0e", 11),
             "recall-right": ("star", "#2ca02c", 16), "recall-hedged": ("diamond", "#ff9900", 14),
             "recall-wrong": ("x", "#d62728", 14),
             "invalidation": ("triangle-down", "#9467bd", 12)}
    fig = go.Figure()
    for key, (symbol, colour, size) in style.items():
        if xs[key]:
            fig.add_trace(go.Scatter(x=xs[key], y=ys[key], mode="markers", name=key, hovertext=hover[key],
                                     hoverinfo="text", marker={"symbol": symbol, "color": colour, "size": size}))
    s = world["script"]
    sub = f"{esc_plot(world.get('cell_label') or world['cell_id'], 120)} · repetition {world.get('repetition')}"
    if not memory:  # the recorded setting, not the condition's name, says what the agents saw
        seen = "the conversation in context" if retrieval.get("conversation") else "own turns only"
        sub += f" · no shared memory ({esc_plot(condition)}: {seen})"
    if _simulated_world(world):
        sub += f" · {SIM_NOTE}"
    fig.update_layout(title={"text": f"world {esc_plot(world['world_id'])} · script {esc_plot(s['script_id'])} "
                                     f"({esc_plot(s['domain'])})<br><sup>{sub}</sup>"},
                      xaxis={"title": "turn", "dtick": 1}, yaxis={"categoryorder": "array",
                                                                   "categoryarray": [esc_plot(r) for r in roles]},
                      height=200 + 40 * len(roles))
    return fig


def retrieval_ranks(world: dict[str, Any]) -> go.Figure:
    """One column per recall: the retrieved entries by rank (1 at the top), marker size by
    score, green when the entry states an accepted answer, red otherwise."""
    from workbench.worlds.recall.scoring import exact_match

    fig = go.Figure()
    by_turn = {(r["turn"], r["agent"]): r for r in world["retrievals"] if r.get("purpose", "recall") == "recall"}
    points: dict[bool, dict[str, list[Any]]] = {ok: {"x": [], "y": [], "size": [], "hover": []} for ok in (True, False)}
    order = []
    for rc in world["recalls"]:
        label = f"t{rc['turn']} {rc['failure_mode'] or ''}"
        order.append(label)
        r = by_turn.get((rc["turn"], rc["agent"]))
        for h in (r or {}).get("hits", []):
            right = exact_match(h["text"], rc["ground_truth"])
            p = points[bool(right)]
            p["x"].append(label)
            p["y"].append(h["rank"])
            p["size"].append(8 + 14 * max(0.0, float(h["score"] or 0)))
            p["hover"].append(plot_lines([f"rank {h['rank']} · score {h['score']:.3f} (sim {h['similarity']:.3f}, "
                                          f"authority {h['authority']}, recency {h['recency']:.3f})",
                                          f"{esc_plot(h['author_role'])}, turn {h['turn']}", esc_plot(h["text"], 160),
                                          "states an accepted answer" if right else "no accepted answer"]))
    for right, name, colour in ((True, "states an accepted answer", "#2ca02c"),
                                (False, "states no accepted answer", "#d62728")):
        p = points[right]
        if p["x"]:
            fig.add_trace(go.Scatter(x=p["x"], y=p["y"], mode="markers", name=name, hovertext=p["hover"],
                                     hoverinfo="text", marker={"color": colour, "size": p["size"],
                                                               "line": {"width": 1, "color": "#333"}}))
    title = f"Retrieved entries per recall, world {esc_plot(world['world_id'])}"
    if not any(points[ok]["x"] for ok in (True, False)):
        why = ("no shared memory (baseline): nothing was retrieved" if not world["retrieval"]["memory"]
               else "no recall retrieved any entry")
        fig.add_annotation(text=esc_plot(why), showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
        fig.update_layout(title={"text": title}, height=220, xaxis={"visible": False}, yaxis={"visible": False},
                          template="plotly_white")
        return fig
    fig.update_layout(title={"text": title + "<br><sup>marker size: retrieval score</sup>"}, template="plotly_white",
                      yaxis={"title": "rank", "autorange": "reversed", "dtick": 1, "rangemode": "tozero"},
                      xaxis={"title": "recall", "categoryorder": "array", "categoryarray": order},
                      legend={"orientation": "v", "x": 1.02, "xanchor": "left", "y": 1.0}, height=400)
    return fig


def context_html(world: dict[str, Any]) -> str:
    """Per recall: the retrieved entries shown (with scores), the agent's own earlier
    turns, the answer, what was expected, the verdicts (exact match with the accepted
    answer it matched and the partial score, the cell's judge, the rule judge), the
    outcome by the current rules (right, hedged or wrong) and, for a failed recall,
    which value it gave. Everything escaped (template ``recall_context.html``)."""
    from workbench.worlds.recall.metrics import recall_scores
    from workbench.worlds.recall.outcomes import given_value, rescore, world_statements

    by_turn = {(r["turn"], r["agent"]): r for r in world["retrievals"] if r.get("purpose", "recall") == "recall"}
    turns = {t["turn"]: t for t in world["turns"]}
    statements = world_statements(world)
    recalls = []
    for rc in world["recalls"]:
        scored = rescore(world, rc, statements)
        ok = "right" if scored.correct else "hedged" if scored.hedged else "wrong"
        scores = recall_scores(rc)
        given = None
        if not scored.correct:
            g = given_value(world, rc, statements, scored)
            said = f", said before by {', '.join(g['said_by'])}" if g["said_by"] else ""
            given = as_text(g["kind"]) + (" (" + g["value"] + ")" if g["value"] else "") + said
        r = by_turn.get((rc["turn"], rc["agent"]))
        hits = None if r is None else [
            [as_text(v) for v in (h["rank"], h["author_role"], h["authority"], f"{h['similarity']:.3f}",
                                  f"{h['recency']:.3f}", f"{h['score']:.3f}", h["turn"], h["text"])] for h in r["hits"]]
        recalls.append({
            "turn": as_text(rc["turn"]), "role": as_text(rc["role"]), "mode": as_text(rc["failure_mode"]),
            "outcome": ok, "colour": {"right": "#2ca02c", "hedged": "#ff9900"}.get(ok, "#d62728"),
            "query": as_text(rc["query"]), "answer": as_text(rc.get("answer")),
            "accepted": " | ".join(rc["ground_truth"]), "exact": as_text(scored.correct_exact),
            "matched": as_text(scores["matched"] or "none"), "partial": as_text(scores["partial_score"]),
            "judge": as_text((rc.get("judge") or {}).get("verdict")) if rc.get("judge") else None,
            "ruling": f"rule judge {'correct' if scores['rule_verdict'] else 'incorrect'} ({scores['rule_reason']})",
            "given": given, "hits": hits,
            "memory_size": as_text(r["memory_size"]) if r is not None else "",
            "namespaces": as_text(r.get("namespaces")) if r is not None and r.get("namespaces") else "",
            "own": [(as_text(n), as_text(turns.get(n, {}).get("reply"))) for n in rc["context"]["own_turns"]]})
    return str(render("recall_context.html", recalls=recalls))


def statements_html(world: dict[str, Any], steps: list[dict[str, Any]]) -> str:
    """Every model call of the world: the prompt and the reply, escaped."""
    rows = [{"seq": as_text(s["seq"]), "turn": as_text(s["turn"]), "agent": as_text(s["agent"]),
             "purpose": as_text(s["purpose"]), "prompt": as_text(s["request"]["prompt"]),
             "reply": as_text(s["reply"].get("text") or f"[failed: {s['reply'].get('error')}]")} for s in steps]
    return str(render("recall_statements.html", steps=rows))


# -- the report -------------------------------------------------------------------------------
LABELS = {"failure_mode": "failure mode", "k/n": "accuracy", "p_mcnemar": "p (exact McNemar)",
          "only_condition": "only condition right", "only_reference": "only reference right",
          "reference k/n": "reference accuracy", "held fixed": "held fixed (same in A and B)"}
TITLES = {"by_condition": "Accuracy by condition", "by_mode_condition": "Accuracy by failure mode and condition",
          "by_domain_mode_condition": "Accuracy by domain, failure mode and condition",
          "differences": "Differences from the reference condition, per failure mode",
          "truth_top_ranked": "Top-ranked entry states an accepted answer",
          "judge_agreement": "Judge against exact match, per cell",
          "judge_disagreements": "Recalls on which a judge and exact match disagree",
          "given_values": "Failed recalls by the value they gave",
          "failed_recalls": "Each failed recall and the value it gave",
          "invalidation": "Invalidation: detector, precision, recall, accuracy",
          "separation": "Stale and current statements of each recalled fact: the embedder's similarity",
          "detector_contrasts": "Each detector against the oracle's ids: the accuracy it gives up",
          "separation_summary": "What the embedder can tell apart",
          "memory": "Memory writes by origin; invalidations by type and action",
          "memory_size": "Memory at its size: recall@k of the index and accuracy"}
CAPTIONS = {
    "by_condition": "One row per model setting and condition: recalls of valid worlds, 95 % Wilson intervals, "
                    "every recall scored again from the record by the current rules (exact match reads numbers as "
                    "numbers: 3.5 % is not 5 %, 15.5 is not 15). hedged: the share of the same recalls whose answer "
                    "stated the accepted value and a stale one (a value said about the fact before, in its place), "
                    "95 % Wilson interval; a hedged recall counts wrong, and is neither right nor stale. mean "
                    "partial_score: the mean over the same recalls of the best share of an accepted answer's words "
                    "and numbers found in the answer (1 when exact match finds it; 0 for an answer that gives "
                    "another number).",
    "by_mode_condition": "One row per model setting, failure mode and condition: recalls of valid worlds, 95 % "
                         "Wilson intervals; hedged and mean partial_score as in the table by condition.",
    "by_domain_mode_condition": "One row per model setting, script domain, failure mode and condition (recalls of "
                                "valid worlds); hedged and mean partial_score as in the table by condition.",
    "differences": "One row per condition against the reference, per model setting and failure mode; Newcombe 95 % "
                   "interval; exact McNemar over recalls paired by script, repetition and turn; no correction.",
    "truth_top_ranked": "Recalls of valid worlds whose first retrieved entry states an accepted answer.",
    "judge_agreement": "One row per cell (model setting, variant, condition) and judge, over answered recalls of "
                       "valid worlds; never pooled across cells. judge: the cell's own judge (scoring: judge; its "
                       "recorded verdicts) or rule (the offline rule judge, re-scored from each answer: dates and "
                       "quantities compared as values). Counts of the 2x2 table against exact match (re-scored by the current "
                       "rules), the share "
                       "agreeing (95 % Wilson interval) and Cohen's kappa (blank when both gave one verdict throughout). paraphrase and "
                       "near miss: of the disagreements, those the rule reads as the accepted value in other words, "
                       "or as the accepted words with another date, number or unit.",
    "judge_disagreements": "Every answered recall of a valid world on which a judge and exact match disagree "
                           "(answers are model text, shown escaped).",
    "given_values": "Failed recalls of valid worlds per cell and failure mode, by the value the answer gave, read "
                    "from the world record: hedged (the accepted value and a stale one both, the answer not setting "
                    "the stale one aside), anchored (said by two or more agents before the recall), stale (said "
                    "before the last statement of the accepted value: superseded), lower-authority (its most "
                    "senior speaker ranks below the accepted value's), other (a value no statement about the fact "
                    "gave), no value (no date or quantity, and no statement repeated). Each failed recall counts "
                    "once, under the first that holds, in that order.",
    "failed_recalls": "Every failed recall of a valid world: the kind of value it gave (as in the table above) and "
                      "the value read from the answer (date:YYYY-MM-DD, num:VALUE|UNIT), the answer (model text, "
                      "escaped) and the accepted answers.",
    "invalidation": "One row per cell with invalidation (valid worlds; never pooled across cells). detector: how a "
                    "conflict was found: oracle = the script's fact ids (no real memory has them; the default), "
                    "lexical = shared topic words and a different value, embedding = the embedder's cosine >= "
                    "conflict_similarity and a different value, judge = the judge model asked about each pair "
                    "(docs/recall.md). pairs examined: (newcomer, live entry) pairs met on writing; conflicts (ids): "
                    "those whose fact ids are the same and whose recorded values differ (the truth). precision = true "
                    "positives / detected, recall = true positives / conflicts (ids), 95 % Wilson intervals. removed, "
                    "refused: what invalidation did. accuracy and anchoring (memory-anchoring recalls): re-scored "
                    "recalls, 95 % Wilson intervals.",
    "detector_contrasts": "One row per detector and model setting: accuracy of the cell under the detector (B) "
                          "against the same cell under the oracle's ids (A), the two differing in conflicts alone; "
                          "recalls paired by script, repetition and turn; Newcombe 95 % interval, exact McNemar; no "
                          "correction.",
    "separation": "One row per script, recalled fact and (stale, current) pair of statements said before the recall "
                  "(current: states an accepted answer; stale: states another value), per embedder: the cosine "
                  "between the two, and the recall query's cosine to each. Where the two are close, similarity "
                  "cannot separate them and retrieval rests on recency and authority.",
    "separation_summary": "Per embedder, over the pairs of the table below: median, lowest and highest cosine "
                          "between a stale statement and the current one, how many reach 0.8 (the default "
                          "conflict_similarity), and how many recall queries sit nearer the stale statement than the "
                          "current one (similarity alone would rank the stale one first).",
    "memory": "Summed over the worlds of each cell (never pooled across cells): memory writes by origin (initial "
              "facts, scripted turns, agents' replies) and writes refused; invalidation events by type (stale, "
              "lower-authority, duplicate) and action (removed, refused, kept). Runs recorded before types existed "
              "count their removals and refusals as untyped.",
    "memory_size": "One row per cell (never pooled across cells): the store (memory: an exact scan; chroma: "
                   "Chroma's HNSW index, its settings shown), the distractor entries written into shared memory "
                   "(cell field distractors), the live entries a recall searched (mean, largest), recall@k: of the "
                   "exact scan's top k entries over every retrieval, those the index's search also returned "
                   "(chroma only; identical top k: retrievals whose top k came back the same, in order), and "
                   "accuracy over every recall (re-scored; 95 % Wilson interval).",
    "headline": "One row per condition against the reference condition, per model setting, over all recalls of "
                "valid worlds; Newcombe 95 % interval; exact McNemar over paired recalls; no correction.",
}


MAX_ROWS = {"judge_disagreements": 200, "failed_recalls": 500, "separation": 300}  # per-recall tables: the rest is in the metrics files


def agreement_view(table: pd.DataFrame) -> pd.DataFrame:
    """The agreement table for a reader: the share agreeing as a rate (``k/n · r %
    [low, high]``, 95 % Wilson) in place of the bare share."""
    from workbench.stats import wilson

    t = table.copy()
    if t.empty:
        return t.drop(columns=["agreement"])
    k = t["both correct"] + t["both wrong"]
    bounds = [wilson(int(a), int(n)) for a, n in zip(k, t["recalls"])]
    pos = list(t.columns).index("agreement")
    t = t.drop(columns=["agreement"])
    for i, (col, values) in enumerate((("agreement:k/n", [f"{a}/{n}" for a, n in zip(k, t["recalls"])]),
                                       ("agreement:low", [b[0] for b in bounds]),
                                       ("agreement:high", [b[1] for b in bounds]))):
        t.insert(pos + i, col, values)
    return t


def memory_view(table: pd.DataFrame, caption: str) -> tuple[pd.DataFrame, str]:
    """The memory table for a reader: invalidation columns that are zero in every row
    left out, and named in the caption (so a reader knows they were counted)."""
    from workbench.worlds.recall.metrics import CONFLICT_TYPES

    counted = [c for c in table.columns if c.split(" ")[0] in (*CONFLICT_TYPES, "untyped")]
    zero = [c for c in counted if not table[c].astype(bool).any()]
    if zero:
        caption += f" None in any cell: {', '.join(zero)}."
    return table.drop(columns=zero), caption


TITLES["poisoning"] = "Adversarial memory: poisoned-value uptake, spoof success and recovery"
CAPTIONS["poisoning"] = (
    "One row per cell (never pooled across cells), over valid worlds; shown when a cell has a poisoner or a spoof "
    "(cell fields poison, spoof). accuracy: the original script's recalls (probes left out), so a cell with a "
    "poisoner and one without answer the same questions; 95 % Wilson. uptake: recalls of a poisoned fact after its "
    "poison whose answer states the poisoned value (in any form the scorer reads as that value), 95 % Wilson; "
    "before / after: the same split at the correction. spoof success: of the recalls exposed to a live spoofed "
    "entry about their fact stating no accepted answer, those where it outranked every entry stating the truth and "
    "the answer gave its value. recovered: corrected facts answered right at a recall after the correction; median "
    "turns from the correction to that recall by Kaplan-Meier (facts never answered right censored at their last "
    "recall; blank when fewer than half recover). The poison and spoof marks are the world's ground truth; the "
    "agents never saw them.")


@dataclass
class RecallReport(RunReport):
    """Everything recall_analysis.ipynb shows, as methods over the records."""

    @cached_property
    def frame(self) -> pd.DataFrame:
        return recall_frame(self.records.worlds)

    @cached_property
    def tables(self) -> dict[str, pd.DataFrame]:
        return metric_tables(self.records.worlds, self.frame)

    @property
    def title(self) -> str:
        study = self.study
        cells = len({w["cell_id"] for w in self.records.worlds})
        return f"Recall study {study}: {len(self.records.worlds)} worlds in {cells} cells, {len(self.frame)} recalls"

    def table(self, name: str) -> Any:
        """A table for a reader; script and model text in it escaped."""
        from IPython.display import HTML

        t = self.tables[name]
        caption = CAPTIONS.get(name, "")
        constant = self.shared_settings
        if name == "differences":
            t = self.contrasts(all_modes=False)
        elif name == "memory":
            t, caption = memory_view(t, caption)
            constant = str(self.tables[name].attrs.get("variant_shared") or "")
        elif name == "memory_size":
            constant = str(t.attrs.get("variant_shared") or "")
        elif name == "judge_agreement":
            t = agreement_view(t)
        elif name in MAX_ROWS and len(t) > MAX_ROWS[name]:
            caption += f" The first {MAX_ROWS[name]} of {len(t)} shown; all are in the metrics table ({name})."
            t = t.head(MAX_ROWS[name])
        return HTML(readable_html(t, caption=caption, title=TITLES.get(name, name), labels=LABELS,
                                  keep=("condition",), constant=constant))

    @property
    def shared_settings(self) -> str:
        """Settings every cell shares (left out of the ``variant`` column, said once)."""
        return str(self.frame.attrs.get("variant_shared") or "")

    def contrasts(self, all_modes: bool = True) -> pd.DataFrame:
        """The condition differences in the shape of a matched-contrast table (A = the
        reference condition, B = the other; one model setting held fixed): what the
        headline table and forest plot read. ``all_modes``: only the rows over
        every failure mode together (each world's recalls of all modes)."""
        from workbench.metrics.contrasts import DIFF

        d = self.differences()
        if all_modes:
            d = d[d["failure_mode"] == "all"]
        rows = []
        for _, r in d.iterrows():
            fixed = f"model={r['model']}" + (f"; {r['variant']}" if r["variant"] else "")
            rows.append({"contrast": f"{r['condition']} vs {r['reference']}", "factor": "condition",
                         "failure mode": r["failure_mode"], "held fixed": fixed, "A": r["reference"],
                         "B": r["condition"], "A k/n": r["reference k/n"], "B k/n": r["k/n"], DIFF: r["diff"],
                         "low": r["low"], "high": r["high"], "pairs": r["pairs"], "p (exact McNemar)": r["p_mcnemar"],
                         "comparison": f"condition: {r['condition']} vs {r['reference']} · {fixed}"
                                       + ("" if all_modes else f" · {r['failure_mode']}")})
        out = pd.DataFrame(rows)
        if all_modes and "failure mode" in out:
            out = out.drop(columns="failure mode")
        out.attrs.update(metric="recall accuracy",
                         empty_reason="no model setting ran the reference condition beside another")
        return out

    def headline(self, contrasts: pd.DataFrame | None = None) -> None:
        """Each condition against the reference: what was found in words (which
        condition recalls better, by how much, p, over how many paired recalls; the
        comparisons that cannot be estimated, with their reasons), the forest plot and
        the table. ``contrasts``: a table in the shape of :meth:`contrasts` (a notebook's)."""
        from workbench.views.forest import forest_figure

        t = self.contrasts() if contrasts is None else contrasts
        names = ", ".join(dict.fromkeys(t["contrast"])) if len(t) else "no condition beside its reference"
        figure = forest_figure(t, metric_label="recall accuracy", colour=self.palette) if len(t) else None
        words = self.contrast_words_html(t, metric_label="recall accuracy", unit="recalls")
        self.show_headline(
            f"recall accuracy, {names}",
            readable_html(t, caption=CAPTIONS["headline"], title="Each condition against the reference",
                          labels=LABELS, keep=("A", "B"), constant=self.shared_settings),
            figure, "Each point: one condition (B) against the reference condition (A) for one model setting, "
                    "over all recalls of valid worlds (every failure mode together); difference in accuracy with "
                    "its 95 % Newcombe interval; no multiple-comparison correction.", words)

    def sections(self) -> dict[str, Section]:
        from IPython.display import display

        def accuracy() -> None:
            show_figure(self.accuracy_figure(), "Accuracy per condition, one bar per failure mode, one panel per "
                        "model setting (recalls of valid worlds, 95 % Wilson intervals).")
            display(self.table("by_mode_condition"))
            display(self.table("by_condition"))

        domains = self.frame["domain"].nunique() if len(self.frame) else 0
        memory = any((w.get("retrieval") or {}).get("memory") or w.get("memory_log") for w in self.records.worlds)
        return {
            "accuracy": Section(
                "Accuracy by failure mode and condition",
                "Recalls of valid worlds; error bars are 95 % Wilson intervals. No multiple-comparison correction.",
                accuracy),
            "differences": Section(
                "Differences per failure mode",
                "Each condition minus the reference, per model setting and failure mode: Newcombe 95 % interval, "
                "and an exact McNemar test on recalls paired by script, repetition and turn.",
                lambda: display(self.table("differences")), applies=bool(len(self.differences()))),
            "domains": Section("Accuracy by domain × failure mode × condition", "",
                               lambda: display(self.table("by_domain_mode_condition")), applies=domains > 1),
            "ranking": Section("Was the right entry ranked first?",
                               "Share of recalls whose top retrieved entry states an accepted answer.",
                               lambda: display(self.table("truth_top_ranked")), applies=memory),
            "invalidation": Section(
                "Invalidation without the script's ids",
                "How each cell's conflict detector did against the script's fact ids, and the accuracy it bought.",
                self._show_invalidation, applies=bool(len(self.tables["invalidation"]))),
            "separation": Section(
                "What the embedder can tell apart",
                "The cosine each embedder gives between the stale and the current statements of every recalled "
                "fact, per script.", self._show_separation, applies=bool(len(self.tables["separation"]))),
            "judges": Section(
                "Judges against exact match",
                "Each judge's verdicts against exact match (whole words, numbers compared as numbers) on the same "
                "answers, per cell. "
                "The rule judge re-scores every answer offline; a cell scored by a judge also shows its own.",
                self._show_judges, applies=bool(len(self.tables["judge_agreement"]))),
            "values": Section(
                "Which value the failed recalls gave",
                "For each failed recall, where its value came from in the world: hedged (the accepted value and a "
                "stale one both), repeated by several agents, superseded, said by a less senior role, or none of "
                "these.",
                self._show_values, applies=bool(len(self.tables["given_values"]))),
            "memory": Section(
                "Memory writes and invalidations",
                "What each cell wrote to shared memory, by origin, and what invalidation removed, refused or kept, "
                "by type.", lambda: display(self.table("memory")), applies=memory and bool(len(self.tables["memory"]))),
            "memory_size": Section(
                "Memory at its size",
                "Distractor entries and the approximate index: how large the memory a recall searched was, how "
                "much of the exact top k the index returned, and the accuracy at that size.",
                lambda: display(self.table("memory_size")),
                applies=any(w.get("distractors") or w.get("index_recall") for w in self.records.worlds)),
            "examples": Section(
                "Example worlds",
                "One world per cell: its turn timeline and the retrieved entries per recall (script and model "
                "text escaped).", self._show_examples, applies=bool(self.example_worlds(1))),
            "poisoning": Section(
                "Adversarial memory",
                "A poisoner's false values, spoofed authority and a correction (cell fields poison and spoof): how "
                "often answers carried the poisoned value, how often a spoofed entry won, and how long the lie "
                "lasted after the correction.", self._show_poisoning,
                applies=any(w.get("adversary") for w in self.records.worlds)),
            "comparison": Section("Comparison with a second run set", "", lambda: display(self.comparison()),
                                  applies=self.other is not None),
        }

    def _show_invalidation(self) -> None:
        from IPython.display import HTML, display

        from workbench.worlds.recall.invalidation import detector_contrasts
        from workbench.worlds.recall.metrics import units

        display(self.table("invalidation"))
        t = detector_contrasts(self.records, units(self.records))
        if len(t):
            display(HTML(readable_html(t, caption=CAPTIONS["detector_contrasts"], title=TITLES["detector_contrasts"],
                                       labels=LABELS, keep=("A", "B"))))

    def _show_separation(self) -> None:
        from IPython.display import HTML, display

        from workbench.worlds.recall.invalidation import separation_summary

        t = separation_summary(self.tables["separation"])
        names = ", ".join(str(x) for x in t["embedder"])
        display(HTML(readable_html(t, caption=CAPTIONS["separation_summary"],
                                   title=f"{TITLES['separation_summary']} (embedder: {names})", labels=LABELS)))
        display(self.table("separation"))

    @cached_property
    def poisoning(self) -> pd.DataFrame:
        """The poisoning table (:func:`workbench.worlds.recall.poisoning.poisoning_table`)."""
        from workbench.worlds.recall.poisoning import poisoning_table

        return poisoning_table(self.records.worlds)

    def _show_poisoning(self) -> None:
        from IPython.display import HTML, display

        display(HTML(readable_html(self.poisoning, caption=CAPTIONS["poisoning"], title=TITLES["poisoning"],
                                   labels=LABELS, keep=("condition", "poisoner", "spoof"),
                                   constant=str(self.poisoning.attrs.get("variant_shared") or ""))))

    def _show_values(self) -> None:
        from IPython.display import display

        display(self.table("given_values"))
        display(self.table("failed_recalls"))

    def _show_judges(self) -> None:
        from IPython.display import display

        display(self.table("judge_agreement"))
        if len(self.tables["judge_disagreements"]):
            display(self.table("judge_disagreements"))

    def _show_examples(self, limit: int = 4) -> None:
        from IPython.display import HTML, display

        worlds = self.example_worlds(limit)
        for w in worlds:
            label = w.get("cell_label") or w["cell_id"]
            show_figure(turn_timeline(w), f"Turns of world {w['world_id']} ({label}): statements, memory writes "
                                          "and recalls (green right, orange hedged, red wrong).")
            show_figure(retrieval_ranks(w), f"The entries retrieved for each recall of world {w['world_id']}, by "
                                            "rank.")
        if worlds:
            display(HTML(context_html(worlds[0])))

    def accuracy_figure(self) -> go.Figure:
        return accuracy_figure(self.frame)

    def example_worlds(self, limit: int = 4) -> list[dict[str, Any]]:
        """One world per cell (its first valid one), at most ``limit``."""
        seen: dict[str, dict[str, Any]] = {}
        for w in sorted(self.records.worlds, key=lambda w: (w["cell_id"], w.get("world_index") or 0)):
            if w["cell_id"] not in seen and w.get("valid"):
                seen[w["cell_id"]] = w
        return list(seen.values())[:limit]

    def example_figures(self, limit: int = 4) -> list[Any]:
        out: list[Any] = []
        for w in self.example_worlds(limit):
            out += [turn_timeline(w), retrieval_ranks(w)]
        return out

    def comparison(self) -> Any:
        """Accuracy per model × failure mode × condition in both run sets, with the
        Newcombe difference (this run set minus the other)."""
        from IPython.display import HTML

        from workbench.stats import newcombe

        if self.other is None:
            return HTML(str(render("note.html", text="No second run set given (compare_dir).")))
        keys = ["model", "variant", "failure_mode", "condition"]
        a = accuracy_table(self.frame, keys)
        b = accuracy_table(recall_frame(self.other.worlds), keys)
        m = a.merge(b, on=keys, suffixes=("", " (other)"))
        rows = []
        for _, r in m.iterrows():
            diff, low, high = newcombe(int(r["k"]), int(r["n"]), int(r["k (other)"]), int(r["n (other)"]))
            rows.append({**{k: r[k] for k in keys}, "k/n": r["k/n"], "other k/n": r["k/n (other)"], "diff": diff,
                         "low": low, "high": high})
        t = pd.DataFrame(rows)
        if t.empty:
            return HTML(str(render("note.html", text="The two run sets share no model × condition × failure mode.")))
        from workbench.views.styled import NO_MATH_CLASS

        return (t.style.format({c: "{:.1%}" for c in ("diff", "low", "high")}, na_rep="—", escape="html")
                .format_index(escape="html", axis=1).hide(axis="index").set_table_attributes(NO_MATH_CLASS))

    def differences(self, reference: str | None = None) -> pd.DataFrame:
        return condition_differences(self.frame, reference)


def memory_at_turn(world: dict[str, Any], turn: int) -> list[dict[str, Any]]:
    """The shared memory's live entries after ``turn`` (0: the initial facts), rebuilt
    from the world's memory log: entries added and not refused, minus those removed."""
    live: dict[Any, dict[str, Any]] = {}
    for rec in world.get("memory_log") or []:
        if rec.get("turn", 0) > turn:
            break
        for gone in rec.get("removed") or []:
            live.pop(gone.get("entry_id"), None)
        entry = rec.get("entry")
        if entry is not None and not rec.get("refused"):
            live[entry.get("entry_id")] = entry
    return list(live.values())
