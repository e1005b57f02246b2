"""The one script a report needs besides plotly.js: the widget renderer
(@jupyter-widgets/html-manager's embed.js), fetched from the npm registry once,
pinned by version and SHA-256, and inlined into every report so that saved
widget state renders with no network."""
from __future__ import annotations

import hashlib
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from workbench.errors import SetupError

HTML_MANAGER = "@jupyter-widgets/html-manager"
HTML_MANAGER_VERSION = "1.0.15"
EMBED_SHA256 = "8f6d2d3f856d8595d1841dec3019d99bbe74d331f2a5178c2a33bfec729e3d6a"


class AssetError(SetupError):
    pass


def widget_js_path(prefix: str | Path = sys.prefix) -> Path:
    return Path(prefix) / "share" / "workbench" / f"html-manager-{HTML_MANAGER_VERSION}-embed.js"


def _verify(data: bytes, where: str) -> None:
    digest = hashlib.sha256(data).hexdigest()
    if digest != EMBED_SHA256:
        raise AssetError(f"{where}: SHA-256 {digest} does not match the pinned {EMBED_SHA256} "
                         f"({HTML_MANAGER}@{HTML_MANAGER_VERSION} dist/embed.js)")


def ensure_widget_js(prefix: str | Path = sys.prefix) -> Path:
    """Return the pinned embed.js, fetching it with ``npm pack`` if it is missing."""
    target = widget_js_path(prefix)
    if target.exists():
        _verify(target.read_bytes(), str(target))
        return target
    with tempfile.TemporaryDirectory() as tmp:
        try:
            res = subprocess.run(["npm", "pack", f"{HTML_MANAGER}@{HTML_MANAGER_VERSION}", "--silent"],
                                 cwd=tmp, capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise AssetError(f"could not run npm to fetch {HTML_MANAGER}@{HTML_MANAGER_VERSION}: {exc}") from None
        tgz = next(Path(tmp).glob("*.tgz"), None)
        if res.returncode != 0 or tgz is None:
            raise AssetError(f"npm pack {HTML_MANAGER}@{HTML_MANAGER_VERSION} failed: {res.stderr.strip()[:300]}")
        with tarfile.open(tgz) as tar:
            member = tar.extractfile("package/dist/embed.js")
            if member is None:
                raise AssetError(f"{tgz.name} has no package/dist/embed.js")
            data = member.read()
    _verify(data, f"{HTML_MANAGER}@{HTML_MANAGER_VERSION}")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    return target
