"""litellm imported on first use, with its offline settings set beforehand."""
from __future__ import annotations

import gc
import os
import threading
from typing import Any

_LITELLM: Any = None
_IMPORT_LOCK = threading.Lock()


def get_litellm() -> Any:
    """Import litellm once, offline: no remote cost map, no tokenizer downloads, no banners."""
    global _LITELLM
    if _LITELLM is None:
        with _IMPORT_LOCK:
            if _LITELLM is None:
                os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
                os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
                import litellm  # noqa: PLC0415 - lazy on purpose (3-9 s)

                litellm.suppress_debug_info = True
                litellm.telemetry = False
                litellm.drop_params = False
                from workbench.models.litellm_client.sent import install

                install(litellm)  # records the body each provider receives (see .sent)
                # The import leaves millions of long-lived objects: without this, each full
                # pass of the cyclic collector walks them all, stalling the event loop with
                # every call in flight (measured: about 20 ms added to the mean call latency
                # at 32 calls in flight, benchmarks/bench_litellm.py).
                gc.freeze()
                _LITELLM = litellm
    return _LITELLM
