"""The parameters of one cell of a recall study (validated with pydantic).

A cell is a retrieval condition × a model setting. The condition fixes the
default retrieval weights and whether memory is shared, namespaced or shown
with its authors; every weight can still be overridden per cell, so an
ablation is a cell, not a code change."""
from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from workbench.errors import InputError
from workbench.metrics.design import non_default_parts  # at import time: describe() runs in worker threads
from workbench.worlds.recall.adversary import PoisonSpec, SpoofSpec
from workbench.worlds.recall.distractors import DistractorSpec

#: How invalidation decides that two entries conflict: ``oracle`` by the script's fact ids (and
#: declared values), the others from the entries' text alone (workbench/worlds/recall/conflicts.py).
ConflictDetector = Literal["oracle", "lexical", "embedding", "judge"]
Condition = Literal["baseline", "isolated", "naive", "lightweight", "lightweight-invalidation", "authors-shown", "namespaced",
                    "verified-authority"]
CONDITIONS: tuple[str, ...] = Condition.__args__  # type: ignore[attr-defined]

#: condition -> (alpha, beta, gamma, invalidation). Naive ignores authority (beta 0);
#: lightweight weighs it (beta 0.4), as in the source study. Baseline (the source's
#: reference: no shared memory, the case file and the conversation in context) and
#: isolated (no memory, own turns only: a floor) retrieve nothing; their weights are unused.
CONDITION_DEFAULTS: dict[str, tuple[float, float, float, bool]] = {
    "baseline": (1.0, 0.0, 0.3, False),
    "isolated": (1.0, 0.0, 0.3, False),
    "naive": (1.0, 0.0, 0.3, False),
    "lightweight": (1.0, 0.4, 0.3, False),
    "lightweight-invalidation": (1.0, 0.4, 0.3, True),
    "authors-shown": (1.0, 0.0, 0.3, False),
    "namespaced": (1.0, 0.0, 0.3, False),
    # as authors-shown, but entries are shown and ranked by their true writer, not the role a write
    # claims (spoof); without a spoof the two conditions are the same
    "verified-authority": (1.0, 0.0, 0.3, False),
}
DEFAULT_MODEL = "sim-recall/trusting"
DEFAULT_JUDGE = "sim-recall/judge"


class RoleOverride(BaseModel):
    """Per-role settings: another model, or a script of fixed replies (one per turn
    the role voices, recall turns included, in order)."""

    model_config = ConfigDict(extra="forbid")
    model: str | None = None
    script: list[str] | None = None
    latency_s: float | None = Field(None, ge=0, description="fixed latency of a scripted agent (world clock)")


class HnswSettings(BaseModel):
    """``vector_backend: chroma``: the settings its HNSW index is built with, recorded with
    the cell (Chroma 1.x's configuration names; defaults are Chroma's, the space cosine)."""

    model_config = ConfigDict(extra="forbid")
    space: Literal["cosine", "l2", "ip"] = "cosine"
    max_neighbors: int = Field(16, ge=2, le=512, description="HNSW M: links per node")
    ef_construction: int = Field(100, ge=1, le=10_000, description="candidate list while building")
    ef_search: int = Field(100, ge=1, le=10_000, description="candidate list while searching")


