"""Tables in the shapes of the source paper, as pandas DataFrames, from the frames
of :mod:`workbench.worlds.stigmergy.frames`.

Every table is one row per cell (``cell_id``), with the cell's label and every
factor that varies across the run set as columns; factors that never vary are in
``attrs["constant"]`` and shown once above the table. Nothing here groups cells
by a subset of their factors: a table that pools cells says so in its title
(:func:`marginal_table`). Rates are k/n over valid worlds with 95% Wilson
intervals; the same over all worlds sits beside them, because an exclusion rule
can discard a whole cell. No multiple-comparison correction.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pandas as pd

from workbench.metrics.design import Design
from workbench.metrics.rates import rate_row, rate_table


def marginal_table(frame: pd.DataFrame, metric: str, by: Sequence[str], design: Design) -> pd.DataFrame:
    """A marginal on purpose: ``metric`` pooled over every cell that shares the
    levels of ``by``. Its title names the factors it pools over."""
    out = rate_table(frame, metric, by=by)
    pooled = [f for f in design.varying if f not in by]
    out.attrs = {"title": f"MARGINAL over {', '.join(pooled) or 'nothing'}: {metric} by {', '.join(by)} "
                          "(pools cells that differ in those factors)", "constant": design.constant}
    return out


def _wide(wf: pd.DataFrame, metrics: Sequence[str], design: Design) -> pd.DataFrame:
    """Per cell, for each metric: k/n over valid worlds, its interval and k/n over all worlds."""
    parts = []
    for metric in metrics:
        t = rate_table(wf, metric, cells=design.cells).set_index("cell_id")
        parts.append(t[["k/n", "low", "high", "all"]].add_prefix(f"{metric}:"))
    if not parts:
        return pd.DataFrame({"cell_id": design.cells})
    return pd.concat(parts, axis=1).rename_axis("cell_id").reset_index()


def coordination_table(wf: pd.DataFrame, design: Design) -> pd.DataFrame:
    """Coordinated worlds (cross-agent access), the strict variant, informative
    reads and joint success, per cell."""
    t = _wide(wf, ("cross_agent_access", "strict_cross_agent_access", "informative_read", "joint_success"), design)
    t.insert(1, "worlds", [int((wf["cell_id"] == c).sum()) if len(wf) else 0 for c in t["cell_id"]])
    t.insert(2, "valid", [int(wf[(wf["cell_id"] == c)]["valid"].sum()) if len(wf) else 0 for c in t["cell_id"]])
    return design.annotate(t, "Cross-agent access per cell: k/n over valid worlds (and over all worlds)")


def joint_by_cross_read(wf: pd.DataFrame, design: Design) -> pd.DataFrame:
    """Joint success split by whether any cross-agent read happened (the paper's
    Table 3: without cross-agent reads, joint success should be zero)."""
    t = rate_table(wf, "joint_success", by=["cell_id", "cross_agent_access"])
    t = t.rename(columns={"cross_agent_access": "had_cross_agent_read"})
    return design.annotate(t, "Joint success per cell, with and without a cross-agent read (valid worlds)")


def writes_table(wf: pd.DataFrame, design: Design) -> pd.DataFrame:
    """Worlds in which a member of the interdependent pair wrote (Table 5)."""
    t = rate_table(wf, "pair_write", cells=design.cells)
    return design.annotate(t, "Worlds in which a pair member wrote, per cell (valid worlds)")


E1_FACTORS = ("condition", "clauses")
E1_ARMS = [("store", "both"), ("store", "persist-only"), ("private", "both"), ("private", "persist-only")]


def e1_table(wf: pd.DataFrame, af: pd.DataFrame, design: Design) -> pd.DataFrame:
    """The E1 design side by side: each row holds the cells that are identical in
    every factor but condition and clauses (shared/private × both/persist-only),
    plus the prepopulated arm (seeded reads by pair agents, joint success). Empty
    when no such group has two arms."""
    others = [f for f in design.factors if f not in E1_FACTORS]
    groups: dict[tuple[str, ...], dict[tuple[str, str], str]] = {}
    for cid in design.cells:
        key = tuple(str(design.frame.at[cid, f]) for f in others)
        arm = (design.level(cid, "condition"), design.level(cid, "clauses"))
        groups.setdefault(key, {})[arm] = cid
    rows = []
    for key, arms in groups.items():
        e1 = {a: c for a, c in arms.items() if a in E1_ARMS or a == ("prepopulated", "both")}
        if len(e1) < 2 or not any(a in E1_ARMS[1:] for a in e1):
            continue
        row: dict[str, object] = {f: v for f, v in zip(others, key) if f in design.varying}
        row["cells"] = ", ".join(e1.values())
        for (cond, clauses), cid in sorted(e1.items(), key=lambda kv: [*E1_ARMS, ("prepopulated", "both")].index(kv[0])):
            sub = wf[(wf["cell_id"] == cid) & wf["valid"]]
            if cond == "prepopulated":
                pa = af[(af["cell_id"] == cid) & af["pair_member"] & af["world_valid"]]
                row["prepopulated seeded read (agents)"] = f"{int(pa['seeded_read'].sum())}/{len(pa)}"
                row["prepopulated joint"] = f"{int(sub['joint_success'].sum())}/{len(sub)}"
                continue
            tag = f"{'shared' if cond == 'store' else 'private'}/{clauses}"
            row[f"{tag} access"] = f"{int(sub['cross_agent_access'].sum())}/{len(sub)}"
            row[f"{tag} joint"] = f"{int(sub['joint_success'].sum())}/{len(sub)}"
        rows.append(row)
    out = pd.DataFrame(rows)
    out.attrs = {"title": "E1: cells identical except in condition and clauses, side by side (valid worlds)",
                 "constant": design.constant,
                 "empty_reason": "no cells differ only in condition × clauses (the E1 arms)"}
    return out


def looks_table(af: pd.DataFrame, design: Design) -> pd.DataFrame:
    """First look (a list at step 0) and second look (a look after the partner's
    first write, other than the first look) among pair agents of valid worlds (Table 7)."""
    pair = af[af["pair_member"] & af["world_valid"]].copy() if len(af) else af.copy()
    pair["valid"] = True
    if len(pair):
        pair["second_look"] = pair["second_look"].fillna(False).astype(bool)
    parts = []
    for metric in ("first_look", "second_look"):
        t = rate_table(pair, metric, cells=design.cells).set_index("cell_id")
        parts.append(t[["k/n", "low", "high"]].add_prefix(f"{metric}:"))
    t = pd.concat(parts, axis=1).rename_axis("cell_id").reset_index()
    return design.annotate(t, "Looks per cell: pair agents of valid worlds")


def no_read_table(af: pd.DataFrame, design: Design) -> pd.DataFrame:
    """Why pair agents made no cross-agent read, per cell: each class as k/n of the
    pair agents of valid worlds without one, with its Wilson interval. The classes
    partition those agents (:data:`NO_READ_CLASSES`), so a cell's k sum to its n."""
    from workbench.worlds.stigmergy.metrics import NO_READ_CLASSES

    if len(af) and "no_read_class" in af:
        rows = af[af["pair_member"] & af["world_valid"] & af["no_read_class"].notna()].copy()
    else:
        rows = pd.DataFrame(columns=["cell_id", "no_read_class"])
    rows["valid"] = True
    parts = []
    for cls in NO_READ_CLASSES:
        flagged = rows.assign(flag=(rows["no_read_class"] == cls)) if len(rows) else rows.assign(flag=False)
        t = rate_table(flagged, "flag", cells=design.cells).set_index("cell_id")
        parts.append(t[["k/n", "low", "high"]].add_prefix(f"{cls}:"))
    t = pd.concat(parts, axis=1).rename_axis("cell_id").reset_index()
    t.insert(1, "pair agents without a cross-agent read",
             [int((rows["cell_id"] == c).sum()) if len(rows) else 0 for c in t["cell_id"]])
    return design.annotate(t, "Why no cross-agent read, per cell: pair agents of valid worlds without one, by "
                              "the first reason that applies")


