"""What leaves the workbench for other tools: Inspect eval logs of a run set
(``inspect_log``) and the index of run sets under a folder (``runs``).

Both read records only (manifest.json, worlds.jsonl, steps.jsonl), never a world
kind's code, a model client or the environment: an export holds what the records
hold, and records never hold an API key."""
