"""service.config.yml as users write it: YAML 1.2, hostile files, and compile output that fits.

Each table row is a file a user wrote (or an attacker could), run through ``gatehouse-service
validate`` in-process, with the exit code and the line it must print.
"""

from __future__ import annotations

import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from gatehouse_operator.api.project_config import (
    MAX_WARNINGS,
    CompiledConfig,
    ProjectConfigStatus,
    fitted_warnings,
)
from gatehouse_operator.cli import service_cli
from gatehouse_operator.connections.errors import validation_message
from gatehouse_operator.project_config.compiler import compile_config
from gatehouse_operator.project_config.schema import ServiceConfig, spec_problems
from gatehouse_operator.project_config.yaml_source import parse
from gatehouse_operator.service_api.models import DefaultsUpdate

INVALID, OK = service_cli.INVALID, service_cli.OK


def validate(
    tmp_path: Path, text: str | bytes, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str]:
    (tmp_path / "dbt_project.yml").write_text("name: shop\n")
    raw = text.encode() if isinstance(text, str) else text
    (tmp_path / "service.config.yml").write_bytes(raw)
    code = service_cli.main(["validate", "--project-dir", str(tmp_path)])
    captured = capsys.readouterr()
    return code, captured.err


def _alias_bomb() -> str:
    lines = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for previous, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{name}: &{name} [" + ", ".join([f"*{previous}"] * 9) + "]")
    return "spotlight: {}\n" + "\n".join(lines) + "\n"


# YAML 1.1 read yes/no/on/off/NO as booleans; YAML 1.2 reads them as the strings they are.
YAML_AS_MEANT: list[tuple[str, str, int, str]] = [
    (
        "yes is not true",
        "spotlight: {}\ndefaults:\n  case_sensitive: yes\n",
        INVALID,
        ":3: defaults.case_sensitive: 'yes' is not a boolean: write true or false",
    ),
    (
        "off is not false",
        "spotlight: {}\ndefaults:\n  column_totals: off\n",
        INVALID,
        ":3: defaults.column_totals: 'off' is not a boolean: write true or false",
    ),
    (
        "On is not true",
        "spotlight: {}\ndefaults:\n  pre_aggregate_execution_fallback: On\n",
        INVALID,
        ":3: defaults.pre_aggregate_execution_fallback: 'On' is not a boolean: write true or false",
    ),
    (
        "country codes stay strings",
        "spotlight: {}\nparameters:\n  country:\n    label: Country\n"
        "    options: [NO, SE, DK]\n    default: NO\n",
        OK,
        "valid (0 warning(s))",
    ),
    (
        "a key on: is the key 'on'",
        "spotlight:\n  categories:\n    on:\n      label: On call\n      color: teal\n",
        INVALID,
        ":5: spotlight.categories.on.color: 'teal' is not one of 'gray', 'violet', 'red', "
        "'orange', 'green', 'blue', 'indigo', 'pink' or 'yellow'",
    ),
    (
        "sections written with nothing under them are empty",
        "spotlight:\n  # default_visibility: hide\nparameters:\ndefaults:\n"
        "  granularity_labels:\ncustom_granularities:\n",
        OK,
        "valid (0 warning(s))",
    ),
    (
        "a parameter name off its pattern is quoted",
        "spotlight: {}\nparameters:\n  bad name:\n    label: B\n    allow_custom_values: true\n",
        INVALID,
        ":3: parameters.bad name.[key]: 'bad name' does not match the pattern '^[a-zA-Z0-9_-]+$'",
    ),
    (
        "a year is a table-group key",
        "spotlight: {}\ntable_groups:\n  2024:\n    label: This year\n",
        OK,
        "valid (0 warning(s))",
    ),
    (
        "a key written twice names both lines",
        "spotlight: {}\ndefaults:\n  case_sensitive: true\n  case_sensitive: false\n",
        INVALID,
        ":4: the key 'case_sensitive' is written twice (first on line 3)",
    ),
    (
        "a top-level section written twice",
        "spotlight: {}\nparameters: {}\nspotlight:\n  default_visibility: hide\n",
        INVALID,
        ":3: the key 'spotlight' is written twice (first on line 1)",
    ),
    (
        "true and false are booleans",
        "spotlight: {}\ndefaults:\n  case_sensitive: false\n  column_totals: true\n",
        OK,
        "valid (0 warning(s))",
    ),
    (
        "merge keys work, as in dbt",
        "spotlight:\n  categories:\n    a: &base {label: A, color: red}\n"
        "    b:\n      <<: *base\n      label: B\n",
        OK,
        "valid (0 warning(s))",
    ),
    (
        "a date stays a string",
        "spotlight: {}\nparameters:\n  since:\n    label: Since\n    type: date\n"
        "    allow_custom_values: true\n    default: 2024-01-31\n",
        OK,
        "valid (0 warning(s))",
    ),
    (
        "a list default with one value and no multiple, as the seed's table shows",
        "spotlight: {}\nparameters:\n  region:\n    label: Region\n    options: [EMEA, APAC]\n"
        "    default: [EMEA]\n",
        OK,
        "valid (0 warning(s))",
    ),
]