def vocabulary_table(wf: pd.DataFrame, design: Design) -> pd.DataFrame:
    """Per cell, the share of cross-agent reads that used a key the pair task names, of
    all cross-agent reads in valid worlds (unit: read). Under a shared vocabulary such
    reads can be collisions as much as coordination (the paper: 396 of 615)."""
    rows = wf if len(wf) else pd.DataFrame(columns=["cell_id", "valid", "cross_reads", "cross_reads_task_named"])
    t = rate_table(rows, "cross_reads_task_named", count="cross_reads", cells=design.cells)
    t = t.drop(columns=["metric"]).rename(columns={"k": "task-named reads", "n": "cross-agent reads"})
    return design.annotate(t, "Cross-agent reads of task-named keys per cell, of all cross-agent reads (valid "
                              "worlds; unit: read)")


def writing_for_readers_table(af: pd.DataFrame, design: Design) -> pd.DataFrame:
    """What tells use from communication (reader_signal): among pair agents of valid
    worlds, who wrote, who wrote something other than a number (a note), how
    early the first write came, and whether pair agents then read across agents."""
    pair = af[af["pair_member"] & af["world_valid"]].copy() if len(af) else af.copy()
    pair["valid"] = True
    if len(pair):
        pair["wrote"] = pair["writes"] > 0
        pair["wrote_note"] = pair["note_writes"].fillna(0) > 0
    else:
        pair = pair.assign(wrote=False, wrote_note=False)
    parts = []
    for metric in ("wrote", "wrote_note", "cross_agent_read"):
        t = rate_table(pair, metric, cells=design.cells).set_index("cell_id")
        parts.append(t[["k/n", "low", "high"]].add_prefix(f"{metric}:"))
    t = pd.concat(parts, axis=1)
    steps = pair.groupby("cell_id")["first_write_step"].median() if len(pair) else None
    t["median first write step"] = steps if steps is not None else float("nan")
    t = t.rename_axis("cell_id").reset_index()
    return design.annotate(t, "Writing for readers per cell: pair agents of valid worlds that wrote, that wrote "
                              "a note (a value that is not a number), their first write's step, and their "
                              "cross-agent reads")


