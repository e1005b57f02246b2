"""``python -m tests.collusion_kill STUDY OUT``: ``workbench run STUDY --out OUT`` with one more
route family, ``sim-hang/PROFILE``: the collusion world's simulated profile, which, when
``COLLUSION_HANG_EPISODE=N`` is set, writes ``COLLUSION_HANG_MARKER`` and sleeps at its first
call of episode N whose last message starts with ``COLLUSION_HANG_AT`` (default: at its first
call of the episode), so a test can kill -9 the process mid-episode. Without the variable it is
the simulated profile itself (same replies, same random stream)."""
from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path
from typing import Any

from workbench.models.base import ModelReply, ModelRequest
from workbench.models.factory import register_route
from workbench.worlds.collusion.simulated import CollusionSimClient, check_route, get_profile


class HangingSimClient(CollusionSimClient):
    async def complete(self, request: ModelRequest) -> ModelReply:
        hang = os.environ.get("COLLUSION_HANG_EPISODE")
        if hang:
            # "=== Episode 6: ..." (horizon hidden, the default) or "=== Episode 6 of 8: ..." (shown)
            tag = re.compile(rf"=== Episode {int(hang)}[: ]")
            at = os.environ.get("COLLUSION_HANG_AT", "")
            last = request.messages[-1].get("content") or "" if request.messages else ""
            if last.startswith(at) and any(m.get("role") == "user" and tag.match(m.get("content") or "")
                                           for m in request.messages):
                Path(os.environ["COLLUSION_HANG_MARKER"]).write_text("in episode " + hang)
                time.sleep(600)
        return await super().complete(request)


def _build(route: str, *, seed: int, **_options: Any) -> HangingSimClient:
    return HangingSimClient(get_profile(route.split("/", 1)[1]), seed)


register_route("sim-hang", _build, check=check_route)

if __name__ == "__main__":
    from workbench.cli import main

    sys.exit(main(["run", sys.argv[1], "--out", sys.argv[2]]))
