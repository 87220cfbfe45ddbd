"""Embeddings: one small protocol, an OpenAI-compatible client, any callable, an offline default.

    embedder = WordLlamaEmbedder()                  # offline, weights inside the wheel
    vectors = await embedder.embed(["user is allergic to peanuts"])   # [[0.01, ...]] (256)

An ``Embedder`` has a ``name`` (which embedding space its vectors live in: two
embedders with one name must give the same vector for the same text, so an index
built by one is valid for the other), a ``dim`` and ``async embed(texts)``, which
returns one vector of ``dim`` floats per text, in order.

- ``OpenAIEmbedder``: ``POST <base_url>/embeddings`` (OpenAI, vLLM, Ollama, LM Studio
  ...), the retry rules of ``OpenAIModel`` (429/5xx and connection failures retried
  with backoff, other 4xx at once, a timeout never retried).
- ``CallableEmbedder``: any function, sync or async, from a list of texts to vectors.
- ``WordLlamaEmbedder``: the local default, WordLlama's 256-dimension model, whose
  weights and tokenizer ship inside the ``wordllama`` wheel (``pip install
  'tether[recall]'``). It never downloads: a missing file is an error, not a fetch.
- ``HashingEmbedder``: hashed words and word pairs, no dependency, deterministic; it
  matches words, not meanings (for tests and as a last resort).

A response of the wrong shape (count, dimension, a non-finite number) raises
``ModelBadResponseError``; nothing is ever indexed from it.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import itertools
import json
import math
import re
import struct
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import httpx

from ..core.messages import Embedder
from ._http import Retries, post_json
from .errors import (
    ModelBadResponseError,
    ModelConfigError,
)

__all__ = [
    "CallableEmbedder",
    "Embedder",
    "HashingEmbedder",
    "OpenAIEmbedder",
    "WordLlamaEmbedder",
    "default_embedder",
    "embedder_from_name",
]


def check_vectors(name: str, dim: int, texts: Sequence[str], vectors: Any) -> list[list[float]]:
    """The vectors as lists of floats, or ``ModelBadResponseError`` (wrong count, size, value)."""
    try:
        out = [[float(x) for x in v] for v in vectors]
    except (TypeError, ValueError) as exc:
        raise ModelBadResponseError(
            f"embedder {name!r} returned something that is not a list of vectors: {exc}"
        ) from None
    if len(out) != len(texts):
        raise ModelBadResponseError(
            f"embedder {name!r} returned {len(out)} vectors for {len(texts)} texts",
            expected=len(texts),
            got=len(out),
        )
    for i, v in enumerate(out):
        if len(v) != dim:
            raise ModelBadResponseError(
                f"embedder {name!r} returned a vector of {len(v)} numbers, expected dim={dim}",
                index=i,
                expected=dim,
                got=len(v),
            )
        if not all(math.isfinite(x) for x in v):
            raise ModelBadResponseError(
                f"embedder {name!r} returned a non-finite number (vector {i})", index=i
            )
    return out


# --------------------------------------------------------------------------- any callable


class CallableEmbedder:
    """An ``Embedder`` around a function (sync or async) from texts to vectors."""

    def __init__(
        self,
        fn: Callable[[list[str]], Sequence[Sequence[float]]]
        | Callable[[list[str]], Awaitable[Sequence[Sequence[float]]]],
        *,
        dim: int,
        name: str,
    ) -> None:
        if dim < 1 or not name:
            raise ModelConfigError("a CallableEmbedder needs dim >= 1 and a name", dim=dim)
        self._fn = fn
        self._dim = dim
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    @property
    def dim(self) -> int:
        return self._dim

    def __repr__(self) -> str:
        return f"CallableEmbedder(name={self._name!r}, dim={self._dim})"

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        texts = list(texts)
        if not texts:
            return []
        out = self._fn(texts)
        if inspect.isawaitable(out):
            out = await out
        return check_vectors(self._name, self._dim, texts, out)


# --------------------------------------------------------------------------- hashing

_WORD = re.compile(r"[a-z0-9]+")


class HashingEmbedder:
    """Words and adjacent word pairs hashed (BLAKE2b) into ``dim`` signed buckets, unit length.

    Deterministic across processes and machines, no dependency, fast. It finds texts
    that share words ("peanut allergy" ~ "allergic to peanuts" only through a shared
    stem of 4 letters), so use it for tests, not for meaning.
    """

    def __init__(self, dim: int = 256) -> None:
        if dim < 8:
            raise ModelConfigError("HashingEmbedder needs dim >= 8", dim=dim)
        self._dim = dim

    @property
    def name(self) -> str:
        return f"hashing-v1:{self._dim}"

    @property
    def dim(self) -> int:
        return self._dim

    def __repr__(self) -> str:
        return f"HashingEmbedder(dim={self._dim})"

    def vector(self, text: str) -> list[float]:
        words = _WORD.findall(text.lower())
        feats = words + [w[:4] for w in words if len(w) > 4]
        feats += [a + " " + b for a, b in itertools.pairwise(words)]
        v = [0.0] * self._dim
        for f in feats:
            h = hashlib.blake2b(f.encode(), digest_size=8).digest()
            (n,) = struct.unpack("<Q", h)
            v[n % self._dim] += 1.0 if (n >> 63) else -1.0
        norm = math.sqrt(sum(x * x for x in v))
        return [x / norm for x in v] if norm else v

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [self.vector(t) for t in texts]


# --------------------------------------------------------------------------- wordllama

_WL_LOCK = threading.Lock()
_WL_MODELS: dict[int, Any] = {}


class WordLlamaEmbedder:
    """WordLlama (``l2_supercat``), 256 dimensions (64 and 128: the same weights
    truncated), unit-length vectors. Offline: loads the weights
    and tokenizer from the installed wheel and never downloads."""

    def __init__(self, dim: int = 256) -> None:
        if dim not in (64, 128, 256):
            raise ModelConfigError("WordLlamaEmbedder dim is one of 64, 128, 256", dim=dim)
        self._dim = dim

    @property
    def name(self) -> str:
        return f"wordllama-l2_supercat:{self._dim}"

    @property
    def dim(self) -> int:
        return self._dim

    def __repr__(self) -> str:
        return f"WordLlamaEmbedder(dim={self._dim})"

    def _model(self) -> Any:
        with _WL_LOCK:
            model = _WL_MODELS.get(self._dim)
            if model is None:
                model = _load_wordllama(self._dim)
                _WL_MODELS[self._dim] = model
            return model

    def embed_sync(self, texts: Sequence[str]) -> list[list[float]]:
        texts = list(texts)
        if not texts:
            return []
        arr = self._model().embed(texts, norm=True)
        return [[float(x) for x in row] for row in arr.tolist()]

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if len(texts) > 256:  # a big batch is CPU work: keep the event loop free
            return await asyncio.to_thread(self.embed_sync, texts)
        return self.embed_sync(texts)


def _load_wordllama(dim: int) -> Any:
    try:
        from pathlib import Path

        import wordllama
        from wordllama import WordLlama
    except ImportError:
        raise ModelConfigError(
            "WordLlamaEmbedder needs the recall extra: pip install 'tether[recall]'"
        ) from None
    # The wheel holds weights/ and tokenizers/; naming the package directory as the
    # cache makes wordllama find both there (its own lookup of the tokenizer misses
    # it), and disable_download turns any miss into an error instead of a fetch.
    here = Path(wordllama.__file__).parent
    trunc = dim if dim < 256 else None
    try:
        return WordLlama.load(dim=256, trunc_dim=trunc, cache_dir=here, disable_download=True)
    except FileNotFoundError as exc:
        raise ModelConfigError(
            f"WordLlama weights for dim={dim} are not in the installed wheel ({exc}); "
            "256 ships with it"
        ) from None


def default_embedder() -> Embedder:
    """The local default: ``WordLlamaEmbedder()`` (needs ``tether[recall]``)."""
    return WordLlamaEmbedder()


# --------------------------------------------------------------------------- OpenAI


class OpenAIEmbedder:
    """An ``Embedder`` over an OpenAI-compatible ``/embeddings`` endpoint.

    ``dim`` is the size the model returns (sent as ``dimensions`` when
    ``send_dimensions=True``, for models that can shorten their vectors). Texts go
    in batches of ``batch_size``.
    """

    def __init__(
        self,
        base_url: str = "https://api.openai.com/v1",
        api_key: str | None = None,
        *,
        model: str = "text-embedding-3-small",
        dim: int = 1536,
        send_dimensions: bool = False,
        batch_size: int = 256,
        timeout: float = 60.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        headers: dict[str, str] | None = None,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        if dim < 1 or batch_size < 1 or timeout <= 0 or max_retries < 0 or backoff < 0:
            raise ModelConfigError(
                "dim and batch_size must be >= 1, timeout > 0, max_retries and backoff >= 0"
            )
        url = base_url.rstrip("/")
        self.url = url if url.endswith("/embeddings") else url + "/embeddings"
        self.model = model
        self._dim = dim
        self.send_dimensions = send_dimensions
        self.batch_size = batch_size
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self._headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._headers.update(headers or {})
        self._client = client

    @property
    def name(self) -> str:
        return f"openai:{self.model}:{self._dim}"

    @property
    def dim(self) -> int:
        return self._dim

    def __repr__(self) -> str:
        return f"OpenAIEmbedder({self.url!r}, model={self.model!r}, dim={self._dim})"

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        texts = list(texts)
        if not texts:
            return []
        if self._client is not None:
            return await self._embed(self._client, texts)
        async with httpx.AsyncClient(timeout=httpx.Timeout(self.timeout)) as client:
            return await self._embed(client, texts)

    async def _embed(self, client: httpx.AsyncClient, texts: list[str]) -> list[list[float]]:
        out: list[list[float]] = []
        for i in range(0, len(texts), self.batch_size):
            batch = texts[i : i + self.batch_size]
            body: dict[str, Any] = {"model": self.model, "input": batch}
            if self.send_dimensions:
                body["dimensions"] = self._dim
            data = await self._post(client, body)
            try:
                items = sorted(data["data"], key=lambda d: int(d.get("index", 0)))
                vectors = [d["embedding"] for d in items]
            except (KeyError, TypeError, ValueError, AttributeError):
                raise ModelBadResponseError(
                    "the embeddings server answered without data[].embedding",
                    body=json.dumps(data, default=str)[:2000],
                ) from None
            out.extend(check_vectors(self.name, self._dim, batch, vectors))
        return out

    async def _post(self, client: httpx.AsyncClient, body: dict[str, Any]) -> Any:
        payload = json.dumps(body, ensure_ascii=False).encode()
        retries = Retries(self.timeout, self.max_retries, self.backoff, self.max_backoff)
        return await post_json(
            client, self.url, payload, self._headers, retries, server="embeddings server"
        )


def embedder_from_name(spec: str) -> Embedder:
    """An embedder from a short name (the CLI's ``--embedder``, the server's setting):

    ``wordllama`` or ``wordllama:<64|128|256>``; ``hashing`` or ``hashing:<dim>``;
    ``openai:<model>:<dim>`` (base URL from ``$OPENAI_BASE_URL``, key from
    ``$OPENAI_API_KEY``).
    """
    import os

    kind, _, rest = spec.partition(":")
    try:
        if kind == "wordllama":
            return WordLlamaEmbedder(int(rest) if rest else 256)
        if kind == "hashing":
            return HashingEmbedder(int(rest) if rest else 256)
        if kind == "openai":
            model, _, dim = rest.rpartition(":")
            return OpenAIEmbedder(
                os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1"),
                os.environ.get("OPENAI_API_KEY"),
                model=model or "text-embedding-3-small",
                dim=int(dim) if dim else 1536,
            )
    except ValueError:
        pass
    raise ModelConfigError(
        f"unknown embedder {spec!r}: wordllama[:dim], hashing[:dim] or openai:<model>:<dim>",
        embedder=spec,
    )
