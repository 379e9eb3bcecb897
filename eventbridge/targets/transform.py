"""Target transforms: what a target receives as the CloudEvent's data, computed from the matched event.

The event is given in its structured JSON form (event_form.py: a mapping with the CloudEvents attributes and `data`).

- ORIGINAL: the whole CloudEvent, as JSON.
- PART: the value a JSONPath matches (several matches give a list); matching nothing is a render error, since
  sending `null` would hide a rule/event mismatch from the operator.
- CONSTANT: a fixed value (a string is sent as text, anything else as JSON).
- TEMPLATE: variables bound by JSONPath (None when nothing matches), rendered by a sandboxed jinja2 environment
  into JSON (the output must parse) or text.

Everything is compiled once, when the rule is loaded (`compile_transform`), and refused there when broken.
Templates run in jinja's `ImmutableSandboxedEnvironment` with StrictUndefined and no autoescape, with no globals
and an allowlist of filters. At load, a template may only use its declared variables and may not name an attribute
or item starting with '_'; what jinja can only see at render time raises SecurityError, reported as
`TransformRenderError`. Output is bounded while it is produced (256 KiB), as are `*`, `**`, `replace` and `join`.
CPU time is bounded by the template's shape: no loop inside a loop, no recursive loop, no macro, so rendering is
linear in the size of the event (256 KiB at most).
"""

from __future__ import annotations

import enum
import json
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from jinja2 import StrictUndefined, Template, TemplateSyntaxError, meta, nodes
from jinja2.exceptions import SecurityError, TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedEnvironment

from eventbridge.errors import TransformConfigError, TransformRenderError
from eventbridge.event_form import canonical_json
from eventbridge.json_path import JsonPath, JsonPathSyntaxError

# AWS EventBridge and rocketmq-eventbridge both cap an event at 256 KiB; a transform may not produce more.
MAX_RENDERED_CHARS = 256 * 1024

# A template is configuration, not a program; jinja's own sandbox allows 100,000-item ranges (MAX_RANGE).
MAX_TEMPLATE_CHARS = 64 * 1024

# Filters a template may use. Left out: `attr` (reads any attribute), `map`/`selectattr`/`rejectattr`/`groupby`/
# `sort`/`dictsort` by attribute, `pprint`, `urlize`, `xmlattr`, `safe`/`escape` (HTML only), `random` (not
# reproducible).
_ALLOWED_FILTERS = frozenset(
    {
        "abs", "capitalize", "count", "d", "default", "first", "float", "int", "join", "last", "length", "list",
        "lower", "max", "min", "replace", "reverse", "round", "string", "sum", "title", "trim", "truncate",
        "unique", "upper", "urlencode", "wordcount",
    }
)  # fmt: skip


class TransformKind(enum.Enum):
    ORIGINAL = "ORIGINAL"
    PART = "PART"
    CONSTANT = "CONSTANT"
    TEMPLATE = "TEMPLATE"


class TemplateOutput(enum.Enum):
    JSON = "json"
    TEXT = "text"


JSON_CONTENT_TYPE = "application/json"
TEXT_CONTENT_TYPE = "text/plain; charset=utf-8"


@dataclass(frozen=True, slots=True)
class TransformedData:
    """What the target sends as the CloudEvent's data: a JSON value, or text, with its content type."""

    value: Any
    content_type: str


@dataclass(frozen=True, slots=True)
class TransformSpec:
    """A transform as written in the rule file. Equal specs compile to transforms that behave the same."""

    kind: TransformKind = TransformKind.ORIGINAL
    path: str | None = None  # PART
    value: Any = field(default=None, compare=False)  # CONSTANT; compared through value_json
    variables: tuple[tuple[str, str], ...] = ()  # TEMPLATE: (name, JSONPath), in file order
    template: str | None = None  # TEMPLATE
    output: TemplateOutput = TemplateOutput.JSON  # TEMPLATE
    value_json: str = field(init=False, repr=False)

    def __post_init__(self) -> None:
        try:
            value_json = canonical_json(self.value)
        except (TypeError, ValueError) as exc:
            raise TransformConfigError("value", f"not a JSON value: {exc}") from None
        object.__setattr__(self, "value_json", value_json)


@dataclass(frozen=True, slots=True)
class Transform:
    """A compiled transform; `apply` is pure and raises only TransformRenderError."""

    spec: TransformSpec
    _apply: Callable[[Mapping[str, Any]], TransformedData] = field(compare=False, repr=False)

    def apply(self, event: Mapping[str, Any]) -> TransformedData:
        return self._apply(event)


