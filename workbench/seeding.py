"""Seeds derived by hashing, so that they are stable across Python versions and
independent of the order in which worlds or agents happen to be built."""
from __future__ import annotations

import hashlib
import random


def derive_seed(*parts: object) -> int:
    """A 63-bit seed from any printable parts; the same parts always give the same seed."""
    text = "\x1f".join(str(p) for p in parts)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") >> 1


def rng_for(*parts: object) -> random.Random:
    return random.Random(derive_seed(*parts))
