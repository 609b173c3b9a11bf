"""Litestar's logging, left to the root logger that ``configure_logging`` set up."""

from __future__ import annotations

from litestar.logging.config import LoggingConfig

__all__ = ["litestar_logging_config"]


def litestar_logging_config() -> LoggingConfig:
    """Litestar's logging, left to the root logger instead of its own handlers."""
    return LoggingConfig(
        configure_root_logger=False,
        loggers={"litestar": {"level": "INFO", "handlers": [], "propagate": True}},
    )
