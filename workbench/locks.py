"""Preregistration: hash locks that form a chain.

A lock records the SHA-256 of everything a study's results could depend on: the
params file, every prompt and task template it uses, the parser and answer
rules (their code and the rules each cell names), the catalogue entries of the
models it names, the analysis notebook and the package's metric code (by
content, not by version string), plus the workbench version and git revision.
Each lock holds the hash of the lock before it, so reordering, editing or
deleting a lock breaks the chain. A deviation is itself a lock: the reason, what
changed, and the new hashes. A data lock covers finished records instead.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench import __version__
from workbench.errors import InputError
from workbench.records import STEPS, WORLDS, git_state, now_iso

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = Path(__file__).resolve().parent
DEFAULT_DIR = Path("locks")
METRIC_CODE = ("metrics/*.py", "stats.py")  # kind-free scoring code; a kind adds all of its own (code_files)
_INSTALLED = Path(__file__).resolve().parent  # where the package really is (PACKAGE can be pointed at a copy)
NOTEBOOKS: Path | None = None  # a folder to read report notebooks from instead of the kind's (a test's copy)


class LockError(InputError):
    pass


def _in_package(path: Path) -> Path:
    """A kind file inside the installed package, read from PACKAGE (the same file unless PACKAGE was moved)."""
    path = path.resolve()
    try:
        return (PACKAGE / path.relative_to(_INSTALLED)).resolve()
    except ValueError:  # a kind from another package or a test folder
        return path


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _name(path: Path) -> str:
    """A file's name in a lock: relative to the project when inside it."""
    path = path.resolve()
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return str(path)


def _resolve(name: str) -> Path:
    p = Path(name)
    return p if p.is_absolute() else ROOT / p


def study_files(params: str | Path) -> tuple[dict[str, str], dict[str, Any]]:
    """The hashed files of a study and the facts that are not files (rules, models)."""
    from workbench.models.catalogue import default_catalogue
    from workbench.params import load_study

    study = load_study(params)
    kind = study.kind
    paths: set[Path] = {Path(params).resolve()}
    if kind.report_notebook:  # the analysis is part of the design
        nb = (NOTEBOOKS / f"{kind.report_notebook}.ipynb") if NOTEBOOKS else kind.notebook_path(kind.report_notebook)
        paths.add(nb.resolve())
    for c in study.cells:
        paths.update(p.resolve() for p in sorted(kind.template_root(c.spec, study.base_dir).rglob("*.txt")))
        # a kind's own inputs: scenario scripts, task data
        paths.update(Path(p).resolve() for p in kind.design_files(c.spec, study.base_dir))
    if study.monitor is not None:  # its prompt decides what a label means: part of the design
        from workbench.params import monitor_prompt_path

        paths.add(monitor_prompt_path(study.path, study.monitor))
    for pattern in METRIC_CODE:
        paths.update(p.resolve() for p in PACKAGE.glob(pattern))
    paths.update(_in_package(p) for p in kind.code_files())
    files = {_name(p): sha256_bytes(p.read_bytes()) for p in sorted(paths)}
    routes = sorted({r for c in study.cells for r in kind.routes(c.spec)}
                    | ({study.monitor.model} if study.monitor is not None else set()))
    catalogue = default_catalogue()
    models = {r: catalogue.get(r).model_dump(mode="json") for r in routes if r in catalogue}
    rules = {k: sorted({str(getattr(c.spec, k)) for c in study.cells if hasattr(c.spec, k)})
             for k in ("parser", "answer_rule", "validity")}
    facts = {"study": study.name, "routes": routes, "models": models, "rules": rules,
             "models_sha256": sha256_bytes(json.dumps(models, sort_keys=True).encode()),
             # every cell's design as a run fingerprints it (the same function): a locked run and its
             # lock can never disagree on what the design is (local models, profiles, data files...)
             **design_facts(study)}
    return files, facts