def pair_frame(af: pd.DataFrame) -> pd.DataFrame:
    """One row per interdependent pair of every world, from the agent frame: whether
    both halves were right, whether either read its partner's value (informative) or
    anything another agent wrote. A world of several pairs is scored pair by pair."""
    cols = ["cell_id", "world_id", "pair", "valid", "joint_success", "informative_read", "cross_agent_read",
            "pair_write"]
    if not len(af) or "pair" not in af:
        return pd.DataFrame(columns=cols)
    halves = af[af["pair"].notna()].assign(wrote=lambda f: f["writes"] > 0)
    g = halves.groupby(["cell_id", "world_id", "pair"], sort=False)
    out = g.agg(valid=("world_valid", "first"), joint_success=("correct", "all"),
                informative_read=("informative_read", "any"), cross_agent_read=("cross_agent_read", "any"),
                pair_write=("wrote", "any")).reset_index()
    out["pair"] = out["pair"].astype(int)
    return out[cols]


def pair_table(af: pd.DataFrame, design: Design) -> pd.DataFrame:
    """Per cell and pair: each pair scored on its own (issue 22, world size). Pair k
    of a cell is one per world, so its k/n are over worlds, as in the coordination
    table; nothing pools pairs of different worlds or cells. For a one-pair cell, the
    joint success and informative reads repeat the coordination table's; its
    cross-agent read counts the pair's halves only, where cross-agent access counts
    every agent, solos included."""
    pf = pair_frame(af)
    parts = []
    for metric in ("joint_success", "informative_read", "cross_agent_read", "pair_write"):
        t = rate_table(pf, metric, by=["cell_id", "pair"]).set_index(["cell_id", "pair"])
        parts.append(t[["k/n", "low", "high"]].add_prefix(f"{metric}:"))
    if not len(pf):
        t = pd.DataFrame(columns=["cell_id", "pair"])
    else:
        t = pd.concat(parts, axis=1).reset_index().sort_values("pair", kind="stable")  # annotate orders cells
    t.attrs["empty_reason"] = "no pairs"
    return design.annotate(t.reset_index(drop=True), "Each pair on its own, per cell: k/n over valid worlds")


REPLY_SHAPES = {"fenced": "fenced_replies", "prose-wrapped": "prose_wrapped_replies",
                "several objects": "multi_object_replies"}