class RecallCell(BaseModel):
    model_config = ConfigDict(extra="forbid")
    #: fields added after recall cells were first recorded: at their default they leave the
    #: cell id alone (workbench.params.cell_hash), so shipped studies keep their ids
    HASH_OMITS_DEFAULT: ClassVar[tuple[str, ...]] = ("conflicts", "conflict_overlap", "conflict_candidates",
                                                     "poison", "spoof", "distractors", "hnsw")
    label: str | None = Field(None, description="a short name for tables; derived when absent")
    model: str = Field(DEFAULT_MODEL, description="route of every role without an override")
    agents: dict[str, RoleOverride] = Field(default_factory=dict, description="per-role overrides, by role name")
    condition: Condition = "naive"
    alpha: float | None = Field(None, ge=0, description="similarity weight (default from the condition)")
    beta: float | None = Field(None, ge=0, description="authority weight (default from the condition)")
    gamma: float | None = Field(None, ge=0, description="recency weight (default from the condition)")
    invalidation: bool | None = Field(None, description="remove a lower-authority entry that conflicts with a "
                                                        "higher-authority one (default from the condition)")
    conflict_similarity: float = Field(0.8, ge=0, le=1, description="similarity above which two entries about "
                                                                    "no common fact id conflict")
    conflicts: ConflictDetector = Field(
        "oracle", description="with invalidation, how a conflict is found: oracle (the script's fact ids and values, "
                              "which no real memory has), lexical (shared topic words and a different value), "
                              "embedding (the cell's embedder's cosine >= conflict_similarity and a different value) "
                              "or judge (the judge model asked about each pair); see docs/recall.md")
    conflict_overlap: float = Field(0.5, gt=0, le=1, description="conflicts: lexical: the share of the shorter "
                                                                 "statement's topic words the other must hold")
    conflict_candidates: int = Field(5, ge=1, le=50, description="conflicts: judge: the judge is asked about this "
                                                                 "many live entries, the most similar by the embedder")
    invalidate_stale: bool = Field(False, description="with invalidation: a newer entry stating another value "
                                                      "removes an equal-authority older one (type stale)")
    k: int = Field(3, ge=1, le=50, description="retrieved entries per recall")
    conversation: bool | None = Field(None, description="the case file and the conversation so far in each agent's "
                                                        "context (default: on in baseline only)")
    context_turns: int | None = Field(None, ge=1, description="with conversation: only the last N turns (null: all)")
    memory_writes: Literal["script", "replies", "both", "update-turns"] = Field(
        "script", description="what is written to shared memory: the scripted write_to_memory turns, every agent "
                              "reply, both, or the agent's reply on the write_to_memory turns only (update-turns: "
                              "the source's agent writes back what it said; no effect without memory)")
    retrieve: Literal["recall-turns", "every-turn"] = Field(
        "recall-turns", description="when agents see retrieved memory: on recall turns only, or on every turn")
    values: Literal["rule", "judge"] = Field(
        "rule", description="how a memory write's value (what decides a conflict) is found when the script declares "
                            "none: by rule, or by asking the judge model (one call per write)")
    embedder: Literal["lexical", "minilm"] = "lexical"
    vector_backend: Literal["memory", "chroma"] = Field(
        "memory", description="the shared memory's store: in-process (memory), or ChromaDB's local persistent client "
                              "(chroma, the optional extra; same top-k, slower)")
    hnsw: HnswSettings | None = Field(None, description="vector_backend chroma: the HNSW index's settings (null: "
                                                        "Chroma's defaults, cosine space)")
    distractors: DistractorSpec | None = Field(None, description="memory at realistic size: seeded distractor "
                                                                 "entries written before and through the script "
                                                                 "(null: none)")
    scripts: str = Field("recall/scripts", description="folder or glob of script JSON, relative to the params file")
    script_ids: list[str] | None = Field(None, description="run only these scripts")
    domains: list[str] | None = Field(None, description="run only scripts of these domains")
    scoring: Literal["exact", "judge"] = "exact"
    judge: str = Field(DEFAULT_JUDGE, description="route of the judge model (scoring: judge)")
    sampling: dict[str, Any] = Field(default_factory=dict, description="temperature, max_tokens, ...")
    judge_sampling: dict[str, Any] = Field(default_factory=lambda: {"temperature": 0})
    prompts: str = Field("prompts/recall", description="template folder, relative to the params file")
    poison: PoisonSpec | None = Field(None, description="a poisoner: false values of chosen facts written at a "
                                                        "chosen authority, optional correction and probes "
                                                        "(workbench/worlds/recall/adversary.py)")
    spoof: SpoofSpec | None = Field(None, description="a writer whose memory writes claim a more senior role")

    @field_validator("vector_backend")
    @classmethod
    def _backend(cls, v: str) -> str:
        from workbench.stores.chroma import chroma_available

        if v == "chroma" and not chroma_available():
            raise InputError("vector_backend 'chroma' needs the optional chromadb package: pip install -e '.[chroma]'")
        return v

    @field_validator("domains")
    @classmethod
    def _domains(cls, v: list[str] | None) -> list[str] | None:
        from workbench.worlds.recall.domains import DOMAINS

        if v is not None:
            bad = [d for d in v if d not in DOMAINS]
            if bad:
                raise InputError(f"unknown domain(s) {bad}; expected some of {sorted(DOMAINS)}")
        return v

    @field_validator("agents")
    @classmethod
    def _roles(cls, v: dict[str, RoleOverride]) -> dict[str, RoleOverride]:
        from workbench.worlds.recall.domains import DOMAINS

        known = sorted({r for roles in DOMAINS.values() for r in roles})
        bad = sorted(set(v) - set(known))
        if bad:
            raise InputError(f"unknown role(s) {bad}; expected roles of the domains: {', '.join(known)}")
        return v

    @model_validator(mode="after")
    def _routes(self) -> RecallCell:
        if self.model == "scripted":
            raise InputError("model 'scripted' needs replies per role: give agents.ROLE.script for the scripted roles "
                             "and a model route for the rest")
        for role, o in self.agents.items():
            if o.model == "scripted" and o.script is None:
                raise InputError(f"role {role} uses model 'scripted' but has no agents.{role}.script")
        if self.context_turns is not None and not self.shows_conversation:
            # a window over a conversation the agents never see would be a factor that changes nothing
            raise InputError(f"context_turns: expected the conversation in context (condition baseline, or "
                             f"conversation: true); condition {self.condition} shows none")
        if self.hnsw is not None and self.vector_backend != "chroma":
            raise InputError("hnsw: expected vector_backend: chroma (the in-memory store is an exact scan and has "
                             "no index settings)")
        if self.distractors is not None and self.distractors.count and not self.memory:
            raise InputError(f"distractors: expected a condition with shared memory; condition {self.condition} "
                             f"has none")
        if self.conflicts != "oracle" and not (self.memory and self.uses_invalidation()):
            # a detector with nothing to decide would be a factor that changes nothing
            raise InputError(f"conflicts: {self.conflicts} expected invalidation on (condition "
                             f"lightweight-invalidation, or invalidation: true); condition {self.condition} has none")
        if self.conflicts != "oracle" and self.distractors is not None and self.distractors.count \
                and self.uses_invalidation():
            # distractors are written in one batch through the store's similarity rule, not through the
            # detector: two detectors in one cell would be mixed in silently
            raise InputError(f"distractors: expected conflicts: oracle with invalidation; under conflicts: "
                             f"{self.conflicts} the distractor entries would be judged by the store's similarity "
                             f"rule, not by the {self.conflicts} detector (not supported yet)")
        return self

    # -- derived settings ---------------------------------------------------------
    @property
    def memory(self) -> bool:
        return self.condition not in ("baseline", "isolated")

    @property
    def shows_conversation(self) -> bool:
        return self.condition == "baseline" if self.conversation is None else self.conversation

    @property
    def writes_script(self) -> bool:
        return self.memory_writes in ("script", "both")

    @property
    def writes_replies(self) -> bool:
        """Every reply written (replies, both); update-turns writes only some: :meth:`writes_reply_on`."""
        return self.memory_writes in ("replies", "both")

    def writes_reply_on(self, write_turn: bool) -> bool:
        """Whether the reply to a turn is written: every reply (replies, both), or under
        update-turns the reply to a turn the script marks write_to_memory."""
        return self.writes_replies or (self.memory_writes == "update-turns" and write_turn)

    @property
    def authors_shown(self) -> bool:
        return self.condition in ("authors-shown", "verified-authority")

    @property
    def verified_authority(self) -> bool:
        """Entries shown and ranked by their true writer (a spoof's claim ignored)."""
        return self.condition == "verified-authority"

    @property
    def namespaced(self) -> bool:
        return self.condition == "namespaced"

    def index_settings(self) -> dict[str, Any]:
        """The HNSW settings a chroma cell's index is built with (the cell's, else Chroma's defaults)."""
        return (self.hnsw or HnswSettings()).model_dump()

    def weights(self) -> tuple[float, float, float]:
        a, b, g, _ = CONDITION_DEFAULTS[self.condition]
        return (a if self.alpha is None else self.alpha, b if self.beta is None else self.beta,
                g if self.gamma is None else self.gamma)

    def uses_invalidation(self) -> bool:
        return CONDITION_DEFAULTS[self.condition][3] if self.invalidation is None else self.invalidation

    def route_for(self, role: str) -> str:
        o = self.agents.get(role)
        if o and o.model:
            return o.model
        if o and o.script is not None:
            return "scripted"
        return self.model

    def agent_routes(self) -> set[str]:
        return {self.model} | {self.route_for(r) for r in self.agents}

    def describe(self) -> str:
        if self.label:
            return self.label
        # the agents' routes and the condition, then every other field that differs from its
        # default: no two cells share a label
        return " · ".join(["+".join(sorted(self.agent_routes())), self.condition,
                           *non_default_parts(self, skip=("model", "condition"))])
