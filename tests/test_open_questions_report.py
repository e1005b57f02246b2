"""Issue 22: the report shows a section for whichever open-question factor a study
uses, and only then (the why-no-read section applies to every study with such agents)."""
from __future__ import annotations

from tests.conftest import make_study
from workbench.study import run_study
from workbench.worlds.stigmergy.analysis import Analysis


def _sections(tmp_path, name, cells, **extra):
    study = make_study(tmp_path, cells, worlds=6, name=name)
    if extra:
        import yaml

        doc = yaml.safe_load(study.path.read_text())
        doc.update(extra)
        study.path.write_text(yaml.safe_dump(doc))
        from workbench.params import load_study
        study = load_study(study.path)
    run_study(study, tmp_path / name, progress=False)
    return {k: s.applies for k, s in Analysis.load(tmp_path / name).sections().items()}


def test_each_factor_brings_its_section(tmp_path):
    plain = _sections(tmp_path, "plain", [{"model": "sim/diligent"}, {"model": "sim/non-writer"}])
    assert plain["no_read"] and not plain["vocabulary"] and not plain["readers"] and not plain["routes"]
    vocab = _sections(tmp_path, "vocab", [{"model": "sim/diligent", "vocabulary": v} for v in ("named", "withheld")])
    assert vocab["vocabulary"] and not vocab["readers"]
    readers = _sections(tmp_path, "readers", [{"model": "sim/diligent", "reader_signal": v} for v in ("none", "told")])
    assert readers["readers"] and not readers["vocabulary"]
    routes = _sections(tmp_path, "routes", [{"model": "sim/diligent"}, {"model": "sim/diligent",
                                                                       "request_path": "router"}])
    assert routes["routes"]
    models = _sections(tmp_path, "models", [{"model": "sim/diligent"}, {"model": "sim/multi-object"}],
                       contrasts=[{"name": "route", "factor": "model", "levels": ["sim/diligent", "sim/multi-object"]}])
    assert not models["routes"]  # two models are not two request paths