def compile_transform(spec: TransformSpec) -> Transform:
    """Compile a transform, refusing a broken JSONPath or template with TransformConfigError."""
    if spec.kind is TransformKind.ORIGINAL:
        return Transform(spec, _original)
    if spec.kind is TransformKind.PART:
        return Transform(spec, _compile_part(spec))
    if spec.kind is TransformKind.CONSTANT:
        return Transform(spec, _compile_constant(spec))
    return Transform(spec, _compile_template(spec))


def _original(event: Mapping[str, Any]) -> TransformedData:
    return TransformedData(dict(event), JSON_CONTENT_TYPE)


def _compile_json_path(field_name: str, text: str | None) -> JsonPath:
    if text is None:
        raise TransformConfigError(field_name, "missing; give a JSONPath such as '$.data'")
    try:
        return JsonPath.compile(text)
    except JsonPathSyntaxError as exc:
        raise TransformConfigError(field_name, str(exc)) from None


def _compile_part(spec: TransformSpec) -> Callable[[Mapping[str, Any]], TransformedData]:
    path = _compile_json_path("path", spec.path)

    def apply(event: Mapping[str, Any]) -> TransformedData:
        values = path.find(event)
        if not values:
            raise TransformRenderError(f"PART transform: JSONPath {path.text!r} matched nothing in the event")
        value = values[0] if len(values) == 1 else values
        return TransformedData(value, JSON_CONTENT_TYPE)

    return apply


def _compile_constant(spec: TransformSpec) -> Callable[[Mapping[str, Any]], TransformedData]:
    content_type = TEXT_CONTENT_TYPE if isinstance(spec.value, str) else JSON_CONTENT_TYPE
    if len(spec.value_json) > MAX_RENDERED_CHARS:
        raise TransformConfigError("value", f"longer than {MAX_RENDERED_CHARS} characters")
    result = TransformedData(spec.value, content_type)
    return lambda event: result


class _TemplateSandbox(ImmutableSandboxedEnvironment):
    """jinja's immutable sandbox (a template may not change the event other targets see).

    Also bounds `*` and `**`, so that `'x' * 10**9` cannot exhaust memory.
    """

    intercepted_binops = frozenset({"*", "**"})

    def call_binop(self, context: Any, operator_name: str, left: Any, right: Any) -> Any:
        if operator_name == "**":
            if isinstance(right, int | float) and abs(right) > 64:
                raise SecurityError("exponent larger than 64 in a template")
            return operator.pow(left, right)
        for seq, count in ((left, right), (right, left)):
            if isinstance(seq, str | list | tuple) and isinstance(count, int) and len(seq) * count > MAX_RENDERED_CHARS:
                raise SecurityError(f"repetition longer than {MAX_RENDERED_CHARS} in a template")
        return operator.mul(left, right)


def _render_bounded(template: Template, variables: Mapping[str, Any]) -> str:
    """Render chunk by chunk, stopping as soon as the output passes MAX_RENDERED_CHARS (a loop over a long list
    would otherwise build all of it first)."""
    chunks: list[str] = []
    size = 0
    for chunk in template.generate(variables):
        size += len(chunk)
        if size > MAX_RENDERED_CHARS:
            raise SecurityError(f"output longer than {MAX_RENDERED_CHARS} characters")
        chunks.append(chunk)
    return "".join(chunks)


def _bounded_replace(value: Any, old: str, new: str, count: int | None = None) -> str:
    # Nested replaces multiply lengths: 'x' * 1000 | replace('x', 'x' * 1000) twice is a gigabyte.
    text, old, new = str(value), str(old), str(new)
    hits = text.count(old) if old else len(text) + 1
    if count is not None and count >= 0:
        hits = min(hits, count)
    if len(text) + hits * (len(new) - len(old)) > MAX_RENDERED_CHARS:
        raise SecurityError(f"replace would produce more than {MAX_RENDERED_CHARS} characters")
    return text.replace(old, new, -1 if count is None else count)


def _bounded_join(value: Any, separator: str = "") -> str:
    items = [str(item) for item in value]
    if sum(map(len, items)) + len(separator) * max(len(items) - 1, 0) > MAX_RENDERED_CHARS:
        raise SecurityError(f"join would produce more than {MAX_RENDERED_CHARS} characters")
    return str(separator).join(items)


