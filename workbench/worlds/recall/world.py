"""One recall world: a scripted scenario played turn by turn by role-played
agents that share one vector memory, with recall probes scored on the way.

A world is one (script, condition, model setting, repetition). World index
``i`` of a cell runs script ``i mod n_scripts`` (scripts sorted by id, after
the cell's ``script_ids``/``domains`` filters) as repetition
``i // n_scripts``; so ``worlds_per_cell = n_scripts × repetitions``. World
seeds depend on the world index only (see :mod:`workbench.study`), so world
``i`` of every cell plays the same script with the same agent draws: cells
are paired by script and repetition.

Every turn: the narrator (``user``) speaks to no agent; its turn may only be
written to memory. Any other role's agent receives the turn content as a user
message and replies briefly. What an agent has in its context is the cell's
choice (issue 18):

- ``conversation`` on (the default of ``baseline``): the case file (the initial
  facts) and the conversation so far (every role's turn content and reply,
  the last ``context_turns`` turns, or all when null), rebuilt for each call;
- off (``isolated`` and the memory conditions): its private history only, the
  turns it voiced and its own replies.

``baseline`` has no shared memory and the conversation in context (the
source's reference); ``isolated`` has neither (own turns only: the old
baseline, a floor). Memory writes follow ``memory_writes``: ``script`` writes
the scripted content of turns marked ``write_to_memory``; ``replies`` writes
every agent reply (statement and recall turns); ``both`` does both. Retrieval
follows ``retrieve``: ``recall-turns`` (only recall turns see memory) or
``every-turn`` (statement turns too, so a reply can repeat what memory holds).
A recall turn retrieves the top-k entries for the recall query (authors shown
only in the authors-shown condition), asks the query, and scores the reply
against the accepted answers (and through the judge when the cell says so).
Every model call is one step. Time is a world clock (the sum of recorded
latencies), so a world is deterministic given its seed and replies, and
replays exactly.

Records written in the world record (besides the script, cell, agents, steps):

``memory_log``: one item per write attempt, in order:
    ``op`` ("add"); ``origin`` in {"initial", "script", "reply"} (a preloaded
    fact, a scripted turn's content, an agent's reply); ``source`` (finer:
    "initial_fact", "turn", "narration", "reply"); ``author_role``;
    ``authority``; ``turn`` (0 for initial facts); ``namespace``; ``fact_id``
    (the turn's fact id, a recall's target fact for a recall reply);
    ``value`` (the statement's value in canonical form, see
    :mod:`workbench.worlds.recall.values`: the script's ``value`` field when
    there is one, else found by rule or, with ``values: judge``, by the judge
    model (a step of purpose "value", agent ``value_judge``), else null: a
    write without a value conflicts with nothing; several current values are
    joined by ";", and two writes agree when one's values hold the other's);
    ``value_source`` in
    {"script", "rule", "judge", null}; ``text``; ``entry_id`` (the id given to this
    write, also when refused); ``entry`` (the stored entry, null when
    refused); ``refused`` (bool); ``refused_by`` (winner id or null);
    ``removed`` (entries this write removed); ``conflicts`` (the positions in
    the world's ``conflicts`` list of the events this write caused).
``conflicts``: one item per invalidation event (cells with invalidation only):
    ``turn``; ``type`` in {"stale", "lower-authority", "duplicate"};
    ``action`` in {"removed", "refused", "kept"}; ``fact_id``;
    ``new`` and ``old`` (the arriving entry and the live entry it was
    compared with, each {``entry_id``, ``value``, ``authority``,
    ``author_role``, ``turn``, ``origin``}); ``removed_id`` (the id of the
    entry removed or refused; null when kept). Types: "lower-authority" — the
    two state different values and the lower-authority one is refused (the
    newcomer) or removed (the old entry); "stale" — different values, equal
    authority, the older is removed (only when the cell sets
    ``invalidate_stale``); "duplicate" — the same value (agreeing
    paraphrases or repeats): noted, never removed (action "kept").
``retrievals``: one per retrieval (recall turns, and statement turns under
    ``every-turn``), with ``purpose`` in {"recall", "turn"} and the hits.
``recalls[].context``: ``entry_ids`` (retrieved), ``own_turns``,
    ``memory_shown``, ``conversation_turns`` (turn numbers of the
    conversation in context, [] when off), ``case_file`` (bool).
    ``recalls[].reply_entry`` and ``turns[].reply_entry``: the memory entry
    the reply became (replies written and stored only); ``turns[].
    context_entry_ids``: what a statement turn retrieved (``every-turn``).
steps: with the conversation in context, ``request.conversation_turns`` (the
    turns the call's context message held; the message itself is rebuilt from
    the script and the recorded replies, its hash is ``messages_sha256``).
``retrieval`` (world-level settings): adds ``memory_writes``, ``retrieve``,
    ``conversation``, ``context_turns``, ``invalidate_stale``, ``values`` and,
    with invalidation, ``conflicts`` (the detector).
``detections`` (cells with invalidation only): each (newcomer, live entry) pair
    the cell's detector (:mod:`workbench.worlds.recall.conflicts`) said conflicts
    or the script says does: ``turn``, ``detector``, ``new`` and ``old`` (entry
    ids), ``answer`` (the detector's; null for a judge reply that is neither YES
    nor NO), ``truth`` (same fact id, recorded values that conflict), ``score``
    (cosine or topic overlap), ``step`` (the judge's), the values the detector
    saw, both fact ids, ``removed`` and ``refused_by_old``; each write's
    ``pairs_examined`` in the memory log counts every pair it met. Under a
    detector other than ``oracle`` the store is given no fact id.
``separation`` (memory cells, repetition 0): the cosine the cell's embedder
    gives between the stale and current statements of each recalled fact
    (:mod:`workbench.worlds.recall.separation`; texts are the turns').
``adversary`` (cells with ``poison`` or ``spoof`` only): the plan of
    :mod:`workbench.worlds.recall.adversary` (each poisoned fact's true and false
    values and the turns of its poison, first recall, correction and probes; the
    spoof's roles; ``turn_map``: original turn -> turn played). Memory writes then
    carry ``poisoned``, or ``spoofed`` with ``true_author``, ``true_authority``,
    ``claimed_author``, ``claimed_authority``; a poisoned turn ``poisoned``: marks
    for the metrics, never shown to an agent.
"""
from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.kinds.base import ClientFactory, WorldOutcome
from workbench.models.base import ModelClient, ModelReply, ModelRequest
from workbench.records import as_record
from workbench.resources import study_path
from workbench.seeding import derive_seed
from workbench.templates import TemplateSet
from workbench.worlds.recall import prompts as P
from workbench.worlds.recall.distractors import DistractorSpec
from workbench.worlds.recall.distractors import summary as distractor_summary
from workbench.worlds.recall.domains import DOMAINS, NARRATOR, RECORD, ROLE_BRIEFS, role_authority
from workbench.worlds.recall.scoring import answer_text, exact_match, judge_verdict, score_answer
from workbench.worlds.recall.scripts import Script, ScriptError, load_scripts
from workbench.worlds.recall.spec import RecallCell
from workbench.worlds.recall.values import judged_value, statement_value