def _replies(af: pd.DataFrame) -> pd.DataFrame:
    rows = af.copy() if len(af) else pd.DataFrame(columns=["cell_id", "steps", *REPLY_SHAPES.values()])
    rows["valid"] = True  # every recorded reply counts, valid world or not: the shape is the request path's
    return rows


def reply_shape_table(af: pd.DataFrame, design: Design) -> pd.DataFrame:
    """Per cell, the share of replies of each shape (fenced, prose-wrapped, several
    objects) with Wilson intervals, over every recorded reply of every world. The unit
    is the reply: replies of one agent are not independent, so the intervals are
    narrower than a per-world analysis would give (the paper's post-hoc diagnostic
    counted replies too)."""
    rows = _replies(af)
    parts = []
    for shape, col in REPLY_SHAPES.items():
        t = rate_table(rows, col, count="steps", cells=design.cells).set_index("cell_id")
        parts.append(t[["k/n", "low", "high"]].add_prefix(f"{shape}:"))
    t = pd.concat(parts, axis=1).rename_axis("cell_id").reset_index()
    return design.annotate(t, "Reply shapes per cell: share of all recorded replies (unit: reply)")


def reply_shape_contrasts(af: pd.DataFrame, design: Design, factor: str = "request_path",
                          declared: Sequence[Any] = ()) -> pd.DataFrame:
    """For each pair of cells that differ in ``factor`` alone (by default the request path:
    the same model, settings and seeds through two transports), each shape's share of
    replies in B minus A. Replies of one agent are not independent, so the interval is
    clustered by agent (:mod:`workbench.metrics.clustered`), not Newcombe's over replies.
    ``declared``: the study's contrasts (ContrastSpec); one on ``factor`` sets which level is A."""
    from workbench.metrics.clustered import clustered_difference
    from workbench.metrics.contrasts import ContrastSpec, matched_pairs

    rows = _replies(af)
    by_cell = {cid: g for cid, g in rows.groupby("cell_id")} if len(rows) else {}
    out = []
    specs = [c for c in declared if c.factor == factor] or [ContrastSpec(factor, factor, declared=False)]
    pairs = list(dict.fromkeys(p for spec in specs for p in matched_pairs(design, spec)))
    empty = pd.DataFrame(columns=["steps", *REPLY_SHAPES.values()])
    for a, b in pairs:
        ga, gb = by_cell.get(a, empty), by_cell.get(b, empty)
        for shape, col in REPLY_SHAPES.items():
            ka, na = ga[col].fillna(0).astype(float).tolist(), ga["steps"].fillna(0).astype(float).tolist()
            kb, nb = gb[col].fillna(0).astype(float).tolist(), gb["steps"].fillna(0).astype(float).tolist()
            diff, low, high = clustered_difference(ka, na, kb, nb)
            out.append({"factor": factor, "A": design.level(a, factor), "B": design.level(b, factor),
                        "A cell": a, "B cell": b, "shape": shape, "A k/n": f"{int(sum(ka))}/{int(sum(na))}",
                        "B k/n": f"{int(sum(kb))}/{int(sum(nb))}", "A agents": len(ka), "B agents": len(kb),
                        "B - A": diff, "low": low, "high": high})
    t = pd.DataFrame(out, columns=["factor", "A", "B", "A cell", "B cell", "shape", "A k/n", "B k/n", "A agents",
                                   "B agents", "B - A", "low", "high"])
    t.attrs = {"title": f"Reply shapes between cells that differ in {factor} alone (B - A over replies; 95 % "
                        "interval clustered by agent, since one agent's replies are not independent)",
               "constant": design.constant,
               "empty_reason": f"no two cells differ in {factor} alone"}
    return t


