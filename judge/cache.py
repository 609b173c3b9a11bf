"""The judge cache: reuse a completion for a byte-identical deterministic request.

A completion is reused only when everything that shapes it is identical: the messages
(so the diagnosis, the ground truth and every question's text), the reply schema, the
backend, the model, the endpoint and the sampling settings. Only requests at
temperature 0 are cached; a sampled judge's answers are never reused, because asking
again is the point of sampling.

A judge's name is not enough to say the same model answers: a :class:`DigestKeyedCache`
adds the judge's digest (``judge.identity``) to every key, so the entries of a model
are not reused once another answers under its name. A judge that reports no digest
cannot be told apart from its replacement: its entries are reused only when the caller
allows it (``unverified``).

Nor are entries shared between gradings whose ground truths come from different sources:
a :class:`DigestKeyedCache` keys them in the namespace of the grading's ground truth
(:func:`ground_truth_namespace`): a registered scenario's (all its submitters hold the
same hidden text), or the token's that sent an inline one. Otherwise a submitter could
send a diagnosis with a guessed ground truth, then the same diagnosis against a scenario,
and learn from the second grading being answered at once that the guess was the
scenario's hidden ground truth.

Within a scenario's namespace, a live grading of a submission a submitter token sent
never reads (:func:`may_read_cache`): it would tell that submitter, by coming back at
once, that the same diagnosis was graded against the same hidden ground truth before
(so that the ground truth was not edited since, or that another submitter sent it).
Its reply is kept all the same, for the regrades of that submission.

The rubric asks every question in one call today, so the cache works per call: a
reworded question changes the prompt and re-asks the whole call.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Sequence
from typing import Any, Protocol, runtime_checkable

from judge.calls import ChatMessage, Completion, JudgeRequest, SamplingParams

__all__ = [
    "CACHE_GRANULARITY",
    "BatchJudgeCache",
    "CacheKeys",
    "DigestKeyedCache",
    "DigestSource",
    "JudgeCache",
    "MemoryJudgeCache",
    "cache_key",
    "ground_truth_namespace",
    "kept_key",
    "may_read_cache",
    "with_digest",
]

#: what one cache entry covers: one judge call asking every question of the rubric
CACHE_GRANULARITY = "call"


@runtime_checkable
class JudgeCache(Protocol):
    """Where completions of deterministic judge requests are kept."""

    async def get(self, key: str) -> Completion | None:
        """The completion stored under ``key``, or None."""
        ...

    async def put(self, key: str, completion: Completion) -> str | None:
        """Keep ``completion`` under ``key`` (a key already present is left alone).

        Returns the key it is kept under, None when it is not kept. A cache may keep an
        entry with the call that brought it: the entry then exists once that call is
        stored with its ``JudgeCall.cache_key`` (``storage.judge_cache``).
        """
        ...


@runtime_checkable
class BatchJudgeCache(JudgeCache, Protocol):
    """A judge cache that can look up many keys at once (per-question asking asks one
    request per question: their entries are read in one query)."""

    async def prefetch(self, keys: Sequence[str]) -> None:
        """Look up ``keys`` now; later ``get`` calls of them answer without a lookup."""
        ...


class CacheKeys:
    """Cache keys of requests sharing one judge, reply schema and sampling settings.

    The shared part is hashed once, so keying many requests (a dry run over thousands
    of submissions) costs little more than hashing their messages.
    """

    def __init__(
        self,
        reply_schema: dict[str, Any],
        params: SamplingParams,
        *,
        backend: str,
        model: str,
        base_url: str | None,
    ) -> None:
        self.cacheable = params.temperature == 0
        shared = {
            "backend": backend,
            "model": model,
            "base_url": base_url,
            "reply_schema": reply_schema,
            "params": params.model_dump(mode="json"),
        }
        canonical = json.dumps(shared, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        self._prefix = hashlib.sha256(canonical.encode("utf-8"))

    def key(self, messages: Sequence[ChatMessage]) -> str | None:
        """The key of a request with these messages; None when not cacheable."""
        if not self.cacheable:
            return None
        digest = self._prefix.copy()
        for message in messages:
            for part in (message.role, message.content):
                data = part.encode("utf-8")
                digest.update(len(data).to_bytes(8, "big"))
                digest.update(data)
        return digest.hexdigest()


def cache_key(
    request: JudgeRequest, *, backend: str, model: str, base_url: str | None
) -> str | None:
    """SHA-256 of the request and the judge's identity; None when not cacheable.

    Not cacheable: a temperature above 0 (the judge samples).
    """
    keys = CacheKeys(
        request.reply_schema, request.params, backend=backend, model=model, base_url=base_url
    )
    return keys.key(request.messages)


class MemoryJudgeCache:
    """A judge cache in a dict: for tests and for one-off runs without a database."""

    def __init__(self) -> None:
        self.entries: dict[str, Completion] = {}

    async def get(self, key: str) -> Completion | None:
        """The completion stored under ``key``, or None."""
        return self.entries.get(key)

    async def put(self, key: str, completion: Completion) -> str | None:
        """Keep the first completion stored under ``key``; the key."""
        self.entries.setdefault(key, completion)
        return key


def with_digest(key: str, digest: str) -> str:
    """The key of the entry under ``key`` made by the model of ``digest``."""
    return hashlib.sha256(f"{key}\0{digest}".encode()).hexdigest()


def ground_truth_namespace(scenario_id: str | None, submitted_by: str) -> str:
    """Whose cache entries a grading may read: ``scenario:<id>`` for a registered
    scenario's ground truth, ``inline:<submitted_by>`` (the token that sent it) for an
    inline one."""
    return f"scenario:{scenario_id}" if scenario_id is not None else f"inline:{submitted_by}"


def may_read_cache(*, scenario_id: str | None, submitter_role: str | None, regrade: bool) -> bool:
    """Whether a grading may read the judge cache (it keeps its replies there either way).

    Not a live grading (``regrade`` False) of a submission that a token of role
    ``submitter`` sent against the registered scenario ``scenario_id``: the scenario's
    gradings share one namespace, so a hit there would tell that submitter something of
    the hidden ground truth it may not see (that it is unchanged since the same diagnosis
    was graded, or that another submitter sent the same diagnosis). A submitter's inline
    ground truth is its own namespace's; admins' and adjudicators' submissions, and
    regrades (run by admins), read as before. ``submitter_role`` None: not a token's
    (anonymous use, which is an admin's)."""
    return regrade or scenario_id is None or submitter_role != "submitter"


def kept_key(key: str, *, digest: str | None, namespace: str | None) -> str:
    """The key the entry of request key ``key`` is kept under: in ``namespace`` (see
    :func:`ground_truth_namespace`; None: none, for a grading of no submission), made by
    the model of ``digest`` (None: a judge that reports none)."""
    if namespace is not None:
        key = hashlib.sha256(f"{namespace}\0{key}".encode()).hexdigest()
    return key if digest is None else with_digest(key, digest)


class DigestSource(Protocol):
    """What a :class:`DigestKeyedCache` asks of its judge (``judge.identity.BackendDigest``)."""

    def digest(self) -> Awaitable[str | None]:
        """The judge's current digest, None when it reports none."""
        ...

    def observe(self, fingerprint: str | None) -> bool:
        """Note a completion's fingerprint; True when it shows a change of model."""
        ...


#: digests learned from completions' fingerprints start so: they say which model
#: answered the last call, not which one would answer the next
FINGERPRINT = "fingerprint:"


class DigestKeyedCache:
    """A judge cache whose entries are keyed on the judge's digest and on the namespace
    of the grading's ground truth as well (:func:`kept_key`).

    Entries are kept under the digest the server reported when they were looked up (no
    digest when it reported none). They are read back only when the server says which
    model answers now (a probed digest), or when ``unverified`` allows it: a judge known
    only by its completions' fingerprints, or not at all, could have been replaced since
    its last reply. A completion whose fingerprint shows that the model changed while it
    was asked is not kept. With ``reads`` False (:func:`may_read_cache`) nothing is read
    back: every request asks the judge, and its reply is kept.
    """

    def __init__(
        self,
        inner: JudgeCache,
        judge: DigestSource,
        *,
        unverified: bool,
        namespace: str | None,
        reads: bool = True,
    ) -> None:
        """Key ``inner``'s entries on ``judge``'s digest, in ``namespace`` (the grading's
        ``ground_truth_namespace``; None: a grading of no submission); ``reads``: whether
        entries are read back, or only kept."""
        self.inner = inner
        self.judge = judge
        self.unverified = unverified
        self.namespace = namespace
        self.reads = reads
        #: plain key -> the key its entry is kept under, and the digest when looked up
        self._kept: dict[str, tuple[str, str | None]] = {}

    async def _keys(self, key: str) -> tuple[str | None, str]:
        """The key to read (None: do not) and the key to keep an entry under."""
        digest = await self.judge.digest()
        kept = kept_key(key, digest=digest, namespace=self.namespace)
        self._kept[key] = (kept, digest)
        verified = digest is not None and not digest.startswith(FINGERPRINT)
        readable = self.reads and (verified or self.unverified)
        return (kept if readable else None), kept

    async def prefetch(self, keys: Sequence[str]) -> None:
        """Look up the entries of ``keys`` at once, when the inner cache can."""
        read = [r for key in keys if (r := (await self._keys(key))[0]) is not None]
        if isinstance(self.inner, BatchJudgeCache) and read:
            await self.inner.prefetch(read)

    async def get(self, key: str) -> Completion | None:
        """The entry of ``key`` made by the model answering now, or None."""
        read, _ = await self._keys(key)
        return None if read is None else await self.inner.get(read)

    async def put(self, key: str, completion: Completion) -> str | None:
        """Keep ``completion`` under the digest ``key`` was looked up with, unless its
        fingerprint shows that another model answered; the key it is kept under."""
        if key not in self._kept:
            await self._keys(key)
        kept, digest = self._kept.pop(key)
        if self.judge.observe(completion.fingerprint) and await self.judge.digest() != digest:
            return None  # the digest learned at once (and announced); the reply is not kept
        return await self.inner.put(kept, completion)
