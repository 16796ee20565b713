"""A form's problems in its own words, from the model's rules: the page builds the strict model
of what was entered and names each refusal by the field's title, not by restating the rule.

A field is found by its path as the model and the API server name it (``auth.apiKey.name``, list
indexes left out); ``FieldTitle`` rows give each the page's title, in the order the page lists its
problems. What a refusal says is the model's: its own message for a rule it words itself (a
validator's, a CEL rule's twin), or the page's words for a constraint pydantic words for
programmers (a minimum length of 1 reads "required"). The API server's refusals of a dry run or a
save (the rules it alone holds: CEL the model leaves to it, the resource's name) are listed the
same way, each cause under the title of the field its path names, in the cause's own words.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, get_args, get_origin

from annotated_types import Ge, Le
from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

from gatehouse_operator.access.as_user import bounded
from gatehouse_operator.api.connection import url_field_of
from gatehouse_operator.kube.errors import Cause
from gatehouse_operator.project_config.schema import rule


@dataclass(frozen=True)
class FieldTitle:
    """One field of the page: its path in the model (or a name of the page's own, for a field
    the model has not), its title, and how its refusals read."""

    path: str
    title: str
    # One value a line: a value's refusal says so.
    lines: bool = False
    # What a value is, for one off the field's pattern ("a media type such as text/*").
    what: str = ""
    # The order the page offers a choice's values in (the model's order otherwise).
    offered: Collection[str] = ()
    # Each item shown on a row of its own, with its problems (the list's are listed).
    rows: bool = False
    # The page's words for one of the model's messages that names other fields by their paths.
    reworded: Mapping[str, str] = field(default_factory=dict)


# A cause's list index or map key (``allowedPaths[1]``, ``parameters[audience]``).
_ITEM = re.compile(r"\[[^\]]*\]")
# How many of a refusal's causes are listed.
MAX_CAUSES = 16


def path_of(location: Sequence[int | str]) -> str:
    """A refusal's location as a path: the aliases, list indexes left out."""
    return ".".join(str(part) for part in location if not isinstance(part, int))


def field_at(model: type[BaseModel], path: str) -> FieldInfo | None:
    """The model's field at ``path``; None where there is none."""
    found: FieldInfo | None = None
    annotation: Any = model
    for name in path.split("."):
        owner = _model_in(annotation)
        if owner is None:
            return None
        fields = {info.alias or key: info for key, info in owner.model_fields.items()}
        found = fields.get(name)
        if found is None:
            return None
        annotation = found.annotation
    return found


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds, itself or as its list's items or an optional value."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for argument in get_args(annotation):
        inner = _model_in(argument)
        if inner is not None:
            return inner
    return None


def choices_of(info: FieldInfo | None) -> tuple[str, ...]:
    """The values a choice field allows, in the model's order."""
    annotation = info.annotation if info else None
    while annotation is not None and get_origin(annotation) is not Literal:
        arguments = [a for a in get_args(annotation) if a is not type(None)]
        annotation = arguments[0] if arguments else None
    return tuple(str(value) for value in get_args(annotation)) if annotation else ()


def range_of(info: FieldInfo | None) -> str:
    """A whole number field's range in words, from its bounds."""
    metadata = info.metadata if info else []
    low = next((f" from {item.ge:,}" for item in metadata if isinstance(item, Ge)), "")
    high = next((f" to {item.le:,}" for item in metadata if isinstance(item, Le)), "")
    optional = ", or empty for none" if info and info.default is None else ""
    return f"a whole number{low}{high}{optional}"


