"""The Mongolian free variation selectors (U+180B-U+180D, U+180F) are
variation selectors too (Unicode's PropList: Variation_Selector, and
Default_Ignorable_Code_Point): after a Latin letter they select nothing and
show nothing. `Stop` + U+180B was taken as an option apart from `Stop`, and
the console drew both rows "Stop" with their own Allow, Deny and Defer
(securityjourney: pixel-identical in headless Chromium); `prod` + U+180B
was taken as an environment a person confirms reading `prod`, and as a tag
beside `prod`. docs/decisions.md: "a variation selector after a space or a
Latin, Greek or Cyrillic letter" is no difference, and an end that shows
nothing is refused."""

from __future__ import annotations

import pytest

from tests.conftest import Caller, Service
from tests.decisions_support import DECISIONS, decision_body, error, new_task
from tests.knowledge_support import error_of, kpath, new_body
from waypost.errors import InvalidRequest
from waypost.resolvers.core.text import require_distinct, require_shown_at_both_ends, shown_as

SELECTORS = ["\u180b", "\u180c", "\u180d", "\u180f"]


@pytest.mark.parametrize("selector", SELECTORS)
def test_a_mongolian_selector_after_a_latin_letter_shows_nothing(selector: str) -> None:
    assert shown_as(f"Stop{selector}") == shown_as(f"St{selector}op") == "Stop"
    with pytest.raises(InvalidRequest) as refused:
        require_distinct(["Stop", "Go", f"St{selector}op"], "options")
    assert refused.value.details == {"field": "options[2]"}
    with pytest.raises(InvalidRequest) as refused:
        require_shown_at_both_ends(f"prod{selector}", "environment")
    assert refused.value.details == {"field": "environment"}


async def test_options_told_apart_by_a_mongolian_selector_alone_are_refused(
    service: Service, project: str
) -> None:
    agent = await service.agent()  # any agent in a session opens one a human answers
    task = await new_task(agent)
    for options in (["Stop", "Stop\u180b"], ["Deploy", "Wait", "Dep\u180cloy"]):
        body = decision_body([task], options=options, required_actor="human")
        r = await agent.post(DECISIONS, body)
        assert r.status_code == 400, r.text
        status, code, details = error(r)
        field = f"options[{len(options) - 1}]"
        assert (status, code, details["field"]) == (400, "invalid_request", field), r.text
    r = await agent.post(DECISIONS, decision_body([task], environment="prod\u180d"))
    assert r.status_code == 400, r.text
    status, code, details = error(r)
    assert (status, code, details["field"]) == (400, "invalid_request", "environment"), r.text


async def test_a_tag_told_apart_by_a_mongolian_selector_alone_is_refused(
    human: Caller, project: str
) -> None:
    r = await human.post(kpath(project), new_body(tags=["prod", "prod\u180b"]))
    assert r.status_code == 400, r.text
    assert error_of(r) == (400, "invalid_request", "tags[1]"), r.text
