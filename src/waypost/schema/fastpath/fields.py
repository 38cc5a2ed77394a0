"""The whole registry of the fast path: every domain's fields registered.

`registry.FIELDS` maps (type, field) to a batch resolver (see registry.py);
each domain module registers its own types when imported, and this module
imports them all, so that whoever reads the registry (the plan, the tests)
reads it whole.
"""

from __future__ import annotations

from waypost.schema.fastpath import decisions, events, knowledge, projects, tasks
from waypost.schema.fastpath.decisions import ANSWER_KEYS, GENERATION_KEYS
from waypost.schema.fastpath.registry import FIELDS, TASK_KEYS, Resolver, typename

__all__ = [
    "ANSWER_KEYS",
    "FIELDS",
    "GENERATION_KEYS",
    "TASK_KEYS",
    "Resolver",
    "decisions",
    "events",
    "knowledge",
    "projects",
    "tasks",
    "typename",
]