def _parameter(lines: str) -> str:
    return "spotlight: {}\nparameters:\n  p:\n    label: P\n" + "".join(
        f"    {line}\n" for line in lines.splitlines()
    )


# A parameter's default checked against its type, its options and multiple, the value quoted.
DEFAULTS: list[tuple[str, str, str]] = [
    (
        "a date that does not exist",
        "type: date\nallow_custom_values: true\ndefault: 2025-02-30",
        ":7: parameters.p.default: '2025-02-30' is not a real date",
    ),
    (
        "a date in another format",
        "type: date\nallow_custom_values: true\ndefault: 30/01/2025",
        ":7: parameters.p.default: '30/01/2025' is not a YYYY-MM-DD date",
    ),
    (
        "a number that is not one",
        "type: number\nallow_custom_values: true\ndefault: abc",
        ":7: parameters.p.default: 'abc' is not a number",
    ),
    (
        "a boolean for a number",
        "type: number\nallow_custom_values: true\ndefault: true",
        ":7: parameters.p.default: True is not a number",
    ),
    (
        "a default outside the options",
        "options: [EMEA, AMER, APAC]\ndefault: LATAM",
        ":6: parameters.p.default: 'LATAM' is not one of the options 'EMEA', 'AMER' or 'APAC' "
        "(allow_custom_values is not true)",
    ),
    (
        "a label where the value belongs",
        "options:\n  - {label: Europe, value: EU}\ndefault: Europe",
        ":7: parameters.p.default: 'Europe' is not one of the options 'EU' "
        "(allow_custom_values is not true)",
    ),
    (
        "a number outside the options",
        "type: number\noptions: [10, 25]\ndefault: 20",
        ":7: parameters.p.default: 20 is not one of the options 10 or 25 "
        "(allow_custom_values is not true)",
    ),
    (
        "one of several defaults outside the options",
        "multiple: true\noptions: [EMEA, AMER]\ndefault: [EMEA, LATAM]",
        ":7: parameters.p.default: 'LATAM' is not one of the options 'EMEA' or 'AMER' "
        "(allow_custom_values is not true)",
    ),
    (
        "several defaults for one value",
        "options: [EMEA, AMER]\ndefault: [EMEA, AMER]",
        ":6: parameters.p.default: ['EMEA', 'AMER'] is a list of 2 values, but multiple is not "
        "true: give one value, or set multiple: true",
    ),
    (
        "an empty list",
        "multiple: true\noptions: [EMEA]\ndefault: []",
        ":7: parameters.p.default: [] is an empty list: leave default out for no default",
    ),
]