NAME = "recall"
SHARED_NS = None  # the initial facts (the case file) are shared: no namespace, visible to every role
JUDGE_SLOT = "judge"
VALUE_SLOT = "value_judge"  # the judge model asked for a write's value (values: judge)
CONFLICT_SLOT = "conflict_judge"  # the judge model asked whether two entries conflict (conflicts: judge)


@dataclass
class _Agent:
    role: str
    route: str
    client: ModelClient
    messages: list[dict[str, str]]
    voiced: list[int] = field(default_factory=list)  # turns it voiced (its private history)
    recalls: int = 0


# -- scripts -------------------------------------------------------------------------
_SCRIPT_CACHE: dict[str, tuple[tuple[tuple[str, int, int], ...], list[Script]]] = {}


def scripts_location(cell: RecallCell, base_dir: Path) -> str:
    if Path(cell.scripts).is_absolute() or any(ch in cell.scripts for ch in "*?["):  # a glob is taken as written
        return str(Path(base_dir) / cell.scripts)
    return str(study_path(base_dir, cell.scripts, explicit="scripts" in cell.model_fields_set))


def _signature(location: str) -> tuple[tuple[str, int, int], ...]:
    import glob

    p = Path(location)
    paths = sorted(p.rglob("*.json")) if p.is_dir() else sorted(Path(x) for x in glob.glob(location, recursive=True))
    return tuple((str(x), x.stat().st_mtime_ns, x.stat().st_size) for x in paths if x.is_file())


def cell_scripts(cell: RecallCell, base_dir: Path) -> list[Script]:
    """The scripts a cell runs, sorted by id, after its filters (cached while the files are unchanged).
    Raises ScriptError (naming the file and field) for a bad script or a filter that leaves none."""
    location = scripts_location(cell, base_dir)
    sig = _signature(location)
    cached = _SCRIPT_CACHE.get(location)
    if cached is None or cached[0] != sig:
        cached = (sig, load_scripts(location))
        _SCRIPT_CACHE[location] = cached
    scripts = cached[1]
    if cell.script_ids is not None:
        known = {s.script_id for s in scripts}
        missing = [i for i in cell.script_ids if i not in known]
        if missing:
            raise ScriptError(location, "script_ids", f"no script with id {missing} (known: {', '.join(sorted(known))})")
        scripts = [s for s in scripts if s.script_id in set(cell.script_ids)]
    if cell.domains is not None:
        scripts = [s for s in scripts if s.domain in set(cell.domains)]
    if not scripts:
        raise ScriptError(location, "domains", f"no script of domain(s) {cell.domains} among the cell's scripts")
    return scripts


def _sha256(path: str | None) -> str | None:
    if path is None or not Path(path).is_file():
        return None
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


# -- memory ----------------------------------------------------------------------------
_EMBEDDERS: dict[str, Any] = {}


def embedder(name: str) -> Any:
    """One embedder per name per process (loading MiniLM once is enough), remembering the
    vectors of texts it has embedded (the scripts' texts recur in every repetition)."""
    if name not in _EMBEDDERS:
        from workbench.embeddings import get_embedder
        from workbench.worlds.recall.separation import MemoEmbedder

        _EMBEDDERS[name] = MemoEmbedder(get_embedder(name))
    return _EMBEDDERS[name]


