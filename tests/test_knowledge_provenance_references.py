"""GraphQL: a knowledge record's provenance references are objects.

service-contract.md section 12: "Nested history is navigable: ...;
references are objects, not bare ids." A lesson recorded at submit pins
`provenance.source_task_id` and `provenance.source_submission_id`
(section 13, "Submit"); GraphQL resolves the first to a `Task`
(`provenance.sourceTask`) but serves the second only as the bare id
`sourceSubmissionId`, though a `Submission` type exists (`Task.submissions`).
"""

from __future__ import annotations

from tests.conftest import Caller, Service
from tests.tasks_support import claimed_by_agent, task_path

PROVENANCE = """
query($id: String!) {
  project(id: "demo") {
    knowledgeItem(id: $id) {
      provenance {
        sourceTaskId
        sourceTask { restId }
        sourceSubmissionId
        sourceSubmission { restId summary task { restId } }
      }
    }
  }
}"""


async def test_a_lessons_source_submission_is_an_object(
    service: Service, human: Caller, project: str
) -> None:
    task, agent = await claimed_by_agent(service, human)
    r = await agent.post(
        task_path(task["id"], "submit"),
        {"summary": "done it", "lessons": [{"kind": "lesson", "title": "L", "body": "B"}]},
    )
    assert r.status_code == 200, r.text
    submission_id = r.json()["submission"]["id"]
    lesson = r.json()["lessons"][0]
    assert lesson["provenance"]["source_submission_id"] == submission_id

    data = await human.gql(PROVENANCE, {"id": lesson["id"]})

    assert "errors" not in data, data["errors"]
    provenance = data["data"]["project"]["knowledgeItem"]["provenance"]
    assert provenance["sourceTask"] == {"restId": task["id"]}
    assert provenance["sourceSubmission"] == {
        "restId": submission_id,
        "summary": "done it",
        "task": {"restId": task["id"]},
    }
