"""The cipher's pieces without a database: envelope, codec, associated data, master keys."""

from __future__ import annotations

import base64
import pickle
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tether.crypto import (
    OVERHEAD,
    CipherCodec,
    CipherError,
    KeyErased,
    Keyring,
    MasterKey,
    MemoryKeyStore,
    MissingKey,
    NotEncrypted,
    WrongKey,
    erased_placeholders,
    is_erased,
)
from tether.crypto._envelope import MAGIC

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


async def _ring(*masters: MasterKey, ks: MemoryKeyStore | None = None) -> Keyring:
    return await Keyring.open(ks or MemoryKeyStore(), list(masters) or [MasterKey.generate()])


async def _codec(scopes: tuple[str, ...] = ("thread:t", "user:u", "app")) -> CipherCodec:
    ring = await _ring()
    for s in scopes:
        await ring.ensure("ns", s, create=True)
    return CipherCodec(ring)


@settings(max_examples=60, deadline=None)
@given(payload=json_values)
async def test_round_trip_any_json_payload(payload: Any) -> None:
    codec = await _codec()
    for scope in ("thread:t", "user:u", "app"):
        data = codec.encode("ns", scope, payload)
        assert data[0] == MAGIC
        assert len(data) == len(orjson.dumps(payload)) + OVERHEAD
        assert codec.decode("ns", scope, data) == payload


async def test_same_payload_twice_gives_different_ciphertexts() -> None:
    codec = await _codec()
    a = codec.encode("ns", "app", {"x": "same"})
    b = codec.encode("ns", "app", {"x": "same"})
    assert a != b  # fresh nonce per payload: equal plaintexts are not visible in the table
    assert codec.decode("ns", "app", a) == codec.decode("ns", "app", b)


async def test_ciphertext_holds_no_plaintext() -> None:
    codec = await _codec()
    data = codec.encode("ns", "user:u", {"secret": "MARKER-a1b2c3"})
    assert b"MARKER" not in data and b"secret" not in data


async def test_ciphertext_moved_to_another_scope_fails() -> None:
    codec = await _codec(("user:u", "user:v", "thread:t", "app"))
    data = codec.encode("ns", "thread:t", {"x": 1})
    # The thread and the app share the namespace key, so only the bound scope stops this.
    with pytest.raises(CipherError) as e:
        codec.decode("ns", "app", data)
    assert e.value.code == "decrypt_failed"
    with pytest.raises(CipherError) as e:
        codec.decode("ns", "thread:other", data)
    assert e.value.code == "decrypt_failed"


async def test_ciphertext_moved_to_another_namespace_fails() -> None:
    ring = await _ring()
    await ring.ensure("ns", "app", create=True)
    await ring.ensure("other", "app", create=True)
    codec = CipherCodec(ring)
    data = codec.encode("ns", "app", {"x": 1})
    with pytest.raises(CipherError) as e:
        codec.decode("other", "app", data)
    assert e.value.code == "unknown_key"


async def test_relabelled_key_id_or_flipped_bit_fails() -> None:
    codec = await _codec(("user:u", "user:v"))
    data = bytearray(codec.encode("ns", "user:u", {"x": 1}))
    other = codec.encode("ns", "user:v", {"x": 1})
    relabelled = bytes(data[:2]) + other[2:18] + bytes(data[18:])
    with pytest.raises(CipherError) as e:
        codec.decode("ns", "user:v", relabelled)
    assert e.value.code == "decrypt_failed"
    for i in (20, len(data) - 1):
        flipped = bytearray(data)
        flipped[i] ^= 1
        with pytest.raises(CipherError) as e:
            codec.decode("ns", "user:u", bytes(flipped))
        assert e.value.code == "decrypt_failed"


async def test_plaintext_payload_is_a_typed_error() -> None:
    codec = await _codec()
    with pytest.raises(NotEncrypted) as e:
        codec.decode("ns", "app", orjson.dumps({"x": 1}))
    assert e.value.code == "not_encrypted"


async def test_write_without_a_loaded_key_is_a_typed_error() -> None:
    codec = CipherCodec(await _ring())
    with pytest.raises(CipherError) as e:
        codec.encode("ns", "app", 1)
    assert e.value.code == "cipher_unprepared"


async def test_erased_key_raises_or_gives_placeholder() -> None:
    ring = await _ring()
    await ring.ensure("ns", "user:u", create=True)
    await ring.ensure("ns", "user:v", create=True)
    codec = CipherCodec(ring)
    gone, kept = codec.encode("ns", "user:u", "a"), codec.encode("ns", "user:v", "b")
    report = await ring.erase_user("ns", "u")
    assert report.keys_destroyed == 1
    with pytest.raises(KeyErased) as e:
        codec.decode("ns", "user:u", gone)
    assert e.value.code == "key_erased" and e.value.details["owner"] == "user:u"
    with erased_placeholders():
        placeholder = codec.decode("ns", "user:u", gone)
        assert is_erased(placeholder) and placeholder == {"$erased": True}
    assert codec.decode("ns", "user:v", kept) == "b"
    with pytest.raises(KeyErased):  # the placeholder mode ended with the block
        codec.decode("ns", "user:u", gone)


async def test_wrong_master_key_is_refused() -> None:
    ks = MemoryKeyStore()
    await _ring(MasterKey.generate(), ks=ks)
    with pytest.raises(WrongKey) as e:
        await _ring(MasterKey.generate(), ks=ks)
    assert e.value.code == "wrong_key"


# -- master keys ---------------------------------------------------------------------


def test_master_key_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = MasterKey.generate()
    monkeypatch.setenv("TETHER_MASTER_KEY", key.to_base64())
    assert MasterKey.from_env() == key
    assert MasterKey.from_env().key_id == key.key_id
    text = tmp_path / "key.txt"
    text.write_text(key.to_base64() + "\n")
    assert MasterKey.from_file(text) == key
    raw = tmp_path / "key.bin"
    raw.write_bytes(base64.b64decode(key.to_base64()))
    assert MasterKey.from_file(raw) == key
    assert MasterKey.from_base64(base64.urlsafe_b64encode(raw.read_bytes()).decode()) == key


def test_master_key_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TETHER_MASTER_KEY", raising=False)
    with pytest.raises(MissingKey):
        MasterKey.from_env()
    with pytest.raises(MissingKey):
        MasterKey.from_file(tmp_path / "nope")
    for bad in ("", "abc", base64.b64encode(b"x" * 31).decode(), "!!!!"):
        with pytest.raises(CipherError) as e:
            MasterKey.from_base64(bad)
        assert e.value.code == "invalid_key"
    with pytest.raises(CipherError):
        MasterKey(b"short")


def test_master_key_never_shows_or_pickles_its_secret() -> None:
    key = MasterKey.generate()
    assert key.to_base64() not in repr(key)
    assert key.key_id in repr(key)
    with pytest.raises(TypeError):
        pickle.dumps(key)


async def test_master_key_wraps_with_context() -> None:
    key = MasterKey.generate()
    wrapped = await key.wrap(b"k" * 32, b"ctx-a")
    assert await key.unwrap(wrapped, b"ctx-a") == b"k" * 32
    with pytest.raises(WrongKey):
        await key.unwrap(wrapped, b"ctx-b")
    with pytest.raises(WrongKey):
        await MasterKey.generate().unwrap(wrapped, b"ctx-a")
