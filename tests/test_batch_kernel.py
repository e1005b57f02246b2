"""`workbench batch` runs its cells' notebooks on one kernel per parallel slot: a new kernel
per cell cost seconds of start-up and imports for runs of a fraction of a second (issue 39).
Sharing a kernel must not let one notebook see another's names, nor a failed or stuck cell
spoil the cells after it."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import nbformat
import pytest
import yaml

from tests.conftest import PROMPTS, study_dict
from workbench.publish import batch
from workbench.publish.notebooks import NotebookError


def probe_notebook(folder: Path, body: str) -> Path:
    """A notebook with a papermill ``tag`` parameter and one code cell."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell('tag = ""', metadata={"tags": ["parameters"]}),
                nbformat.v4.new_code_cell(body)]
    nb.metadata["kernelspec"] = {"name": "workbench", "display_name": "Python (workbench)", "language": "python"}
    path = folder / "probe.ipynb"
    nbformat.write(nb, path)
    return path


def printed(path: Path) -> dict:
    """The JSON line the probe's last cell printed, and the execution count of its first cell."""
    nb = json.loads(path.read_text())
    text = "".join("".join(o["text"]) for o in nb["cells"][-1]["outputs"] if o["output_type"] == "stream")
    return {**json.loads(text.strip().splitlines()[-1]), "first_count": nb["cells"][0]["execution_count"]}


def test_notebooks_on_one_kernel_see_nothing_of_each_other(tmp_path):
    source = probe_notebook(tmp_path, (
        "import json, os\n"
        "assert 'leftover' not in globals(), 'a name from the previous notebook'\n"
        "leftover = tag\n"
        "print(json.dumps({'pid': os.getpid(), 'tag': tag}))"))
    kernel = batch.SharedKernel(tmp_path, timeout_s=60)
    try:
        first = kernel.execute(source, tmp_path / "out" / "one.ipynb", {"tag": "one"})
        second = kernel.execute(source, tmp_path / "out" / "two.ipynb", {"tag": "two"})
    finally:
        kernel.close()
    one, two = printed(first), printed(second)
    assert one["pid"] == two["pid"]  # one kernel ran both
    assert two["tag"] == "two" and two["first_count"] == 1  # numbered as in a new kernel
    assert json.loads(second.read_text())["metadata"]["papermill"]["parameters"] == {"tag": "two"}


def test_the_next_notebook_starts_in_the_notebooks_folder(tmp_path):
    source = probe_notebook(tmp_path, "import json, os\nprint(json.dumps({'cwd': os.getcwd()}))\nos.chdir('/')")
    kernel = batch.SharedKernel(tmp_path, timeout_s=60)
    try:
        kernel.execute(source, tmp_path / "out" / "one.ipynb", {"tag": "one"})
        second = kernel.execute(source, tmp_path / "out" / "two.ipynb", {"tag": "two"})
    finally:
        kernel.close()
    assert printed(second)["cwd"] == str(tmp_path)


def test_a_notebook_that_times_out_is_a_failed_cell(tmp_path):
    """nbclient raises its own timeout error, which papermill lets through: it ended the whole batch."""
    source = probe_notebook(tmp_path, "import time\ntime.sleep(60)")
    kernel = batch.SharedKernel(tmp_path, timeout_s=2)
    try:
        with pytest.raises(NotebookError, match="did not finish.*[Tt]imeout"):
            kernel.execute(source, tmp_path / "out" / "slow.ipynb", {"tag": "slow"})
    finally:
        kernel.close()


def test_a_slot_keeps_its_kernel_until_a_cell_fails(tmp_path, monkeypatch):
    """Three cells in one slot: the first two share a kernel; the second fails, so the third
    gets a new one (a half-run cell leaves nothing behind), and the batch reports just that cell."""
    started = []

    class Counted(batch.SharedKernel):
        def __init__(self, *a, **kw):
            started.append(1)
            super().__init__(*a, **kw)

    prompts = tmp_path / "prompts"
    shutil.copytree(PROMPTS, prompts)
    (prompts / "persistence" / "none.txt").write_text("$undefined_placeholder")
    spec = study_dict(name="slot", worlds_per_cell=1, cells=[
        {"model": "sim/diligent"}, {"model": "sim/diligent", "clauses": "none"}, {"model": "sim/loner"}])
    spec["defaults"]["prompts"] = str(prompts)
    path = tmp_path / "slot.yaml"
    path.write_text(yaml.safe_dump(spec))
    monkeypatch.setattr(batch, "SharedKernel", Counted)
    result = batch.run_batch(path, tmp_path / "out", parallel=1, timeout_s=300, report=False)
    assert len(result.done) == 2 and len(result.failed) == 1
    assert "undefined_placeholder" in next(iter(result.failed.values()))
    assert len(started) == 2
    assert len(list((tmp_path / "out" / "notebooks").glob("study-*.ipynb"))) == 3


def test_an_unexpected_error_ends_the_batch_and_closes_the_kernel(tmp_path, monkeypatch):
    """Anything but a failed notebook is a fault of the batch itself: raised, not reported as a
    cell, and no kernel process is left behind by the slot that met it."""
    closed = []

    class Broken:
        def __init__(self, cwd, *, timeout_s):
            pass

        def execute(self, name, output, parameters):
            raise OSError("disk full")

        def close(self):
            closed.append(1)

    spec = study_dict(name="broken", worlds_per_cell=1, cells=[{"model": "sim/diligent"}])
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump(spec))
    monkeypatch.setattr(batch, "SharedKernel", Broken)
    with pytest.raises(OSError, match="disk full"):
        batch.run_batch(path, tmp_path / "out", parallel=1, timeout_s=30, report=False)
    assert closed == [1]
