"""The audit chain key of the service the tests run (``SRE_JUDGE_SECRET_KEY_FILE``)."""

from __future__ import annotations

from api.service.secret_key import load_service_key
from api.service.settings import Settings
from storage import ChainKey

__all__ = ["configured_chain_key"]


def configured_chain_key() -> ChainKey:
    """The chain key of the configured service key (created by the app under test)."""
    return ChainKey.of(load_service_key(Settings(), create=False))
