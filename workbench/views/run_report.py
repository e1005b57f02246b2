"""What every world kind's report shows in the same way: which records, which
code and packages produced them, and the preregistration lock each run ran
under. Each kind's report class (``Analysis``, ``RecallReport``,
``CollusionReport``) extends :class:`RunReport` with its own tables and figures."""
from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.records import RunRecords, load_run
from workbench.routes import all_simulated


@dataclass
class RunReport:
    records: RunRecords
    other: RunRecords | None = None

    @classmethod
    def load(cls, run_dir: str | Path, compare_dir: str | Path | None = None) -> RunReport:
        return cls(load_run(run_dir), load_run(compare_dir) if compare_dir else None)

    @property
    def study(self) -> str:
        return self.records.manifest.get("study") or Path(self.records.dir).name

    @property
    def simulated(self) -> bool:
        """Every agent of every world simulated: the report then says so in a banner."""
        agents = [a for w in self.records.worlds for a in w.get("agents", [])]
        return all_simulated(a.get("route", "") for a in agents)

    def provenance_html(self) -> str:
        """Study, params hash, git revision per invocation, package versions: escaped."""
        m = self.records.manifest
        rows = [("records", str(self.records.dir)), ("study", str(m.get("study"))),
                ("params", f"{(m.get('params') or {}).get('path')} sha256 {(m.get('params') or {}).get('sha256')}")]
        runs = m.get("runs") or [r for part in (m.get("parts") or {}).values() for r in part.get("runs", [])]
        for r in runs:
            env = r.get("environment") or {}
            git = env.get("git") or {}
            rows.append((f"run {r.get('run')}", f"{r.get('started')} → {r.get('finished')}; git {git.get('revision')}"
                         f"{' (dirty)' if git.get('dirty') else ''}; workbench code sha256 "
                         f"{str(env.get('package_sha256'))[:16]}…; {r.get('finished_worlds')} worlds"))
        if runs:
            pk = (runs[-1].get("environment") or {}).get("packages") or {}
            rows.append(("packages", ", ".join(f"{k} {v}" for k, v in pk.items() if v)))
        body = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>"
                       for k, v in rows)
        return f"<table>{body}</table>"

    def lock_runs(self) -> list[dict[str, Any]]:
        m = self.records.manifest
        runs = m.get("runs") or [r for part in (m.get("parts") or {}).values() for r in part.get("runs", [])]
        return [r for r in runs if r.get("lock")]

    def locks_html(self) -> str:
        """The lock chain each run ran under, whether it matched, every deviation with its
        reason: as recorded (a fresh verification is :func:`workbench.locks.verification_html`)."""
        runs = self.lock_runs()
        if not runs:
            return "<p><i>This run set was not run under a preregistration lock.</i></p>"
        e = html.escape
        out = ["<table><tr><th>run</th><th>lock</th><th>matched at run time</th><th>deviation</th></tr>"]
        for r in runs:
            lk = r["lock"]
            dev = e(lk.get("deviation") or "")
            if lk.get("changes_at_run"):
                dev += "<br><small>" + "<br>".join(e(c) for c in lk["changes_at_run"]) + "</small>"
            out.append(f"<tr><td>{r.get('run')}</td><td>{e(str(lk.get('lock')))} <code>{e(str(lk.get('lock_sha256'))[:12])}"
                       f"</code></td><td>{'yes' if lk.get('matched') else '<b>no</b>'}</td><td>{dev}</td></tr>")
        out.append("</table>")
        chain = runs[-1]["lock"].get("chain") or []
        out.append("<p><b>Lock chain</b> (as of the last run)</p><table><tr><th>#</th><th>name</th><th>kind</th>"
                   "<th>created</th><th>covers</th><th>sha256</th><th>reason</th></tr>")
        for c in chain:
            out.append("<tr>" + "".join(f"<td>{e(str(v if v is not None else ''))}</td>" for v in (
                c["sequence"], c["name"], c["kind"], c["created"], c["params"], c["sha256"][:12], c.get("reason"))) +
                "</tr>")
        out.append("</table>")
        return "".join(out)

