"""The simulated grid against its reference, in the same run (issue 17, part 6).

Figure: `workbench run PARAMS -q` (default params/e1.yaml: 16 cells x 50 worlds,
simulated twins), whole process, records and all, as a user runs it: with its
default `--processes auto` (one world process per core, at most one per 200 worlds;
two on a 2-core machine), so the figure uses every core while the reference uses
one. The same run with `--processes 1` is printed beside it, with its own ratio:
that one says what the records cost on one core. Reference: a plain asyncio
loop over the same worlds with no records, also a whole process: the package's
own world (scheduler, simulated agents, parser, store, prompts) minus every
record (no step or world dicts, no metrics, no manifest, no writer), the same
concurrency and seeds. The two alternate, REPEATS times each; the medians and
the median of the per-pair ratios are printed, so a busy machine still gives a
stable ratio; the CPU seconds of the same processes, and their ratio, are printed
too (a process that waits for a core loses wall time, not CPU). Targets (issue 17):
figure <= 4 s and ratio <= 1.4, on wall time.

    python benchmarks/bench_grid.py [--params params/e1.yaml] [--repeats 3]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TARGET_S = 4.0
TARGET_RATIO = 1.4


# -- the reference: the same worlds, no records ----------------------------------------
def _bare_world_class() -> type:
    from workbench.worlds.stigmergy.parsing import parse_reply
    from workbench.worlds.stigmergy.world import StigmergyWorld

    class BareWorld(StigmergyWorld):
        """StigmergyWorld with its step handling minus the record: what the agents see
        and do is unchanged (same parse under the cell's rule, same store, same
        messages), nothing is kept about it but a step count."""

        n_steps = 0

        def _handle(self, agent: Any, reply: Any, t_issue: float, request: Any) -> None:  # noqa: ARG002
            t_done = round(t_issue + max(0.0, float(reply.latency_s or 0.0)), 6)
            self.clock = max(self.clock, t_done)
            agent.t = t_done
            self.n_steps += 1
            if reply.failed:
                self.failure = {"error": reply.error}
                agent.done = True
                return
            decided = parse_reply(reply.text, self.cell.parser, self.ops)
            agent.steps += 1
            if decided.valid and decided.op is not None:
                result, _ = self._apply(agent, decided.op)
            else:
                result = self.t.render("results/invalid", error=decided.error)
            if not agent.done and agent.steps >= self.cell.max_steps:
                agent.done = True
                result = None
            agent.messages.append({"role": "assistant", "content": reply.text})
            if result is not None:
                agent.messages.append({"role": "user", "content": result})

        async def play(self) -> int:
            if self.cell.scheduler == "lockstep":
                await self._run_lockstep()
            else:
                await self._run_async()
            return self.n_steps

    return BareWorld


def reference(params: Path) -> tuple[int, int]:
    """Run every world of the study with no records; return (worlds, steps)."""
    from workbench.models.factory import make_client
    from workbench.params import load_study
    from workbench.seeding import derive_seed
    from workbench.templates import template_set

    study = load_study(params)
    if study.world != "stigmergy":
        raise SystemExit("the reference loop is written for the stigmergy kind")
    bare = _bare_world_class()
    todo = iter([(c, i) for c in study.cells for i in range(study.worlds_per_cell)])
    steps = worlds = 0

    def factory(route: str, slot: str, seed: int, options: dict[str, Any]) -> Any:  # noqa: ARG001
        return make_client(route, seed=seed, profiles=study.profiles, **options)

    async def worker() -> None:
        nonlocal steps, worlds
        for cell, i in todo:
            world = bare(cell.spec, world_id=f"{cell.cell_id}-{i:04d}", cell_id=cell.cell_id,
                         seed=derive_seed(study.seed, "world", i),
                         templates=template_set(study.kind.template_root(cell.spec, study.base_dir)),
                         client_factory=factory)
            n = await world.play()  # (not `steps += await ...`: that reads steps before the await)
            steps += n
            worlds += 1

    async def main() -> None:
        await asyncio.gather(*(worker() for _ in range(max(1, study.concurrency))))

    asyncio.run(main())
    return worlds, steps


# -- the figure and the table ----------------------------------------------------------
def _cpu_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(cmd: list[str]) -> tuple[float, float, str]:
    """Wall seconds, CPU seconds (user + system) and stdout of a whole process."""
    c0, t0 = _cpu_children(), time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    wall, cpu = time.perf_counter() - t0, _cpu_children() - c0
    if res.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{res.stderr[-2000:]}")
    return wall, cpu, res.stdout


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--params", type=Path, default=ROOT / "params" / "e1.yaml")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--reference", action="store_true", help="(internal) run the reference loop and print its counts")
    args = ap.parse_args()
    if args.reference:
        worlds, steps = reference(args.params)
        print(json.dumps({"worlds": worlds, "steps": steps}))
        return 0
    exe = str(Path(sys.executable))
    figures: list[float] = []
    refs: list[float] = []
    cpu_figures: list[float] = []
    cpu_refs: list[float] = []
    ones: list[float] = []  # the same run in one process (--processes 1)
    cpu_ones: list[float] = []
    counts: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.repeats):
            ref_s, ref_cpu, out = _timed([exe, __file__, "--params", str(args.params), "--reference"])
            refs.append(ref_s)
            cpu_refs.append(ref_cpu)
            counts["reference"] = json.loads(out.strip().splitlines()[-1])
            run_dir = Path(tmp) / f"run{k}"
            fig_s, fig_cpu, _ = _timed([exe, "-m", "workbench", "run", str(args.params), "--out", str(run_dir), "-q"])
            figures.append(fig_s)
            cpu_figures.append(fig_cpu)
            entry = json.loads((run_dir / "manifest.json").read_text())["runs"][-1]
            counts["records"] = {"worlds": entry["finished_worlds"],
                                 "steps": (run_dir / "steps.jsonl").read_bytes().count(b"\n"),
                                 "fsyncs": entry.get("record_syncs"), "processes": entry.get("processes", 1)}
            one_s, one_cpu, _ = _timed([exe, "-m", "workbench", "run", str(args.params), "--out",
                                        str(Path(tmp) / f"one{k}"), "-q", "--processes", "1"])
            ones.append(one_s)
            cpu_ones.append(one_cpu)
    fig, ref = statistics.median(figures), statistics.median(refs)
    ratio = statistics.median(f / r for f, r in zip(figures, refs))
    rc, rr = counts["records"], counts["reference"]
    same = rc["worlds"] == rr["worlds"] and rc["steps"] == rr["steps"]
    name = args.params.name
    print(f"simulated grid {name}: {rc['worlds']} worlds, {rc['steps']} steps; medians of {args.repeats} "
          f"alternating whole-process runs")
    print(f"{'what':<44} {'median s':>9}  runs")
    procs = rc["processes"]
    one_ratio = statistics.median(f / r for f, r in zip(ones, refs))
    print(f"{f'workbench run {name} -q ({procs} processes)':<44} {fig:>9.2f}  " + " ".join(f"{x:.2f}" for x in figures))
    print(f"{f'workbench run {name} -q --processes 1':<44} {statistics.median(ones):>9.2f}  "
          + " ".join(f"{x:.2f}" for x in ones))
    print(f"{'plain asyncio loop, no records (reference)':<44} {ref:>9.2f}  " + " ".join(f"{x:.2f}" for x in refs))
    print(f"{'ratio (median of pairs)':<44} {ratio:>9.2f}  (one process: {one_ratio:.2f})")
    # CPU seconds (user + system) of the same processes: less moved than wall time by other
    # work on a busy machine (a process waiting for a core costs wall time, not CPU)
    cpu_ratio = statistics.median(f / r for f, r in zip(cpu_figures, cpu_refs))
    print(f"{'CPU s: records / reference (medians)':<44} {statistics.median(cpu_figures):>5.2f} / "
          f"{statistics.median(cpu_refs):.2f}  ratio {cpu_ratio:.2f}  (one process: "
          f"{statistics.median(cpu_ones):.2f}, ratio {statistics.median(f / r for f, r in zip(cpu_ones, cpu_refs)):.2f})")
    print(f"record fsyncs: {rc['fsyncs']}; reference ran the same worlds and steps: {'yes' if same else 'NO'} "
          f"({rr['worlds']} worlds, {rr['steps']} steps)")
    print(f"targets: figure <= {TARGET_S:.0f} s: {'met' if fig <= TARGET_S else 'MISSED'}; "
          f"ratio <= {TARGET_RATIO}: {'met' if ratio <= TARGET_RATIO else 'MISSED'}")
    print(f"RESULT name=simulated-grid figure=run_{name.replace('.yaml', '')}_s:{fig:.2f} "
          f"reference=plain_asyncio_s:{ref:.2f} ratio={ratio:.2f} processes={procs} one_process_ratio={one_ratio:.2f} "
          f"target=<={TARGET_S:.0f}s,ratio<={TARGET_RATIO} "
          f"met={'yes' if fig <= TARGET_S and ratio <= TARGET_RATIO else 'no'}")
    # the same run in one process, for the table: what the records cost on one core (no target of its own)
    print(f"RESULT name=simulated-grid-one-process figure=run_{name.replace('.yaml', '')}_processes1_s:"
          f"{statistics.median(ones):.2f} reference=plain_asyncio_s:{ref:.2f} ratio={one_ratio:.2f} target=- met=-")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
