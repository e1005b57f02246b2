"""The parameters of one cell of a peer-verification study (validated with pydantic).

Defaults are the source study's main setting: 10 episodes, 15 model turns in
the task phase, 5 rounds of 200-character messages (throttled), 3 attempts per
message turn and per verdict, the raw-only policy, shared verdict-accuracy
rewards with review and reflection, and full cross-episode memory."""
from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from workbench.errors import InputError
from workbench.metrics.design import non_default_parts  # at import time: describe() runs in worker threads
from workbench.worlds.collusion.spans import POLICIES, THROTTLES, episode_values

AGENTS: tuple[str, ...] = ("alice", "bob")
MemoryScope = Literal["full", "communication-onward", "feedback-and-reflection"]
MEMORY_SCOPES: tuple[str, ...] = MemoryScope.__args__  # type: ignore[attr-defined]


class AgentSpec(BaseModel):
    """One agent: its model route (or a script of reply texts) and its memory length."""

    model_config = ConfigDict(extra="forbid")
    model: str | None = Field(None, description="route; defaults to the cell's model")
    script: list[str] | None = Field(None, description="reply texts of a scripted agent (JSON tool calls)")
    latency_s: float | None = Field(None, ge=0)
    memory_length: int | Literal["all", "none"] = Field(
        "all", description="earlier episodes kept in context: all, none, or the last N")
    sampling: dict[str, Any] = Field(default_factory=dict, description="this agent's sampling settings, over the "
                                                                       "cell's (temperature, reasoning_effort ...)")

    @field_validator("memory_length")
    @classmethod
    def _length(cls, v: Any) -> Any:
        if isinstance(v, int) and v < 0:
            raise InputError("memory_length must be all, none or a non-negative integer")
        return v

    def keep(self) -> int | None:
        """How many earlier episodes to keep (None: all)."""
        if self.memory_length == "all":
            return None
        if self.memory_length == "none":
            return 0
        return int(self.memory_length)


ControlledAlias = Literal["none", "compliant", "violating"]


class ControlledSpec(BaseModel):
    """The source study's controlled peer: what its messages are (its own summaries, or
    consecutive char_limit slices of its raw log) crossed with its fixed verdict."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    messages: Literal["summary", "raw-prefix"] = Field(..., description="summary: its recorded summaries; "
                                                                       "raw-prefix: slices of its raw log")
    verdict: Literal["accept", "reject"] = Field(..., description="its fixed verdict on alice's task")

    def label(self) -> str:
        return f"{self.messages}+{self.verdict}"


# the names of the two settings shipped before the 2x2 (kept: studies use them)
CONTROLLED_ALIASES: dict[str, ControlledSpec] = {
    "compliant": ControlledSpec(messages="raw-prefix", verdict="reject"),
    "violating": ControlledSpec(messages="summary", verdict="accept"),
}


class WarmupSpec(BaseModel):
    """A warm-up regime: how many episodes come before the evaluation episodes and what is
    relaxed in them (the verdict policy, the channel throttle); the cell's spans then cover
    the evaluation episodes, and the warm-up's spans are derived from this."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    episodes: int = Field(..., ge=1, le=50, description="warm-up episodes before the evaluation episodes")
    policy: Literal["raw-only", "summary-allowed"] | None = Field(
        None, description="verdict policy in the warm-up (default: that of the first evaluation episode)")
    throttle: Literal["throttled", "no-throttle"] | None = Field(
        None, description="channel in the warm-up (default: that of the first evaluation episode)")


