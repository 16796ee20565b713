"""service.config.yml against the dbt project's models: each row a model file a user wrote.

The example project (``examples/project``) is copied, one models file is written into it, and
``gatehouse-service validate`` (and ``deploy``, which must refuse before reaching any cluster)
runs in-process. Each expected line is ``file:line: message``.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from gatehouse_operator.api.project_config import CompiledConfig
from gatehouse_operator.cli import service_cli
from gatehouse_operator.project_config import dbt_project
from gatehouse_operator.project_config.compiler import Compiled, compile_config
from gatehouse_operator.project_config.schema import ServiceConfig, spec_problems

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "project"
INVALID, OK = service_cli.INVALID, service_cli.OK


@pytest.fixture
def project(tmp_path: Path) -> Path:
    shutil.copytree(EXAMPLE, tmp_path / "project")
    shutil.rmtree(tmp_path / "project" / "models")
    (tmp_path / "project" / "models").mkdir()
    return tmp_path / "project"


def run(capsys: pytest.CaptureFixture[str], project: Path, *args: str) -> tuple[int, str, str]:
    code = service_cli.main([*args, "--project-dir", str(project)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def model_file(body: str) -> str:
    return "version: 2\nmodels:\n  - name: orders\n" + body


def metric_file(spotlight: str, model_meta: str = "") -> str:
    """The model orders with a few dimensions and the metric total, whose meta holds the
    ``spotlight`` lines (its spotlight key on line 16)."""
    return model_file(
        (f"    meta:\n{model_meta}" if model_meta else "")
        + "    columns:\n      - name: status\n      - name: amount\n"
        "      - name: ordered_at\n        meta:\n          dimension:\n"
        "            type: timestamp\n            time_intervals: [DAY, MONTH, day_of_shift]\n"
        "          metrics:\n            total:\n              type: count\n"
        + "".join(f"              {line}\n" for line in spotlight.splitlines())
    )


def dimension_file(column: str, lines: str) -> str:
    """A model file with one column whose meta.dimension holds ``lines``."""
    return model_file(
        f"    columns:\n      - name: {column}\n        meta:\n          dimension:\n"
        + "".join(f"            {line}\n" for line in lines.splitlines())
    )


CASES: list[tuple[str, str, int, str]] = [
    (
        "a misspelt parameter in a metric's SQL",
        model_file(
            "    columns:\n      - name: amount\n        meta:\n          metrics:\n"
            "            big:\n              type: sum\n"
            "              sql: IF(${TABLE}.amount > ${sv.parameters.min-order-valeu}, 1, 0)\n"
        ),
        INVALID,
        "orders.yml:10: model orders: ${service.parameters.min-order-valeu} names no parameter "
        "of service.config.yml or of the model (did you mean 'min-order-value'?)",
    ),
    (
        "a parameter in a model's sql_filter, defined by the model",
        model_file(
            "    meta:\n      sql_filter: ${TABLE}.shop = ${service.parameters.shop}\n"
            "      parameters:\n        shop:\n          label: Shop\n"
            "          allow_custom_values: true\n"
        ),
        OK,
        "",
    ),
    (
        "a model-scoped parameter, as the reference writes it",
        model_file(
            "    meta:\n      sql_filter: ${TABLE}.shop = ${sv.parameters.orders.shop}\n"
            "      parameters:\n        shop:\n          label: Shop\n"
            "          allow_custom_values: true\n"
        ),
        OK,
        "",
    ),
    (
        "a joined model's parameter, with the long prefix",
        "version: 2\nmodels:\n  - name: stores\n    meta:\n      parameters:\n"
        "        tier:\n          label: Tier\n          options: [a, b]\n"
        "    columns:\n      - name: name\n"
        "  - name: orders\n    meta:\n      joins:\n        - join: stores\n"
        "          sql_on: ${orders.store} = ${stores.name}\n"
        "      sql_filter: ${stores.tier} = ${service.parameters.stores.tier}\n",
        OK,
        "",
    ),
    (
        "a model-scoped parameter the model does not define",
        model_file(
            "    meta:\n      sql_filter: ${TABLE}.shop = ${sv.parameters.orders.shpo}\n"
            "      parameters:\n        shop:\n          label: Shop\n"
            "          allow_custom_values: true\n"
        ),
        INVALID,
        "orders.yml:5: model orders: ${service.parameters.orders.shpo} names no parameter of "
        "the model orders (did you mean 'shop'?)",
    ),
    (
        "a model-scoped parameter of a model no .yml describes",
        model_file("    meta:\n      sql_filter: ${TABLE}.x = ${sv.parameters.order.shop}\n"),
        INVALID,
        "orders.yml:5: model orders: ${service.parameters.order.shop} names the model 'order', "
        "which no .yml describes (did you mean 'orders'?)",
    ),
    (
        "a model-scoped parameter of a model not joined",
        "version: 2\nmodels:\n  - name: stores\n    meta:\n      parameters:\n"
        "        tier:\n          label: Tier\n          options: [a, b]\n"
        "    columns:\n      - name: name\n"
        "  - name: orders\n    meta:\n"
        "      sql_filter: ${TABLE}.tier = ${sv.parameters.stores.tier}\n",
        INVALID,
        "orders.yml:13: model orders: ${service.parameters.stores.tier} is a parameter of the "
        "model stores, which orders does not join (a query has only its own model's and its "
        "joined models' parameters)",
    ),
    (
        "two dots are not a reference",
        model_file("    meta:\n      sql_filter: ${TABLE}.r = ${sv.parameters.a.b.c}\n"),
        INVALID,
        "orders.yml:5: model orders: ${sv.parameters.a.b.c} is not a parameter reference, and "
        "would stay in the SQL as written: write ${sv.parameters.NAME} or "
        "${sv.parameters.MODEL.NAME}",
    ),
    (
        "date_zoom is reserved",
        model_file("    meta:\n      sql_where: ${sv.parameters.date_zoom} = 'day'\n"),
        OK,
        "",
    ),
    (
        "a reference with a typo in its prefix",
        model_file("    meta:\n      sql_filter: ${TABLE}.r = ${sv.parameter.region}\n"),
        INVALID,
        "orders.yml:5: model orders: ${sv.parameter.region} is not a parameter reference, and "
        "would stay in the SQL as written: write ${sv.parameters.NAME} or "
        "${sv.parameters.MODEL.NAME}",
    ),
    (
        "a time interval that is not a name",
        dimension_file("ordered_at", "type: timestamp\ntime_intervals: [[DAY]]"),
        INVALID,
        "model orders, dimension ordered_at: a time interval must be a name, not ['DAY']",
    ),
    (
        "a time interval that is no grain nor custom granularity",
        dimension_file("ordered_at", "type: timestamp\ntime_intervals: [DAY, fiscal_qtr]"),
        INVALID,
        "orders.yml:9: model orders, dimension ordered_at: the time interval 'fiscal_qtr' is "
        "neither a standard grain nor a custom granularity of service.config.yml "
        "(did you mean 'fiscal_quarter'?)",
    ),
    (
        "time_intervals: OFF",
        dimension_file("ordered_at", "type: timestamp\ntime_intervals: OFF"),
        OK,
        "",
    ),
    (
        "a sub-day grain on a date dimension",
        dimension_file("ordered_on", "type: date\ntime_intervals: [hour, DAY]"),
        OK,
        "orders.yml:9: warning: model orders, dimension ordered_on: the sub-day time interval "
        "'hour' does not apply to a date dimension",
    ),
    (
        "parts of a date from the reference's TimeFrames, in any case",
        dimension_file(
            "ordered_on",
            "type: date\ntime_intervals: [DAY, MONTH_NAME, day_of_week_index, QUARTER_NUM]",
        ),
        OK,
        "",
    ),
    (
        "the hour of the day on a date dimension",
        dimension_file("ordered_on", "type: date\ntime_intervals: [DAY, HOUR_OF_DAY_NUM]"),
        OK,
        "orders.yml:9: warning: model orders, dimension ordered_on: the sub-day time interval "
        "'HOUR_OF_DAY_NUM' does not apply to a date dimension",
    ),
    (
        "groups nested five deep, as the reference allows",
        model_file("    meta:\n      groups: [sales, sales-emea, marketing, nordics, oslo]\n"),
        OK,
        "",
    ),
    (
        "groups nested six deep",
        model_file("    meta:\n      groups: [sales, sales-emea, marketing, nordics, oslo, b2b]\n"),
        INVALID,
        "orders.yml:5: model 'orders': meta.groups nests 6 levels deep "
        "(sales > sales-emea > marketing > nordics > oslo > b2b); at most 5 are allowed",
    ),
    (
        "a group key table_groups does not define",
        model_file("    meta:\n      groups: [sales, salse-emea]\n"),
        OK,
        "orders.yml:5: warning: model orders: the group 'salse-emea' is not in table_groups, "
        "so 'salse-emea' is its label (did you mean 'sales-emea'?)",
    ),
    (
        "a model's undefined category",
        model_file("    meta:\n      spotlight:\n        categories: [revenue, finance]\n"),
        INVALID,
        "orders.yml:6: model orders: the category 'finance' is not defined in spotlight.categories",
    ),
    (
        "a metric's undefined category, under dbt's config.meta",
        model_file(
            "    columns:\n      - name: amount\n        config:\n          meta:\n"
            "            metrics:\n              total:\n                type: sum\n"
            "                spotlight: {categories: [grwoth]}\n"
        ),
        INVALID,
        "orders.yml:11: model orders, metric total: the category 'grwoth' is not defined in "
        "spotlight.categories (did you mean 'growth'?)",
    ),
    (
        "a model's visibility that is neither show nor hide",
        model_file("    meta:\n      spotlight:\n        visibility: maybe\n"),
        INVALID,
        "orders.yml:6: model orders: spotlight.visibility: 'maybe' is not one of 'show' or 'hide'",
    ),
    (
        "a metric's spotlight with a key it cannot set",
        model_file(
            "    columns:\n      - name: amount\n        meta:\n"
            "          metrics:\n            total:\n              type: sum\n"
            "              spotlight: {visibility: hide, colour: red}\n"
        ),
        INVALID,
        "orders.yml:10: model orders, metric total: spotlight.colour: unknown key (a metric "
        "sets visibility, categories, owner, filter_by, segment_by, default_segment and "
        "default_filter)",
    ),
    (
        "catalog metadata as the reference writes it",
        metric_file(
            "spotlight:\n  owner: ana@shop.example\n  filter_by: [status, ordered_at]\n"
            "  segment_by: [status, ordered_at_month, ordered_at_day_of_shift]\n"
            "  default_segment: status\n  default_filter:\n    status: [completed, shipped]",
            model_meta="      spotlight:\n        owner: finance@shop.example\n",
        ),
        OK,
        "",
    ),
    (
        "a default filter of the reference's filter syntax, or null",
        metric_file("spotlight:\n  default_filter: {status: '!returned'}"),
        OK,
        "",
    ),
    (
        "an owner that is not a string is ignored with a warning",
        metric_file("spotlight:\n  owner: 42"),
        OK,
        "orders.yml:16: warning: model orders, metric total: spotlight.owner: 42 is not a "
        "string (a name or an email), so it is ignored",
    ),
    (
        "filter_by naming no dimension of the model",
        metric_file("spotlight:\n  filter_by: [stauts]"),
        INVALID,
        "orders.yml:16: model orders, metric total: spotlight.filter_by: 'stauts' is not a "
        "dimension of the model orders (did you mean 'status'?)",
    ),
    (
        "segment_by written as one name",
        metric_file("spotlight:\n  segment_by: status"),
        INVALID,
        "orders.yml:16: model orders, metric total: spotlight.segment_by: must be a list of "
        "dimension names, not 'status'",
    ),
    (
        "a time interval the dimension does not offer",
        metric_file("spotlight:\n  segment_by: [ordered_at_hour]"),
        INVALID,
        "spotlight.segment_by: 'ordered_at_hour' is not a dimension of the model orders "
        "(did you mean 'ordered_at'?)",
    ),
    (
        "a default segment that segment_by leaves out",
        metric_file("spotlight:\n  segment_by: [status]\n  default_segment: amount"),
        INVALID,
        "orders.yml:17: model orders, metric total: spotlight.default_segment: 'amount' is not "
        "one of segment_by (status)",
    ),
    (
        "a default filter on two dimensions",
        metric_file("spotlight:\n  default_filter: {status: completed, amount: 5}"),
        INVALID,
        "orders.yml:16: model orders, metric total: spotlight.default_filter: must be one "
        "dimension and its value (status: completed), not {'status': 'completed', 'amount': 5}",
    ),
    (
        "a default filter on a dimension filter_by leaves out",
        metric_file("spotlight:\n  filter_by: [status]\n  default_filter: {amount: 5}"),
        INVALID,
        "spotlight.default_filter: 'amount' is not one of filter_by (status)",
    ),
    (
        "a default filter on no dimension",
        metric_file("spotlight:\n  default_filter: {stats: completed}"),
        INVALID,
        "spotlight.default_filter: 'stats' is not a dimension of the model orders "
        "(did you mean 'status'?)",
    ),
    (
        "a default filter whose value is a mapping",
        metric_file("spotlight:\n  default_filter: {status: {is: completed}}"),
        INVALID,
        "spotlight.default_filter: {'is': 'completed'} is not a value of status: give a value, "
        "a list of values or null",
    ),
    (
        "a metric's setting on the model",
        model_file("    meta:\n      spotlight:\n        filter_by: [status]\n"),
        INVALID,
        "orders.yml:6: model orders: spotlight.filter_by: a metric's setting, not a model's "
        "(the reference reads it from each metric): set it in the spotlight of the metrics it "
        "is for",
    ),
    (
        "a model's own parameter of a type the file's schema lacks",
        model_file(
            "    meta:\n      parameters:\n        region:\n          label: Region\n"
            "          type: text\n          options: [EU, US]\n"
        ),
        INVALID,
        "orders.yml:8: model orders: parameters.region.type: 'text' is not one of 'string', "
        "'number' or 'date'",
    ),
    (
        "a model's own parameter with a default outside its options",
        model_file(
            "    meta:\n      parameters:\n        region:\n          label: Region\n"
            "          options: [EU, US]\n          default: APAC\n"
        ),
        INVALID,
        "orders.yml:9: model orders: parameters.region.default: 'APAC' is not one of the "
        "options 'EU' or 'US' (allow_custom_values is not true)",
    ),
    (
        "a model's own parameter with no values",
        model_file("    meta:\n      parameters:\n        region:\n          label: Region\n"),
        INVALID,
        "model orders: parameters.region: Value error, a parameter needs options, "
        "options_from_dimension or allow_custom_values: true",
    ),
    (
        "case_sensitive: yes on a model",
        model_file("    meta:\n      case_sensitive: yes\n"),
        INVALID,
        "orders.yml:5: model orders: case_sensitive must be true or false, not 'yes'",
    ),
    (
        "case_sensitive: 0 on a dimension",
        dimension_file("status", "case_sensitive: 0"),
        INVALID,
        "orders.yml:8: model orders, dimension status: case_sensitive must be true or false, not 0",
    ),
    (
        "a key written twice in a model file",
        model_file("    meta:\n      groups: [sales]\n      groups: [marketing]\n"),
        INVALID,
        "orders.yml:6: the key 'groups' is written twice (first on line 5)",
    ),
    (
        "options_from_dimension naming a column the model lacks",
        "version: 2\nmodels:\n  - name: stores\n    columns:\n      - name: title\n",
        INVALID,
        "service.config.yml:36: parameter store: options_from_dimension: the model stores has "
        "no column 'name'",
    ),
]


@pytest.mark.parametrize(
    ("models", "code", "says"), [row[1:] for row in CASES], ids=[row[0] for row in CASES]
)
def test_the_file_is_checked_against_the_models(
    capsys: pytest.CaptureFixture[str], project: Path, models: str, code: int, says: str
) -> None:
    (project / "models" / "orders.yml").write_text(models)
    got, _, err = run(capsys, project, "validate")
    assert got == code, err
    if says:
        assert any(line.endswith(says) for line in err.splitlines()), err
    if code == INVALID:
        deployed, _, err = run(capsys, project, "deploy", "-n", "shop")
        assert deployed == INVALID, err  # refused before any cluster is reached


def test_a_custom_granularity_removed_while_a_model_uses_it_is_refused(
    capsys: pytest.CaptureFixture[str], project: Path
) -> None:
    (project / "models" / "orders.yml").write_text(
        dimension_file("ordered_at", "type: timestamp\ntime_intervals: [day_of_shift]")
    )
    assert run(capsys, project, "validate")[0] == OK
    config = project / "service.config.yml"
    config.write_text(config.read_text().replace("  day_of_shift:", "  shift_of_day:"))
    code, _, err = run(capsys, project, "deploy", "-n", "shop")
    assert code == INVALID
    assert "the time interval 'day_of_shift' is neither" in err


def test_overlapping_and_absolute_model_paths_read_each_file_once(
    capsys: pytest.CaptureFixture[str], project: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "shared-models"
    elsewhere.mkdir()
    (elsewhere / "stores.yml").write_text(
        "version: 2\nmodels:\n  - name: stores\n    columns:\n      - name: name\n"
    )
    (project / "models" / "marts").mkdir()
    (project / "models" / "marts" / "orders.yml").write_text(model_file(""))
    (project / "dbt_project.yml").write_text(
        f"name: shop\nmodel-paths: [models, models/marts, {elsewhere}]\n"
    )
    code, out, err = run(capsys, project, "validate")
    assert code == OK, err
    assert "2 model(s)" in out


def test_the_model_paths_of_dbt_project_yml_are_read(
    capsys: pytest.CaptureFixture[str], project: Path
) -> None:
    (project / "dbt_project.yml").write_text("name: shop\nmodel-paths: [marts]\n")
    (project / "marts" / "finance").mkdir(parents=True)
    (project / "marts" / "finance" / "orders.yaml").write_text(
        model_file("    meta:\n      case_sensitive: nope\n")
    )
    (project / "models" / "ignored.yml").write_text(model_file("    meta:\n      groups: 1\n"))
    code, _, err = run(capsys, project, "validate")
    assert code == INVALID
    errors = [line for line in err.splitlines() if ": warning: " not in line]
    assert len(errors) == 1, err
    assert errors[0].endswith(
        "marts/finance/orders.yaml:5: model orders: case_sensitive must be true or false, "
        "not 'nope'"
    ), err


EXPLAINED = [
    (
        "orders",
        [
            "  sidebar: Sales > EMEA  (meta.groups: sales > sales-emea)",
            "  case sensitive: true  (from the model's meta.case_sensitive)",
            "  sql_filter: ${TABLE}.region IN ('EMEA')",
            "  metric revenue (sum): CASE WHEN ${TABLE}.amount >= 25 THEN ${TABLE}.amount END",
        ],
    ),
    (
        # Written for the reference: catalog metadata, a model-scoped parameter, five levels.
        "payments",
        [
            "  sidebar: Sales > EMEA > Finance > Billing > Card payments  "
            "(meta.groups: sales > sales-emea > finance > billing > cards)",
            "  sql_filter: ${TABLE}.method IN ('card', 'gift_card')",
            "  catalog: visibility show, categories revenue, owner finance@jaffle.shop "
            "(the model's spotlight.owner)",
            "  metric total_paid (sum): (the column)",
            "    catalog: visibility show, categories revenue, growth, owner ana@jaffle.shop "
            "(the metric's spotlight.owner)",
            "    filter by: method, status",
            "    segment by: method, paid_at_month (default method)",
            '    default filter: status: "completed"',
            "    catalog: visibility hide, categories revenue, owner finance@jaffle.shop "
            "(the model's spotlight.owner)",
        ],
    ),
    (
        "orders.ordered_at",
        [
            "  time intervals: DAY, WEEK, MONTH, fiscal_quarter, day_of_shift  "
            "(from the dimension's own time_intervals)",
            "    WEEK: Ordered at Fiscal week",
            "    day_of_shift: Shift -> ordered_at_day_of_shift (string): CASE WHEN EXTRACT(hour "
            "FROM ${TABLE}.ordered_at) < 14 THEN 'early' ELSE 'late' END",
        ],
    ),
    (
        "stores.opened_on",
        [
            "  case sensitive: false  (from defaults.case_sensitive in service.config.yml)",
            "  time intervals: DAY, WEEK, MONTH, QUARTER, YEAR, fiscal_quarter  "
            "(from built-ins + defaults.additional_time_intervals.date)",
            "    QUARTER: Opened on Calendar quarter",
            "    fiscal_quarter: Fiscal quarter -> opened_on_fiscal_quarter (date): "
            "DATE_TRUNC('quarter', DATEADD('month', 1, CAST(${TABLE}.opened_at AS DATE)))",
        ],
    ),
    (
        "orders.status",
        ["  case sensitive: false  (from the dimension's case_sensitive)"],
    ),
]


@pytest.mark.parametrize(("target", "lines"), EXPLAINED, ids=[row[0] for row in EXPLAINED])
def test_explain_prints_what_the_rules_resolve_to(
    capsys: pytest.CaptureFixture[str], target: str, lines: list[str]
) -> None:
    code, out, err = run(capsys, EXAMPLE, "explain", target)
    assert code == OK, err
    for line in lines:
        assert line in out.splitlines(), out


def test_explain_substitutes_dates_as_dates(
    capsys: pytest.CaptureFixture[str], project: Path
) -> None:
    (project / "models" / "orders.yml").write_text(
        model_file(
            "    meta:\n      sql_filter: ${TABLE}.day >= ${sv.parameters.from}\n"
            "      parameters:\n        from:\n          label: From\n          type: date\n"
            "          allow_custom_values: true\n          default: 2024-01-31\n"
        )
    )
    code, out, err = run(capsys, project, "explain", "orders")
    assert code == OK, err
    assert "  sql_filter: ${TABLE}.day >= CAST('2024-01-31' AS DATE)" in out.splitlines()


def test_explain_substitutes_model_scoped_parameters(
    capsys: pytest.CaptureFixture[str], project: Path
) -> None:
    (project / "models" / "orders.yml").write_text(
        "version: 2\nmodels:\n  - name: stores\n    meta:\n      parameters:\n"
        "        tier:\n          label: Tier\n          options: [gold, silver]\n"
        "          default: gold\n    columns:\n      - name: name\n"
        "  - name: orders\n    meta:\n      joins:\n        - join: stores\n"
        "          sql_on: ${orders.store} = ${stores.name}\n"
        "      sql_filter: ${stores.tier} = ${sv.parameters.stores.tier} AND ${TABLE}.n > "
        "${sv.parameters.orders.least}\n"
        "      parameters:\n        least:\n          label: Least\n          type: number\n"
        "          allow_custom_values: true\n          default: 3\n"
    )
    code, out, err = run(capsys, project, "explain", "orders")
    assert code == OK, err
    assert "  sql_filter: ${stores.tier} = 'gold' AND ${TABLE}.n > 3" in out.splitlines(), out


def test_a_custom_granularity_inherits_the_dimensions_attributes_and_explain_shows_them(
    capsys: pytest.CaptureFixture[str], project: Path
) -> None:
    (project / "models" / "orders.yml").write_text(
        dimension_file(
            "ordered_at",
            "type: timestamp\ntime_intervals: [DAY, fiscal_quarter]\n"
            "required_attributes: {team: finance}\nany_attributes: {region: [emea, apac]}",
        )
    )
    code, out, err = run(capsys, project, "explain", "orders.ordered_at")
    assert code == OK, err
    lines = out.splitlines()
    at = lines.index(
        "    fiscal_quarter: Fiscal quarter -> ordered_at_fiscal_quarter (date): "
        "DATE_TRUNC('quarter', DATEADD('month', 1, ${TABLE}.ordered_at))"
    )
    assert lines[at + 1 : at + 3] == [
        '      requiredAttributes (inherited from ordered_at): {"team": "finance"}',
        '      anyAttributes (inherited from ordered_at): {"region": ["emea", "apac"]}',
    ]


def test_explain_shows_each_part_of_a_date_in_words(
    capsys: pytest.CaptureFixture[str], project: Path
) -> None:
    (project / "models" / "orders.yml").write_text(
        dimension_file("ordered_on", "type: date\ntime_intervals: [month_name, DAY_OF_WEEK_INDEX]")
    )
    code, out, err = run(capsys, project, "explain", "orders.ordered_on")
    assert code == OK, err
    lines = out.splitlines()
    assert "    MONTH_NAME: Ordered on Month name" in lines, out
    assert "    DAY_OF_WEEK_INDEX: Ordered on Day of week index" in lines, out


@pytest.mark.parametrize(
    ("target", "says"),
    [
        ("order", "no model .yml describes 'order' (did you mean 'orders'?)"),
        ("orders.statu", "the model orders has no column 'statu' (did you mean 'status'?)"),
    ],
)
def test_explain_names_what_is_missing(
    capsys: pytest.CaptureFixture[str], target: str, says: str
) -> None:
    code, _, err = run(capsys, EXAMPLE, "explain", target)
    assert code == INVALID
    assert err.strip() == f"gatehouse-service: {says}"


def _as_status(compiled: Compiled) -> dict[str, Any]:
    """The compiled result as the status writer writes it."""
    return CompiledConfig.of(compiled).model_dump(by_alias=True, exclude_unset=True, mode="json")


def test_deploy_sends_the_models_catalog_resolved_under_a_manager_of_its_own(
    project: Path,
) -> None:
    """What explain shows of a model's catalog metadata reaches the ProjectConfig: the file
    alone never held it."""
    (project / "models" / "orders.yml").write_text(
        metric_file(
            "spotlight:\n  owner: ana@shop.example\n  categories: [growth]\n"
            "  filter_by: [status, ordered_at]\n  segment_by: [status, ordered_at_month]\n"
            "  default_segment: status\n  default_filter:\n    status: [completed, shipped]",
            model_meta="      spotlight:\n        owner: finance@shop.example\n"
            "        categories: [revenue]\n",
        )
    )
    found = service_cli.find(project)
    assert found is not None
    checked = service_cli.check(found, dbt_project.read(project))
    assert checked.config is not None
    assert checked.compiled is not None
    models = service_cli.models_catalog(checked.config, checked.compiled, dbt_project.read(project))
    applies = [
        (manager, document.model_dump(by_alias=True))
        for manager, document in service_cli.documents(found, "project", False, models)
    ]
    assert [manager for manager, _ in applies][-1] == service_cli.CATALOG_MANAGER
    sent = applies[-1][1]["spec"]
    assert list(sent) == ["catalog"]
    orders = sent["catalog"]["orders"]
    assert (orders["visibility"], orders["categories"], orders["owner"]) == (
        "show",
        ["revenue"],
        "finance@shop.example",
    )
    assert {"status", "amount", "ordered_at", "ordered_at_month"} <= set(orders["dimensions"])
    assert orders["metrics"]["total"] == {
        "visibility": "show",
        "categories": ["revenue", "growth"],
        "owner": "ana@shop.example",
        "filter_by": ["status", "ordered_at"],
        "segment_by": ["status", "ordered_at_month"],
        "default_segment": "status",
        "default_filter": {"status": ["completed", "shipped"]},
    }
    # What the webhook and the operator check of the spec deploy makes; and the status keeps it.
    spec = {key: value for _, applied in applies for key, value in applied["spec"].items()}
    assert spec_problems(spec) == []
    compiled = compile_config(ServiceConfig.model_validate(spec))
    assert compiled.warnings == []
    kept = _as_status(compiled)["catalog"]["orders"]
    assert "dimensions" not in kept
    assert kept["owner"] == "finance@shop.example"
    assert kept["metrics"]["total"] == orders["metrics"]["total"]


def test_a_catalog_edited_by_hand_keeps_only_what_its_model_has(project: Path) -> None:
    """The compiler drops, with a warning naming the path and the rule, a setting deploy would
    have refused: one rule, the CLI's."""
    spec = {
        "spotlight": {"categories": {"revenue": {"label": "Revenue"}}},
        "catalog": {
            "orders": {
                "categories": ["revenue", "nowhere"],
                "dimensions": ["status", "amount"],
                "metrics": {
                    "total": {
                        "filter_by": ["status", "colour"],
                        "default_segment": "amount",
                        "default_filter": {"status": "completed"},
                    }
                },
            }
        },
    }
    assert spec_problems(spec) == []
    compiled = compile_config(ServiceConfig.model_validate(spec))
    assert [(w.rule, w.path) for w in compiled.warnings] == [
        ("UnknownCatalogDimension", "catalog.orders.metrics.total.filter_by"),
        ("UnknownCatalogCategory", "catalog.orders.categories"),
    ]
    assert "'colour' is not a dimension of the model orders" in compiled.warnings[0].message
    kept = _as_status(compiled)["catalog"]["orders"]
    assert kept["categories"] == ["revenue"]
    assert kept["metrics"]["total"] == {
        "visibility": "show",
        "categories": [],
        "default_segment": "amount",
        "default_filter": {"status": "completed"},
    }


def test_the_file_cannot_set_the_catalog_deploy_writes(
    capsys: pytest.CaptureFixture[str], project: Path
) -> None:
    config = project / "service.config.yml"
    config.write_text(config.read_text() + "catalog: {}\n")
    code, _, err = run(capsys, project, "validate")
    assert code == INVALID
    assert "catalog: not a key of service.config.yml: deploy writes it from the models'" in err


@pytest.mark.parametrize("command", ["deploy", "validate"])
def test_a_catalog_too_large_to_store_with_the_file_is_refused_before_deploy(
    capsys: pytest.CaptureFixture[str], project: Path, command: str
) -> None:
    columns = "".join(f"      - name: {'c' * 80}{n:05}\n" for n in range(3_200))
    (project / "models" / "orders.yml").write_text(model_file("    columns:\n" + columns))
    code, out, err = run(capsys, project, command)
    assert code == INVALID
    assert out == ""
    assert "service.config.yml:1: the file with its models' catalog is " in err
    assert "bytes as JSON; at most 262,144 are stored" in err
