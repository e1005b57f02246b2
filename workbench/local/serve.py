"""Child process: serve one GGUF file on 127.0.0.1 until stdin closes or a signal."""
from __future__ import annotations

import signal
import sys
import threading


def main() -> None:
    import xllamacpp as x

    path, port, threads, ctx, slots = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    p = x.CommonParams()
    p.model.path = path
    p.n_ctx = ctx * slots
    p.cpuparams.n_threads = threads
    p.cpuparams_batch.n_threads = threads
    p.port = port
    p.hostnames = ["127.0.0.1"]
    p.n_parallel = slots
    p.cache_prompt = True
    server = x.Server(p)  # noqa: F841 - serves while referenced
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    def _on_stdin_closed() -> None:  # the parent went away
        sys.stdin.read()
        done.set()

    threading.Thread(target=_on_stdin_closed, daemon=True).start()
    done.wait()


if __name__ == "__main__":
    main()