def exposure_then_read(wf: pd.DataFrame, af: pd.DataFrame, design: Design) -> pd.DataFrame:
    """Per cell, two units side by side: valid exposed worlds and those in which an
    exposed agent then made a cross-agent read (per world, the paper's "exposed
    worlds with a subsequent cross-agent read"), and exposed agents and those that
    then read (per agent), with the lag in steps (median, maximum)."""
    exposed = wf[wf["exposure"].astype(bool)] if len(wf) else wf
    worlds = rate_table(exposed, "exposed_then_read_world", cells=design.cells).set_index("cell_id")
    agents_f = af[af["world_valid"] & af["exposed"].astype(bool)].copy() if len(af) else af.copy()
    agents_f["valid"] = True
    agents = rate_table(agents_f, "read_after_exposure", cells=design.cells).set_index("cell_id")
    table = worlds[["k", "n", "k/n", "low", "high"]].add_prefix("worlds:")
    table = table.join(agents[["k", "n", "k/n", "low", "high"]].add_prefix("agents:"))
    read = af[af["world_valid"] & af["read_after_exposure"].astype(bool)] if len(af) else af
    lags = read.groupby("cell_id")["steps_exposure_to_read"] if len(read) else None
    table["median_steps_to_read"] = lags.median() if lags is not None else float("nan")
    table["max_steps_to_read"] = lags.max() if lags is not None else float("nan")
    t = table.rename_axis("cell_id").reset_index()
    return design.annotate(t, "Exposure, then a cross-agent read, per cell: exposed worlds that then saw a read "
                              "(per world) and exposed agents that then read (per agent); valid worlds")


def exposure_lags(af: pd.DataFrame) -> pd.DataFrame:
    """One row per exposed agent that later read across agents: its lag in steps
    (the distribution behind the exposure-then-read plot)."""
    cols = ["cell_id", "cell_label", "world_id", "agent", "role", "steps_exposure_to_read"]
    if not len(af):
        return pd.DataFrame(columns=cols)
    rows = af[af["world_valid"] & af["read_after_exposure"].astype(bool)]
    return rows[cols]


TEXT_SIGNAL_COLUMNS = ["cell_id", "readers", "mention", "mention_before_exposure", "monitored_readers",
                       "monitor_flag_on_read", "monitor k/n", "monitor low", "monitor high"]


def text_signal_table(af: pd.DataFrame, design: Design) -> pd.DataFrame:
    """Among pair agents that made a cross-agent read: how many mention another
    party in their text, how many did so in a reply written before they were
    shown any other agent's entry, and (where the study ran a monitor) how many
    of those whose read steps were labelled got the monitor's flag label on one:
    the paper's post-hoc intent check (its "11/381 on read steps")."""
    rows = []
    pair = af[af["pair_member"] & af["world_valid"] & af["cross_agent_read"]] if len(af) else af
    for cid in design.cells:
        g = pair[pair["cell_id"] == cid] if len(pair) else pair
        labelled = g["monitor_flag_on_read"].dropna() if len(g) and "monitor_flag_on_read" in g else pd.Series([], dtype=object)
        k, n = int(labelled.astype(bool).sum()), len(labelled)
        rate = rate_row(k, n)
        rows.append({"cell_id": cid, "readers": len(g), "mention": int(g["mentions_other"].sum()) if len(g) else 0,
                     "mention_before_exposure": int(g["mention_before_exposure"].sum()) if len(g) else 0,
                     "monitored_readers": n, "monitor_flag_on_read": k,
                     "monitor k/n": rate["k/n"] if n else "no monitor", "monitor low": rate["low"],
                     "monitor high": rate["high"]})
    return design.annotate(pd.DataFrame(rows, columns=TEXT_SIGNAL_COLUMNS),
                           "Post-hoc text signal per cell: pair agents with a cross-agent read (valid worlds); "
                           "the monitor columns count those whose cross-agent read steps the monitor labelled")


def monitor_label_table(steps: pd.DataFrame, design: Design) -> pd.DataFrame:
    """Per cell and label: how many labelled steps, and how many of them were cross-agent
    read steps (the steps the paper's check looks at). ``steps`` is
    :func:`workbench.worlds.stigmergy.frames.monitor_frame`. Empty when no world was monitored."""
    cols = ["cell_id", "label", "steps", "read_steps", "cross_agent_read_steps"]
    if not len(steps):
        out = pd.DataFrame(columns=cols)
        out.attrs = {"title": "Monitor labels per cell", "constant": design.constant,
                     "empty_reason": "the study ran no monitor (set monitor: in the params file)"}
        return out
    g = steps.groupby(["cell_id", "label"], sort=False, dropna=False)
    out = g.agg(steps=("label", "size"), read_steps=("read", "sum"), cross_agent_read_steps=("cross_agent_read", "sum"))
    out = out.reset_index()
    order = {c: i for i, c in enumerate(design.cells)}
    out = out.sort_values(["cell_id", "label"], key=lambda col: col.map(order) if col.name == "cell_id" else col.astype(str))
    return design.annotate(out[cols].reset_index(drop=True),
                           "Monitor labels per cell: labelled steps of valid worlds, and of them read and cross-agent "
                           "read steps (labels never reach an agent or another metric)")


