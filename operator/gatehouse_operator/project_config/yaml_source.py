"""YAML files as their authors mean them: ``service.config.yml`` and the dbt project's own files.

YAML 1.2's core schema: ``true`` and ``false`` are the booleans (``yes``, ``no``, ``on``,
``off`` and ``NO`` are strings), dates are strings, and every key is the string written
(``2024:`` is the key ``"2024"``). A key written twice is refused, naming both lines. Merge keys
(``<<: *base``) work, as they do in dbt's own loader.

Hostile files are refused before anything expands them: more than ``max_bytes``, text that is not
UTF-8, a ``%YAML`` directive other than 1.2, more than ``MAX_VALUES`` values (or an eighth of
``max_bytes``, if more) or four times ``max_bytes`` in characters once aliases are expanded (a
"billion laughs" file has a billion values; one long string used a million times, a billion
characters), nesting deeper than ``MAX_DEPTH`` (flow collections are refused by the scanner as they
open), an alias inside itself, tags outside the core schema, integers past Python's digits.

The file is parsed once: ruamel.yaml composes the node graph (YAML 1.2 tags, line numbers), its
expanded size is counted over the graph, each node once, and the values are built from it here,
each path's line remembered.
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, NoReturn, TypeVar

from pydantic import JsonValue
from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from ruamel.yaml.reader import ReaderError
from ruamel.yaml.scanner import RoundTripScanner, ScannerError

from gatehouse_operator.errors import GatehouseError

MAX_VALUES = 100_000
MAX_DEPTH = 64

_CORE = "tag:yaml.org,2002:"
_INT = re.compile(r"[-+]?[0-9]+")
_OCTAL = re.compile(r"0o[0-7]+")
_HEX = re.compile(r"0x[0-9a-fA-F]+")
_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_INFINITY = re.compile(r"([-+]?)\.(inf|Inf|INF)")
_NULLS = ("", "~", "null", "Null", "NULL")
_NAN = re.compile(r"\.(nan|NaN|NAN)")
_OTHER_VERSION = re.compile(r"^%YAML[ \t]+(?!1\.2[ \t]*(?:#.*)?$)(\S*)", re.MULTILINE)

Location = tuple[str, ...]
# What a document holds: any of JSON's values as read, or (``Document.mapping``) a mapping.
Data = TypeVar("Data", bound=JsonValue, covariant=True)


class YamlProblem(GatehouseError, ValueError):
    """Why a file cannot be read, as ``file:line: message``."""

    def __init__(self, path: str, line: int, message: str) -> None:
        super().__init__(f"{path}:{line}: {message}")
        self.line = line


@dataclass(frozen=True)
class Document(Generic[Data]):
    """A file's values as written: JSON's values, whatever shape the file has (its readers parse
    them into their models, and say where a value breaks a rule by its ``lines``)."""

    path: str
    data: Data
    lines: dict[Location, int]

    def mapping(self) -> MappingDocument | None:
        """This document as the mapping it holds (None when it holds something else)."""
        return Document(self.path, self.data, self.lines) if isinstance(self.data, dict) else None

    def line_of(self, location: tuple[str | int, ...]) -> int:
        """The line of the deepest part of ``location`` that is in the file."""
        parts = tuple(str(part) for part in location)
        while parts and parts not in self.lines:
            parts = parts[:-1]
        return self.lines.get(parts, 1)


# A file of sections, as service.config.yml and dbt_project.yml are.
MappingDocument = Document[dict[str, JsonValue]]


def read(path: Path, max_bytes: int) -> Document[JsonValue]:
    """The file at ``path``; read no further than one byte past ``max_bytes``."""
    with path.open("rb") as file:
        raw = file.read(max_bytes + 1)
    return parse(raw, str(path), max_bytes)


def parse(raw: bytes, path: str, max_bytes: int) -> Document[JsonValue]:
    if len(raw) > max_bytes:
        raise YamlProblem(path, 1, f"the file is larger than {max_bytes:,} bytes")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = raw.count(b"\n", 0, error.start) + 1
        byte = raw[error.start]
        raise YamlProblem(
            path, line, f"not UTF-8 text (byte 0x{byte:02x}); save it as UTF-8"
        ) from None
    if directive := _OTHER_VERSION.search(text):
        line = text.count("\n", 0, directive.start()) + 1
        raise YamlProblem(
            path, line, f"only YAML 1.2 is read, and the file asks for %YAML {directive[1]}"
        )
    yaml = YAML(typ="rt", pure=True)
    yaml.version = (1, 2)
    yaml.Scanner = _BoundedScanner
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            node = yaml.compose(text)
    except RecursionError:
        raise YamlProblem(path, 1, f"nested more than {MAX_DEPTH} levels deep") from None
    except MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line = mark.line + 1 if mark is not None else 1
        said = ", ".join(part for part in (error.context, error.problem) if part)
        raise YamlProblem(path, line, f"not valid YAML: {said}") from None
    except ReaderError as error:
        line = text.count("\n", 0, error.position) + 1
        raise YamlProblem(path, line, f"not valid YAML: {error.reason}") from None
    except YAMLError as error:
        raise YamlProblem(path, 1, f"not valid YAML: {error}") from None
    if node is None:
        return Document(path, None, {})
    builder = _Builder(path, max_bytes)
    builder.expanded_size(node, {}, [])
    return Document(path, builder.value(node, ()), builder.lines)


class _BoundedScanner(RoundTripScanner):
    """ruamel.yaml's scanner, refusing a collection where it opens past ``MAX_DEPTH``: the
    scanner's time grows with the square of flow nesting (seconds for two thousand ``[``), and
    block nesting (a line indented one more each time) is composed whole before anything else
    could count it (seconds for six hundred levels)."""

    def fetch_flow_collection_start(self, TokenClass: Any, to_push: str) -> None:
        if self.flow_level >= MAX_DEPTH:
            self._too_deep()
        super().fetch_flow_collection_start(TokenClass, to_push)

    def add_indent(self, column: int) -> bool:
        if self.indent < column and len(self.indents) >= MAX_DEPTH:
            self._too_deep()
        added: bool = super().add_indent(column)
        return added

    def _too_deep(self) -> NoReturn:
        mark = self.reader.get_mark()
        raise ScannerError(None, None, f"nested more than {MAX_DEPTH} levels deep", mark)


class _Builder:
    def __init__(self, path: str, max_bytes: int) -> None:
        self.path = path
        self.lines: dict[Location, int] = {}
        # A file may expand to a few times its size, never to gigabytes.
        self.max_values = max(MAX_VALUES, max_bytes // 8)
        self.max_characters = 4 * max_bytes

    def problem(self, node: Node, message: str) -> YamlProblem:
        return YamlProblem(self.path, node.start_mark.line + 1, message)

    def expanded_size(
        self, node: Node, sizes: dict[int, tuple[int, int]], inside: list[Node]
    ) -> tuple[int, int]:
        """How many values and characters ``node`` becomes, each node of the graph visited once.

        Building the values (or their JSON) would take as long as they are large, and a file of
        a few hundred bytes can have a billion values, or a string used a million times, so they
        are counted first.
        """
        if id(node) in sizes:
            return sizes[id(node)]
        if any(node is outer for outer in inside):
            raise self.problem(node, "an alias refers to a node that contains it")
        if len(inside) >= MAX_DEPTH:
            raise self.problem(node, f"nested more than {MAX_DEPTH} levels deep")
        values, characters = 1, 0
        children: list[Node] = []
        if isinstance(node, MappingNode):
            children = [value for _, value in node.value]
            characters = sum(
                len(str(key.value)) for key, _ in node.value if isinstance(key, ScalarNode)
            )
        elif isinstance(node, SequenceNode):
            children = node.value
        else:
            characters = len(str(node.value))
        inside.append(node)
        for child in children:
            child_values, child_characters = self.expanded_size(child, sizes, inside)
            values, characters = values + child_values, characters + child_characters
        inside.pop()
        for count, most, what in (
            (values, self.max_values, "values"),
            (characters, self.max_characters, "characters"),
        ):
            if count > most:
                raise self.problem(
                    node,
                    f"the file expands to more than {most:,} {what} "
                    "(an alias is expanded every time it is used)",
                )
        sizes[id(node)] = (values, characters)
        return values, characters

    def value(self, node: Node, location: Location) -> JsonValue:
        self.lines.setdefault(location, node.start_mark.line + 1)
        if isinstance(node, MappingNode) and str(node.tag) == _CORE + "map":
            return self.mapping(node, location)
        if isinstance(node, SequenceNode) and str(node.tag) == _CORE + "seq":
            return [self.value(item, (*location, str(i))) for i, item in enumerate(node.value)]
        if isinstance(node, ScalarNode):
            return self.scalar(node)
        raise self.problem(node, f"the tag {node.tag} is not supported here")

    def mapping(self, node: MappingNode, location: Location) -> dict[str, JsonValue]:
        built: dict[str, JsonValue] = {}
        merged: dict[str, JsonValue] = {}
        first_line: dict[str, int] = {}
        for key_node, value_node in node.value:
            if str(key_node.tag) == _CORE + "merge":
                if "<<" in first_line:
                    raise self.problem(
                        key_node, f"a second merge key (first on line {first_line['<<']})"
                    )
                first_line["<<"] = key_node.start_mark.line + 1
                for source in self.merge_sources(value_node):
                    # A mapping is built as a dict, or refused if its tag is not the core schema's.
                    if isinstance(merging := self.value(source, location), dict):
                        for key, value in merging.items():
                            merged.setdefault(key, value)
                continue
            if not isinstance(key_node, ScalarNode):
                raise self.problem(key_node, "a key must be a string, not a list or a mapping")
            key = str(key_node.value)
            line = key_node.start_mark.line + 1
            if key in first_line:
                raise self.problem(
                    key_node, f"the key {key!r} is written twice (first on line {first_line[key]})"
                )
            first_line[key] = line
            child = (*location, key)
            self.lines[child] = line
            built[key] = self.value(value_node, child)
        return {**merged, **built}

    def merge_sources(self, node: Node) -> Iterator[MappingNode]:
        sources = node.value if isinstance(node, SequenceNode) else [node]
        for source in sources:
            if not isinstance(source, MappingNode):
                raise self.problem(source, "a merge key (<<) takes a mapping or a list of them")
            yield source

    def scalar(self, node: ScalarNode) -> JsonValue:
        tag, text = str(node.tag), str(node.value)
        # YAML 1.2's core schema has no timestamps, and `=` and `<<` as values are strings.
        if tag in (_CORE + "str", _CORE + "timestamp", _CORE + "value", _CORE + "merge"):
            return text
        if tag == _CORE + "null":
            if text not in _NULLS:
                raise self.problem(node, f"{text!r} is not null")
            return None
        if tag == _CORE + "bool":
            if text.lower() not in ("true", "false"):
                raise self.problem(node, f"{text!r} is not a boolean (true or false)")
            return text.lower() == "true"
        if tag == _CORE + "int":
            try:
                if _INT.fullmatch(text):
                    return int(text)
                if _OCTAL.fullmatch(text):
                    return int(text[2:], 8)
                if _HEX.fullmatch(text):
                    return int(text[2:], 16)
            except ValueError:  # past Python's 4,300 digits
                raise self.problem(node, "an integer too long to read") from None
            return text
        if tag == _CORE + "float":
            if _FLOAT.fullmatch(text):
                return float(text)
            if infinity := _INFINITY.fullmatch(text):
                return -math.inf if infinity[1] == "-" else math.inf
            if _NAN.fullmatch(text):
                return math.nan
            return text
        raise self.problem(node, f"the tag {tag} is not supported here")
