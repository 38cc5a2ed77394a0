"""One frozen Settings object, built from command-line flags and the environment."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

DEFAULT_DB = "./waypost.db"
DEFAULT_TYPESAFE_URL = "https://api.typesafe.example/v1/rerank"


def default_db_path() -> str:
    """`WAYPOST_DB`, unless unset or blank (`WAYPOST_DB=' '` made a file
    named by a space)."""
    named = os.environ.get("WAYPOST_DB", "")
    return named if named.strip() else DEFAULT_DB


class SettingError(ValueError):
    """A setting `serve` cannot run with; the message names it and says why."""


def _positive_int(env: dict[str, str], name: str, default: int) -> int:
    raw = (env.get(name) or "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise SettingError(f"{name} must be a whole number of at least 1, not {raw!r}")
    return value


def _positive_seconds(env: dict[str, str], name: str, default: float) -> float:
    raw = (env.get(name) or "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    # nan or inf would leave an opened circuit open for good
    if not (math.isfinite(value) and value > 0):
        raise SettingError(f"{name} must be a finite number of seconds above 0, not {raw!r}")
    return value


@dataclass(frozen=True)
class RerankSettings:
    """The reranker's configuration; read by `serve` only (never by admin commands)."""

    api_key: str | None = None
    url: str = DEFAULT_TYPESAFE_URL
    ca_bundle: Path | None = None
    max_concurrency: int = 4
    circuit_open_seconds: float = 60.0

    @property
    def enabled(self) -> bool:
        return bool(self.api_key)

    @classmethod
    def from_environ(cls, environ: dict[str, str] | None = None) -> RerankSettings:
        """The settings from the environment; `SettingError` for a value that
        cannot be used (checked whether or not a key is set)."""
        env = dict(os.environ if environ is None else environ)
        key = (env.get("TYPESAFE_API_KEY") or "").strip() or None
        ca = env.get("TYPESAFE_CA_BUNDLE")
        return cls(
            api_key=key,
            url=env.get("TYPESAFE_URL") or DEFAULT_TYPESAFE_URL,
            ca_bundle=Path(ca) if ca else None,
            max_concurrency=_positive_int(env, "TYPESAFE_MAX_CONCURRENCY", 4),
            circuit_open_seconds=_positive_seconds(env, "TYPESAFE_CIRCUIT_OPEN_SECONDS", 60.0),
        )


LifecycleAuth = Literal["waypost", "tokenreview"]


@dataclass(frozen=True)
class LifecycleSettings:
    """How the lifecycle listener authenticates, and where its events go."""

    auth: LifecycleAuth = "waypost"  # tokens of audience lifecycle, or Kubernetes TokenReview
    k8s_api: str | None = None
    k8s_ca: Path | None = None
    k8s_token_file: Path | None = None
    webhook: str | None = None


@dataclass(frozen=True)
class Settings:
    db_path: Path
    host: str = "127.0.0.1"
    port: int = 8080
    lifecycle_host: str = "127.0.0.1"
    lifecycle_port: int = 8081
    sweep_interval: float = 300.0
    graphiql: bool = False
    clock_file: Path | None = None
    rerank: RerankSettings = RerankSettings()
    lifecycle: LifecycleSettings = LifecycleSettings()
    # Reader connections for GET requests; the writer is always exactly one.
    readers: int = 3
    # How long a writer waits for SQLite's lock held by another process.
    busy_timeout_ms: int = 5000
    # How long a client may take to send a whole request once its connection
    # opens or its previous response ends (http/slow_clients.py).
    request_read_timeout: float = 30.0
    # Connections both listeners hold open at once, at most (http/slow_clients.py);
    # None: the process's open-file limit less `serving.RESERVED_FILES`.
    max_connections: int | None = None
    # How long a context packet's full-text search may run (docs/context.md).
    search_time_limit_ms: int = 1000
    # Objects (and object fields) one GraphQL query's result may count
    # (docs/graphql.md, "Limits"); None: the built-in schema.budget.MAX_OBJECTS.
    graphql_max_objects: int | None = None
    # Operators' view (docs/operations.md): one line per request; "text" or
    # "json" lines; GET /metrics (a token of audience `metrics`) when enabled.
    access_log: bool = True
    metrics: bool = False