def attrition_table(worlds: pd.DataFrame, replies: pd.DataFrame, design: Design) -> pd.DataFrame:
    """Per cell: worlds, failed calls by cause, valid worlds under each parser rule
    and each validity rule (all recomputed from the raw replies), and invalid
    replies by shape under each parser rule (a tool reply's shapes too: no call, several
    calls, unknown tool, bad arguments). ``worlds`` is
    :func:`workbench.worlds.stigmergy.frames.validity_frame`, ``replies`` is
    :func:`workbench.worlds.stigmergy.frames.reply_frame`."""
    from workbench.worlds.stigmergy.frames import INVALID_SHAPES, VALIDITY_GRID
    from workbench.worlds.stigmergy.parsing import TOOL_INVALID_SHAPES

    shapes_named = tuple(dict.fromkeys((*INVALID_SHAPES, *TOOL_INVALID_SHAPES.values())))

    rows = []
    for cid in design.cells:
        g = worlds[worlds["cell_id"] == cid] if len(worlds) else worlds
        r = replies[replies["cell_id"] == cid] if len(replies) else replies
        own = g["own_parser"].iloc[0] if len(g) else None
        causes = g["failure_cause"].dropna().value_counts() if len(g) else pd.Series(dtype=int)
        row: dict[str, Any] = {"cell_id": cid, "worlds": len(g), "failed": int(g["failed"].sum()) if len(g) else 0,
                                  "failure causes": "; ".join(f"{c}: {n}" for c, n in causes.items()) or "—"}
        for parser, validity in VALIDITY_GRID:
            row[f"valid ({parser}, {validity})"] = int(g[f"valid:{parser}:{validity}"].sum()) if len(g) else 0
        own_validity = g["own_validity"].iloc[0] if len(g) else None
        row["valid strict"] = int(row.get(f"valid (strict, {own_validity})", 0))  # under the cell's validity rule
        row["valid lenient"] = int(row.get(f"valid (lenient, {own_validity})", 0))
        row["lost under own rules"] = (len(g) - int(row[f"valid ({own}, {own_validity})"])) if len(g) else 0
        for parser in ("strict", "lenient"):
            shapes = r[f"invalid:{parser}"].dropna().value_counts() if len(r) else pd.Series(dtype=int)
            row[f"invalid replies ({parser})"] = int(shapes.sum())
            for shape in shapes_named:
                row[f"{parser}: {shape}"] = int(shapes.get(shape, 0))
        rows.append(row)
    out = design.annotate(pd.DataFrame(rows), "Attrition per cell: failed calls by cause, worlds valid under each "
                                              "(parser, validity) rule, invalid replies by shape under each parser rule")
    # shown only where some cell has one (a CSV keeps them all)
    out.attrs["sparse"] = [f"{p}: {shape}" for p in ("strict", "lenient") for shape in shapes_named]
    return out


def rescore_table(frames: dict[str, pd.DataFrame], design: Design,
                  metrics: Iterable[str] = ("cross_agent_access", "joint_success")) -> pd.DataFrame:
    """The same cells under several (parser, answer) rule pairs, side by side:
    ``frames`` maps a label such as "recorded" or "strict/exact" to a world frame."""
    parts = []
    for label, wf in frames.items():
        cols = {}
        for metric in metrics:
            cols[f"{label}: {metric}"] = rate_table(wf, metric, cells=design.cells).set_index("cell_id")["k/n"]
        valid = rate_table(wf, "valid", valid_only=False, cells=design.cells).set_index("cell_id")["k/n"]
        cols[f"{label}: valid"] = valid
        parts.append(pd.DataFrame(cols))
    t = pd.concat(parts, axis=1).rename_axis("cell_id").reset_index() if parts else pd.DataFrame({"cell_id": []})
    return design.annotate(t, "Re-scoring: each cell under other parser and answer rules (k/n over the worlds "
                              "valid under that rule)")
