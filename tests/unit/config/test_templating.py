from __future__ import annotations

import pytest

from agent_eval_sandbox.config.templating import check_syntax, is_jinja, render_template
from agent_eval_sandbox.errors import TemplateError


def test_brace_required_field():
    assert render_template('--title "{title}"', {"title": "Login"}) == '--title "Login"'


@pytest.mark.parametrize("data", [{}, {"title": ""}, {"title": None}, {"title": []}])
def test_brace_required_missing_or_empty_is_error(data):
    with pytest.raises(TemplateError) as info:
        render_template('--title "{title}"', data)
    assert "Missing required field in template: title" in str(info.value)


def test_brace_optional_omitted_when_missing_or_empty():
    assert render_template("{prompt} {flags?}", {"prompt": "go"}) == "go"
    assert render_template("{prompt} {flags?}", {"prompt": "go", "flags": ""}) == "go"
    assert render_template("{prompt} {flags?}", {"prompt": "go", "flags": "-v"}) == "go -v"


def test_brace_non_string_values():
    assert render_template("{n} {on} {items}", {"n": 3, "on": True, "items": [1, 2]}) == "3 true [1, 2]"


def test_jinja_binds_input_and_is_strict():
    assert render_template('--priority {{ input.priority }} "{{ input.prompt }}"', {"priority": "P1", "prompt": "x"}) == '--priority P1 "x"'
    with pytest.raises(TemplateError) as info:
        render_template("{{ input.priority }}", {})
    assert "Missing required field in template: priority" in str(info.value)


def test_jinja_optional_guards():
    assert render_template("{{ input.get('flags', '') }}|{{ input.title | default('') }}", {}) == "|"


def test_no_mixing_jinja_wins_and_braces_stay():
    assert render_template("{{ input.a }} {b}", {"a": 1, "b": 2}) == "1 {b}"


def test_is_jinja_detection():
    assert is_jinja("{{ x }}") and is_jinja("{% if x %}{% endif %}") and not is_jinja("{x} {y?}")


def test_json_braces_are_left_alone():
    assert render_template('{"k": 1} {name}', {"name": "n"}) == '{"k": 1} n'


def test_syntax_check():
    assert check_syntax("{{ input.x ") is not None
    assert check_syntax("{x}") is None
    assert check_syntax("{{ input.x }}") is None


def test_jinja_sandbox_blocks_attribute_escape():
    with pytest.raises(TemplateError):
        render_template("{{ input.__class__.__mro__[1].__subclasses__() }}", {})
