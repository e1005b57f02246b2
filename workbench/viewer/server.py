"""``workbench view RUN_DIR ...``: the viewer's files served from 127.0.0.1 by the standard
library's ``http.server``; a world page that is not written yet is rendered when asked for
(so ten thousand worlds cost nothing until one is opened) and kept for the next request."""
from __future__ import annotations

import re
import shutil
import sys
import tempfile
import threading
from collections.abc import Sequence
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from workbench.viewer.data import load_run_sets
from workbench.viewer.site import Site, build_site

WORLD_PATH = re.compile(r"^/worlds/([A-Za-z0-9]+)/([A-Za-z0-9_.-]+\.html)$")


class ViewerHandler(SimpleHTTPRequestHandler):
    site: Site
    lock: threading.Lock
    quiet: bool = True

    def __init__(self, *args: Any, site: Site, lock: threading.Lock, quiet: bool = True, **kwargs: Any) -> None:
        self.site, self.lock, self.quiet = site, lock, quiet
        super().__init__(*args, directory=str(site.root), **kwargs)

    def _allowed(self) -> bool:
        """Only requests addressed to this viewer: a page on another site that points a name of
        its own at our address (DNS rebinding) sends that name as its Host and is refused. Bound
        to a loopback address, the loopback names; bound to one address, that address; bound to
        every interface (``--host 0.0.0.0``), an IP address, localhost or this machine's names."""
        import ipaddress
        import socket
        from urllib.parse import urlsplit as split

        address: Any = self.server.server_address
        bound, port = str(address[0]).lower(), int(address[1])
        try:
            parsed = split(f"//{(self.headers.get('Host') or '').strip().lower()}")
            name, given_port = parsed.hostname or "", parsed.port or 80
        except ValueError:
            return False
        if given_port != port:
            return False
        if bound in ("127.0.0.1", "::1", "localhost"):
            return name in ("localhost", "127.0.0.1", "::1")
        if bound in ("0.0.0.0", "::", ""):
            try:
                ipaddress.ip_address(name)
                return True
            except ValueError:
                return name in ("localhost", socket.gethostname().lower(), socket.getfqdn().lower())
        return name == bound

    def do_HEAD(self) -> None:  # noqa: N802
        if self._refused():
            return
        super().do_HEAD()

    def _refused(self) -> bool:
        if not self._allowed():
            self.send_error(403, "this viewer answers only requests addressed to the address it serves on")
            return True
        path = unquote(urlsplit(self.path).path)
        if "\x00" in path or ".." in Path(path).parts:
            self.send_error(400, "bad path")
            return True
        return False

    def list_directory(self, path: Any) -> None:
        self.send_error(404, "no listing")  # the viewer lists no folder: its pages link what there is
        return None

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self._refused():
            return
        path = unquote(urlsplit(self.path).path)
        m = WORLD_PATH.match(path)
        if m and not (self.site.root / path.lstrip("/")).exists():
            hit = self.site.world_file(m.group(1), m.group(2))
            if hit is None:
                self.send_error(404, "no such world in these run sets")
                return
            with self.lock:
                if not (self.site.root / path.lstrip("/")).exists():
                    try:
                        self.site.write_world(*hit)
                    except Exception as exc:  # noqa: BLE001 - the page says why, the server goes on
                        self.send_error(500, f"the world page could not be drawn: {type(exc).__name__}: {exc}")
                        return
        super().do_GET()

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
        if not self.quiet:
            super().log_message(format, *args)


def make_server(dirs: Sequence[str | Path], *, host: str = "127.0.0.1", port: int = 8765, site_dir: str | Path | None = None,
                ignore: Sequence[str] = (), quiet: bool = True) -> tuple[ThreadingHTTPServer, Site]:
    """A server (not yet serving) for the run sets in ``dirs``; its files go to ``site_dir`` (a new temporary
    folder when None). ``port=0`` takes any free port (``server.server_address`` says which)."""
    root = Path(site_dir) if site_dir else Path(tempfile.mkdtemp(prefix="workbench-view-"))
    site = build_site(load_run_sets(dirs), root, examples=0, server=True, ignore=ignore)
    handler = partial(ViewerHandler, site=site, lock=threading.Lock(), quiet=quiet)
    return ThreadingHTTPServer((host, port), handler), site


def serve(dirs: Sequence[str | Path], *, host: str = "127.0.0.1", port: int = 8765, ignore: Sequence[str] = (),
          quiet: bool = True) -> None:
    """Serve until interrupted; prints the address on stdout first."""
    import signal

    def stop(_signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt  # SIGTERM ends it as Ctrl-C does: the folder of drawn pages is removed

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, stop)
    root = Path(tempfile.mkdtemp(prefix="workbench-view-"))
    try:
        _serve(dirs, root, host=host, port=port, ignore=ignore, quiet=quiet)
    finally:
        shutil.rmtree(root, ignore_errors=True)  # the pages it drew go with it


def _serve(dirs: Sequence[str | Path], root: Path, *, host: str, port: int, ignore: Sequence[str], quiet: bool) -> None:
    server, site = make_server(dirs, host=host, port=port, site_dir=root, ignore=ignore, quiet=quiet)
    h, p = server.server_address[:2]
    print(f"workbench view: {len(site.index.worlds)} worlds at http://{h!s}:{p}/ (Ctrl-C stops)",
          flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr)
    finally:
        server.server_close()
