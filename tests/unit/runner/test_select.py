"""Case selection: ids and globs, in dataset order, then the limit."""

from __future__ import annotations

import re

import pytest

from agent_eval_sandbox.errors import UserError
from agent_eval_sandbox.runner.select import matches, select_ids

IDS = ["001-greet-ada", "002-greet-grace", "003-fix-typo", "a[1]"]


@pytest.mark.parametrize(("case_id", "pattern", "expected"), [
    ("001-greet-ada", "001-greet-ada", True),
    ("001-greet-ada", "001", False),  # an id is matched whole, not as a prefix
    ("001-greet-ada", "*greet*", True),
    ("003-fix-typo", "00[12]-*", False),
    ("002-greet-grace", "00[12]-*", True),
    ("002-greet-grace", "00?-greet-grace", True),
    ("002-greet-grace", "002-GREET*", False),  # ids are directory names: case-sensitive
])
def test_matches(case_id: str, pattern: str, expected: bool) -> None:
    assert matches(case_id, pattern) is expected


def test_patterns_keep_dataset_order_and_union() -> None:
    assert select_ids(IDS, ["003-*", "001-greet-ada"]) == ["001-greet-ada", "003-fix-typo"]


def test_no_pattern_is_every_case_and_limit_takes_the_first() -> None:
    assert select_ids(IDS) == IDS
    assert select_ids(IDS, limit=2) == IDS[:2]
    assert select_ids(IDS, ["*greet*"], limit=1) == ["001-greet-ada"]
    assert select_ids(IDS, limit=10) == IDS


def test_an_id_with_glob_characters_is_still_found_exactly() -> None:
    # `a[1]` as a glob matches "a1" only; as the id itself it must be selectable (fnmatch escape).
    assert select_ids(IDS, ["a[[]1]"]) == ["a[1]"]


def test_a_pattern_matching_nothing_is_an_error_naming_it() -> None:
    with pytest.raises(UserError, match=re.escape("'00*-greet-bob' matches no case id")):
        select_ids(IDS, ["*grace", "00*-greet-bob"])
