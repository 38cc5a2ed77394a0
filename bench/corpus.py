"""A deterministic corpus of realistic task and knowledge text, and search queries.

Words follow a Zipf law over a vocabulary of a few hundred common English and
engineering words (the head) and tens of thousands of made-up words (the long
tail), as natural text does: a few words appear in most records, most words
in few. That is what makes ranking cost grow with the data (a common word
matches a large share of a million records) while rare words stay cheap.
Records are written with plain SQL, as the resolvers write them (revision 1,
current projection, the FTS triggers keep the indexes), never through the API.
"""

from __future__ import annotations

import itertools
import json
import random
import sqlite3
from collections.abc import Iterator

HEAD_TEXT = """
the a to of and in for is on that with this it be as are at by from or not we when
deploy rollback release build test flaky retry cache database migration schema index
query timeout latency error failure service worker queue lock lease token session config
secret staging production canary review owner approval policy decision task lesson fact
checkpoint version component environment cluster node pod container image network dns
certificate tls proxy gateway api endpoint client server request response payload json
parser encoder decoder logging metrics trace alert pager incident outage backup restore
snapshot replica leader follower write read commit transaction fsync disk memory cpu
thread async loop event stream batch job cron scheduler sweep cleanup feature flag
toggle experiment rollout percentage traffic load balancer health check billing invoice
payment customer account user admin permission role grant audit log search ranking
budget limit bound packet context agent human handoff step plan verify python rust go
typescript sqlite postgres redis kafka docker kubernetes terraform ansible github ci
pipeline lint format type check coverage benchmark profile regression
"""
HEAD = HEAD_TEXT.split()
SYLLABLES = [
    "ka",
    "ri",
    "to",
    "mu",
    "se",
    "la",
    "po",
    "ne",
    "vi",
    "do",
    "ru",
    "ha",
    "zo",
    "fe",
    "gi",
    "lu",
    "ma",
    "ti",
    "sa",
    "ko",
    "be",
    "ni",
    "ra",
    "yo",
]


class Corpus:
    def __init__(self, seed: int = 14, tail_words: int = 40_000) -> None:
        self.random = random.Random(seed)
        tail = set()
        while len(tail) < tail_words:
            n = self.random.randint(2, 4)
            tail.add("".join(self.random.choice(SYLLABLES) for _ in range(n)))
        self.vocabulary = HEAD + sorted(tail - set(HEAD))
        # Zipf weights (s = 1.07): cumulative, for random.choices
        weights = [1 / (rank**1.07) for rank in range(1, len(self.vocabulary) + 1)]
        self.cumulative = list(itertools.accumulate(weights))

    def words(self, count: int) -> list[str]:
        return self.random.choices(self.vocabulary, cum_weights=self.cumulative, k=count)

    def sentence(self, low: int, high: int) -> str:
        words = self.words(self.random.randint(low, high))
        return " ".join(words).capitalize() + "."

    def paragraph(self, low: int, high: int) -> str:
        total = self.random.randint(low, high)
        sentences = []
        while total > 0:
            n = min(total, self.random.randint(6, 18))
            sentences.append(self.sentence(n, n))
            total -= n
        return " ".join(sentences)

    def queries(self, count: int) -> list[str]:
        """Search strings of 1-3 words, drawn as the text is (common words often)."""
        return [" ".join(self.words(self.random.randint(1, 3))) for _ in range(count)]


def _knowledge_rows(
    corpus: Corpus, project_id: str, count: int, actor: str, at: str
) -> Iterator[tuple[object, ...]]:
    kinds = ("lesson", "fact", "rejected_approach", "checkpoint")
    for i in range(count):
        r = corpus.random
        components = json.dumps(r.sample(["api", "web", "worker", "db"], r.randint(0, 1)))
        yield (
            f"kn_{project_id}_{i:07d}", project_id, kinds[i % 4], "project", 0,
            corpus.sentence(4, 10)[:200], corpus.paragraph(30, 150), "observed",
            "[]", components, "[]", "[]",
            json.dumps(corpus.words(r.randint(0, 4))),
            corpus.sentence(0, 15) if r.random() < 0.6 else "",
            "seeded", actor, at, 1, at, at,
        )  # fmt: skip


def _task_rows(
    corpus: Corpus, project_id: str, count: int, actor: str, at: str
) -> Iterator[tuple[object, ...]]:
    for i in range(count):
        r = corpus.random
        criteria = [corpus.sentence(4, 10) for _ in range(r.randint(1, 3))]
        yield (
            f"task_{project_id}_{i:07d}", project_id, corpus.sentence(4, 10)[:200],
            corpus.paragraph(20, 80), json.dumps(criteria), actor, at, at,
        )  # fmt: skip


# A knowledge row written directly (the FTS5 triggers index it), in the
# column order of `_knowledge_rows`; tests that seed files use it too.
INSERT_KNOWLEDGE = (
    "INSERT INTO knowledge (id, project_id, kind, collection, share_across_projects,"
    " title, body, status, scope_task_ids, scope_components, scope_environments,"
    " scope_versions, tags, applicability, provenance_summary, provenance_actor_id,"
    " provenance_recorded_at, revision, created_at, updated_at)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def seed(
    conn: sqlite3.Connection,
    project_id: str,
    knowledge: int,
    tasks: int,
    actor: str,
    at: str,
    corpus: Corpus,
    batch: int = 20_000,
) -> None:
    """Insert `knowledge` records (with revision 1) and `tasks` (with revision 1)."""
    rows = _knowledge_rows(corpus, project_id, knowledge, actor, at)
    while chunk := list(itertools.islice(rows, batch)):
        conn.execute("BEGIN")
        conn.executemany(INSERT_KNOWLEDGE, chunk)
        conn.execute(
            "INSERT INTO knowledge_revisions (knowledge_id, revision, title, body, status,"
            " scope_task_ids, scope_components, scope_environments, scope_versions, tags,"
            " applicability, provenance_summary, provenance_actor_id, provenance_recorded_at)"
            " SELECT id, 1, title, body, status, scope_task_ids, scope_components,"
            " scope_environments, scope_versions, tags, applicability, provenance_summary,"
            " provenance_actor_id, provenance_recorded_at FROM knowledge"
            " WHERE id IN (SELECT value FROM json_each(?))",
            (json.dumps([row[0] for row in chunk]),),
        )
        conn.execute("COMMIT")
    task_rows = _task_rows(corpus, project_id, tasks, actor, at)
    while chunk := list(itertools.islice(task_rows, batch)):
        conn.execute("BEGIN")
        conn.executemany(
            "INSERT INTO tasks (id, project_id, title, description, acceptance_criteria, kind,"
            " priority, status, revision, judged_revision, created_by, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?, 'feature', 0, 'open', 1, 1, ?, ?, ?)",
            chunk,
        )
        conn.execute(
            "INSERT INTO task_revisions (task_id, revision, title, description,"
            " acceptance_criteria, kind, priority, depends_on, changed_fields, judged_change,"
            " actor_id, at) SELECT id, 1, title, description, acceptance_criteria, kind,"
            " priority, '[]', '[]', 1, created_by, created_at FROM tasks"
            " WHERE id IN (SELECT value FROM json_each(?))",
            (json.dumps([row[0] for row in chunk]),),
        )
        conn.execute("COMMIT")