class FieldProblems:
    """The problems of one form against one model, listed in the order of its titles."""

    def __init__(
        self, model: type[BaseModel], titles: Sequence[FieldTitle], sections: Mapping[str, str]
    ) -> None:
        self.model = model
        self.titles = {row.path: row for row in titles}
        self.order = [row.path for row in titles]
        # Under a section, "required" says for what: "for an API key".
        self.sections = sections
        self.found: dict[str, list[str]] = {}
        # The API server's causes on fields the page has no title for, in its own words.
        self.elsewhere: list[str] = []

    def add(self, path: str, message: str, title: str = "") -> None:
        """A problem of the field at ``path``, under its title (or ``title``): a message of the
        model's, in the page's words where it has some for it."""
        row = self.titles[path]
        line = f"{title or row.title}: {row.reworded.get(message, message)}"
        lines = self.found.setdefault(path, [])
        if line not in lines:
            lines.append(line)

    def built(self, document: object) -> None:
        """Builds the model of ``document``: each refusal of a field the page shows, worded."""
        try:
            self.model.model_validate(document)
        except ValidationError as error:
            self.refused(error.errors(include_url=False))

    def checked(self, path: str, value: object) -> None:
        """Checks one value against the model's field at ``path``: for a field the document
        holds only with another's value (a choice of an auth type's section)."""
        info = field_at(self.model, path)
        if info is None:
            raise KeyError(path)
        try:
            TypeAdapter(annotated_type(info)).validate_python(value)
        except ValidationError as error:
            self.refused(error.errors(include_url=False), prefix=path)

    def refused(self, errors: Iterable[ErrorDetails], prefix: str = "") -> None:
        for error in errors:
            path = ".".join(part for part in (prefix, path_of(error["loc"])) if part)
            row = self.titles.get(path)
            item = any(isinstance(part, int) for part in error["loc"])
            if row is None or (row.rows and item):
                # A field the page makes itself (the Secret's name, the sealed value), keeps
                # as stored (the limits it does not show) or shows on its own rows (headers), or
                # a rule across fields the page asks the model for itself: the dry run at
                # Review names anything else.
                continue
            self.add(path, self.words(row, error))

    def caused(self, causes: Sequence[Cause]) -> None:
        """The API server's causes of a refusal, each under the title of the field it names
        (or of the nearest field holding it: a header's name under Headers), with its own
        message; one on a field the page does not show, by the API's path for it."""
        for cause in causes[:MAX_CAUSES]:
            message = bounded(cause.rule)
            path = _ITEM.sub("", cause.field).removeprefix("spec.")
            while path and path not in self.titles:
                path = path.rpartition(".")[0]
            if path:
                self.add(path, message)
            elif (line := f"{cause.field}: {message}" if cause.field else message) not in (
                self.elsewhere
            ):
                self.elsewhere.append(line)
        if len(causes) > MAX_CAUSES:
            self.elsewhere.append(f"{len(causes) - MAX_CAUSES:,} more (shortened)")

    def words(self, row: FieldTitle, error: ErrorDetails) -> str:
        kind, context = error["type"], error.get("ctx", {})
        info = field_at(self.model, row.path)
        section = next(
            (
                f" for {words}"
                for where, words in self.sections.items()
                if row.path.startswith(f"{where}.")
            ),
            "",
        )
        if kind == "missing" or (kind == "string_too_short" and context.get("min_length") == 1):
            url = url_field_of(info.metadata) if info else None
            return f"required{section}" + (f", {url.required}" if url else "")
        if kind == "too_short" and context.get("min_length") == 1:
            return f"at least one{section}"
        if kind == "string_too_long":
            given = len(str(error["input"]))
            return f"at most {context['max_length']:,} characters ({given:,} given)"
        if kind == "too_long":
            return f"at most {context['max_length']:,} ({context['actual_length']:,} given)"
        if kind == "literal_error":
            allowed = choices_of(info)
            ordered = [value for value in row.offered if value in allowed] or allowed
            return f"one of {', '.join(ordered)}"
        if kind in ("greater_than_equal", "less_than_equal", "int_parsing", "int_type"):
            return range_of(info)
        if kind == "string_pattern_mismatch" and row.what:
            return f"{error['input']!r} is not {row.what}" + (" (one a line)" if row.lines else "")
        return error["msg"].removeprefix("Value error, ") if kind == "value_error" else rule(error)

    def only(self, keep: Callable[[str], bool], *, elsewhere: bool = False) -> FieldProblems:
        """The problems of the fields whose paths ``keep`` keeps, and the API server's causes on
        fields the page has no title for if ``elsewhere``."""
        kept = FieldProblems(self.model, list(self.titles.values()), self.sections)
        kept.found = {path: lines for path, lines in self.found.items() if keep(path)}
        kept.elsewhere = list(self.elsewhere) if elsewhere else []
        return kept

    def listed(self) -> list[str]:
        """Every problem found, field by field in the page's order, then the API server's
        causes on fields it has no title for."""
        return [line for path in self.order for line in self.found.get(path, [])] + self.elsewhere


def annotated_type(info: FieldInfo) -> Any:
    """A field's type with its constraints, to check one value as the model would."""
    return Annotated[info.annotation, *info.metadata] if info.metadata else info.annotation
