"""The console's forms hold the API's limits as constants of their own (a
form stops before sending what would be refused, and says so in its words):
each must stay the value the resolvers enforce."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, get_args

import pytest

from waypost.resolvers.context import params
from waypost.resolvers.decisions import models as decisions
from waypost.resolvers.decisions.timeouts import TIMEOUT
from waypost.resolvers.knowledge import models as knowledge

JS = Path(__file__).parent.parent / "src" / "waypost" / "console" / "static" / "js"


def constant(module: str, name: str) -> Any:
    """A top-level `const NAME = ...;` of a console module, read as Python would."""
    text = (JS / module).read_text()
    found = re.search(rf"^const {name} = (.+?);", text, re.MULTILINE | re.DOTALL)
    assert found, f"{module} has no const {name}"
    return eval(found.group(1), {})  # numbers, products, lists of strings


def max_length(annotated: Any) -> int:
    [meta] = [m for m in get_args(annotated)[1:] if hasattr(m, "max_length")]
    return int(meta.max_length)


@pytest.mark.parametrize(
    ("module", "name", "expected"),
    [
        ("decision.js", "RATIONALE_MAX", max_length(decisions.Text)),
        ("decision.js", "ENVIRONMENT_MAX", max_length(decisions.Environment)),
        ("decision.js", "CONDITIONS_MAX", max_length(decisions.Conditions)),
        ("decision.js", "CONDITION_MAX", max_length(decisions.Condition)),
        ("knowledge.js", "TAG_MAX", knowledge.TAG_MAX_CHARS),
        ("knowledge.js", "KINDS", [k.upper() for k in get_args(knowledge.Kind)]),
        ("knowledge.js", "STATUSES", [s.upper() for s in get_args(knowledge.Status)]),
        ("dom.js", "TIMEOUT_MS", TIMEOUT.total_seconds() * 1000),
    ],
)
def test_a_console_limit_is_the_apis(module: str, name: str, expected: Any) -> None:
    assert constant(module, name) == expected


def test_the_search_filters_words_name_the_apis_bounds() -> None:
    words = (JS / "knowledge.js").read_text()
    assert f"at most {params.Q_MAX_BYTES:,} bytes and {params.Q_MAX_TERMS} words" in words