def _num(x: Any) -> Any:
    return round(float(x), 6) if x is not None else None


def hit_record(hit: Any) -> dict[str, Any]:
    """A flat, JSON-able record of one retrieved entry and its scores."""
    e = hit.entry
    return {"rank": int(hit.rank), "entry_id": e.entry_id, "text": e.text, "author_role": e.author_role,
            "authority": _num(e.authority), "turn": int(e.turn), "namespace": e.namespace, "fact_id": e.fact_id,
            "similarity": _num(hit.similarity), "recency": _num(hit.recency), "score": _num(hit.score)}


def entry_record(e: Any) -> dict[str, Any]:
    return {"entry_id": e.entry_id, "text": e.text, "author_role": e.author_role, "authority": _num(e.authority),
            "turn": int(e.turn), "namespace": e.namespace, "fact_id": e.fact_id}


def _side(e: Any, origin: str | None) -> dict[str, Any]:
    return {"entry_id": e.entry_id, "value": e.value, "authority": _num(e.authority), "author_role": e.author_role,
            "turn": int(e.turn), "origin": origin}


class RecallWorld:
    def __init__(self, cell: RecallCell, *, world_id: str, world_index: int, seed: int, templates: TemplateSet, base_dir: Path,
                 client_factory: ClientFactory, run: int = 1, cell_id: str = "") -> None:
        self.cell = cell
        self.world_id = world_id
        self.cell_id = cell_id
        self.seed = seed
        self.run_no = run
        self.t = templates
        scripts = cell_scripts(cell, base_dir)
        self.world_index = world_index
        self.script_index = self.world_index % len(scripts)
        self.repetition = self.world_index // len(scripts)
        self.script = scripts[self.script_index]
        self.source_script = self.script  # as its file says, before an adversary's inserted turns
        self.adversary: dict[str, Any] | None = None  # a poisoner's or spoof's plan (adversary.py), marks for metrics
        if cell.poison is not None or cell.spoof is not None:
            from workbench.worlds.recall.adversary import apply

            self.script, self.adversary = apply(self.script, cell.poison, cell.spoof, verified=cell.verified_authority)
        self.base_dir = Path(base_dir)
        domain = self.script.domain
        team = list(DOMAINS[domain])
        speakers: list[str] = []
        for turn in self.script.turns:
            if turn.role != NARRATOR and turn.role not in speakers:
                speakers.append(turn.role)
        self.agents: dict[str, _Agent] = {}
        for role in speakers:
            route = cell.route_for(role)
            override = cell.agents.get(role)
            options: dict[str, Any] = {}
            if override is not None and override.script is not None:
                options["script"] = list(override.script)
            if override is not None and override.latency_s is not None:
                options["latency_s"] = override.latency_s
            client = client_factory(route, role, derive_seed(seed, "agent", role, route), options)
            system = P.system_prompt(templates, brief=ROLE_BRIEFS[domain][role], role=role, domain=domain,
                                     team=team, memory=cell.memory)
            self.agents[role] = _Agent(role, route, client, [{"role": "system", "content": system}])
        self.judge: ModelClient | None = None
        if cell.scoring == "judge":
            self.judge = client_factory(cell.judge, JUDGE_SLOT, derive_seed(seed, "judge", cell.judge), {})
        self.memory: Any = None
        self.memory_log: list[dict[str, Any]] = []
        self.conflicts: list[dict[str, Any]] = []  # invalidation events (module docstring)
        self.origins: dict[int, str] = {}  # entry id -> origin of the write
        if cell.memory:
            from workbench.stores.chroma import vector_memory_class
            from workbench.stores.vector import Weights

            VectorMemory = vector_memory_class(cell.vector_backend)  # the cell's store: memory or chroma
            self.memory = VectorMemory(embedder(cell.embedder), Weights(*cell.weights()),
                                       invalidation=cell.uses_invalidation(),
                                       conflict_similarity=cell.conflict_similarity,
                                       invalidate_stale=cell.invalidate_stale,
                                       compare_wording=False,  # values decide conflicts, never wording
                                       **({"hnsw": cell.index_settings()} if cell.vector_backend == "chroma" else {}))
        # memory at realistic size (distractors.py): seeded entries written at the start of their turn
        from workbench.worlds.recall.distractors import build_distractors

        self.distractors = (build_distractors(self.script, cell.distractors)
                            if self.memory is not None and cell.distractors is not None else [])
        self.distractor_counts = {"stored": 0, "refused": 0, "removed": 0}
        # vector_backend chroma: each retrieval also run as an exact scan (recall@k of the index)
        self.index_recall: dict[str, Any] | None = (
            {"hnsw": cell.index_settings(), "k": cell.k, "retrievals": 0, "found": 0, "expected": 0, "identical": 0,
             "misses": []} if self.memory is not None and cell.vector_backend == "chroma" else None)
        self.value_judge: ModelClient | None = None
        if cell.memory and cell.values == "judge":
            self.value_judge = client_factory(cell.judge, VALUE_SLOT, derive_seed(seed, "values", cell.judge), {})
        # conflict detection (module docstring, ``detections``): who decides, and the script's truth per entry
        self.detector = cell.conflicts if self.memory is not None and self.memory.invalidation else None
        self.detections: list[dict[str, Any]] = []
        self.truth_of: dict[int, tuple[str | None, str | None]] = {}  # entry id -> (fact id, recorded value)
        self.conflict_judge: ModelClient | None = None
        if self.detector == "judge":
            self.conflict_judge = client_factory(cell.judge, CONFLICT_SLOT,
                                                 derive_seed(seed, "conflicts", cell.judge), {})
        self.transcript: list[dict[str, Any]] = []  # the conversation so far: {turn, role, content, reply}
        self.steps: list[dict[str, Any]] = []
        self.turns: list[dict[str, Any]] = []
        self.retrievals: list[dict[str, Any]] = []
        self.recalls: list[dict[str, Any]] = []
        self.failure: dict[str, Any] | None = None
        self.clock = 0.0

    # -- memory ----------------------------------------------------------------------
    _ORIGINS = {"initial_fact": "initial", "turn": "script", "narration": "script", "reply": "reply"}

    async def _preload(self) -> None:
        """The case file (initial facts) into shared memory at turn 0, before the first turn."""
        for f in self.script.initial_facts:
            await self._write(f.text, author=RECORD, authority=f.authority_level, turn=0, namespace=SHARED_NS,
                              fact_id=f.id, source="initial_fact", declared=getattr(f, "value", None))
            if self.failure is not None:
                return
        self._write_distractors(0)

    def _write_distractors(self, turn: int) -> None:
        """The distractor entries of ``turn``, in one batch through the store's own rule (their
        own fact ids; under a detector other than oracle, none: the store's similarity rule
        decides). Counted in the record's ``distractors``, never one by one in ``memory_log``."""
        batch = [d for d in self.distractors if d.turn == turn]
        if not batch:
            return
        oracle = getattr(self, "detector", None) in (None, "oracle")
        items = [{**d.item(), **({} if oracle else {"fact_id": None})} for d in batch]
        for d, result in zip(batch, self.memory.add_many(items)):
            entry_id = result.entry_id if result.entry_id is not None else (
                result.entry.entry_id if result.entry is not None else None)
            if entry_id is not None:
                self.origins[entry_id] = "distractor"
                if hasattr(self, "truth_of"):
                    self.truth_of[entry_id] = (d.fact_id, d.value)
            self.distractor_counts["stored" if result.entry is not None else "refused"] += 1
            self.distractor_counts["removed"] += len(result.removed)
            for c in result.conflicts:
                self.conflicts.append({"turn": turn, "type": c.type, "action": c.action, "fact_id": d.fact_id,
                                       "new": _side(c.new, "distractor"),
                                       "old": _side(c.old, self.origins.get(c.old.entry_id)),
                                       "removed_id": c.removed_id})

    async def _value(self, declared: str | None, text: str, turn: int) -> tuple[str | None, str | None]:
        """A write's value and where it came from: the script, the judge (values: judge) or the rule."""
        if declared or self.value_judge is None:
            return statement_value(declared, text)
        messages = P.value_messages(self.t, text=text)
        reply = await self._call(VALUE_SLOT, VALUE_SLOT, self.cell.judge, self.value_judge, messages,
                                 self.cell.judge_sampling, turn, "value")
        if reply.failed:
            return None, None
        value = judged_value(reply.text)
        return (value, "judge") if value is not None else (None, None)

    async def _write(self, text: str, *, author: str, authority: float, turn: int, namespace: str | None,
                     fact_id: str | None, source: str, declared: str | None = None) -> dict[str, Any]:
        from workbench.worlds.recall.adversary import stored_author

        author, authority, spoofed = stored_author(self.adversary, author, authority)  # a spoof's claim, if any
        origin = self._ORIGINS[source]
        live = self.memory.entries
        decided: list[tuple[Any, bool | None, float | None, int | None]] | None = None
        if self.detector in (None, "oracle"):
            value, value_source = await self._value(declared, text, turn)
            seen = value
            result = self.memory.add(text, author_role=author, authority=float(authority), turn=turn,
                                     namespace=namespace, fact_id=fact_id, value=value)
            if self.detector == "oracle":
                found = set(result.conflicting)
                decided = [(e, e.entry_id in found, None, None) for e in live]
        else:  # the detector sees the text, the value found in it and the embedding: no fact id, no declared value
            seen, seen_source = await self._value(None, text, turn)
            value, value_source = statement_value(declared, text) if declared else (seen, seen_source)
            decided = await self._detect(text, seen, live, turn)
            if self.failure is not None:
                return {"entry": None}
            result = self.memory.add(text, author_role=author, authority=float(authority), turn=turn,
                                     namespace=namespace, fact_id=None, value=seen,
                                     conflicting=[e.entry_id for e, answer, _, _ in decided if answer])
        entry_id = result.entry_id if result.entry_id is not None else (
            result.entry.entry_id if result.entry is not None else None)
        if entry_id is not None:
            self.origins[entry_id] = origin
            self.truth_of[entry_id] = (fact_id, value)
        if decided is not None:
            self._record_detections(turn, entry_id, fact_id, value, seen, result, decided)
        first = len(self.conflicts)
        for c in result.conflicts:
            self.conflicts.append({"turn": turn, "type": c.type, "action": c.action, "fact_id": fact_id,
                                   "new": _side(c.new, origin), "old": _side(c.old, self.origins.get(c.old.entry_id)),
                                   "removed_id": c.removed_id})
        rec = {"op": "add", "turn": turn, "origin": origin, "source": source, "author_role": author,
               "authority": _num(authority), "namespace": namespace, "fact_id": fact_id, "value": value,
               "value_source": value_source, "text": text, "entry_id": entry_id,
               "entry": entry_record(result.entry) if result.entry is not None else None,
               "refused": result.entry is None, "refused_by": getattr(result, "refused_by", None),
               "removed": [entry_record(e) for e in result.removed],
               "conflicts": list(range(first, len(self.conflicts)))}
        if decided is not None:
            rec["pairs_examined"] = len(decided)
        rec.update(spoofed)  # the true writer beside the claim: for metrics, never shown
        self.memory_log.append(rec)
        return rec

    async def _detect(self, text: str, value: str | None, live: list[Any],
                      turn: int) -> list[tuple[Any, bool | None, float | None, int | None]]:
        """The cell's detector on a newcomer against every live entry: (entry, answer, score,
        judge step) each; the judge is asked about the ``conflict_candidates`` most similar."""
        from workbench.worlds.recall import conflicts as C

        if not live:
            return []
        vector = embedder(self.cell.embedder).embed([text])[0]
        new = C.Statement(0, text, value, vector)
        olds = [C.Statement(e.entry_id, e.text, e.value, e.embedding) for e in live]
        if self.detector == "lexical":
            return [(e, *C.lexical(new, o, self.cell.conflict_overlap), None) for e, o in zip(live, olds)]
        if self.detector == "embedding":
            return [(e, *C.embedding(new, o, self.cell.conflict_similarity), None) for e, o in zip(live, olds)]
        sims = [C.cosine(vector, o.vector) for o in olds]
        asked = set(sorted(range(len(live)), key=lambda i: (-sims[i], -live[i].entry_id))[:self.cell.conflict_candidates])
        out: list[tuple[Any, bool | None, float | None, int | None]] = []
        for i, (e, o) in enumerate(zip(live, olds)):
            if i not in asked:
                out.append((e, False, sims[i], None))
                continue
            assert self.conflict_judge is not None
            reply = await self._call(CONFLICT_SLOT, CONFLICT_SLOT, self.cell.judge, self.conflict_judge,
                                     C.judge_messages(self.t, first=o.text, second=text), self.cell.judge_sampling,
                                     turn, "conflict")
            if reply.failed:
                return out
            out.append((e, C.judge_answer(reply.text), sims[i], self.steps[-1]["seq"]))
        return out

    def _record_detections(self, turn: int, new_id: int | None, fact_id: str | None, value: str | None,
                           seen: str | None, result: Any,
                           decided: list[tuple[Any, bool | None, float | None, int | None]]) -> None:
        """The pairs a detector said conflict or the script says do (the rest are agreed
        negatives, counted in the write's ``pairs_examined``), each with both answers."""
        from workbench.worlds.recall.conflicts import truth

        for old, answer, score, step in decided:
            old_fact, old_value = self.truth_of.get(old.entry_id, (None, None))
            true = truth(fact_id, value, old_fact, old_value)
            if not (answer or true):
                continue
            self.detections.append({
                "turn": turn, "detector": self.detector, "new": new_id, "old": old.entry_id,
                "answer": answer, "truth": true, "score": _num(score), "step": step,
                "new_value": seen, "old_value": old.value, "new_fact": fact_id, "old_fact": old_fact,
                "removed": old.entry_id in {e.entry_id for e in result.removed},
                "refused_by_old": result.refused_by == old.entry_id})

    def _separation(self) -> list[dict[str, Any]]:
        """How close the cell's embedder puts the stale and current statements of each
        recalled fact (separation.py); once per script and cell (repetition 0): it depends
        on the script and the embedder alone. Texts are left out (they are the turns')."""
        from workbench.worlds.recall.separation import cached_rows

        rows = cached_rows(self.source_script, embedder(self.cell.embedder), _sha256(self.script.path) or "")
        return [{k: v for k, v in r.items() if k not in ("stale", "current", "script_id", "domain")} for r in rows]

    def _namespace(self, role: str) -> str:
        return role

    def _retrieve(self, role: str, query: str, turn: int, purpose: str = "recall") -> list[dict[str, Any]]:
        namespaces = [role] if self.cell.namespaced else None  # a role's own entries, plus the shared ones
        hits = self.memory.search(query, current_turn=turn, k=self.cell.k, namespaces=namespaces)
        records = [hit_record(h) for h in hits]
        if self.index_recall is not None:  # the same search by an exact scan: what the index missed
            exact = [h.entry.entry_id for h in self.memory.exact_search(query, current_turn=turn, k=self.cell.k,
                                                                          namespaces=namespaces)]
            got = [h.entry.entry_id for h in hits]
            ir = self.index_recall
            ir["retrievals"] += 1
            ir["expected"] += len(exact)
            ir["found"] += len(set(got) & set(exact))
            ir["identical"] += got == exact
            if got != exact:
                ir["misses"].append({"turn": turn, "purpose": purpose, "entry_ids": got, "exact_entry_ids": exact})
        self.retrievals.append({"turn": turn, "agent": role, "purpose": purpose, "query": query, "k": self.cell.k,
                                "namespaces": namespaces, "memory_size": len(self.memory.entries), "hits": records})
        return records

    async def _write_reply(self, role: str, text: str, turn: int, fact_id: str | None,
                           write_turn: bool = False) -> str | None:
        """Store an agent's reply (``memory_writes: replies | both``, or ``update-turns`` on a
        turn the script marks ``write_to_memory``); its entry id, if stored."""
        if self.memory is None or not self.cell.writes_reply_on(write_turn) or not text.strip():
            return None
        rec = await self._write(text, author=role, authority=role_authority(self.script.domain, role), turn=turn,
                                namespace=self._namespace(role), fact_id=fact_id, source="reply")
        return rec["entry"]["entry_id"] if rec["entry"] else None

    # -- context ---------------------------------------------------------------------
    def _window(self) -> list[dict[str, Any]]:
        n = self.cell.context_turns
        return list(self.transcript if n is None else self.transcript[-n:])

    def _request_messages(self, agent: _Agent, prompt: str) -> tuple[list[dict[str, str]], list[int]]:
        """The messages of one call and the conversation turns they hold. The private history
        (``agent.messages``) always grows; with the conversation in context the call sees the
        system prompt, the case file and the conversation so far, then the prompt."""
        agent.messages.append({"role": "user", "content": prompt})
        if not self.cell.shows_conversation:
            return agent.messages, []
        window = self._window()
        context = P.context_message(self.t, facts=[f.text for f in self.script.initial_facts], transcript=window,
                                    me=agent.role, total=len(self.transcript))
        return ([agent.messages[0], {"role": "user", "content": context}, {"role": "user", "content": prompt}],
                [int(x["turn"]) for x in window])

    # -- model calls -----------------------------------------------------------------
    async def _call(self, slot: str, role: str, route: str, client: ModelClient, messages: list[dict[str, str]],
                    params: dict[str, Any], turn: int, purpose: str,
                    conversation_turns: list[int] | None = None) -> ModelReply:
        request = ModelRequest(messages=[dict(m) for m in messages], params=dict(params))
        started = time.perf_counter()
        try:
            reply = await client.complete(request)
        except Exception as exc:  # a client bug or provider fault: recorded, never raised
            reply = ModelReply(text="", latency_s=0.0, route=route, error=f"{type(exc).__name__}: {str(exc)[:500]}")
        reply.timing = {**reply.timing, "wall_s": round(time.perf_counter() - started, 6)}
        t_issue = self.clock
        self.clock = round(t_issue + max(0.0, float(reply.latency_s or 0.0)), 6)
        msgs = request.messages
        self.steps.append({
            "kind": "step", "world_id": self.world_id, "run": self.run_no, "seq": len(self.steps),
            "agent": slot, "role": role, "turn": turn, "purpose": purpose,
            "t_issue": round(t_issue, 6), "t_done": self.clock,
            "request": {"route": route, "params": dict(request.params), "n_messages": len(msgs),
                        "messages_sha256": hashlib.sha256(json.dumps(msgs, ensure_ascii=False).encode()).hexdigest(),
                        "prompt": msgs[-1]["content"],
                        **({"conversation_turns": conversation_turns} if conversation_turns is not None else {})},
            "reply": as_record(reply),
        })
        if reply.failed:
            self.failure = {"agent": slot, "role": role, "turn": turn, "purpose": purpose, "error": reply.error}
        return reply

    # -- turns -------------------------------------------------------------------------
    async def _statement(self, turn: Any) -> None:
        agent = self.agents[turn.role]
        hits = None
        if self.memory is not None and self.cell.retrieve == "every-turn":
            hits = self._retrieve(agent.role, turn.content, turn.turn, purpose="turn")
            prompt = P.turn_with_memory(self.t, turn=turn.turn, content=turn.content,
                                        memory=P.memory_block(self.t, hits, authors=self.cell.authors_shown))
        else:
            prompt = P.turn_message(self.t, turn=turn.turn, content=turn.content)
        messages, conversation_turns = self._request_messages(agent, prompt)
        reply = await self._call(agent.role, agent.role, agent.route, agent.client, messages,
                                 self.cell.sampling, turn.turn, "turn",
                                 conversation_turns if self.cell.shows_conversation else None)
        record: dict[str, Any] = {"turn": turn.turn, "role": turn.role, "content": turn.content, "is_recall": False,
                                  "write_to_memory": turn.write_to_memory, "fact_id": turn.fact_id,
                                  "step": self.steps[-1]["seq"], "reply": reply.text if not reply.failed else None}
        if hits is not None:
            record["context_entry_ids"] = [h["entry_id"] for h in hits]
        if turn.poisoned:
            record["poisoned"] = True  # ground truth for the metrics; the agents saw a plain statement
        self.turns.append(record)
        self.transcript.append({"turn": turn.turn, "role": turn.role, "content": turn.content,
                                "reply": None if reply.failed else reply.text})
        if reply.failed:
            return
        agent.messages.append({"role": "assistant", "content": reply.text})
        agent.voiced.append(turn.turn)
        if turn.write_to_memory and self.memory is not None and self.cell.writes_script:
            rec = await self._write(turn.content, author=turn.role,
                                    authority=role_authority(self.script.domain, turn.role)
                                    if turn.authority is None else turn.authority, turn=turn.turn,
                                    namespace=self._namespace(turn.role), fact_id=turn.fact_id, source="turn",
                                    declared=getattr(turn, "value", None))
            record["memory_entry"] = rec["entry"]["entry_id"] if rec["entry"] else None
            if turn.poisoned:
                rec["poisoned"] = True
        reply_entry = await self._write_reply(turn.role, reply.text, turn.turn, turn.fact_id, turn.write_to_memory)
        if reply_entry is not None:
            record["reply_entry"] = reply_entry

    async def _narration(self, turn: Any) -> None:
        record: dict[str, Any] = {"turn": turn.turn, "role": turn.role, "content": turn.content, "is_recall": False,
                                  "write_to_memory": turn.write_to_memory, "fact_id": turn.fact_id, "step": None,
                                  "reply": None}
        if turn.write_to_memory and self.memory is not None and self.cell.writes_script:
            rec = await self._write(turn.content, author=NARRATOR,
                                    authority=role_authority(self.script.domain, NARRATOR)
                                    if turn.authority is None else turn.authority, turn=turn.turn,
                                    namespace=NARRATOR, fact_id=turn.fact_id, source="narration",
                                    declared=getattr(turn, "value", None))
            record["memory_entry"] = rec["entry"]["entry_id"] if rec["entry"] else None
            if turn.poisoned:
                rec["poisoned"] = True
        if turn.poisoned:
            record["poisoned"] = True
        self.turns.append(record)
        self.transcript.append({"turn": turn.turn, "role": turn.role, "content": turn.content, "reply": None})

    async def _recall(self, turn: Any) -> None:
        agent = self.agents[turn.role]
        query = turn.recall_query or ""
        hits = self._retrieve(agent.role, query, turn.turn) if self.memory is not None else None
        shown = P.memory_block(self.t, hits, authors=self.cell.authors_shown)
        own_turns = list(agent.voiced)
        messages, conversation_turns = self._request_messages(
            agent, P.recall_message(self.t, turn=turn.turn, content=turn.content, memory=shown, query=query))
        reply = await self._call(agent.role, agent.role, agent.route, agent.client, messages,
                                 self.cell.sampling, turn.turn, "recall",
                                 conversation_turns if self.cell.shows_conversation else None)
        agent.recalls += 1
        self.turns.append({"turn": turn.turn, "role": turn.role, "content": turn.content, "is_recall": True, "write_to_memory": False,
                           "fact_id": turn.fact_id, "step": self.steps[-1]["seq"],
                           "reply": reply.text if not reply.failed else None})
        ground_truth = list(turn.ground_truth)
        answer = None if reply.failed else answer_text(reply.text)
        truth_rank = None
        for h in hits or []:
            if exact_match(h["text"], ground_truth):
                truth_rank = h["rank"]
                break
        recall: dict[str, Any] = {
            "turn": turn.turn, "agent": agent.role, "role": agent.role, "route": agent.route,
            "failure_mode": turn.failure_mode, "target_fact_id": turn.target_fact_id, "query": query,
            "ground_truth": ground_truth, "answer": answer, "step": self.steps[-1]["seq"],
            **score_answer(answer, ground_truth), "judge": None,
            "context": {"entry_ids": [h["entry_id"] for h in hits] if hits is not None else [],
                        "own_turns": own_turns, "memory_shown": hits is not None,
                        "conversation_turns": conversation_turns, "case_file": self.cell.shows_conversation},
            "truth_rank": truth_rank, "top_entry_correct": bool(hits) and exact_match(hits[0]["text"], ground_truth),  # type: ignore[index]
        }
        self.recalls.append(recall)
        self.transcript.append({"turn": turn.turn, "role": turn.role, "content": f"{turn.content} (asked: {query})",
                                "reply": None if reply.failed else reply.text})
        if reply.failed:
            recall["correct"] = None
            return
        agent.messages.append({"role": "assistant", "content": reply.text})
        reply_entry = await self._write_reply(agent.role, reply.text, turn.turn, turn.target_fact_id)
        if reply_entry is not None:
            recall["reply_entry"] = reply_entry
        if self.judge is not None and answer is not None:
            messages = P.judge_messages(self.t, query=query, accepted=ground_truth, answer=answer)
            jr = await self._call(JUDGE_SLOT, JUDGE_SLOT, self.cell.judge, self.judge, messages,
                                  self.cell.judge_sampling, turn.turn, "judge")
            verdict = None if jr.failed else judge_verdict(jr.text)
            recall["judge"] = {"verdict": verdict, "step": self.steps[-1]["seq"],
                               "text": jr.text if not jr.failed else None}
            recall["correct"] = verdict
        else:
            recall["correct"] = recall["correct_exact"] if answer is not None else False

    async def run(self) -> WorldOutcome:
        started = time.perf_counter()
        if self.memory is not None:
            await self._preload()
        for turn in self.script.turns:
            if self.failure is not None:
                break
            if self.memory is not None and turn.turn:
                self._write_distractors(turn.turn)
            if turn.role == NARRATOR:
                await self._narration(turn)
            elif turn.is_recall:
                await self._recall(turn)
            else:
                await self._statement(turn)
            if self.failure is not None:
                break
        return WorldOutcome(self._world_record(time.perf_counter() - started), self.steps)

    # -- the world record ------------------------------------------------------------------
    def _valid(self) -> bool:
        if self.failure is not None or len(self.recalls) != len(self.script.recalls()):
            return False
        for r in self.recalls:
            if not r["answer"]:
                return False
            if self.cell.scoring == "judge" and (r["judge"] is None or r["judge"]["verdict"] is None):
                return False
        return True

    def _world_record(self, wall_s: float) -> dict[str, Any]:
        s = self.script
        path = s.path
        rel = None
        if path is not None:
            try:
                rel = str(Path(path).resolve().relative_to(self.base_dir.resolve()))
            except ValueError:
                rel = str(path)
        agents = [{"agent": a.role, "role": a.role, "route": a.route,
                   "authority": _num(role_authority(s.domain, a.role)), "system_prompt": a.messages[0]["content"],
                   "turns_voiced": len(a.voiced), "recalls": a.recalls,
                   "model_returned": sorted({st["reply"]["model_returned"] for st in self.steps
                                             if st["agent"] == a.role and st["reply"]["model_returned"]})}
                  for a in self.agents.values()]
        if self.value_judge is not None:
            agents.append({"agent": VALUE_SLOT, "role": VALUE_SLOT, "route": self.cell.judge, "authority": None,
                           "system_prompt": None, "turns_voiced": 0, "recalls": 0, "model_returned": []})
        if self.conflict_judge is not None:
            agents.append({"agent": CONFLICT_SLOT, "role": CONFLICT_SLOT, "route": self.cell.judge, "authority": None,
                           "system_prompt": None, "turns_voiced": 0, "recalls": 0, "model_returned": []})
        if self.judge is not None:
            agents.append({"agent": JUDGE_SLOT, "role": JUDGE_SLOT, "route": self.cell.judge, "authority": None,
                           "system_prompt": None, "turns_voiced": 0, "recalls": 0, "model_returned": []})
        a, b, g = self.cell.weights()
        record = {
            "kind": "world", "world_kind": NAME, "world_id": self.world_id, "cell_id": self.cell_id,
            "run": self.run_no, "seed": self.seed, "cell": self.cell.model_dump(mode="json"),
            "script": {"script_id": s.script_id, "domain": s.domain, "path": rel, "sha256": _sha256(path),
                       "n_turns": len(s.turns), "n_recalls": len(s.recalls()),
                       "initial_facts": [{"id": f.id, "text": f.text, "tier": f.tier,
                                          "authority_level": _num(f.authority_level)} for f in s.initial_facts]},
            "script_index": self.script_index, "repetition": self.repetition,
            "retrieval": {"memory": self.cell.memory, "alpha": a, "beta": b, "gamma": g, "k": self.cell.k,
                          "invalidation": self.cell.uses_invalidation() if self.cell.memory else False,
                          "embedder": self.cell.embedder if self.cell.memory else None,
                          "authors_shown": self.cell.authors_shown, "namespaced": self.cell.namespaced,
                          "memory_writes": self.cell.memory_writes if self.cell.memory else None,
                          "retrieve": self.cell.retrieve if self.cell.memory else None,
                          "invalidate_stale": self.cell.invalidate_stale if self.cell.memory else False,
                          "conversation": self.cell.shows_conversation, "context_turns": self.cell.context_turns,
                          "values": self.cell.values if self.cell.memory else None,
                          **({"conflicts": self.detector} if self.detector is not None else {})},
            "agents": agents, "turns": self.turns, "retrievals": self.retrievals, "memory_log": self.memory_log,
            "conflicts": self.conflicts,
            **({"detections": self.detections} if self.detector is not None else {}),
            **({"separation": self._separation()} if self.cell.memory and self.repetition == 0 else {}),
            **({"adversary": self.adversary} if self.adversary is not None else {}),
            **({"distractors": distractor_summary(self.cell.distractors or DistractorSpec(), self.distractors,
                                                  **self.distractor_counts)} if self.distractors else {}),
            **({"index_recall": self.index_recall} if self.index_recall is not None else {}),
            "recalls": self.recalls, "n_steps": len(self.steps), "clock_end": round(self.clock, 6),
            "failed": self.failure, "valid": self._valid(), "timing": {"wall_s": round(wall_s, 6)},
        }
        self._mark_hedges(record)
        return record

    @staticmethod
    def _mark_hedges(record: dict[str, Any]) -> None:
        """An answer stating a stale value beside the current one is hedged, not correct: known
        only once the world's statements are in (metrics score every record again the same way)."""
        from workbench.worlds.recall.outcomes import rescore, world_statements

        statements = world_statements(record)
        for recall in record["recalls"]:
            if recall.get("answer") is None:
                continue
            hedge = rescore(record, recall, statements).hedged
            recall["hedged"] = hedge
            if hedge:
                recall["correct"] = False
