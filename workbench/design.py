"""A cell's design fingerprint: one hash over every input a world's result can depend on.

Two worlds of one cell id are the same experiment only if they ran under the same
inputs, and a cell id says nothing of most of them: it hashes the cell's spec, not
what its templates say, the seed, the simulated profiles' parameters, the catalogue
entry behind a route or the kind's code. :func:`cell_designs` hashes each of those
as a named *part* (the content, never a path), and a cell's fingerprint is the hash
of its parts. The runner stamps every world with its cell's fingerprint and refuses
to add worlds of a changed design to a run directory unless the change is declared
(``--accept-changes``); analysis keeps worlds of one cell id under two fingerprints
apart; and preregistration locks hash the same parts with this same function, so a
lock and a run can never disagree about what "the design" is.

Parts are named for what a reader would look for: ``seed``, ``cell spec``,
``template system.txt``, ``monitor prompt``, ``kind code workbench/worlds/...``,
``kind data .../twins.yaml``, ``profile sim/twin-gpt-5-nano``, ``model gpt-5-nano``,
``local model qwen2.5-coder-0.5b``. A part that is a value (the seed, a catalogue
entry) also keeps the value, so a refusal can say "seed: 20261202 -> 999".
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.routes import is_simulated_route

SKIPPED_NAMES = ("__pycache__", ".ipynb_checkpoints", ".DS_Store")


def sha256_text(text: str | bytes) -> str:
    return hashlib.sha256(text if isinstance(text, bytes) else text.encode("utf-8")).hexdigest()


def canonical(value: Any) -> str:
    """A value as the one JSON text its hash is taken over (sorted keys, no spaces)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


@dataclass
class CellDesign:
    """One cell's design: its parts (name -> sha256 of the content) and, for parts that are
    values, the value as shown to a reader. ``contents`` holds each part's bytes for the
    run directory's content store (never compared, never part of the fingerprint)."""

    cell_id: str
    parts: dict[str, str] = field(default_factory=dict)
    shown: dict[str, str] = field(default_factory=dict)
    contents: dict[str, bytes] = field(default_factory=dict, repr=False)

    @property
    def fingerprint(self) -> str:
        return sha256_text("\n".join(f"{k}={v}" for k, v in sorted(self.parts.items())))

    def add_value(self, name: str, value: Any, shown: str | None = None) -> None:
        text = canonical(value)
        self.parts[name] = sha256_text(text)
        self.shown[name] = shown if shown is not None else (text if len(text) <= 200 else text[:197] + "...")
        self.contents[self.parts[name]] = text.encode("utf-8")

    def add_file(self, name: str, path: Path) -> None:
        digest, data = _read_hashed(path)
        self.parts[name] = digest
        self.shown[name] = str(path)
        self.contents[digest] = data

    def record(self) -> dict[str, Any]:
        """What the run directory keeps of it (``design/<fingerprint>.json``)."""
        return {"cell_id": self.cell_id, "fingerprint": self.fingerprint, "parts": dict(sorted(self.parts.items())),
                "shown": dict(sorted(self.shown.items()))}


_HASHED: dict[tuple[str, int, int], tuple[str, bytes]] = {}  # (path, mtime_ns, size) -> (sha256, bytes)


def _read_hashed(path: Path) -> tuple[str, bytes]:
    """A file's hash and bytes, read once per process while its size and modification time stay
    the same (a study's cells share the kind's code; a notebook recomputes designs often)."""
    st = path.stat()
    key = (str(path), st.st_mtime_ns, st.st_size)
    hit = _HASHED.get(key)
    if hit is None:
        data = path.read_bytes()
        hit = _HASHED[key] = (sha256_text(data), data)
    return hit


def _files(root: Path) -> list[Path]:
    if root.is_file():
        return [root]
    if not root.is_dir():
        return []
    return sorted(p for p in root.rglob("*") if p.is_file() and not any(s in p.parts for s in SKIPPED_NAMES)
                  and not p.name.endswith((".pyc", ".pyo")))


def _package_name(path: Path) -> str:
    """A file inside a Python package named from the folder above its top package
    (``workbench/worlds/stigmergy/profiles/twins.yaml``), so the name is the same in a
    checkout, a wheel and a copy; a file in no package keeps its full path."""
    path = path.resolve()
    inner = next((p for p in path.parents if (p / "__init__.py").exists()), None)
    if inner is None:
        return str(path)
    top = inner
    while (top.parent / "__init__.py").exists():
        top = top.parent
    return path.relative_to(top.parent).as_posix()


def _study_name(path: Path, base_dir: Path) -> str:
    """A study's own input named from the study's folder (moving the study renames nothing)."""
    try:
        return Path(path).resolve().relative_to(Path(base_dir).resolve()).as_posix()
    except ValueError:
        return _package_name(Path(path))


