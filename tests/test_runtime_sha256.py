"""The runtime's SHA-256 (runtime/common/sha256.cpp) against Python's hashlib, through runtime/tests/sha256_harness.

The delegate refuses a cubin whose digest is not its content address, so a wrong digest would refuse every
program: the harness hashes each message in one piece and in random pieces, and both must equal hashlib's on
every length around the 64-byte block and 56-byte padding boundaries, on random messages up to a few MiB, and on
the FIPS 180-4 examples; with the CPU's SHA instructions (when it has them) and with the portable code.
"""

from __future__ import annotations

import hashlib
import random
import subprocess

import pytest
from runtime_helpers import blob_stream, ensure_built

pytestmark = pytest.mark.timeout(300)


MODES = ["default", "portable"]  # default: the CPU's SHA instructions when it has them


def _digests(messages: list[bytes], mode: str) -> list[str]:
    cmd = [str(ensure_built() / "sha256_harness"), "digest"] + (["portable"] if mode == "portable" else [])
    r = subprocess.run(cmd, input=blob_stream(messages), capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout.decode().split("\n")[:-1]


@pytest.mark.parametrize("mode", MODES)
def test_known_answers(mode: str) -> None:
    fips = [b"", b"abc", b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", b"a" * 1_000_000]
    assert _digests(fips, mode) == [
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
        "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0",
    ]


@pytest.mark.parametrize("mode", MODES)
def test_every_length_up_to_300_bytes(mode: str) -> None:
    rng = random.Random(0)
    messages = [bytes(rng.randrange(256) for _ in range(n)) for n in range(301)]
    assert _digests(messages, mode) == [hashlib.sha256(m).hexdigest() for m in messages]


@pytest.mark.parametrize("mode", MODES)
def test_random_messages(mode: str) -> None:
    rng = random.Random(1)
    messages = [
        rng.randbytes(rng.choice([rng.randrange(64, 4096), rng.randrange(1, 1 << 20)])) for _ in range(200)
    ]
    messages += [rng.randbytes(3 << 20), bytes(1 << 21), b"\xff" * ((1 << 16) + 55)]
    assert _digests(messages, mode) == [hashlib.sha256(m).hexdigest() for m in messages]