DEFAULTS_ACCEPTED: list[tuple[str, str]] = [
    ("a custom value", "allow_custom_values: true\noptions: [EMEA]\ndefault: LATAM"),
    ("a real date", "type: date\nallow_custom_values: true\ndefault: 2024-02-29"),
    ("a number", "type: number\noptions: [10, 2.5]\ndefault: 2.5"),
    # Compared as the type reads them: the query gets 25 either way.
    ("a number written as a string", "type: number\noptions: [10, 25]\ndefault: '25'"),
    ("a value of a {label, value} option", "options:\n  - {label: Europe, value: EU}\ndefault: EU"),
    ("several, when multiple", "multiple: true\noptions: [EMEA, AMER]\ndefault: [AMER, EMEA]"),
    # The seed's table shows a list default; one value is unambiguous.
    ("a list of one without multiple", "options: [EMEA]\ndefault: [EMEA]"),
    (
        "options from a dimension: only the type is checked",
        "type: number\noptions_from_dimension: {model: m, dimension: d}\ndefault: 3",
    ),
]


@pytest.mark.parametrize(
    ("lines", "says"), [row[1:] for row in DEFAULTS], ids=[row[0] for row in DEFAULTS]
)
def test_a_parameters_default_is_checked_and_quoted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], lines: str, says: str
) -> None:
    code, err = validate(tmp_path, _parameter(lines), capsys)
    assert code == INVALID
    assert err.strip().endswith(says), err


@pytest.mark.parametrize(
    "lines", [row[1] for row in DEFAULTS_ACCEPTED], ids=[row[0] for row in DEFAULTS_ACCEPTED]
)
def test_a_default_that_fits_is_accepted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], lines: str
) -> None:
    code, err = validate(tmp_path, _parameter(lines), capsys)
    assert code == OK, err


def test_the_webhook_checks_a_default_in_the_same_words() -> None:
    spec = {
        "spotlight": {},
        "parameters": {"n": {"label": "N", "type": "number", "options": [1], "default": "x"}},
    }
    assert spec_problems(spec) == ["spec.parameters.n.default: 'x' is not a number"]


# A custom granularity named like a standard grain could never be offered: a dimension's
# time_intervals and additional_time_intervals read the name as the standard grain.
STANDARD_GRAIN_NAMES = ["week", "MONTH_NAME", "Day_Of_Week_Index", "raw"]


@pytest.mark.parametrize("name", STANDARD_GRAIN_NAMES)
def test_a_custom_granularity_named_like_a_standard_grain_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    grain = name.upper()
    text = (
        "spotlight: {}\ncustom_granularities:\n  fiscal_quarter:\n    label: FQ\n"
        f"    sql: ${{COLUMN}}\n  {name}:\n    label: Mine\n    sql: ${{COLUMN}}\n"
    )
    code, err = validate(tmp_path, text, capsys)
    assert code == INVALID
    rule = (
        f"{name!r} is the standard grain {grain}: time intervals read the name as that grain, "
        "so this granularity could never be offered; give it a name of its own"
    )
    assert err.strip().endswith(f":6: custom_granularities.{name}.[key]: {rule}"), err
    # The webhook's and the operator's words are the same.
    spec = {"spotlight": {}, "custom_granularities": {name: {"label": "M", "sql": "${COLUMN}"}}}
    assert spec_problems(spec) == [f"spec.custom_granularities.{name}.[key]: {rule}"]


