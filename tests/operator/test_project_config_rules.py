"""service.config.yml's rules, one table per rule, without a cluster."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from gatehouse_operator.project_config import (
    case_sensitivity,
    custom_granularities,
    labels,
    parameters,
    table_groups,
    time_intervals,
)
from gatehouse_operator.project_config.compiler import compile_config
from gatehouse_operator.project_config.schema import CustomGranularity, ServiceConfig, TableGroup


def config(**sections: Any) -> ServiceConfig:
    return ServiceConfig.model_validate({"spotlight": {}, **sections})


# --- time intervals ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "additional", "customs", "expected", "rules"),
    [
        ("date", [], [], ["DAY", "WEEK", "MONTH", "QUARTER", "YEAR"], []),
        ("timestamp", [], [], ["RAW", "DAY", "WEEK", "MONTH", "QUARTER", "YEAR"], []),
        (
            "timestamp",
            ["hour", "Minute"],
            [],
            [*time_intervals.BUILT_IN["timestamp"], "HOUR", "MINUTE"],
            [],
        ),
        ("date", ["week", "DAY"], [], list(time_intervals.BUILT_IN["date"]), []),  # de-duplicated
        ("date", ["HOUR"], [], list(time_intervals.BUILT_IN["date"]), ["SubDayIntervalOnDate"]),
        (
            "date",
            ["raw", "second"],
            [],
            list(time_intervals.BUILT_IN["date"]),
            ["SubDayIntervalOnDate", "SubDayIntervalOnDate"],
        ),
        (
            "timestamp",
            ["fortnight"],
            [],
            list(time_intervals.BUILT_IN["timestamp"]),
            ["UnknownTimeInterval"],
        ),
        (
            "date",
            ["fiscal_quarter"],
            ["fiscal_quarter"],
            [*time_intervals.BUILT_IN["date"], "fiscal_quarter"],
            [],
        ),
        (
            "date",
            ["Fiscal_Quarter"],
            ["fiscal_quarter"],
            list(time_intervals.BUILT_IN["date"]),
            ["UnknownTimeInterval"],
        ),  # custom keys are exact; only standard grains ignore case
    ],
)
def test_additional_time_intervals(
    kind: time_intervals.DimensionType,
    additional: list[str],
    customs: list[str],
    expected: list[str],
    rules: list[str],
) -> None:
    kept, warnings = time_intervals.checked_additional(kind, additional, customs)
    assert time_intervals.effective(kind, kept) == expected
    assert [w.rule for w in warnings] == rules
    assert all(w.path == f"defaults.additional_time_intervals.{kind}" for w in warnings)


def test_the_references_whole_time_frames_list_is_standard_and_its_time_parts_are_sub_day() -> None:
    parts = ["day_of_week_index", "Month_Name", "QUARTER_NAME", "week_num", "year_num"]
    kept, warnings = time_intervals.checked_additional("date", parts, [])
    assert kept == ["DAY_OF_WEEK_INDEX", "MONTH_NAME", "QUARTER_NAME", "WEEK_NUM", "YEAR_NUM"]
    assert warnings == []
    times = ["hour_of_day_num", "MINUTE_OF_HOUR_NUM"]
    kept, warnings = time_intervals.checked_additional("date", times, [])
    assert kept == []
    assert [w.rule for w in warnings] == ["SubDayIntervalOnDate"] * 2
    assert time_intervals.checked_additional("timestamp", times, [])[0] == [
        "HOUR_OF_DAY_NUM",
        "MINUTE_OF_HOUR_NUM",
    ]
    result, unknown = labels.checked_labels({"month_name": "Month", "day_of_week_name": "Weekday"})
    assert result == {"MONTH_NAME": "Month", "DAY_OF_WEEK_NAME": "Weekday"}
    assert unknown == []
    assert labels.grain_label("DAY_OF_WEEK_INDEX", {}) == "Day of week index"


def test_the_warnings_use_the_specs_wording() -> None:
    _, sub_day = time_intervals.checked_additional("date", ["HOUR"], [])
    assert sub_day[0].message == (
        'Ignoring sub-day time interval "HOUR" in defaults.additional_time_intervals.date — not '
        "valid for DATE dimensions."
    )
    _, unknown = time_intervals.checked_additional("timestamp", ["fortnight"], [])
    assert unknown[0].message == (
        'Ignoring unknown time interval "fortnight" in defaults.additional_time_intervals.'
        "timestamp — not a standard granularity or a defined custom_granularity."
    )


@pytest.mark.parametrize(
    ("own", "expected"),
    [
        (None, ["DAY", "WEEK", "MONTH", "QUARTER", "YEAR", "HOUR"]),
        (["month", "fiscal"], ["MONTH", "fiscal"]),
        ([], []),
    ],
)
def test_a_dimensions_own_intervals_win(own: list[str] | None, expected: list[str]) -> None:
    assert time_intervals.effective("date", ["HOUR"], own) == expected


# --- labels -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "kept", "rules"),
    [
        ({"week": "Fiscal week"}, {"WEEK": "Fiscal week"}, []),
        ({"MONTH": "Period"}, {"MONTH": "Period"}, []),
        ({"fortnight": "Two weeks"}, {}, ["UnknownGranularityLabel"]),
        ({"hour": "Hr", "sprint": "Sprint"}, {"HOUR": "Hr"}, ["UnknownGranularityLabel"]),
    ],
)
def test_granularity_labels(given: dict[str, str], kept: dict[str, str], rules: list[str]) -> None:
    result, warnings = labels.checked_labels(given)
    assert result == kept
    assert [w.rule for w in warnings] == rules
    for warning in warnings:
        assert warning.message.startswith('Ignoring unknown granularity "')
        assert "in defaults.granularity_labels — not a standard granularity." in warning.message


@pytest.mark.parametrize(
    ("grain", "expected"), [("week", "Fiscal week"), ("WEEK", "Fiscal week"), ("day", "Day")]
)
def test_a_label_replaces_the_grain_verbatim(grain: str, expected: str) -> None:
    assert labels.grain_label(grain, {"WEEK": "Fiscal week"}) == expected
    assert labels.dimension_label("Order date", grain, {"WEEK": "Fiscal week"}) == (
        f"Order date {expected}"
    )


# --- case sensitivity -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dimension", "explore", "project", "expected"),
    [
        (None, None, None, True),
        (None, None, False, False),
        (None, True, False, True),
        (False, True, True, False),
        (True, False, False, True),
        (None, False, None, False),
    ],
)
def test_case_sensitive_precedence(
    dimension: bool | None, explore: bool | None, project: bool | None, expected: bool
) -> None:
    assert case_sensitivity.case_sensitive(dimension, explore, project)[0] is expected


# --- parameters -------------------------------------------------------------------------------

TYPES: dict[str, parameters.ParameterType] = {
    "region": "string",
    "regions": "string",
    "limit": "number",
    "since": "date",
    "sales-region": "string",
    "orders.channel": "string",
}


@pytest.mark.parametrize(
    ("sql", "values", "expected"),
    [
        ("x = ${service.parameters.region}", {"region": "EMEA"}, "x = 'EMEA'"),
        ("x = ${sv.parameters.region}", {"region": "O'Brien"}, "x = 'O''Brien'"),
        ("x IN (${sv.parameters.regions})", {"regions": ["a", "b"]}, "x IN ('a', 'b')"),
        ("LIMIT ${sv.parameters.limit}", {"limit": 10}, "LIMIT 10"),
        ("x > ${sv.parameters.limit}", {"limit": "2.5"}, "x > 2.5"),
        ("d >= ${sv.parameters.since}", {"since": "2024-02-29"}, "d >= CAST('2024-02-29' AS DATE)"),
        ("r = ${sv.parameters.sales-region}", {"sales-region": "NA"}, "r = 'NA'"),
        ("${ sv.parameters.region }", {"region": "a"}, "'a'"),
        # A model's own parameter, named by its model as the reference writes it.
        ("c = ${sv.parameters.orders.channel}", {"orders.channel": "web"}, "c = 'web'"),
        ("grain = ${sv.parameters.date_zoom}", {}, "grain = 'month'"),
    ],
)
def test_substitution_by_type(sql: str, values: dict[str, Any], expected: str) -> None:
    assert parameters.substitute(sql, values, TYPES, date_zoom="MONTH") == expected


@pytest.mark.parametrize(
    ("sql", "values", "error"),
    [
        (
            "${sv.parameters.unknown}",
            {},
            "parameter 'unknown' is referenced in SQL but not defined",
        ),
        ("${sv.parameters.region}", {}, "parameter 'region' has no value and no default"),
        ("${sv.parameters.limit}", {"limit": "nan"}, "is not a finite number"),
        ("${sv.parameters.limit}", {"limit": "1; DROP"}, "is not a number"),
        ("${sv.parameters.since}", {"since": "2023-02-29"}, "is not a real date"),
        ("${sv.parameters.since}", {"since": "yesterday"}, "is not a YYYY-MM-DD date"),
        ("${sv.parameters.regions}", {"regions": []}, "has an empty list of values"),
    ],
)
def test_substitution_fails_clearly(sql: str, values: dict[str, Any], error: str) -> None:
    with pytest.raises(parameters.ParameterError, match=error):
        parameters.substitute(sql, values, TYPES)


def test_date_zoom_is_empty_without_a_zoom_and_a_user_parameter_shadows_it() -> None:
    assert parameters.substitute("${sv.parameters.date_zoom}", {}, {}) == "''"
    shadowed = parameters.substitute(
        "${sv.parameters.date_zoom}",
        {"date_zoom": "custom"},
        {"date_zoom": "string"},
        date_zoom="week",
    )
    assert shadowed == "'custom'"


@pytest.mark.parametrize(
    ("definition", "error"),
    [
        ({"label": "R"}, "needs options, options_from_dimension or allow_custom_values: true"),
        ({"label": "R", "options": ["a"], "type": "text"}, "type"),
        ({"label": "R", "options": ["a"], "colour": "red"}, "Extra inputs are not permitted"),
        ({"options": ["a"]}, "label"),
    ],
)
def test_parameter_definitions_are_checked(definition: dict[str, Any], error: str) -> None:
    with pytest.raises(ValidationError, match=error):
        config(parameters={"region": definition})


def test_parameter_definitions_accept_every_documented_property() -> None:
    parsed = config(
        parameters={
            "region": {
                "label": "Region",
                "description": "Sales region",
                "type": "string",
                "options": ["EMEA", {"label": "Americas", "value": "AMER"}],
                "default": ["EMEA"],
                "multiple": True,
                "allow_custom_values": True,
            },
            "store": {
                "label": "Store",
                "options_from_dimension": {"model": "stores", "dimension": "name"},
            },
            "sales-cap": {
                "label": "Cap",
                "type": "number",
                "allow_custom_values": True,
                "default": 100,
            },
        }
    )
    assert set(parsed.parameters) == {"region", "store", "sales-cap"}


# --- custom granularities ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("granularity", "expected_type"),
    [
        ({"label": "Fiscal quarter", "sql": "fq(${COLUMN})"}, "date"),
        ({"label": "Shift", "sql": "shift(${COLUMN}, ${COLUMN})", "type": "string"}, "string"),
    ],
)
def test_custom_granularity_sub_dimension(granularity: dict[str, str], expected_type: str) -> None:
    dimension: custom_granularities.BaseDimension = {
        "name": "ordered_at",
        "sql": "orders.ordered_at",
        "requiredAttributes": {"team": "finance"},
        "anyAttributes": {"region": ["EU"]},
    }
    derived = custom_granularities.sub_dimension(
        dimension, "fq", CustomGranularity.model_validate(granularity)
    )
    assert derived["name"] == "ordered_at_fq"
    assert "${COLUMN}" not in derived["sql"]
    assert derived["sql"].count("orders.ordered_at") == granularity["sql"].count("${COLUMN}")
    assert derived["type"] == expected_type
    assert derived["requiredAttributes"] == {"team": "finance"}
    assert derived["anyAttributes"] == {"region": ["EU"]}


@pytest.mark.parametrize(
    ("section", "name", "ok"),
    [
        ("custom_granularities", "fiscal_quarter", True),
        ("custom_granularities", "Fiscal Quarter", False),
        ("custom_granularities", "fiscal-quarter", False),
        ("table_groups", "sales-ops_2", True),
        ("table_groups", "sales ops", False),
        ("parameters", "sales-region", True),
        ("parameters", "sales.region", False),
    ],
)
def test_key_patterns(section: str, name: str, ok: bool) -> None:
    bodies = {
        "custom_granularities": {"label": "L", "sql": "${COLUMN}"},
        "table_groups": {"label": "L"},
        "parameters": {"label": "L", "allow_custom_values": True},
    }
    if ok:
        config(**{section: {name: bodies[section]}})
        return
    with pytest.raises(ValidationError) as raised:
        config(**{section: {name: bodies[section]}})
    assert raised.value.errors()[0]["loc"] == (section, name, "[key]")


@pytest.mark.parametrize(
    ("section", "body", "error"),
    [
        ("spotlight", {"default_visibility": "visible"}, "default_visibility"),
        ("spotlight", {"categories": {"kpi": {"label": "KPI", "color": "teal"}}}, "color"),
        ("spotlight", {"categories": {"kpi": {"color": "red"}}}, "label"),
        ("custom_granularities", {"fq": {"label": "FQ", "sql": "x", "type": "week"}}, "type"),
        ("custom_granularities", {"fq": {"label": "FQ"}}, "sql"),
        ("defaults", {"column_totals": "yes"}, "column_totals"),
        ("defaults", {"case_sensitve": False}, "case_sensitve"),
        ("table_groups", {"sales": {"label": "Sales", "colour": "red"}}, "colour"),
    ],
)
def test_enums_required_fields_and_unknown_keys(section: str, body: Any, error: str) -> None:
    sections = {"spotlight": {}, section: body}
    with pytest.raises(ValidationError, match=error):
        ServiceConfig.model_validate(sections)


def test_spotlight_is_required_and_unknown_top_level_keys_are_refused() -> None:
    with pytest.raises(ValidationError, match="spotlight"):
        ServiceConfig.model_validate({})
    with pytest.raises(ValidationError, match="metrics_catalog"):
        ServiceConfig.model_validate({"spotlight": {}, "metrics_catalog": {}})


# --- table groups -----------------------------------------------------------------------------

GROUPS = {"sales": TableGroup(label="Sales"), "emea": TableGroup(label="EMEA", description="")}


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        (["sales"], ["Sales"]),
        (["sales", "emea"], ["Sales", "EMEA"]),
        (["sales", "undefined-key", "emea"], ["Sales", "undefined-key", "EMEA"]),
        # Five levels, as the reference allows since its limit went from 3 to 5.
        (["sales", "emea", "a", "b", "c"], ["Sales", "EMEA", "a", "b", "c"]),
        ([], []),
    ],
)
def test_group_labels(keys: list[str], expected: list[str]) -> None:
    assert table_groups.sidebar_path("orders", keys, GROUPS) == expected


def test_nesting_deeper_than_five_levels_names_the_model() -> None:
    with pytest.raises(
        table_groups.NestingError, match=r"model 'orders': .* 6 levels deep .*at most 5"
    ):
        table_groups.sidebar_path("orders", ["a", "b", "c", "d", "e", "f"], GROUPS)


# --- the compiler -----------------------------------------------------------------------------


def test_compile_collects_every_warning_and_the_effective_result() -> None:
    compiled = compile_config(
        config(
            defaults={
                "column_totals": False,
                "additional_time_intervals": {
                    "date": ["HOUR", "fiscal_quarter", "sprint"],
                    "timestamp": ["hour", "fiscal_quarter"],
                },
                "granularity_labels": {"week": "Fiscal week", "sprint": "Sprint"},
            },
            custom_granularities={"fiscal_quarter": {"label": "FQ", "sql": "fq(${COLUMN})"}},
        )
    )
    assert compiled.time_intervals == {
        "date": ["DAY", "WEEK", "MONTH", "QUARTER", "YEAR", "fiscal_quarter"],
        "timestamp": ["RAW", "DAY", "WEEK", "MONTH", "QUARTER", "YEAR", "HOUR", "fiscal_quarter"],
    }
    assert compiled.granularity_labels == {"WEEK": "Fiscal week"}
    assert compiled.defaults == {
        "case_sensitive": True,
        "column_totals": False,
        "pre_aggregate_execution_fallback": True,
    }
    assert [w.rule for w in compiled.warnings] == [
        "SubDayIntervalOnDate",
        "UnknownTimeInterval",
        "UnknownGranularityLabel",
    ]
    assert compiled.table_groups is None
