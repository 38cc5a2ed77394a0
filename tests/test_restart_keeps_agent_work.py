"""An operator restarting `serve` (restartjourney): an agent working over
REST keeps its session and its lease across the restart, graceful or not,
and a write whose answer it lost replays under its key (docs/operations.md,
"Stopping": retry with the same idempotency key once the service is back;
docs/api.md: `Waypost-Session` names a live session, else
`session_not_live`). Only an MCP session's own Waypost session ends with
the process (docs/mcp.md); an agent's own session is a row of the
database, and a restart that ended it would leave every lease it holds
unusable until the lease expired (15 minutes by default)."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.serve_support import START, Server, admin_command, auth, start


def _started(db: Path, clock: Path) -> Server:
    served = start(db, clock)
    try:
        served.wait_for(r"listening on http://\S+ \(public\)")
    except BaseException:
        # a start that did not say so in time (a loaded machine) is stopped,
        # not left serving after the test (one ran on for an hour)
        served.stop()
        raise
    return served


def _send(
    served: Server, token: str, path: str, body: Any, key: str, session: str = ""
) -> httpx.Response:
    headers = {**auth(token), "Idempotency-Key": key}
    if session:
        headers["Waypost-Session"] = session
    return httpx.post(served.url + path, json=body, headers=headers, timeout=30)


@pytest.mark.parametrize("ending", [signal.SIGTERM, signal.SIGKILL], ids=lambda s: s.name)
def test_an_agent_session_and_its_lease_outlive_a_restart(
    tmp_path: Path, ending: signal.Signals
) -> None:
    clock = tmp_path / "clock"
    clock.write_text(START)
    db = tmp_path / "waypost.db"
    first = start(db, clock)
    try:
        first.wait_for(r"created human principal 'admin'; its token \(shown once\)")
        admin = first.wait_for(r"^\s+(wp_\S+)$").group(1)
        first.wait_for(r"listening on http://\S+ \(public\)")
        assert (
            _send(first, admin, "/api/v1/projects", {"id": "demo", "name": "Demo"}, "p").status_code
            == 201
        )
        agent = admin_command(db, "principal", "create", "--kind", "agent", "--name", "worker")[
            "token"
        ]
        session = _send(first, agent, "/api/v1/sessions", {}, "s").json()["id"]
        task = _send(
            first, agent, "/api/v1/projects/demo/tasks", {"title": "Rotate keys"}, "t"
        ).json()["id"]
        claimed = _send(
            first, agent, "/api/v1/projects/demo/claims", {"task_id": task}, "c", session
        )
        assert claimed.status_code == 200, claimed.text
    finally:
        first.stop(ending)

    second = _started(db, clock)
    try:
        # the claim's answer "lost": the same request under its key replays it
        again = _send(
            second, agent, "/api/v1/projects/demo/claims", {"task_id": task}, "c", session
        )
        assert again.status_code == 200, again.text
        assert again.headers.get("idempotent-replayed") == "true"
        # the session is still live, and the lease still its own
        checkpoint = _send(second, agent, f"/api/v1/projects/demo/tasks/{task}/checkpoint",
                           {"note": "half done"}, "k", session)  # fmt: skip
        assert checkpoint.status_code == 200, checkpoint.text
        assert checkpoint.json()["checkpoint"]["actor_session_id"] == session
        assert checkpoint.json()["task"]["lease"]["session_id"] == session
        submitted = _send(second, agent, f"/api/v1/projects/demo/tasks/{task}/submit",
                          {"summary": "Rotated."}, "u", session)  # fmt: skip
        assert submitted.status_code == 200, submitted.text
        events = httpx.get(
            second.url + "/api/v1/projects/demo/events?limit=50", headers=auth(admin)
        )
        kinds = [e["type"] for e in events.json()["items"]]
        # each write once: the replayed claim wrote nothing
        assert kinds == ["project.created", "task.created", "task.claimed",
                         "task.checkpointed", "task.submitted"]  # fmt: skip
    finally:
        assert second.stop() == 0