HOSTILE: list[tuple[str, str | bytes, str]] = [
    ("an empty file", "", ":1: the file is empty; it must be a mapping of sections"),
    ("a comment only", "# nothing yet\n", ":1: the file is empty"),
    ("a top-level list", "- spotlight\n", ":1: the file is a list; it must be a mapping"),
    ("a top-level string", "spotlight\n", ":1: the file is a str; it must be a mapping"),
    ("broken YAML", "spotlight: {\n", ":2: not valid YAML"),
    ("bad indentation", "spotlight:\n  a: 1\n b: 2\n", ":3: not valid YAML"),
    ("not UTF-8", b"spotlight: {}\n# caf\xe9\n", ":2: not UTF-8 text (byte 0xe9)"),
    (
        "two documents",
        "spotlight: {}\n---\nspotlight: {}\n",
        ":2: not valid YAML: expected a single",
    ),
    ("an alias bomb", _alias_bomb(), "expands to more than 100,000 values"),
    (
        "an alias inside itself",
        "spotlight: &s {categories: *s}\n",
        "refers to a node that contains it",
    ),
    ("deep flow nesting", "spotlight: " + "[" * 20_000, ":1: not valid YAML: nested more than 64"),
    # Closing brackets in strings hide the depth from a count of brackets.
    ("hidden flow nesting", "spotlight: " + '["]", ' * 3_000, ":1: not valid YAML: nested more"),
    ("YAML 1.1 asked for", "%YAML 1.1\n---\nspotlight: {}\n", ":1: only YAML 1.2 is read"),
    (
        "an integer past Python's digits",
        "spotlight: {}\nx: " + "9" * 5_000 + "\n",
        ":2: an integer",
    ),
    ("an explicit bool that is not one", "spotlight: !!bool yes\n", ":1: 'yes' is not a boolean"),
    (
        "two merge keys",
        "a: &a {x: 1}\nb: &b {y: 2}\nspotlight:\n  <<: *a\n  <<: *b\n",
        ":5: a second merge key (first on line 4)",
    ),
    (
        "a long string used many times",
        'spotlight: {}\nx: &s "' + "x" * 200_000 + '"\ny: [' + ", ".join(["*s"] * 50) + "]\n",
        "expands to more than 1,048,576 characters",
    ),
    ("deep block nesting", "".join(" " * i + "k:\n" for i in range(600)), "nested more than 64"),
    ("a custom tag", "spotlight: !include other.yml\n", ":1: the tag !include is not supported"),
    ("a mapping as a key", "? {a: 1}\n: x\n", ":1: a key must be a string"),
    (
        "larger than the API server stores",
        "spotlight: {}\nparameters:\n"
        + "".join(
            f"  p{i}:\n    label: {'x' * 200}\n    allow_custom_values: true\n"
            for i in range(12_000)
        ),
        ":1: the file is larger than 262,144 bytes",
    ),
]


@pytest.mark.parametrize(
    ("text", "code", "says"),
    [row[1:] for row in YAML_AS_MEANT],
    ids=[row[0] for row in YAML_AS_MEANT],
)
def test_yaml_is_read_as_users_mean_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, code: int, says: str
) -> None:
    got, err = validate(tmp_path, text, capsys)
    assert got == code, err
    if code == OK:
        return
    assert says in err, err


def test_values_are_read_with_yaml_1_2_types() -> None:
    document = parse(
        b"a: NO\nb: on\nc: 017\nd: 0o17\ne: 0x1F\nf: 1_000\ng: .inf\nh: ~\n"
        b"i: 2024-01-31\nj: True\n",
        "f.yml",
        1024,
    )
    assert document.data == {
        "a": "NO",
        "b": "on",
        "c": 17,
        "d": 15,
        "e": 31,
        "f": "1_000",
        "g": float("inf"),
        "h": None,
        "i": "2024-01-31",
        "j": True,
    }
    assert document.line_of(("i",)) == 9


@pytest.mark.parametrize(
    ("text", "says"), [row[1:] for row in HOSTILE], ids=[row[0] for row in HOSTILE]
)
def test_hostile_files_are_refused_with_one_line_and_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str | bytes, says: str
) -> None:
    tracemalloc.start()
    started = time.perf_counter()
    try:
        code, err = validate(tmp_path, text, capsys)
        took, (_, peak) = time.perf_counter() - started, tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert code == INVALID, err
    assert len(err.splitlines()) == 1, err
    assert err.startswith(str(tmp_path / "service.config.yml")), err
    assert says in err, err
    assert "Traceback" not in err
    # Bounds, not timings: a bomb once took past 60 s and 6 GB.
    assert took < 10
    assert peak < 200 * 1024 * 1024


