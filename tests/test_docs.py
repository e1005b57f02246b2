"""The documentation site (mkdocs.yml, docs/): it builds offline with `mkdocs build
--strict` (a broken link or anchor, a page left out of the nav, an API page whose
module or member does not load is an error), the built pages load nothing from
another host, every page is in the nav, every complete study a page shows loads, and
the glossary names every quantity the code defines. The docs' shell commands are run
by tests/test_readme.py, with the README's."""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.test_readme import DOCS, README, doc_files, nav_pages

MKDOCS_BIN = ROOT / ".venv" / "bin" / "mkdocs"
YAML_BLOCK = re.compile(r"^```yaml\n(.*?)^```", re.MULTILINE | re.DOTALL)


def _mkdocs() -> Path:
    if not MKDOCS_BIN.exists():
        pytest.fail(f"mkdocs is not installed in .venv ({MKDOCS_BIN} is missing): it is in the dev extra; run "
                    "`make test` (or .venv/bin/pip install -e '.[dev]')")
    return MKDOCS_BIN


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built once for this module's tests, as `make docs` builds it."""
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    res = subprocess.run([str(_mkdocs()), "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
                          "--site-dir", str(out)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, f"mkdocs build --strict failed:\n{(res.stdout + res.stderr)[-4000:]}"
    return out


def test_the_site_builds_strict_offline(site):
    assert (site / "index.html").exists() and (site / "glossary.html").exists()
    # the API reference is rendered from the docstrings, not left as a ::: directive
    api = (site / "api" / "params.html").read_text(encoding="utf-8")
    assert "load_study" in api and ":::" not in api
    assert "wilson" in (site / "api" / "stats.html").read_text(encoding="utf-8")


def test_the_site_loads_nothing_from_another_host(site):
    """No script, stylesheet, font or image from a CDN: the site opens with no network."""
    external = re.compile(r"<(?:script|img|iframe)[^>]*\ssrc=[\"']?(?:https?:)?//|<link[^>]*\shref=[\"']?(?:https?:)?//")
    for page in site.rglob("*.html"):
        found = external.findall(page.read_text(encoding="utf-8"))
        assert not found, f"{page.relative_to(site)} loads {found[:3]}"
    for css in site.rglob("*.css"):
        assert not re.search(r"@import\s+url\((?:[\"'])?https?:|fonts\.googleapis", css.read_text(encoding="utf-8")), css


def test_every_page_is_in_the_nav():
    pages = {p.resolve() for p in nav_pages()}
    on_disk = {p.resolve() for p in DOCS.rglob("*.md")}
    assert on_disk - pages == set(), f"pages not in mkdocs.yml's nav: {sorted(on_disk - pages)}"
    assert all(p.exists() for p in pages), [p for p in pages if not p.exists()]


def test_every_study_the_docs_show_loads(tmp_path):
    """A YAML block that starts with `world:` is a whole study: it validates as written."""
    from workbench.params import load_study

    studies = [(path, block) for path in doc_files() for block in YAML_BLOCK.findall(path.read_text(encoding="utf-8"))
               if block.lstrip().startswith("world:")]
    assert len(studies) >= 2, studies  # the README's and study-files.md's
    for i, (path, block) in enumerate(studies):
        study_file = tmp_path / f"study{i}.yaml"
        study_file.write_text(block, encoding="utf-8")
        study = load_study(study_file)
        assert study.cells, f"{path.name}: a study with no cell"


def _glossary() -> str:
    return (DOCS / "glossary.md").read_text(encoding="utf-8")


def test_the_glossary_names_every_defined_quantity():
    """Every metric the shared-store world defines, the terminal summary's columns, each
    kind's contrast metrics and the Inspect export's headline scores have a row."""
    from workbench.export.inspect_log import HEADLINE
    from workbench.worlds.stigmergy.metrics import DEFINITIONS
    from workbench.worlds.stigmergy.summary import SUMMARY_METRICS

    codes = set(re.findall(r"`([a-z][a-z0-9_]*)`", _glossary()))
    wanted = set(DEFINITIONS) | set(SUMMARY_METRICS) | set(HEADLINE.values())
    wanted |= {"correct", "hedged", "correct_exact", "top_entry_correct"}  # recall's contrast units
    wanted |= {"ever_colluded", "ever_colluded_strict", "warmup_collusion"}  # collusion's
    assert wanted <= codes, f"docs/glossary.md does not name {sorted(wanted - codes)}"


def test_the_glossary_gives_one_name_per_quantity():
    """No display name stands for two code names, and no code name has two rows."""
    quantities = _glossary().split("## Terms")[0]  # the terms table names ideas, not quantities
    rows = [r for r in quantities.splitlines() if r.startswith("| ") and "`" in r.split("|")[2]]
    names: dict[str, str] = {}
    codes: dict[str, str] = {}
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        name, code = cells[0], cells[1]
        # accuracy: one quantity at two units (a recall is right; a world's share of right recalls)
        assert name not in names or names[name] == code or name == "accuracy", (name, code, names.get(name))
        names[name] = code
        for c in re.findall(r"`([a-z][a-z0-9_]*)`", code):
            assert c not in codes or codes[c] == name, f"{c} is both {codes[c]!r} and {name!r}"
            codes[c] = name


def test_the_readme_links_into_the_docs():
    text = README.read_text(encoding="utf-8")
    links = set(re.findall(r"\]\((docs/[^)#]+)", text))
    assert links and all((ROOT / link).exists() for link in links), [ln for ln in links if not (ROOT / ln).exists()]
    linked = {(ROOT / link).resolve() for link in links}
    assert {p.resolve() for p in nav_pages() if p.parent == DOCS} <= linked, "the README's map misses a page"