def design_facts(study: Any) -> dict[str, Any]:
    """Each cell's design (workbench.design) and the content of its value parts (seed, catalogue
    entries, profiles: small JSON), so a changed value is shown as old -> new."""
    from workbench.design import cell_designs, is_value_part

    designs = cell_designs(study)
    values = {digest: d.contents[digest].decode("utf-8") for d in designs.values()
              for name, digest in d.parts.items() if is_value_part(name)}
    return {"designs": {cid: d.record() for cid, d in sorted(designs.items())}, "design_values": values}


def design_lock_changes(lock: dict[str, Any], study: Any) -> list[str]:
    """What differs between the designs a lock recorded and the study's designs now, one line per part."""
    from workbench.design import by_change, cell_designs, design_changes

    if "designs" not in lock:  # a lock from before fingerprints: its files and facts say what they can
        return []
    now = cell_designs(study)
    values = lock.get("design_values", {})
    per_cell: dict[str, list[str]] = {}
    for cid, recorded in sorted(lock["designs"].items()):
        label = f"{(recorded.get('shown') or {}).get('cell spec') or cid} ({cid})"
        per_cell[label] = (["no longer in the study"] if cid not in now else design_changes(
            recorded, now[cid], lambda digest: values[digest].encode() if digest in values else None))
    for cid in sorted(set(now) - set(lock["designs"])):
        per_cell[f"{now[cid].shown.get('cell spec') or cid} ({cid})"] = ["new in the study"]
    return by_change(per_cell, len(lock["designs"]))


def records_hash(run_dir: str | Path) -> dict[str, str]:
    """Hashes of a run directory's records (worlds and steps; the manifest changes with every run)."""
    run_dir = Path(run_dir)
    out = {}
    for name in (WORLDS, STEPS):
        p = run_dir / name
        if not p.exists():
            raise LockError(f"{run_dir} has no {name}: not a run directory with records")
        out[name] = sha256_bytes(p.read_bytes())
    return out


@dataclass
class Chain:
    dir: Path
    locks: list[dict[str, Any]] = field(default_factory=list)  # in sequence order
    raw: dict[str, bytes] = field(default_factory=dict)  # lock name -> file bytes
    problems: list[str] = field(default_factory=list)

    @property
    def head_sha256(self) -> str | None:
        return sha256_bytes(self.raw[self.locks[-1]["name"]]) if self.locks else None

    def for_params(self, params: str | Path) -> list[dict[str, Any]]:
        key = _name(Path(params))
        return [lk for lk in self.locks if lk.get("params") == key]


def load_chain(lock_dir: str | Path = DEFAULT_DIR) -> Chain:
    """Read every lock and check the chain: sequence 1..n without gaps, each lock
    naming the hash of the one before it."""
    d = Path(lock_dir)
    chain = Chain(d)
    if not d.is_dir():
        return chain
    entries = []
    for p in sorted(d.glob("*.json")):
        data = p.read_bytes()
        try:
            lock = json.loads(data)
        except ValueError:
            chain.problems.append(f"{p.name}: not valid JSON")
            continue
        if lock.get("name") != p.stem:
            chain.problems.append(f"{p.name}: names itself {lock.get('name')!r}")
        chain.raw[p.stem] = data
        entries.append(lock)
    entries.sort(key=lambda lk: lk.get("sequence", 0))
    prev_hash = None
    for i, lock in enumerate(entries, 1):
        if lock.get("sequence") != i:
            chain.problems.append(f"{lock.get('name')}: sequence {lock.get('sequence')} where {i} was expected "
                                  "(a lock was deleted or renumbered)")
        if lock.get("previous_sha256") != prev_hash:
            chain.problems.append(f"{lock.get('name')}: previous_sha256 does not match the lock before it "
                                  "(the chain was reordered, or an earlier lock was edited or deleted)")
        prev_hash = sha256_bytes(chain.raw.get(lock.get("name"), b""))
    chain.locks = entries
    return chain


