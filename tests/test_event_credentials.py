"""A text an event copies never brings a credential into the event log.

Service-contract section 10: an event's `data` "never holds credentials or
headers", and events are never rewritten. A publication `detail` was refused
so, while a knowledge record's title and tags went into `knowledge.created`
and `knowledge.corrected` as sent (knowledgejourney); so did a project's
name, a task's title and the decision option an answer copies. Each is
refused now, naming its field, and nothing is written.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import Caller, Service
from tests.knowledge_support import correction, create, kpath, new_body, raw
from tests.tasks_support import BASE, claimed_by_agent, error, make_task, task_path

GITHUB_TOKEN = "ghp_" + "A1b2" * 9


def events(service: Service) -> list[tuple[str, str]]:
    with raw(service.db_path) as conn:
        return [(row[0], row[1]) for row in conn.execute("SELECT type, data FROM events")]


def refused(r: Any, field: str) -> None:
    assert error(r) == (400, "invalid_request",
                        {"reason": "secret_marker_detected", "field": field}), r.text  # fmt: skip
    assert "a GitHub token" in r.json()["error"]["message"]


async def test_a_project_name(service: Service, human: Caller) -> None:
    before = events(service)
    r = await human.post("/api/v1/projects", {"id": "leaky", "name": f"Ops {GITHUB_TOKEN}"})
    refused(r, "name")
    assert events(service) == before
    assert (await human.get("/api/v1/projects/leaky")).status_code == 404


async def test_a_task_title_new_and_edited(service: Service, human: Caller, project: str) -> None:
    task = await make_task(human)
    before = events(service)
    refused(await human.post(f"{BASE}/tasks", {"title": f"Push {GITHUB_TOKEN}"}), "title")
    edit = {"expected_revision": 1, "title": f"Push with {GITHUB_TOKEN}"}
    refused(await human.patch(task_path(task["id"]), edit), "title")
    assert events(service) == before
    assert (await human.get(task_path(task["id"]))).json()["revision"] == 1


@pytest.mark.parametrize(
    ("changes", "field"),
    [({"title": f"Deploy with {GITHUB_TOKEN}"}, "title"),
     ({"tags": ["deploy", GITHUB_TOKEN]}, "tags[1]")],
)  # fmt: skip
async def test_a_knowledge_title_and_tags_new_and_corrected(
    service: Service, human: Caller, project: str, changes: dict[str, Any], field: str
) -> None:
    record = await create(human, project)
    before = events(service)
    refused(await human.post(kpath(project), new_body(**changes)), field)
    r = await human.patch(kpath(project, record["id"]), correction(record, **changes))
    refused(r, field)
    assert events(service) == before


async def test_a_lessons_title_at_submit(service: Service, human: Caller, project: str) -> None:
    task, agent = await claimed_by_agent(service, human)
    before = events(service)
    lesson = {"kind": "lesson", "title": f"Use {GITHUB_TOKEN}", "body": "b"}
    r = await agent.post(task_path(task["id"], "submit"), {"summary": "done", "lessons": [lesson]})
    refused(r, "lessons[0].title")
    assert events(service) == before


async def test_a_decisions_option_which_its_answer_would_copy(
    service: Service, human: Caller, project: str
) -> None:
    task = await make_task(human)
    before = events(service)
    body = {"question": "Push?", "options": ["Proceed", f"Push as {GITHUB_TOKEN}"],
            "rationale": "r", "required_actor": "human", "task_ids": [task["id"]],
            "environment": "staging"}  # fmt: skip
    refused(await human.post(f"{BASE}/decisions", body), "options[1]")
    assert events(service) == before
    assert all(GITHUB_TOKEN not in data for _, data in events(service))


@pytest.mark.parametrize(
    "title",
    ["xoxb- tokens for the Slack bot", "Stop printing password=${DB_PASSWORD} at boot",
     "Mask token=******** lines", "Logs show token=<redacted> in startup",
     "Template secret={{ vault_secret }}", "Use sk-learn 1.5",
     # docs/api.md: a value beginning `%` is a placeholder too; a Slack
     # token needs ten characters after its prefix; a setting 8 or more
     "Template password=%(db_password)s in settings", "Rotate xoxb-style tokens",
     "Bot uses xoxb-123456789 here", "Fix token=missing crash",
     # a value a bug report quotes, or a redaction (review84)
     "Handle token=undefined in the OAuth callback", "Logs print token=[REDACTED]",
     "Mask password=REDACTED in logs", "password=xxxxxxxx in the sample env",
     "Migrate xoxp-legacy-tokens to bot tokens", "Rotate xoxb-token-based integrations",
     # each exempt word and character docs/api.md names (review85)
     "Logs show token=null when unset", "Logs show secret=none yet",
     "Mask token=masked in output", "Show password=hidden in the form",
     "Mask password=######## lines", "Mask password=•••••••• in the UI"],
)  # fmt: skip
async def test_a_title_that_names_a_secret_or_a_placeholder_is_taken(
    human: Caller, project: str, title: str
) -> None:
    """What a team writes about secrets is no secret: the kind's prefix alone,
    a template's placeholder, a redaction (review83 found them refused)."""
    r = await human.post(f"{BASE}/tasks", {"title": title})
    assert r.status_code == 201, r.text


@pytest.mark.parametrize(
    ("title", "kind"),
    [("Bot uses xoxb-1234567890-abcdefghij", "a Slack token"),
     ("Set token=abcd1234efgh on the runner", "a password=, secret= or token= setting"),
     ("Bot uses xoxb-1234567890 here", "a Slack token"),
     ("Set token=abcdefg1 on the runner", "a password=, secret= or token= setting"),
     # the lifecycle's markers refuse `password=` wherever it appears, and
     # PGPASSWORD is what psql reads its password from (review84)
     ("Run migrations with PGPASSWORD=hunter2hunter2", "a password=, secret= or token= setting"),
     # a redaction's word or one repeated character is exempt only whole
     ("Set token=undefined1 on the runner", "a password=, secret= or token= setting"),
     ("Set password=xxxxxxxxy on the runner", "a password=, secret= or token= setting"),
     ("Set secret=nullnullnull on it", "a password=, secret= or token= setting"),
     # docs/api.md: exempt when the value "is one of the words": a real
     # secret that only begins with one, then punctuation, is still one (review85)
     ("Set password=Hidden!2024Secure on it", "a password=, secret= or token= setting"),
     ("Set token=null-8f3a9c2e7b1d4f60 on it", "a password=, secret= or token= setting"),
     ("Set secret=masked_Kx9Qz7Lm2Pv4 on it", "a password=, secret= or token= setting"),
     ("Use DB_PASSWORD=None.Of.Your.Business1", "a password=, secret= or token= setting")],
)  # fmt: skip
async def test_a_title_holding_the_secret_itself_is_refused(
    human: Caller, project: str, title: str, kind: str
) -> None:
    r = await human.post(f"{BASE}/tasks", {"title": title})
    assert error(r)[2] == {"reason": "secret_marker_detected", "field": "title"}
    assert f"looks like {kind}" in r.json()["error"]["message"]
