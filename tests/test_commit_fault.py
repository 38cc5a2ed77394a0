"""A COMMIT whose fsync fails: the write may have been committed after all.

SQLite writes the commit frame to the WAL before it syncs the file. When the
sync fails, the service rolls back, but a crash before its next commit leaves
the frame for recovery to find: the write, its receipt and its event are
there after the restart. It was answered "the write was not committed", and
a client that believed it and retried under a new key made the record twice.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.serve_support import START, auth, start

SHIM = Path(__file__).parent / "faults" / "fsync_fails.c"


@pytest.fixture
def shim(tmp_path: Path) -> Path:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler to build the fsync fault")
    built = tmp_path / "fsync_fails.so"
    subprocess.run([compiler, "-shared", "-fPIC", "-O2", "-o", str(built), str(SHIM), "-ldl"],
                   check=True, capture_output=True, timeout=60)  # fmt: skip
    return built


def test_a_failed_commit_sync_is_answered_as_an_unknown_outcome(tmp_path: Path, shim: Path) -> None:
    clock, flag, db = tmp_path / "clock", tmp_path / "fsync-fails", tmp_path / "waypost.db"
    clock.write_text(START)
    fault = {"LD_PRELOAD": str(shim), "WAYPOST_TEST_FSYNC_FLAG": str(flag)}
    first = start(db, clock, env_extra=fault)
    task = {"title": "written once"}
    try:
        token = first.wait_for(r"^\s+(wp_\S+)$").group(1)
        first.wait_for(r"listening on http://")
        for project in ("p", "g"):
            r = httpx.post(f"{first.url}/api/v1/projects", json={"id": project, "name": project},
                           headers={**auth(token), "Idempotency-Key": project})  # fmt: skip
            assert r.status_code == 201, r.text
        flag.touch()  # the device fails from here on
        # over GraphQL the key is the mutation's input field, and the advice
        # names it so (it named the REST header); first, as the REST write's
        # frame must be the last one written
        create = (
            'mutation { taskCreate(input: {idempotencyKey: "k", projectId: "g", title: "t"})'
            " { task { title } } }"
        )
        r = httpx.post(f"{first.url}/graphql", json={"query": create}, headers=auth(token))
        (error,) = r.json()["errors"]
        assert error["extensions"]["code"] == "unavailable", error
        assert (
            "same idempotencyKey" in error["message"] and "Idempotency-Key" not in error["message"]
        )
        headers = {**auth(token), "Idempotency-Key": "the-task"}
        r = httpx.post(f"{first.url}/api/v1/projects/p/tasks", json=task, headers=headers)
        assert r.status_code == 503, r.text
        message = r.json()["error"]["message"]
        assert "may have been committed" in message and "same Idempotency-Key" in message
    finally:
        first.process.kill()  # before any later commit could overwrite the frame
        first.stop()
    flag.unlink()
    second = start(db, clock)
    try:
        second.wait_for(r"listening on http://")
        # the retry the answer asked for: with the same key it is done once
        r = httpx.post(f"{second.url}/api/v1/projects/p/tasks", json=task, headers=headers)
        assert r.status_code == 201, r.text
        # recovery found the commit frame: it had been committed, receipt and all
        assert r.headers.get("idempotent-replayed") == "true"
        listed = httpx.get(f"{second.url}/api/v1/projects/p/tasks", headers=auth(token)).json()
        assert [t["title"] for t in listed["items"]] == ["written once"]
    finally:
        second.stop()