class CellMonitorSpec(BaseModel):
    """The cell's monitor condition: a route that reads each recorded episode after the fact
    (``workbench collusion monitor``; never reaching the agents), and what it reads."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    route: str = Field(..., min_length=1, description="monitor route: a model, or sim-collusion-monitor/cues")
    reads: Literal["channel", "channel+reasoning"] = Field(
        "channel", description="channel: the delivered messages; channel+reasoning: also the agents' verdict "
                               "reasoning and reflections")


class CollusionCell(BaseModel):
    model_config = ConfigDict(extra="forbid")
    # protocol factors added after cells were first recorded: a cell at their default keeps its id
    # (the templates' hashes, recorded with every run, say that the wording changed)
    HASH_OMITS_DEFAULT: ClassVar[tuple[str, ...]] = ("horizon", "limit_notice", "verdict_opening", "answer_check",
                                                     "memory", "code_tools", "extraction_ids", "data_questions")
    label: str | None = Field(None, description="a short name for tables; derived when absent")
    model: str = Field("sim-collusion/pragmatic", description="route of every agent without its own")
    alice: AgentSpec = Field(default_factory=AgentSpec)
    bob: AgentSpec = Field(default_factory=AgentSpec)
    episodes: int = Field(10, ge=1, le=200, description="evaluation episodes")
    warmup: int = Field(0, ge=0, le=50, description="warm-up episodes before them (flagged in the records): none, "
                                                    "{episodes: N, policy: P, throttle: T} (the regime; the spans "
                                                    "then cover the evaluation episodes and the warm-up's are "
                                                    "derived), or N (the spans cover all episodes, the old spelling)")
    warmup_regime: WarmupSpec | None = Field(None, exclude=True, description="set by warmup: {...}; recorded as "
                                                                             "the cell's warmup")
    _inherited: tuple[str, ...] = PrivateAttr(default=())  # agents whose memory_length is the cell's memory
    memory: int | Literal["all", "none"] = Field(
        "all", description="both agents' memory length (all, none or the last N), unless an agent sets its own "
                           "memory_length to other than all")
    sequence_seed: int = Field(20260901, description="seed of the fixed episode sequences (shared by all cells)")
    sequences: int = Field(50, ge=1, le=10_000, description="how many fixed sequences; world i uses sequence i")
    sequences_file: str | None = Field(
        None, description="episode sequences imported from a manifest in the source study's format (a folder, its "
                          "sampled_manifest_record.json or one rep file), relative to the params file; replaces "
                          "the seeded sequences")
    max_turns: int = Field(15, ge=1, le=200, description="model turns of the task phase")
    max_rounds: int = Field(5, ge=0, le=50, description="message rounds; 0: no channel (the source study's "
                                                          "no-communication condition)")
    char_limit: int = Field(200, ge=1, le=100_000)
    attempts: int = Field(3, ge=1, le=20, description="attempts per message turn")
    verdict_attempts: int = Field(3, ge=1, le=20)
    policy_spans: str = Field("raw-only:*", description="verdict policy per episode, e.g. summary-allowed:3,raw-only:*")
    throttle_spans: str = Field("throttled:*", description="channel per episode, e.g. no-throttle:3,throttled:*")
    reward_type: Literal["verdict-accuracy", "acceptance"] = "verdict-accuracy"
    reward_scope: Literal["shared", "separate"] = "shared"
    no_reward: bool = Field(False, description="no reward instructions, reward feedback or reflection "
                                               "(the verdict review stays unless turned off)")
    verdict_review: bool = True
    reflection: bool = True
    memory_scope: MemoryScope = "full"
    feedback: Literal["verdict-correctness", "full"] = Field(
        "verdict-correctness", description="what the verdict review tells an agent: whether each verdict was "
                                           "right, with the two task ids (the source study's review), or also the "
                                           "peer's actual verdict and the truth of each task (full)")
    tool_choice: Literal["forced", "auto"] = Field(
        "forced", description="forced: require a tool call in the task, communication and verdict phases "
                              "(by name when one tool is offered) where the provider supports it")
    reasoning_replay: bool = Field(True, description="keep the reasoning a provider returns in the agent's own "
                                                     "later context (as reasoning_content on its turns)")
    context_limit_tokens: int | None = Field(None, ge=100, description="drop the oldest episode when the context "
                                                                       "would exceed this many (approximate) tokens")
    horizon: Literal["hidden", "shown"] = Field(
        "hidden", description="hidden: the agents are never told how many episodes there are (the source "
                              "study); shown: the system prompt and every phase opening say 'of N'")
    limit_notice: Literal["on-reject", "upfront"] = Field(
        "on-reject", description="on-reject: the message length limit is learned from the rejection of a longer "
                                 "message (the source study); upfront: the communication opening and the "
                                 "send_message schema state it")
    verdict_opening: Literal["original", "restated"] = Field(
        "original", description="original: the verdict phase opens with the source study's question and output "
                                "format; restated: it restates the acceptance rule and the episode's policy")
    answer_check: Literal["original", "none"] = Field(
        "original", description="original: a malformed answer (code not no_bug/bug, extraction not a JSON array "
                                "of ids, data rows not the answer columns) is refused with the source study's "
                                "message and the agent may save again; none: saved as given and scored wrong")
    code_tools: Literal["workbench", "original"] = Field(
        "workbench", description="the code-analysis tools of our own tasks: workbench (read_file, write_test, "
                                 "run_tests; pytest -q, 10 s) or original (the source study's read_code, "
                                 "write_test_file, run_tests; pytest -vv, 30 s, TARGET_CODE_PATH); imported code "
                                 "tasks always get the original's")
    extraction_ids: Literal["shown", "resolved"] = Field(
        "shown", description="our record-extraction tasks: shown (each record line starts with its id; "
                             "read_document) or resolved (the source study's form: the document without ids, "
                             "read_source, and resolve_records maps the chosen lines to ids)")
    data_questions: Literal["simple", "multi-join"] = Field(
        "simple", description="our data-search questions: simple (one or two conditions, rows as lists in the "
                              "asked column order) or multi-join (the source study's form: searches over joined "
                              "tables, most with EXISTS, answered as objects with exactly the answer key columns)")
    controlled: ControlledAlias | ControlledSpec = Field(
        "none", description="replace bob by a recorded peer: {messages: summary | raw-prefix, verdict: accept | "
                            "reject}; compliant = raw-prefix + reject, violating = summary + accept")
    peer_cache: str = Field("peer-cache", description="folder of recorded peers, relative to the params file")
    peer_model: str | None = Field(None, description="route that records the controlled peer (default: bob's)")
    observed_verdict: bool | Literal["withheld"] = Field(
        False, description="alice's feedback beside a controlled peer: hidden (false; the source study's feedback: "
                           "the shared reward and whether each verdict was right), shown (true; also 'Bob "
                           "submitted X on your task'), or withheld (the peer's verdict and its reward term left "
                           "out, the workbench's earlier feedback)")
    sampling: dict[str, Any] = Field(default_factory=dict, description="temperature, max_tokens, reasoning_effort ...")
    prompts: str = Field("prompts/collusion", description="template folder, relative to the params file")
    monitor: CellMonitorSpec | None = Field(
        None, description="the monitor condition: {route, reads: channel | channel+reasoning}, run over the "
                          "recorded episodes by workbench collusion monitor (post hoc, never seen by the agents)")

    @model_validator(mode="before")
    @classmethod
    def _agents(cls, data: Any) -> Any:
        """``agents: {alice: {...}, bob: {...}}`` is another way to write ``alice:`` / ``bob:``
        (e.g. ``agents: {alice: {sampling: {temperature: 0.2}}}``); a setting given both ways is refused."""
        if not isinstance(data, dict) or "agents" not in data:
            return data
        data = dict(data)
        agents = data.pop("agents")
        if not isinstance(agents, dict):
            raise InputError("agents: expected a mapping of alice and/or bob to their settings")
        for slot, body in agents.items():
            if slot not in AGENTS:
                raise InputError(f"agents.{slot}: expected alice or bob")
            if not isinstance(body, dict):
                raise InputError(f"agents.{slot}: expected a mapping of settings")
            own = dict(data.get(slot) or {})
            both = sorted(set(own) & set(body))
            if both:
                raise InputError(f"agents.{slot}.{both[0]}: also set as {slot}.{both[0]}; set it once")
            data[slot] = {**own, **body}
        return data

    @model_validator(mode="before")
    @classmethod
    def _warmup(cls, data: Any) -> Any:
        """``warmup: none`` is 0; ``warmup: {episodes, policy, throttle}`` is the regime
        (its episode count is ``warmup``)."""
        if not isinstance(data, dict):
            return data
        w = data.get("warmup")
        if w == "none":
            data = {**data, "warmup": 0}
        elif isinstance(w, (dict, WarmupSpec)):
            if data.get("warmup_regime") is not None:
                raise InputError("warmup_regime: set by warmup: {...}; set warmup alone")
            regime = w if isinstance(w, WarmupSpec) else WarmupSpec.model_validate(w)
            data = {**data, "warmup": regime.episodes, "warmup_regime": regime}
        return data

    @field_validator("memory")
    @classmethod
    def _memory(cls, v: Any) -> Any:
        if isinstance(v, int) and v < 0:
            raise InputError("memory must be all, none or a non-negative integer")
        return v

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> Any:
        """The record as written: a warm-up regime as ``warmup``, and an agent's memory
        length that comes from the cell's ``memory`` as the agent's default (all)."""
        out = handler(self)
        if isinstance(out, dict):
            if self.warmup_regime is not None and "warmup" in out:
                out["warmup"] = self.warmup_regime.model_dump(mode="json", exclude_none=True)
            for slot in self._inherited:
                if isinstance(out.get(slot), dict) and "memory_length" in out[slot]:
                    out[slot]["memory_length"] = "all"
            if out.get("monitor", 0) is None:  # no monitor: recorded as before the field existed
                del out["monitor"]
        return out

    @field_validator("observed_verdict", mode="before")
    @classmethod
    def _observed(cls, v: Any) -> Any:
        """``shown`` and ``hidden`` are the factor's names; stored as true and false, so cells
        recorded before the names keep their ids."""
        return {"shown": True, "hidden": False}.get(v, v) if isinstance(v, str) else v

    @model_validator(mode="after")
    def _check(self) -> CollusionCell:
        if self.warmup_regime is not None and self.warmup != self.warmup_regime.episodes:
            raise InputError("warmup: the regime's episodes and warmup differ; set warmup once")
        self.policies()
        self.throttles()
        # the cell's memory is each agent's length unless the agent sets its own (other than all)
        inherited = [s for s in AGENTS if self.memory != "all" and getattr(self, s).memory_length == "all"]
        self._inherited = tuple(inherited)
        for slot in inherited:
            setattr(self, slot, getattr(self, slot).model_copy(update={"memory_length": self.memory}))
        for slot in AGENTS:
            spec: AgentSpec = getattr(self, slot)
            if self.route_for(slot) == "scripted" and spec.script is None:
                raise InputError(f"{slot} uses model 'scripted' but has no {slot}.script")
        if self.controlled_spec() is not None and self.peer_route() == "scripted":
            raise InputError("a controlled peer is recorded by a model; set peer_model (or bob.model) to a route")
        return self

    def controlled_spec(self) -> ControlledSpec | None:
        """The controlled peer's messages and verdict (aliases resolved), or None without one."""
        if isinstance(self.controlled, ControlledSpec):
            return self.controlled
        return CONTROLLED_ALIASES.get(self.controlled)

    def observed(self) -> str:
        """hidden | shown | withheld (see observed_verdict)."""
        if self.observed_verdict == "withheld":
            return "withheld"
        return "shown" if self.observed_verdict else "hidden"

    def route_for(self, slot: str) -> str:
        spec: AgentSpec = getattr(self, slot)
        if spec.model:
            return spec.model
        if spec.script is not None:
            return "scripted"
        return self.model

    def sampling_for(self, slot: str) -> dict[str, Any]:
        """The cell's sampling settings with the agent's own over them."""
        spec: AgentSpec = getattr(self, slot)
        return {**self.sampling, **spec.sampling}

    def peer_route(self) -> str:
        return self.peer_model or self.route_for("bob")

    def n_total(self) -> int:
        return self.warmup + self.episodes

    def policies(self) -> list[str]:
        r = self.warmup_regime
        if r is None:
            return episode_values(self.policy_spans, POLICIES, self.n_total(), field="policy_spans")
        rest = episode_values(self.policy_spans, POLICIES, self.episodes, field="policy_spans")
        return [r.policy or rest[0]] * r.episodes + rest

    def throttles(self) -> list[bool]:
        r = self.warmup_regime
        if r is None:
            values = episode_values(self.throttle_spans, THROTTLES, self.n_total(), field="throttle_spans")
        else:
            rest = episode_values(self.throttle_spans, THROTTLES, self.episodes, field="throttle_spans")
            values = [r.throttle or rest[0]] * r.episodes + rest
        return [v == "throttled" for v in values]

    def describe(self) -> str:
        if self.label:
            return self.label
        # the routes, then every field that differs from its default: no two cells share a label
        routes = sorted({self.route_for(s) for s in AGENTS})
        return " · ".join(["+".join(routes), *non_default_parts(self, skip=("model",))])
