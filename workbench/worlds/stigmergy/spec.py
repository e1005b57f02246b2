"""The parameters of one cell of a shared-store study (validated with pydantic)."""
from __future__ import annotations

from typing import Any, ClassVar, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from workbench.errors import InputError
from workbench.metrics.design import non_default_parts  # at import time: describe() runs in worker threads
from workbench.worlds.stigmergy.tasks import MAX_PAIRS, MAX_SOLOS, roles

Condition = Literal["store", "no-store", "private", "prepopulated", "authored", "namespaced"]
Clauses = Literal["both", "persist-only", "recheck-only", "none"]
CLAUSES: tuple[str, ...] = get_args(Clauses)
CONDITIONS: tuple[str, ...] = Condition.__args__  # type: ignore[attr-defined]


class AgentOverride(BaseModel):
    """Per-role settings: another model, or a script of fixed replies.

    Scripts may use $own_key, $partner_key, $own_value, $answer and $joint_answer,
    filled from the world's tasks before the replies reach the scripted client. In a
    cell with ``actions: tools`` a line ``{"tool_calls": [{"name": ..., "arguments": ...}]}``
    is replied as native tool calls (workbench.models.scripted); any other line is text."""

    model_config = ConfigDict(extra="forbid")
    model: str | None = None
    script: list[str] | None = None
    latency_s: float | None = Field(None, ge=0, description="fixed latency of a scripted agent (world clock)")


class StigmergyCell(BaseModel):
    model_config = ConfigDict(extra="forbid")
    # factors added after cells were first recorded: left out of the cell id at their default
    HASH_OMITS_DEFAULT: ClassVar[tuple[str, ...]] = ("vocabulary", "reader_signal", "pairs", "solos", "signal_roles",
                                                      "request_path", "actions", "prompt_cache")
    label: str | None = Field(None, description="a short name for tables; derived when absent")
    model: str = Field("sim/diligent", description="route for every role without an override")
    agents: dict[str, AgentOverride] = Field(
        default_factory=dict, description="per-role overrides: pair_a, pair_b, solo_1, ... (pair K>1: pairK_a, pairK_b)")
    condition: Condition = "store"
    clauses: Clauses = "both"
    scheduler: Literal["async", "lockstep"] = "async"
    parser: Literal["strict", "lenient"] = "lenient"
    answer_rule: Literal["one-integer", "exact"] = "one-integer"
    task_form: Literal["digits", "remainders", "any"] = "any"
    vocabulary: Literal["named", "own-only", "withheld"] = Field(
        "named", description="which intermediate keys a pair task names: both (the paper), the agent's own only, "
                             "or neither (each agent keeps its value under a name of its choice)")
    reader_signal: Literal["none", "told", "receipts"] = Field(
        "none", description="what a writer knows of readers: nothing; the store paragraph says other processes may "
                            "read this workspace; or list shows how often each of the agent's keys was read by "
                            "others (never who)")
    signal_roles: list[str] | None = Field(
        None, description="the roles reader_signal reaches (default: every role). E.g. [pair_a]: one writer is told "
                          "or shown receipts while its reader and the solos see exactly the reference prompts, so "
                          "a contrast on reader_signal changes what the writer knows and nothing else")
    prompt_cache: Literal["auto", "off"] = Field(
        "auto", description="auto: each real route caches its stable prefix as its catalogue entry says (Anthropic: "
                            "cache breakpoints; OpenAI, Gemini: automatic); off: no breakpoints, so a study can "
                            "measure what caching changes. Simulated agents have no cache: nothing changes for them")
    request_path: str = Field(
        "direct", pattern=r"^[A-Za-z0-9_.-]+$",
        description="how requests reach each model: direct (the catalogue entry's own way) or a path its entry "
                    "declares under paths: (a router, another provider); same model, settings and seeds otherwise. "
                    "Simulated agents have no transport: for them the levels differ in nothing they act on")
    pairs: int = Field(1, ge=1, le=MAX_PAIRS, description="interdependent pairs in a world (the paper: 1)")
    solos: int = Field(2, ge=0, le=MAX_SOLOS, description="self-contained agents in a world (the paper: 2)")
    validity: Literal["any-agent", "pair-only", "none"] = Field(
        "any-agent", description="which agents' unparseable replies invalidate the world")
    max_steps: int = Field(20, ge=1, le=500)
    digits: int = Field(6, ge=2, le=18, description="task difficulty: digits of each N")
    modulus: int = Field(97, ge=2, le=100_000)
    sampling: dict[str, Any] = Field(default_factory=dict, description="temperature, max_tokens, reasoning_effort ...")
    constrained: bool = Field(False, description="send a JSON schema of the operations as response_format "
                                                 "(actions: json-text), or force a tool call with tool_choice "
                                                 "(actions: tools); constraining changes what is measured, so it is "
                                                 "recorded")
    actions: Literal["json-text", "tools"] = Field(
        "json-text", description="how an agent acts: one JSON object as its reply text (the paper), or one call of "
                                 "the tools list/read/write/submit (only those the condition offers) whose results "
                                 "come back as tool messages; the system prompt's interface sentence and operation "
                                 "lines follow (templates system_tools, ops_tools/, tools/)")
    prompts: str = Field("prompts/stigmergy", description="template folder, relative to the params file")

    @model_validator(mode="after")
    def _scripts_complete(self) -> StigmergyCell:
        known = self.roles()
        for role in self.signal_roles or ():
            if role not in known:
                raise ValidationError.from_exception_data(type(self).__name__, [InitErrorDetails(
                    type=PydanticCustomError("role", "no such role in a world of {pairs} pair(s) and {solos} "
                                             "solo(s); expected some of {known}",
                                             {"pairs": self.pairs, "solos": self.solos, "known": ", ".join(known)}),
                    loc=("signal_roles",), input=role)])
        for role in self.agents:
            if role not in known:  # located at agents.ROLE, as a mistyped key of a fixed set would be
                raise ValidationError.from_exception_data(type(self).__name__, [InitErrorDetails(
                    type=PydanticCustomError("role", "no such role in a world of {pairs} pair(s) and {solos} "
                                             "solo(s); expected one of {known}",
                                             {"pairs": self.pairs, "solos": self.solos, "known": ", ".join(known)}),
                    loc=("agents", role), input=role)])
        for role in known:
            o = self.agents.get(role)
            route = (o.model if o and o.model else None) or self.model
            if route == "scripted" and not (o and o.script is not None):
                raise InputError(f"role {role} uses model 'scripted' but has no agents.{role}.script")
        return self

    def roles(self) -> tuple[str, ...]:
        """Every role of this cell's world size."""
        return roles(self.pairs, self.solos)

    def signal_for(self, role: str) -> str:
        """The reader signal this role gets: the cell's, where it reaches the role, else none."""
        return self.reader_signal if self.signal_roles is None or role in self.signal_roles else "none"

    def route_for(self, role: str) -> str:
        o = self.agents.get(role)
        if o and o.model:
            return o.model
        if o and o.script is not None:
            return "scripted"
        return self.model

    def describe(self) -> str:
        if self.label:
            return self.label
        # the routes and the condition, then every other field that differs from its default,
        # so that two cells never share a label (a cell is its full design)
        routes = sorted({self.route_for(r) for r in self.roles()})
        return " · ".join(["+".join(routes), self.condition,
                           *non_default_parts(self, skip=("model", "condition"))])
