"""``defaults.granularity_labels``: project-wide replacement labels for standard grains.

A label replaces the grain's name verbatim (it is not appended to it) wherever the grain is shown:
the Explorer's dimension labels and tree, the date zoom options, chart axes. Keys are standard
grains in any case; other keys are ignored with a warning (relabel a non-standard period by
defining a custom granularity instead).
"""

from __future__ import annotations

from collections.abc import Mapping

from gatehouse_operator.project_config.time_intervals import CompileWarning, standard

PATH = "defaults.granularity_labels"


def checked_labels(labels: Mapping[str, str]) -> tuple[dict[str, str], list[CompileWarning]]:
    """Labels keyed by upper-case standard grain, and a warning per key that is not one."""
    kept: dict[str, str] = {}
    warnings = []
    for key, label in labels.items():
        grain = standard(key)
        if grain is None:
            warnings.append(
                CompileWarning(
                    "UnknownGranularityLabel",
                    PATH,
                    f'Ignoring unknown granularity "{key}" in {PATH} — not a standard granularity.',
                )
            )
        else:
            kept[grain] = label
    return kept, warnings


def grain_label(grain: str, labels: Mapping[str, str]) -> str:
    """How ``grain`` is shown: its replacement label, else its name in words (``Month name``)."""
    upper = grain.upper()
    return labels.get(upper) or upper.replace("_", " ").capitalize()


def dimension_label(dimension_label: str, grain: str, labels: Mapping[str, str]) -> str:
    """The Explorer's label for a dimension at a grain: the grain segment is replaced."""
    return f"{dimension_label} {grain_label(grain, labels)}"