def _route_parts(design: CellDesign, route: str, study: Any) -> None:
    """The parts a route contributes: a simulated profile's definition, or the catalogue
    entry of a hosted or local model (with how it is served and translated)."""
    from workbench.kinds import load_kinds

    if route in ("scripted", "replay"):
        return
    if is_simulated_route(route):
        own = getattr(study, "profiles", {}) or {}
        name = route.split("/", 1)[1] if "/" in route else route
        if name in own:  # a profile the study defines
            body = own[name].model_dump(mode="json") if hasattr(own[name], "model_dump") else repr(own[name])
            design.add_value(f"profile {route}", body, shown=f"defined in {study.path.name}")
            return
        for kind in load_kinds():
            text = kind.profile_text(route)
            if text is not None:
                design.add_value(f"profile {route}", text, shown=f"the {kind.name} kind's profile")
                return
        return  # a profile defined in a kind's code: its code is a part already
    prefix, _, rest = route.partition("/")
    if prefix == "local":
        from workbench.local.catalogue import get_local
        from workbench.local.runtime import choose, installed_version

        entry = get_local(rest)
        chosen = choose(entry.runtime) if installed_version() else None
        design.add_value(f"local model {rest}", {
            "entry": entry.model_dump(mode="json"), "xllamacpp": installed_version(),
            "runtime": chosen.kind if chosen else None,
            "build": _built(chosen.path) if chosen is not None and chosen.path else None})
        return
    from workbench.models.catalogue import default_catalogue

    catalogue = default_catalogue()
    hosted: dict[str, Any] = {"route": route}
    if route in catalogue:
        from workbench.models.litellm_client.keys import strip_credentials

        model = catalogue.get(route)
        hosted["entry"] = model.model_dump(mode="json")
        if hosted["entry"].get("api_base"):  # a password in a URL is no part of the design, and is never kept
            hosted["entry"]["api_base"] = strip_credentials(hosted["entry"]["api_base"])
        # how the route's parameters are translated for its provider: litellm's version, and the
        # parameters it would send for the entry's defaults (reasoning_effort -> a thinking budget, ...)
        hosted["translated"] = _translated(model.route, model.defaults())
    hosted["litellm"] = _litellm_version()
    design.add_value(f"model {route}", hosted)


def _translated(route: str, params: dict[str, Any]) -> Any:
    """The provider parameters litellm makes of ``params`` on ``route`` (offline, no call)."""
    from workbench.models.litellm_client.loader import get_litellm

    provider, _, model = route.partition("/")
    get_litellm()  # imported offline (no remote cost map), as every call imports it
    try:
        from litellm.utils import get_optional_params

        return json.loads(json.dumps(get_optional_params(model=model, custom_llm_provider=provider, **params),
                                     default=str))
    except Exception as exc:  # noqa: BLE001 - a translation litellm refuses is itself part of the design
        return f"not translated: {type(exc).__name__}: {exc}"[:300]


def _built(path: Path) -> Any:
    marker = Path(path) / "BUILT.json"
    return json.loads(marker.read_text()) if marker.is_file() else str(path)


def _litellm_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("litellm")
    except PackageNotFoundError:
        return None


def cell_designs(study: Any, cells: list[Any] | None = None) -> dict[str, CellDesign]:
    """Each cell's design (by cell id): the study's cells, or ``cells`` of it."""
    kind = study.kind
    code = [(f"kind code {_package_name(p)}", p) for p in sorted(set(kind.code_files()))]
    data = [(f"kind data {_package_name(p)}", p) for p in sorted(set(kind.data_files()))]
    kind_files = {p.resolve() for _, p in code + data}
    out: dict[str, CellDesign] = {}
    for cell in cells if cells is not None else study.cells:
        d = CellDesign(cell.cell_id)
        d.add_value("seed", study.seed, shown=str(study.seed))
        d.add_value("cell spec", cell.spec.model_dump(mode="json"), shown=cell.label or cell.cell_id)
        root = kind.template_root(cell.spec, study.base_dir)
        unrendered = kind.unrendered_templates(cell.spec)
        for path in _files(root):
            name = path.relative_to(root).as_posix()
            if name not in unrendered:
                d.add_file(f"template {name}", path)
        for path in kind.design_files(cell.spec, study.base_dir):
            for f in _files(Path(path)):
                if f.resolve() not in kind_files:  # a kind's own file is a part already, once
                    d.add_file(f"data {_study_name(f, study.base_dir)}", f)
        for name, path in code + data:
            d.add_file(name, path)
        routes = set(kind.routes(cell.spec))
        if study.monitor is not None:
            from workbench.params import monitor_prompt_path

            d.add_file("monitor prompt", monitor_prompt_path(study.path, study.monitor))
            d.add_value("monitor", study.monitor.model_dump(mode="json"))
            routes.add(study.monitor.model)
        for route in sorted(routes):
            _route_parts(d, route, study)
        out[cell.cell_id] = d
    return out