def _write(chain: Chain, lock: dict[str, Any]) -> Path:
    name = lock["name"]
    if not name or any(c in name for c in "/\\") or name.startswith("."):
        raise LockError(f"lock name {name!r}: expected a plain file name")
    path = chain.dir / f"{name}.json"
    if path.exists():
        raise LockError(f"{path} exists: locks are never overwritten; choose another name")
    if chain.problems:
        raise LockError("the lock chain is broken, refusing to extend it: " + "; ".join(chain.problems))
    lock["sequence"] = len(chain.locks) + 1
    lock["previous_sha256"] = chain.head_sha256
    chain.dir.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(lock, indent=1, sort_keys=True) + "\n")
    return path


def _base(name: str, kind: str) -> dict[str, Any]:
    return {"name": name, "kind": kind, "created": now_iso(), "workbench_version": __version__,
            "git": git_state(ROOT)}


def create_lock(name: str, params: str | Path, lock_dir: str | Path = DEFAULT_DIR) -> Path:
    files, facts = study_files(params)
    lock = {**_base(name, "design"), "params": _name(Path(params)), "files": files, **facts}
    return _write(load_chain(lock_dir), lock)


def create_data_lock(name: str, run_dir: str | Path, lock_dir: str | Path = DEFAULT_DIR) -> Path:
    lock = {**_base(name, "data"), "run_dir": _name(Path(run_dir)), "records": records_hash(run_dir)}
    return _write(load_chain(lock_dir), lock)


def changes(lock: dict[str, Any]) -> list[str]:
    """What differs between a design lock and the files and facts as they are now."""
    out = []
    for name, digest in sorted(lock.get("files", {}).items()):
        p = _resolve(name)
        if not p.exists():
            out.append(f"{name}: deleted")
        elif sha256_bytes(p.read_bytes()) != digest:
            out.append(f"{name}: changed")
    if lock.get("params") and _resolve(lock["params"]).exists():
        try:
            files, facts = study_files(_resolve(lock["params"]))
        except Exception as exc:  # noqa: BLE001 - a now-broken study is a change to report, not a crash
            out.append(f"{lock['params']}: no longer loads ({exc})")
        else:
            out += [f"{n}: new file the study now uses" for n in sorted(set(files) - set(lock.get("files", {})))]
            if facts["models_sha256"] != lock.get("models_sha256"):
                out.append("model catalogue entries of the study's models: changed")
            if facts["rules"] != lock.get("rules"):
                out.append(f"parser/answer/validity rules: {lock.get('rules')} -> {facts['rules']}")
            from workbench.params import load_study

            known = set(out)
            out += [line for line in design_lock_changes(lock, load_study(_resolve(lock["params"]))) if line not in known]
    return out


def data_changes(lock: dict[str, Any]) -> list[str]:
    run_dir = _resolve(lock["run_dir"])
    try:
        now = records_hash(run_dir)
    except LockError as exc:
        return [str(exc)]
    return [f"{lock['run_dir']}/{k}: changed" for k, v in lock["records"].items() if now.get(k) != v]


def head_for(chain: Chain, params: str | Path) -> dict[str, Any] | None:
    """The latest design or deviation lock of this params file: the one a run must match."""
    mine = [lk for lk in chain.for_params(params) if lk.get("kind") in ("design", "deviation")]
    return mine[-1] if mine else None


def check_study(params: str | Path, lock_dir: str | Path = DEFAULT_DIR) -> dict[str, Any] | None:
    """None when the study is not locked; else what a run must know: the head lock,
    the chain's problems and the changes since the head."""
    chain = load_chain(lock_dir)
    head = head_for(chain, params)
    if head is None:
        return None
    return {"lock": head["name"], "lock_sha256": sha256_bytes(chain.raw[head["name"]]),
            "chain_problems": chain.problems, "changes": changes(head), "chain": summary(chain)}


