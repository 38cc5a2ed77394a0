"""A variable that does not coerce to its type is refused naming its path
within `variables` in `extensions.field`, as REST names a body's field,
without a Python repr of the input, and an unknown enum value is told the
values taken (schema/variable_errors.py; errmsgaudit)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import Caller

CREATE = "mutation($i: TaskCreateInput!) { taskCreate(input: $i) { userErrors { code } } }"
POLICY = "mutation($i: PolicyUpdateInput!) { policyUpdate(input: $i) { userErrors { code } } }"
FIRST = 'query($n: Int!) { project(id: "demo") { tasks(first: $n) { totalCount } } }'
TASK = {"projectId": "demo", "idempotencyKey": "k1", "title": "t"}


@pytest.mark.parametrize(
    ("query", "variables", "field", "says"),
    [(CREATE, {"i": {"projectId": "demo", "idempotencyKey": "k1"}}, "i.title",
      "Variable '$i' has invalid value: Expected value of type 'TaskCreateInput' to include"
      " required field 'title'."),
     (CREATE, {"i": {**TASK, "bogus": 1}}, "i.bogus",
      "Variable '$i' has invalid value: Expected value of type 'TaskCreateInput' not to"
      " include unknown field 'bogus'."),
     (CREATE, {"i": {**TASK, "title": 5}}, "i.title",
      "Variable '$i' has invalid value at .title: String cannot represent a non string value: 5"),
     (CREATE, {"i": {**TASK, "acceptanceCriteria": ["a", 1]}}, "i.acceptanceCriteria[1]",
      "Variable '$i' has invalid value at .acceptanceCriteria[1]: String cannot represent a"
      " non string value: 1"),
     (CREATE, {"i": "text"}, "i",
      "Variable '$i' has invalid value: Expected value of type 'TaskCreateInput' to be an"
      " object."),
     (POLICY, {"i": {"projectId": "demo", "idempotencyKey": "k1", "expectedRevision": 1,
                     "reviewMode": "BOGUS"}}, "i.reviewMode",
      "Variable '$i' has invalid value at .reviewMode: Value 'BOGUS' does not exist in"
      " 'ReviewMode' enum (one of NONE, HUMAN, ANY)."),
     (FIRST, {"n": "x"}, "n", "Variable '$n' has invalid value: Int cannot represent"
      " non-integer value: 'x'"),
     # a null where one is not taken, said in JSON's word (it said Python's `None`)
     (FIRST, {"n": None}, "n", "Variable '$n' has invalid value: Expected value of non-null"
      " type 'Int!' not to be null."),
     (CREATE, {"i": {**TASK, "title": None}}, "i.title",
      "Variable '$i' has invalid value at .title: Expected value of non-null type 'String!'"
      " not to be null."),
     # a near miss is told the field meant, still without the input's repr (review51)
     (CREATE, {"i": {**TASK, "titl": "a private note"}}, "i.titl",
      "Variable '$i' has invalid value: Expected value of type 'TaskCreateInput' not to"
      " include unknown field 'titl'. Did you mean 'title'?"),
     # the client's text never moves the path or cuts the message short
     (CREATE, {"i": {**TASK, "title": {"x": "required field 'zz'"}}}, "i.title",
      "Variable '$i' has invalid value at .title: String cannot represent a non string"
      " value: {'x': \"required field 'zz'\"}"),
     (FIRST, {"n": "a; found: b"}, "n", "Variable '$n' has invalid value: Int cannot"
      " represent non-integer value: 'a; found: b'"),
     (CREATE, {"i": {**TASK, "a, found: b": 1}}, "i.a, found: b",
      "Variable '$i' has invalid value: Expected value of type 'TaskCreateInput' not to"
      " include unknown field 'a, found: b'.")],
)  # fmt: skip
async def test_a_refused_variable_is_named_by_its_path(
    human: Caller, project: str, query: str, variables: dict[str, Any], field: str, says: str
) -> None:
    answer = await human.gql(query, variables)
    assert answer["data"] is None
    (error,) = answer["errors"]
    assert error["extensions"] == {"code": "invalid_request", "field": field}
    assert error["message"] == says


async def test_an_unknown_enum_literal_is_told_the_values(human: Caller, project: str) -> None:
    answer = await human.gql(
        'mutation { policyUpdate(input: {projectId: "demo", idempotencyKey: "k",'
        " expectedRevision: 1, reviewMode: BOGUS}) { userErrors { code } } }"
    )
    (error,) = answer["errors"]
    assert error["extensions"] == {"code": "invalid_request"}
    assert error["message"] == (
        "Value 'BOGUS' does not exist in 'ReviewMode' enum (one of NONE, HUMAN, ANY)."
    )


async def test_a_literal_null_where_one_is_needed_is_told_in_graphqls_word(
    human: Caller, project: str
) -> None:
    """The variable's form said `null` and the literal's still Python's
    `None` (review60)."""
    answer = await human.gql("query { project(id: null) { name } }")
    (error,) = answer["errors"]
    assert error["extensions"] == {"code": "invalid_request"}
    assert error["message"] == "Expected value of non-null type 'String!' not to be null."


async def test_a_long_unknown_field_is_named_in_a_few_characters(
    human: Caller, project: str
) -> None:
    answer = await human.gql(CREATE, {"i": {**TASK, "z" * 5_000: 1}})
    (error,) = answer["errors"]
    assert error["extensions"]["field"] == "i." + "z" * 40 + "..."
    assert len(error["message"]) < 300
