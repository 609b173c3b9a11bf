"""Fixtures of the grading tests: the API client and tokens of ``tests/api``."""

from __future__ import annotations

from tests.api.conftest import api_client, tokens

__all__ = ["api_client", "tokens"]
