"""Claims in the hand-written docs that the code decides, checked against the code so they cannot
go stale: where a connection's secret may come from, the table channel's frames and their sizes,
each program's layers and modules, and the files the Layout points at."""

from __future__ import annotations

import re
import tomllib
import typing
from pathlib import Path

import pytest

from gatehouse_contract import channel
from gatehouse_contract.frames import OperatorFrame, ReplicaMessage
from gatehouse_operator import table as operator_table
from gatehouse_operator.api.connection import Auth, AuthType, ExternalConnectionSpec
from gatehouse_operator.table import channel as operator_channel
from gatehouse_operator.table import journal

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
OVERVIEW = DOCS / "concepts" / "overview.md"
TABLE_CHANNEL = DOCS / "concepts" / "table-channel.md"
LAYOUT = DOCS / "development" / "layout.md"
OPERATOR = ROOT / "operator" / "gatehouse_operator"
PROXY = ROOT / "proxy" / "gatehouse_proxy"
MIB = 1024 * 1024


def _section(path: Path, heading: str) -> str:
    text = path.read_text()
    start = text.index(f"\n{heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def _table_rows(section: str) -> list[list[str]]:
    """The cells of each row of the section's tables, header and rule lines left out."""
    rows = [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in section.splitlines()
        if line.startswith("|")
    ]
    return [row for row in rows if not set(row[0]) <= {"-", ":", " "}][1:]


def _hand_written_pages() -> list[Path]:
    return [ROOT / "README.md"] + [
        page for page in DOCS.rglob("*.md") if "reference" not in page.relative_to(DOCS).parts
    ]


# --- Where a connection's secret comes from -----------------------------------------------------


def _secret_sources() -> set[str]:
    """Auth's fields other than its type and one type's settings: where a secret comes from."""
    settings = set(typing.get_args(AuthType))
    wire_names = {field.alias or name for name, field in Auth.model_fields.items()}
    return wire_names - settings - {"type"}


def test_the_docs_name_every_source_of_a_secret_and_every_auth_type() -> None:
    section = _section(OVERVIEW, "## Auth types, and where the secret comes from")
    sources = _secret_sources()
    assert sources == {"secretRef", "sealedSecret"}, "a new source: describe it in the overview"
    listed = set(re.findall(r"^- `(\w+)`:", section, re.M))
    assert listed == sources
    types_in_table = {row[0].strip("`") for row in _table_rows(section)}
    assert types_in_table == set(typing.get_args(AuthType))


def test_the_auth_fields_description_names_every_source_of_its_secret() -> None:
    """The generated reference and ``kubectl explain`` describe spec.auth from this description:
    a secret may be sealed into the connection, not only kept in a Secret."""
    description = ExternalConnectionSpec.model_fields["auth"].description or ""
    assert sorted(source for source in _secret_sources() if source not in description) == []


# --- The table channel --------------------------------------------------------------------------


def _frame_kinds(union: object) -> set[str]:
    return {
        str(frame.model_fields["type"].default)
        for frame in typing.get_args(union)
        if hasattr(frame, "model_fields")
    }


def test_the_frames_table_is_the_contracts() -> None:
    text = TABLE_CHANNEL.read_text()
    table = text[text.index("| direction | `type` |") :]
    rows = _table_rows(table[: table.index("\n\n")])
    by_direction: dict[str, set[str]] = {}
    for direction, kind, *_ in rows:
        by_direction.setdefault(direction, set()).add(kind.strip("`"))
    assert by_direction == {
        "operator → replica": _frame_kinds(OperatorFrame),
        "replica → operator": _frame_kinds(ReplicaMessage),
    }


def test_every_frame_the_docs_name_exists() -> None:
    kinds = _frame_kinds(OperatorFrame) | _frame_kinds(ReplicaMessage)
    named = {
        (page.name, kind)
        for page in _hand_written_pages()
        for kind in re.findall(r"`(\w+)` frames?\b", page.read_text())
    }
    assert named, "the docs name the channel's frames"
    assert sorted((page, kind) for page, kind in named if kind not in kinds) == []
    # A replica opens its stream with a signed request; no frame greets the operator.
    greeted = [
        page.name
        for page in _hand_written_pages()
        if re.search(r"\bhello\b", page.read_text(), re.I)
    ]
    assert greeted == []


SIZES = {
    "SNAPSHOT_PART_BYTES": journal.SNAPSHOT_PART_BYTES,
    "MAX_FRAME_BYTES": channel.MAX_FRAME_BYTES,
    "MAX_REPLICA_MESSAGE_BYTES": operator_channel.MAX_REPLICA_MESSAGE_BYTES,
}


def test_the_channels_sizes_are_the_constants() -> None:
    stated = [
        (page.name, int(figure), name)
        for page in _hand_written_pages()
        for figure, name in re.findall(r"(\d+) MiB\s+\(`([A-Z_]+)`\)", page.read_text())
    ]
    assert {name for page, _, name in stated if page == TABLE_CHANNEL.name} == set(SIZES)
    wrong = [(page, figure, name) for page, figure, name in stated if figure * MIB != SIZES[name]]
    assert wrong == []
    # Every size on the channel's page is one of these, with its name.
    bare = re.findall(r"\d+ MiB(?!\s+\(`[A-Z_]+`\))", TABLE_CHANNEL.read_text())
    assert bare == []


def test_the_table_packages_own_account_gives_the_constants() -> None:
    """The table package's docstring (what is pushed, and when) says its figures with their names,
    and each figure is the constant's."""
    text = operator_table.__doc__ or ""
    sizes = re.findall(r"(\d+) MiB\s+\(``([A-Z_]+)``\)", text)
    assert sizes == [("4", "SNAPSHOT_PART_BYTES")]
    assert all(int(figure) * MIB == SIZES[name] for figure, name in sizes)
    assert re.findall(r"\d+ MiB(?!\s+\(``[A-Z_]+``\))", text) == []
    seconds = re.findall(r"(\d+) s \(``HEARTBEAT_SECONDS``\)", text)
    assert [float(figure) for figure in seconds] == [channel.HEARTBEAT_SECONDS]
    coalesce = re.findall(r"(\d+) ms\b", text)
    assert [int(figure) / 1000 for figure in coalesce] == [operator_channel.COALESCE_SECONDS]


# --- Layout -------------------------------------------------------------------------------------


PROGRAMS = {
    "gatehouse_operator": ("The operator's layers", "## The operator's layers", OPERATOR),
    "gatehouse_proxy": ("The proxy's layers", "## The proxy's rooms", PROXY),
}


def _contract_layers(program: str) -> list[set[str]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (layers,) = [
        contract["layers"]
        for contract in config["tool"]["importlinter"]["contracts"]
        if contract["name"] == PROGRAMS[program][0]
    ]
    return [
        {module.strip().removeprefix(f"{program}.") for module in layer.split("|")}
        for layer in layers
    ]


def _documented_rows(program: str) -> list[list[str]]:
    return _table_rows(_section(LAYOUT, PROGRAMS[program][1]))


def _documented_layers(program: str) -> list[set[str]]:
    return [set(re.findall(r"`(\w+)`", modules)) for _, modules, _ in _documented_rows(program)]


def _top_modules(package: Path) -> set[str]:
    return {
        child.stem
        for child in package.iterdir()
        if (child.suffix == ".py" and child.name != "__init__.py")
        or (child.is_dir() and (child / "__init__.py").exists())
    }


@pytest.mark.parametrize("program", PROGRAMS)
def test_the_layout_lists_each_programs_layers_as_the_contract_does(program: str) -> None:
    assert _documented_layers(program) == _contract_layers(program)


@pytest.mark.parametrize("program", PROGRAMS)
def test_every_module_the_layout_names_exists_and_none_is_left_out(program: str) -> None:
    named = set().union(*_documented_layers(program))
    package = PROGRAMS[program][2]
    assert sorted(named - _top_modules(package)) == []
    assert sorted(_top_modules(package) - named) == []


@pytest.mark.parametrize("program", PROGRAMS)
def test_every_module_inside_a_package_is_named_in_its_row(program: str) -> None:
    """A package's modules are each named (in backquotes) in its layer's row: a module added to
    a room is placed on the page with it."""
    package = PROGRAMS[program][2]
    unnamed = []
    for _, modules, what in _documented_rows(program):
        named = set(re.findall(r"`(\w+)`", what))
        for room in re.findall(r"`(\w+)`", modules):
            if (package / room).is_dir():
                unnamed += [
                    f"{room}/{module}" for module in sorted(_top_modules(package / room) - named)
                ]
    assert unnamed == []


QUESTIONS = {
    "Where is a credential injected?",
    "Where does each auth kind inject?",
    "Where is a path normalised?",
    "What does the operator push, and when?",
    "How is a value sealed in Git opened?",
    "How do the table keys rotate?",
    "How is the leader chosen?",
    "Where is an admission decision made?",
    "Where is a request admitted?",
    "Where is a fetch observed?",
    "Where is the shared store touched?",
}


def _answers(path: Path, heading: str | None) -> dict[str, str]:
    text = _section(path, heading) if heading else path.read_text()
    table = text[text.index("| question | file |") :]
    table = table[: table.index("\n\n")]
    return {row[0]: re.findall(r"`([^`]+)`", row[1])[0] for row in _table_rows(table)}


def test_the_layout_answers_each_question_with_one_file_that_exists() -> None:
    full = _answers(LAYOUT, "## Where to look")
    short = _answers(ROOT / "README.md", "## Layout")
    assert set(full) == QUESTIONS
    assert short == full
    assert sorted(path for path in full.values() if not (ROOT / path).is_file()) == []


# --- The tests the security pages say hold a guarantee ----------------------------------------


def test_every_test_the_security_pages_name_exists_with_the_tests_it_names() -> None:
    """A guarantee held by a test that was renamed or removed is a claim nobody checks: each
    ``tests/...py`` a security page names exists, and each test named beside it in backquotes
    (``..._pauses_that_endpoint_only``: a name's end) is one of that file's."""
    for page in sorted((DOCS / "security").glob("*.md")):
        for line in page.read_text().splitlines():
            for path, names in re.findall(r"`(tests/[\w/]+\.py)`((?: \([^)]*\))?)", line):
                source = ROOT / path
                assert source.is_file(), f"{page.name} names {path}, which does not exist"
                defined = re.findall(r"^(?:async )?def (test_\w+)", source.read_text(), re.M)
                for end in re.findall(r"`\.\.\.(\w+)`", names):
                    assert any(name.endswith(end) for name in defined), (page.name, path, end)