def _json_filter(value: Any) -> str:
    # jinja's own `tojson` escapes for HTML; a JSON body wants plain JSON.
    return json.dumps(value, ensure_ascii=False)


def _make_environment() -> SandboxedEnvironment:
    env = _TemplateSandbox(autoescape=False, undefined=StrictUndefined, keep_trailing_newline=True)
    env.globals.clear()  # cycler, joiner, namespace, lipsum, range, dict: nothing a transform needs
    env.filters = {name: f for name, f in env.filters.items() if name in _ALLOWED_FILTERS}
    env.filters["replace"] = _bounded_replace
    env.filters["join"] = _bounded_join
    env.filters["json"] = _json_filter
    env.filters["tojson"] = _json_filter
    return env


_ENVIRONMENT = _make_environment()


def _check_template_ast(ast: nodes.Template, declared: set[str]) -> None:
    for name in sorted(meta.find_undeclared_variables(ast) - declared):
        raise TransformConfigError(
            "template", f"uses {name!r}, which is not one of its variables {sorted(declared)}; bind it in variables"
        )
    # CPU time: a loop runs at most once per item of an event (256 KiB), but loops in loops multiply, and macros
    # can recurse. A transform needs neither, so neither is allowed: rendering stays linear in the event's size.
    for loop in ast.find_all(nodes.For):
        if loop.recursive:
            raise TransformConfigError("template", "recursive loops are not allowed", template_line=loop.lineno)
        for inner in (*loop.body, *loop.else_):
            nested = next(iter(inner.find_all(nodes.For)), None) if not isinstance(inner, nodes.For) else inner
            if nested is not None:
                raise TransformConfigError(
                    "template", "a loop inside a loop is not allowed (its cost multiplies)", template_line=nested.lineno
                )
    for block in ast.find_all((nodes.Macro, nodes.CallBlock)):
        raise TransformConfigError("template", "macros and call blocks are not allowed", template_line=block.lineno)
    if any(node.name == "self" for node in ast.find_all(nodes.Name)):
        raise TransformConfigError("template", "'self' (the template itself) is not available to a transform")
    for node in ast.find_all((nodes.Getattr, nodes.Getitem)):
        key: object = None
        if isinstance(node, nodes.Getattr):
            key = node.attr
        elif isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const):
            key = node.arg.value
        if isinstance(key, str) and key.startswith("_"):
            raise TransformConfigError(
                "template", f"reads {key!r}; names starting with '_' are not allowed", template_line=node.lineno
            )


def _compile_template(spec: TransformSpec) -> Callable[[Mapping[str, Any]], TransformedData]:
    if spec.template is None:
        raise TransformConfigError("template", "missing; give the template text")
    if len(spec.template) > MAX_TEMPLATE_CHARS:
        raise TransformConfigError("template", f"longer than {MAX_TEMPLATE_CHARS} characters")
    paths: dict[str, JsonPath] = {}
    for name, text in spec.variables:
        if not name.isidentifier() or name.startswith("_"):
            raise TransformConfigError(f"variables.{name}", "a variable name is an identifier not starting with '_'")
        paths[name] = _compile_json_path(f"variables.{name}", text)
    try:
        ast = _ENVIRONMENT.parse(spec.template)
        _check_template_ast(ast, set(paths))
        template = _ENVIRONMENT.from_string(spec.template)
    except TemplateSyntaxError as exc:
        raise TransformConfigError("template", exc.message or str(exc), template_line=exc.lineno) from None
    except SecurityError as exc:
        raise TransformConfigError("template", str(exc)) from None
    as_json = spec.output is TemplateOutput.JSON

    def apply(event: Mapping[str, Any]) -> TransformedData:
        bound = {name: path.find_value(event) for name, path in paths.items()}
        try:
            text = _render_bounded(template, bound)
        except SecurityError as exc:
            raise TransformRenderError(f"TEMPLATE transform: refused by the sandbox: {exc}") from None
        except (TemplateError, ArithmeticError, TypeError, ValueError) as exc:
            raise TransformRenderError(f"TEMPLATE transform: {type(exc).__name__}: {exc}") from None
        if not as_json:
            return TransformedData(text, TEXT_CONTENT_TYPE)
        try:
            return TransformedData(json.loads(text), JSON_CONTENT_TYPE)
        except json.JSONDecodeError as exc:
            raise TransformRenderError(
                f"TEMPLATE transform: output is not JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); "
                "quote strings with the 'json' filter, e.g. {{ name | json }}"
            ) from None

    return apply
