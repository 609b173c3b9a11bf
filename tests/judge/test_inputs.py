"""JSON handed in is read with one value per key: a key given twice in one object is
refused, naming where that object is, never read as its last value."""

from __future__ import annotations

import json

import pytest

from judge.inputs import RepeatedKey, load_json


def test_json_reads_as_json_loads_reads_it() -> None:
    text = '[{"id": "a", "tags": ["x", {"k": 1}]}, {"scenarios": {"n": null}}, 1.5, "s"]'
    assert load_json(text) == json.loads(text)


@pytest.mark.parametrize(
    ("text", "key", "path"),
    [
        ('{"a": 1, "a": 2}', "a", ()),
        (
            '[{"id": "x"}, {"id": "y", "ground_truth": "1", "ground_truth": "2"}]',
            "ground_truth",
            (1,),
        ),
        (
            '{"scenarios": [{"id": "x", "tags": [{"k": 1, "k": 2}]}]}',
            "k",
            ("scenarios", 0, "tags", 0),
        ),
    ],
)
def test_a_key_given_twice_is_refused_naming_where_its_object_is(
    text: str, key: str, path: tuple[str | int, ...]
) -> None:
    with pytest.raises(RepeatedKey) as raised:
        load_json(text)
    assert raised.value.args == (key,) and raised.value.path == path
