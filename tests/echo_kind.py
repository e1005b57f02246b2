"""A fourth world kind defined entirely in tests: one agent, N turns, each reply echoed.

It exists to prove the kind interface: registered through the registry (no
package file names it), it must validate, run, resume, replay, score, lock and
be reported on like the shipped kinds, and bring its own surfaces through the
kind's hooks: a page in the world browser (every turn's prompt and reply) and a
subcommand (``workbench echo words RUN_DIR``: the words echoed per cell)."""
from __future__ import annotations

import argparse
import html
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from workbench.kinds import WorldContext, WorldKind, WorldOutcome, register_kind, unregister_kind
from workbench.kinds.base import KindCommand, Section
from workbench.models.base import ModelRequest
from workbench.templates import template_set

PROMPTS = Path(__file__).resolve().parent / "echo"


class EchoCell(BaseModel):
    model_config = ConfigDict(extra="forbid")
    label: str | None = None
    model: str = "scripted"
    script: list[str] = Field(default_factory=lambda: ["hello", "again", "bye"])
    steps: int = Field(3, ge=1, le=20)
    prompts: str = str(PROMPTS)


class EchoKind(WorldKind):
    name = "echo"
    cell_spec = EchoCell

    def routes(self, cell: EchoCell) -> set[str]:
        return {cell.model}

    def template_root(self, cell: EchoCell, base_dir: Path) -> Path:
        return (Path(base_dir) / cell.prompts).resolve()

    async def run_world(self, cell: EchoCell, ctx: WorldContext) -> WorldOutcome:
        t = template_set(self.template_root(cell, ctx.base_dir))
        client = ctx.client_factory(cell.model, "echo", ctx.seed, {"script": cell.script})
        steps: list[dict[str, Any]] = []
        failed = None
        for i in range(cell.steps):
            prompt = t.render("turn", step=i, steps=cell.steps)
            reply = await client.complete(ModelRequest(messages=[{"role": "user", "content": prompt}]))
            steps.append({"kind": "step", "world_id": ctx.world_id, "run": ctx.run, "seq": i, "agent": "echo",
                          "request": {"prompt": prompt}, "reply": reply.to_record()})
            if reply.failed:
                failed = {"error": reply.error, "step": i}
                break
        world = {"kind": "world", "world_kind": self.name, "world_id": ctx.world_id, "cell_id": ctx.cell_id,
                 "seed": ctx.seed, "run": ctx.run, "cell": cell.model_dump(mode="json"), "valid": failed is None,
                 "failed": failed, "agents": [{"agent": "echo", "role": "echo", "route": cell.model}]}
        return WorldOutcome(world, steps)

    def world_metrics(self, world: dict[str, Any], steps: list[dict[str, Any]]) -> dict[str, Any]:
        texts = [s["reply"]["text"] for s in steps]
        return {"turns": len(steps), "echoed_chars": sum(len(t) for t in texts)}

    def metric_tables(self, records: Any, **_rules: Any) -> dict[str, Any]:
        rows = [{"cell_id": w["cell_id"], **w["metrics"]} for w in records.worlds]
        frame = pd.DataFrame(rows).groupby("cell_id", as_index=False).sum() if rows else pd.DataFrame()
        frame.attrs = {"title": "Echo turns per cell"}
        return {"echo": frame}

    def world_page(self, records: Any, world: dict[str, Any], steps: list[dict[str, Any]]) -> list[Section]:
        rows = "".join(f"<tr><td>{s['seq']}</td><td>{html.escape(s['request']['prompt'])}</td>"
                       f"<td>{html.escape(s['reply'].get('text') or '')}</td></tr>" for s in steps)
        return [("Echo turns", f"<table class='echo-turns'><tr><th>turn</th><th>prompt</th><th>reply</th></tr>{rows}</table>")]

    def commands(self) -> list[KindCommand]:
        return [KindCommand("words", "print the words echoed in each cell of a run directory",
                            "workbench echo words outputs/echo", _configure_words, _words)]


def _configure_words(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", help="run directory of an echo study")


def _words(args: argparse.Namespace) -> int:
    from workbench.records import load_run

    records = load_run(args.dir)
    per_cell: dict[str, Counter[str]] = {}
    for world_id, steps in sorted(records.steps.items()):
        cell = next(w["cell_id"] for w in records.worlds if w["world_id"] == world_id)
        per_cell.setdefault(cell, Counter()).update(s["reply"]["text"] for s in steps)
    for cell, words in sorted(per_cell.items()):
        print(cell, " ".join(f"{w}={n}" for w, n in sorted(words.items())))
    return 0


KIND = EchoKind()


def install() -> EchoKind:
    return register_kind(KIND)  # type: ignore[return-value]


def uninstall() -> None:
    unregister_kind(KIND.name)
