"""Prompt and task wording lives in template files, never in code, so that a
study can change it and a lock can hash it. Templates use ``string.Template``
(``$name``): substituted text is never re-interpreted, so model-written values
inserted into a template stay data."""
from __future__ import annotations

import hashlib
from pathlib import Path
from string import Template

from workbench.errors import InputError


class TemplateError(InputError):
    pass


class TemplateSet:
    """A folder of ``.txt`` templates, read once each and remembered with its hash."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise TemplateError(f"prompt folder {self.root} does not exist (expected a folder of .txt templates)")
        self._cache: dict[str, Template] = {}

    def text(self, name: str) -> str:
        path = self.root / f"{name}.txt"
        if not path.is_file():
            raise TemplateError(f"template {path} is missing")
        return path.read_text(encoding="utf-8")

    def render(self, name: str, **values: object) -> str:
        tpl = self._cache.get(name)
        if tpl is None:
            tpl = self._cache[name] = Template(self.text(name))
        try:
            return tpl.substitute(**values)
        except KeyError as exc:
            raise TemplateError(f"template {self.root / (name + '.txt')} uses ${exc.args[0]}, which is not provided") from None
        except ValueError as exc:
            raise TemplateError(f"template {self.root / (name + '.txt')}: {exc}") from None

    def hashes(self) -> dict[str, str]:
        """SHA-256 of every template file under the folder, by relative path."""
        return {
            str(p.relative_to(self.root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(self.root.rglob("*.txt"))
        }


_SETS: dict[Path, TemplateSet] = {}


def template_set(root: str | Path) -> TemplateSet:
    """Shared, cached instances: thousands of worlds reuse the same files."""
    key = Path(root).resolve()
    if key not in _SETS:
        _SETS[key] = TemplateSet(key)
    return _SETS[key]