def record_deviation(params: str | Path, reason: str, found: list[str],
                     lock_dir: str | Path = DEFAULT_DIR) -> Path:
    """A deviation lock: the reason, what changed, and the hashes as they are now."""
    if not reason.strip():
        raise LockError("a deviation needs a reason")
    chain = load_chain(lock_dir)
    files, facts = study_files(params)
    n = sum(1 for lk in chain.locks if lk.get("kind") == "deviation") + 1
    stem = Path(params).stem
    lock = {**_base(f"{stem}-deviation-{n}", "deviation"), "params": _name(Path(params)), "files": files,
            **facts, "reason": reason, "changes": found}
    return _write(chain, lock)


def summary(chain: Chain) -> list[dict[str, Any]]:
    """The chain as rows for manifests and reports."""
    rows = []
    for lk in chain.locks:
        rows.append({"sequence": lk.get("sequence"), "name": lk.get("name"), "kind": lk.get("kind"),
                     "created": lk.get("created"), "params": lk.get("params") or lk.get("run_dir"),
                     "sha256": sha256_bytes(chain.raw.get(str(lk.get("name")), b"")),
                     "reason": lk.get("reason"), "changes": lk.get("changes", [])})
    return rows


def verify(lock_dir: str | Path = DEFAULT_DIR) -> tuple[bool, list[str]]:
    """Check the chain and every hashed file; the latest lock of each study must
    match, earlier ones are reported as superseded when a later lock replaced them."""
    chain = load_chain(lock_dir)
    lines: list[str] = []
    ok = not chain.problems
    lines += [f"CHAIN BROKEN: {p}" for p in chain.problems]
    heads = {}
    for lk in chain.locks:
        if lk.get("kind") in ("design", "deviation"):
            heads[lk.get("params")] = lk["name"]
    for lk in chain.locks:
        kind = lk.get("kind")
        found = data_changes(lk) if kind == "data" else changes(lk)
        superseded = kind != "data" and heads.get(lk.get("params")) != lk["name"]
        if not found:
            lines.append(f"ok   {lk['sequence']:>3} {lk['name']} ({kind})")
        elif superseded:
            lines.append(f"old  {lk['sequence']:>3} {lk['name']} ({kind}): superseded by a later lock")
        else:
            ok = False
            lines.append(f"FAIL {lk['sequence']:>3} {lk['name']} ({kind}):")
            lines += [f"       {c}" for c in found]
    if not chain.locks:
        lines.append(f"no locks in {chain.dir}")
    return ok, lines


def verification_html(records: Any) -> str:
    """A fresh verification of the lock chain the last locked run of ``records`` ran under (when
    that lock folder is here), and whether these records are exactly those of a data lock; "" when
    no run was locked. Shown under a report's recorded lock table (template ``locks_verification.html``)."""
    from workbench.views.markup import render

    m = records.manifest
    runs = m.get("runs") or [r for part in (m.get("parts") or {}).values() for r in part.get("runs", [])]
    runs = [r for r in runs if r.get("lock")]
    if not runs or not runs[-1]["lock"].get("lock_dir"):
        return ""
    lock_dir = Path(runs[-1]["lock"]["lock_dir"])
    if not lock_dir.is_dir():
        return str(render("locks_verification.html", missing=True, lock_dir=str(lock_dir)))
    ok, lines = verify(lock_dir)
    here = Path(records.dir).resolve()
    data_locks = []
    for lk in load_chain(lock_dir).locks:
        if lk.get("kind") == "data" and _resolve(lk["run_dir"]).resolve() == here:
            found = data_changes(lk)
            data_locks.append((lk["name"], "this analysis ran on exactly the locked data" if not found
                               else "the records changed since the data lock: " + "; ".join(found)))
    return str(render("locks_verification.html", missing=False, ok=ok, lines="\n".join(lines), data_locks=data_locks))