def _compiled_status(spec: dict[str, Any]) -> ProjectConfigStatus:
    compiled = compile_config(ServiceConfig.model_validate(spec))
    warnings = fitted_warnings(compiled.warnings)
    return ProjectConfigStatus.model_validate(
        {
            "warnings": [{"rule": w.rule, "path": w.path, "message": w.message} for w in warnings],
            "compiled": CompiledConfig.of(compiled),
        }
    )


FITS: list[tuple[str, dict[str, Any], str]] = [
    (
        "more than 64 effective time intervals",
        {
            "custom_granularities": {
                f"g{i}": {"label": "G", "sql": "${COLUMN}"} for i in range(90)
            },
            "defaults": {"additional_time_intervals": {"date": [f"g{i}" for i in range(90)]}},
        },
        "TooManyTimeIntervals",
    ),
    (
        "more than 256 warnings",
        {"defaults": {"granularity_labels": {f"fortnight{i}": "F" for i in range(400)}}},
        "MoreWarnings",
    ),
    (
        "a 2,000-character interval name",
        {"defaults": {"additional_time_intervals": {"timestamp": ["x" * 2_000]}}},
        "UnknownTimeInterval",
    ),
]


@pytest.mark.parametrize(("spec", "rule"), [row[1:] for row in FITS], ids=[row[0] for row in FITS])
def test_what_validates_compiles_to_a_status_the_crd_accepts(
    spec: dict[str, Any], rule: str
) -> None:
    status = _compiled_status({"spotlight": {}, **spec})
    assert rule in [warning.rule for warning in status.warnings]
    assert len(status.warnings) <= MAX_WARNINGS


def test_the_count_of_warnings_left_out_is_said() -> None:
    status = _compiled_status(
        {"spotlight": {}, "defaults": {"granularity_labels": {f"f{i}": "F" for i in range(400)}}}
    )
    assert status.warnings[-1].message.startswith("145 more warnings are not listed")


def test_a_spec_too_large_to_store_is_refused_by_the_webhooks_check() -> None:
    spec = {"spotlight": {"categories": {f"c{i}": {"label": "x" * 200} for i in range(2_000)}}}
    assert spec_problems(spec) == [
        "spec: the file is 440,920 bytes as JSON; at most 262,144 are stored"
    ]


def test_an_unknown_key_is_named_as_one() -> None:
    problems = spec_problems({"spotlight": {}, "defaults": {"case_sensitve": False}})
    assert problems == [
        "spec.defaults.case_sensitve: unknown key (misspelt, or not a setting of this section)"
    ]


def test_what_deploy_applies_keeps_country_codes_as_written(tmp_path: Path) -> None:
    (tmp_path / "dbt_project.yml").write_text("name: shop\n")
    (tmp_path / "service.config.yml").write_text(
        "spotlight: {}\nparameters:\n  country:\n    label: Country\n"
        "    options: [NO, SE, DK]\n    default: NO\n"
    )
    found = service_cli.find(tmp_path)
    assert found is not None
    [applied] = [
        document.model_dump(by_alias=True)
        for _, document in service_cli.documents(found, "project", preview=False)
    ]
    assert applied["spec"]["parameters"]["country"] == {
        "label": "Country",
        "options": ["NO", "SE", "DK"],
        "default": "NO",
    }


def test_a_value_that_is_not_a_boolean_is_quoted_wherever_it_is_checked() -> None:
    # The webhook's and the operator's words.
    assert spec_problems(
        {"spotlight": {}, "parameters": {"p": {"label": "P", "options": ["a"], "multiple": 1}}}
    ) == ["spec.parameters.p.multiple: 1 is not a boolean: write true or false"]
    # The defaults API's.
    with pytest.raises(ValidationError) as refused:
        DefaultsUpdate.model_validate_json('{"column_totals": "no"}')
    assert validation_message(refused.value) == (
        "column_totals: 'no' is not a boolean: write true or false"
    )
