"""Exceptions of the EventBridge package (rule files, transforms, retry policies).

Messages say what went wrong, where, and what to do about it.
"""

from __future__ import annotations


class EventBridgeError(Exception):
    """Base class of every error the EventBridge package raises."""


class TransformConfigError(EventBridgeError, ValueError):
    """A target's transform cannot be compiled (bad JSONPath, bad or unsafe template).

    `field` names the transform field at fault ("path", "template", "variables.<name>") so that the rule file
    loader can point at the YAML node; `template_line` is the 1-based line inside a template, when known.
    """

    def __init__(self, field: str, reason: str, *, template_line: int | None = None) -> None:
        super().__init__(f"transform {field}: {reason}")
        self.field = field
        self.reason = reason
        self.template_line = template_line


class TransformRenderError(EventBridgeError):
    """A compiled transform failed on one event (path matched nothing, unsafe access, output not JSON, too big).

    Reported per event, like a failed delivery: the event goes to the target's dead-letter topic with this reason.
    """


class RuleFileError(EventBridgeError, ValueError):
    """A rule file is refused. Prints as `file:line:column: reason`, the position of the offending YAML node."""

    def __init__(self, path: str, line: int, column: int, reason: str) -> None:
        super().__init__(f"{path}:{line}:{column}: {reason}")
        self.path = path
        self.line = line
        self.column = column
        self.reason = reason


class IngressError(EventBridgeError, ValueError):
    """A PutEvents request cannot be read as a whole (unknown content type, a batch that is not a JSON array, too many
    entries, a body too large); the HTTP layer answers it with `status` and nothing is stored.

    A bad event inside a readable request is not an IngressError: it is reported in its own slot of the response.
    `code` is an AWS-style error name ("UnsupportedContentType", "MalformedRequest", ...).
    """

    def __init__(self, code: str, message: str, *, status: int = 400) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status


class ReprocessError(EventBridgeError, ValueError):
    """A replay or a dead-letter redrive that cannot be done as asked (a bad time range, name or limit); nothing
    was appended."""


class NotFoundError(ReprocessError):
    """The bus, rule, target or dead-letter topic that a replay or a redrive names does not exist."""


class ScheduleError(EventBridgeError, ValueError):
    """A schedule expression (`rate(...)` or `cron(...)`) that cannot be parsed. `offset` is the index in the
    expression's text of the part at fault, so that the rule file loader can point at its column."""

    def __init__(self, reason: str, offset: int = 0) -> None:
        super().__init__(reason)
        self.reason = reason
        self.offset = offset
