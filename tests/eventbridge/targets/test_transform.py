"""Target transforms: ORIGINAL, PART, CONSTANT, TEMPLATE; broken and unsafe ones refused."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from cloudevents.core.v1.event import CloudEvent

from eventbridge.errors import TransformConfigError, TransformRenderError
from eventbridge.event_form import event_as_json
from eventbridge.targets.transform import (
    JSON_CONTENT_TYPE,
    TEXT_CONTENT_TYPE,
    TemplateOutput,
    TransformKind,
    TransformSpec,
    compile_transform,
)


def structured_event() -> dict[str, Any]:
    event = CloudEvent(
        attributes={
            "id": "e-1",
            "source": "mqgate/gw1/client-7",
            "type": "sensor.reading",
            "specversion": "1.0",
            "subject": "plant/a/temp",
            "time": datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
            "datacontenttype": "application/json",
        },
        data={"temp": 21.5, "unit": "C", "tags": [{"k": "line"}, {"k": "hall"}], "note": 'say "hi"'},
    )
    return event_as_json(event)


def template(text: str, output: TemplateOutput = TemplateOutput.JSON, **variables: str) -> TransformSpec:
    return TransformSpec(kind=TransformKind.TEMPLATE, template=text, variables=tuple(variables.items()), output=output)


def test_original_is_the_whole_event() -> None:
    event = structured_event()
    out = compile_transform(TransformSpec()).apply(event)
    assert out.value == event
    assert out.value["data"]["temp"] == 21.5
    assert out.content_type == JSON_CONTENT_TYPE


def test_part_one_match_several_matches_and_none() -> None:
    event = structured_event()
    assert compile_transform(TransformSpec(TransformKind.PART, path="$.data.temp")).apply(event).value == 21.5
    assert compile_transform(TransformSpec(TransformKind.PART, path="$.data")).apply(event).value["unit"] == "C"
    tags = compile_transform(TransformSpec(TransformKind.PART, path="$.data.tags[*].k")).apply(event)
    assert tags.value == ["line", "hall"]
    missing = compile_transform(TransformSpec(TransformKind.PART, path="$.data.absent"))
    with pytest.raises(TransformRenderError, match=r"\$\.data\.absent.*matched nothing"):
        missing.apply(event)


def test_constant_text_and_json() -> None:
    event = structured_event()
    text = compile_transform(TransformSpec(TransformKind.CONSTANT, value="ping")).apply(event)
    assert (text.value, text.content_type) == ("ping", TEXT_CONTENT_TYPE)
    obj = compile_transform(TransformSpec(TransformKind.CONSTANT, value={"a": [1, None]})).apply(event)
    assert (obj.value, obj.content_type) == ({"a": [1, None]}, JSON_CONTENT_TYPE)


@pytest.mark.parametrize("path", ["$.[", "$.data[", "a b c", ""])
def test_broken_part_path_refused_at_load(path: str) -> None:
    with pytest.raises(TransformConfigError) as info:
        compile_transform(TransformSpec(TransformKind.PART, path=path))
    assert info.value.field == "path"


def test_template_json_with_quoted_strings() -> None:
    spec = template(
        '{"where": {{ subject | json }}, "t": {{ temp }}, "note": {{ note | json }}, "n": {{ tags | length }}}',
        subject="$.subject",
        temp="$.data.temp",
        note="$.data.note",
        tags="$.data.tags[*].k",
    )
    out = compile_transform(spec).apply(structured_event())
    assert out.value == {"where": "plant/a/temp", "t": 21.5, "note": 'say "hi"', "n": 2}
    assert out.content_type == JSON_CONTENT_TYPE


def test_template_text_and_unmatched_variable_is_none() -> None:
    spec = template(
        "{{ unit | lower }}:{{ temp }} {{ missing is none }}", TemplateOutput.TEXT, unit="$.data.unit",
        temp="$.data.temp", missing="$.data.nope",
    )  # fmt: skip
    out = compile_transform(spec).apply(structured_event())
    assert (out.value, out.content_type) == ("c:21.5 True", TEXT_CONTENT_TYPE)


def test_template_json_output_that_does_not_parse_is_a_render_error() -> None:
    spec = template('{"where": {{ subject }}}', subject="$.subject")
    with pytest.raises(TransformRenderError, match="not JSON"):
        compile_transform(spec).apply(structured_event())


def test_template_syntax_error_refused_with_line() -> None:
    with pytest.raises(TransformConfigError) as info:
        compile_transform(template('{\n "a": {{ x }\n}', x="$.id"))
    assert info.value.field == "template"
    assert info.value.template_line == 2


def test_template_variable_path_broken_refused() -> None:
    with pytest.raises(TransformConfigError) as info:
        compile_transform(template("{{ x }}", x="$.data["))
    assert info.value.field == "variables.x"


def test_template_undeclared_name_refused_at_load() -> None:
    with pytest.raises(TransformConfigError, match="'y'"):
        compile_transform(template("{{ x }}{{ y }}", x="$.id"))


@pytest.mark.parametrize(
    "text",
    [
        "{{ ''.__class__.__mro__ }}",
        "{{ cycler.__init__.__globals__ }}",
        "{{ x.__class__ }}",
        "{{ x['__class__'] }}",
        "{{ lipsum.__globals__ }}",
        "{{ x.items.__self__ }}",
        "{{ self }}",
        "{{ range(10) }}",
        "{{ x | attr('__class__') }}",
        "{{ x | map(attribute='__class__') | list }}",
        "{% for c in ().__class__.__base__.__subclasses__() %}{{ c }}{% endfor %}",
    ],
)
def test_injection_refused_at_load(text: str) -> None:
    with pytest.raises(TransformConfigError):
        compile_transform(template(text, TemplateOutput.TEXT, x="$.data"))


@pytest.mark.parametrize(
    "text",
    [
        "{{ ('{0.__class__.__mro__}').format(x) }}",  # the sandbox's formatter sees the attribute, jinja's AST cannot
        "{{ x.pop('temp') }}",  # mutating the event is an unsafe call
        "{{ 'x' * 100000000 }}",
        "{{ 9 ** 9999999 }}",
        "{{ ('x' * 1000) | replace('x', 'x' * 1000) | replace('x', 'x' * 1000) }}",
        "{{ ['x' * 200000] * 1000 | join }}",
        "{% for i in ['x'] * 300000 %}{{ i }}{% endfor %}",
    ],
)
def test_injection_refused_at_render_never_executed(text: str) -> None:
    event = structured_event()
    transform = compile_transform(template(text, TemplateOutput.TEXT, x="$.data"))
    with pytest.raises(TransformRenderError):
        transform.apply(event)
    assert event["data"]["temp"] == 21.5


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("{% for i in x %}{% for j in x %}{% endfor %}{% endfor %}", "a loop inside a loop"),
        ("{% for i in x %}{% if i %}{% for j in x %}{% endfor %}{% endif %}{% endfor %}", "a loop inside a loop"),
        ("{% for i in x recursive %}{{ loop(i) }}{% endfor %}", "recursive loops"),
        ("{% macro m(n) %}{{ m(n) }}{% endmacro %}{{ m(1) }}", "macros"),
        ("{% call x.get('a') %}{% endcall %}", "call blocks"),
    ],
)
def test_templates_whose_cost_can_multiply_are_refused_at_load(text: str, reason: str) -> None:
    # Rendering stays linear in the event's size: no CPU-time bomb that emits nothing.
    with pytest.raises(TransformConfigError, match=reason):
        compile_transform(template(text, TemplateOutput.TEXT, x="$.data"))


def test_one_loop_over_the_event_is_allowed() -> None:
    transform = compile_transform(
        template("{% for k in x %}{{ k }};{% endfor %}{% for k in x %}.{% endfor %}", TemplateOutput.TEXT, x="$.data")
    )
    assert transform.apply(structured_event()).value.startswith("temp;")


def test_equal_specs_compile_to_equal_transforms() -> None:
    a = compile_transform(template("{{ x }}", x="$.id"))
    b = compile_transform(template("{{ x }}", x="$.id"))
    assert a == b
    assert a != compile_transform(template("{{ x }}", x="$.source"))


def test_event_as_json_extensions_and_binary_data() -> None:
    event = CloudEvent(
        attributes={"id": "b-1", "source": "s", "type": "t", "specversion": "1.0", "replayname": "replay-1"},
        data=b"\x00\x01\xff",
    )
    as_json = event_as_json(event)
    assert as_json["replayname"] == "replay-1"
    assert as_json["data_base64"] == "AAH/"
    assert "data" not in as_json
    part = compile_transform(TransformSpec(TransformKind.PART, path="$.replayname")).apply(as_json)
    assert part.value == "replay-1"
    assert structured_event()["time"] == "2026-01-02T03:04:05Z"


def test_bounded_filters_still_work() -> None:
    spec = template(
        "{{ unit | replace('C', 'celsius') }}|{{ tags | join(',') }}", TemplateOutput.TEXT,
        unit="$.data.unit", tags="$.data.tags[*].k",
    )  # fmt: skip
    assert compile_transform(spec).apply(structured_event()).value == "celsius|line,hall"