def design_changes(old: dict[str, Any], new: CellDesign,
                   old_content: Callable[[str], bytes | None] = lambda digest: None) -> list[str]:
    """What differs between a recorded design (``CellDesign.record()``) and ``new``, one line a part:
    a value's changed fields as old -> new (``old_content`` gives a recorded part's bytes by hash),
    a file's hashes by their first 8 characters."""
    before, after = old.get("parts", {}), new.parts
    shown = old.get("shown", {})
    lines = []
    for name in sorted(set(before) | set(after)):
        a, b = before.get(name), after.get(name)
        if a == b:
            continue
        if a is None:
            lines.append(f"{name}: new")
        elif b is None:
            lines.append(f"{name}: gone")
        elif is_value_part(name):
            fields = _changed_fields(old_content(a), new.contents.get(b))
            lines.append(f"{name}: {fields}" if fields else f"{name}: {shown.get(name, a[:8])} -> {new.shown.get(name, b[:8])}")
        else:
            lines.append(f"{name}: {a[:8]} -> {b[:8]}")
    return lines


def _changed_fields(old: bytes | None, new: bytes | None, limit: int = 4) -> str:
    """The fields two recorded JSON objects differ in (``entry.temperature: None -> 0.2``), or ""."""
    if old is None or new is None:
        return ""
    try:
        a, b = json.loads(old), json.loads(new)
    except ValueError:
        return ""
    if not isinstance(a, dict) or not isinstance(b, dict):
        return ""
    fa, fb = _flat(a), _flat(b)
    diffs = [f"{k}: {fa.get(k)!r} -> {fb.get(k)!r}" for k in sorted(set(fa) | set(fb)) if fa.get(k) != fb.get(k)]
    return ", ".join(diffs[:limit]) + (f" and {len(diffs) - limit} more" if len(diffs) > limit else "")


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flat(v, f"{prefix}{k}."))
        return out
    return {prefix.rstrip("."): value}


def by_change(per_cell: dict[str, list[str]], cells: int) -> list[str]:
    """Changes of several cells, one line per distinct change with the cells it touches
    (``seed: 1 -> 2 (every cell)``): a changed template or code file is one change, not one per cell."""
    where: dict[str, list[str]] = {}
    for cell, lines in per_cell.items():
        for line in lines:
            where.setdefault(line, []).append(cell)
    out = []
    for line, found in where.items():
        scope = "every cell" if len(found) == cells and cells > 1 else (
            f"cell {found[0]}" if len(found) == 1 else f"{len(found)} cells: {', '.join(found[:3])}"
            + (" ..." if len(found) > 3 else ""))
        out.append(f"{line} ({scope})")
    return out


def is_value_part(name: str) -> bool:
    """Whether a part is a value (kept as JSON, shown field by field) rather than a file."""
    return name in ("seed", "cell spec", "monitor") or name.startswith(("model ", "local model ", "profile "))


# -- the run directory's copy ---------------------------------------------------------------
DESIGN_DIR = "design"  # design/<fingerprint>.json per design; design/blobs/<sha256> per content, stored once


def store_designs(out_dir: Path, designs: dict[str, CellDesign]) -> None:
    """Keep each design's parts and every part's content in the run directory, each once
    (addressed by hash; a file already there is never rewritten)."""
    folder = Path(out_dir) / DESIGN_DIR
    blobs = folder / "blobs"
    blobs.mkdir(parents=True, exist_ok=True)
    for d in designs.values():
        for digest, data in d.contents.items():
            path = blobs / digest
            if not path.exists():
                _write_new(path, data)
        path = folder / f"{d.fingerprint}.json"
        if not path.exists():
            _write_new(path, (json.dumps(d.record(), indent=1, ensure_ascii=False) + "\n").encode("utf-8"))


def _write_new(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


def recorded_content(out_dir: Path, digest: str) -> bytes | None:
    """A part's content as the run directory stored it, or None."""
    path = Path(out_dir) / DESIGN_DIR / "blobs" / digest
    return path.read_bytes() if path.is_file() else None


def recorded_design(out_dir: Path, fingerprint: str) -> dict[str, Any]:
    """A design the run directory holds, or {} where it has none of that fingerprint."""
    path = Path(out_dir) / DESIGN_DIR / f"{fingerprint}.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
