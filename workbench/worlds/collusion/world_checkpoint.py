"""Episode-level checkpoints of one trajectory of the peer-verification world.

A trajectory of ten real-model episodes is long; a crash in episode 9 should not
lose the eight before it. As each episode finishes, one JSON line is appended
(and synced to disk) to ``<checkpoint_dir>/<world_id>.collusion.jsonl``: the
episode's record, the step records it made, each live agent's memory of that
episode (earlier episodes never change once finished) with its overflow drops,
and each client's position (the random stream of a simulated agent, the next
reply of a scripted or replayed one; a hosted model's client keeps none).

Lines are compressed (zlib, base64): a simulated ten-episode trajectory's
checkpoint is about 1 MB as plain JSON.

When the world is run again (the study resumed after a kill or an
infrastructure failure) it restores those episodes, memories and client
positions and goes on with the next episode, so its records equal those of an
uninterrupted run: the restored steps take the run number of the new world
record (loaders keep a world's steps of its record's run), and only the run
number, wall-clock timings and ``timing.resumed`` (episodes restored, the runs
that made them) tell the two apart; a replay through the engine reproduces it.
A checkpoint is used only when its
fingerprint (cell, seed, world, episode sequence, system prompts, templates and
routes) matches the world's; otherwise it is discarded, and ``timing.resumed``
says why. A torn last line (a kill while it was being written) is dropped.
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
import random
import zlib
from pathlib import Path
from typing import Any

from workbench.records import dumps
from workbench.worlds.collusion.memory import AgentMemory, EpisodeMemory

VERSION = 2  # 2: each episode line holds its entry zlib-compressed (base64), beside its episode number
SUFFIX = ".collusion.jsonl"


def checkpoint_path(folder: Path, world_id: str) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in world_id)
    return Path(folder) / f"{safe}{SUFFIX}"


def fingerprint(facts: dict[str, Any]) -> str:
    blob = json.dumps({"version": VERSION, **facts}, sort_keys=True, ensure_ascii=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


# -- client positions ------------------------------------------------------------------------
def client_state(client: Any) -> dict[str, Any]:
    """What a client carries from one call to the next that shapes its later replies: a seeded
    random stream (``rng``) and a position in a list of replies (``_i``). Hosted-model clients
    keep neither (their replies depend on the request alone)."""
    out: dict[str, Any] = {}
    rng = getattr(client, "rng", None)
    if isinstance(rng, random.Random):
        version, internal, gauss = rng.getstate()
        out["rng"] = [version, list(internal), gauss]
    pos = getattr(client, "_i", None)
    if isinstance(pos, int) and not isinstance(pos, bool):
        out["_i"] = pos
    return out


def restore_client(client: Any, state: dict[str, Any]) -> None:
    if "rng" in state:
        version, internal, gauss = state["rng"]
        client.rng.setstate((version, tuple(internal), gauss))
    if "_i" in state:
        client._i = int(state["_i"])


# -- memory ------------------------------------------------------------------------------------
def memory_entry(memory: AgentMemory) -> dict[str, Any]:
    ep = memory.current
    return {"episode": ep.episode, "phases": ep.phases, "dropped": memory.dropped}


def restore_memory(memory: AgentMemory, entry: dict[str, Any]) -> None:
    memory.episodes.append(EpisodeMemory(int(entry["episode"]), {p: list(v) for p, v in entry["phases"].items()}))
    memory.dropped = int(entry["dropped"])


# -- the file ----------------------------------------------------------------------------------
class TrajectoryCheckpoint:
    """The checkpoint file of one world: read what it holds, then append episode by episode."""

    def __init__(self, path: Path, fingerprint: str) -> None:
        self.path = Path(path)
        self.fingerprint = fingerprint
        self.discarded: str | None = None  # why an existing checkpoint was not used

    def load(self) -> list[dict[str, Any]]:
        """The finished episodes it holds, in order (consecutive from episode 1). Anything after
        the last whole line is cut off; a checkpoint of another world or setting is discarded."""
        if not self.path.exists():
            self._start()
            return []
        raw = self.path.read_bytes()
        entries: list[dict[str, Any]] = []
        good = 0
        header: dict[str, Any] | None = None
        for line in raw.splitlines(keepends=True):
            if not line.endswith(b"\n"):
                break  # torn by a kill mid-write
            try:
                value = json.loads(line)
            except ValueError:
                break
            if header is None:
                header = value
            elif value.get("episode") == len(entries) + 1 and isinstance(value.get("zlib"), str):
                try:
                    entries.append(json.loads(zlib.decompress(base64.b64decode(value["zlib"]))))
                except (ValueError, zlib.error):
                    break
            else:
                break
            good += len(line)
        if header is None or header.get("kind") != "collusion-checkpoint" or header.get("version") != VERSION:
            self.discarded = "not a checkpoint this version can read"
        elif header.get("fingerprint") != self.fingerprint:
            self.discarded = "made for another cell, seed, sequence, prompt or route"
        if self.discarded is not None:
            self._start()
            return []
        if good < len(raw):
            with self.path.open("r+b") as f:
                f.truncate(good)
                f.flush()
                os.fsync(f.fileno())
        return entries

    def _start(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with tmp.open("w", encoding="ascii") as f:
            f.write(dumps({"kind": "collusion-checkpoint", "version": VERSION, "fingerprint": self.fingerprint}) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    def append(self, entry: dict[str, Any]) -> None:
        """One finished episode, compressed (its steps and memory repeat much text), synced."""
        packed = base64.b64encode(zlib.compress(dumps(entry).encode("ascii"), 6)).decode("ascii")
        with self.path.open("a", encoding="ascii") as f:
            f.write(dumps({"episode": entry["episode"], "run": entry["run"], "zlib": packed}) + "\n")
            f.flush()
            os.fsync(f.fileno())
