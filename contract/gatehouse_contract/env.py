"""Installation settings from the environment, read the same way by both programs.

The chart sets them; a value out of range stops the program at start with a message that names
the variable and the rule, never a traceback.
"""

from __future__ import annotations

import os

from gatehouse_contract.numerals import whole_number


def env_flag(name: str) -> bool:
    """A yes-or-no setting (empty: no). Helm renders a boolean as true or false; a setting
    documented as on or off (the audit log) reads the same."""
    value = os.environ.get(name, "").strip().lower()
    if value in ("", "0", "false", "no", "off"):
        return False
    if value in ("1", "true", "yes", "on"):
        return True
    raise ValueError(f"{name} must be true or false (or on or off), not {value!r}")


def env_port(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    port = whole_number(raw)
    if port is None or not 0 < port < 65536:
        raise ValueError(f"{name} must be a port number (1 to 65535), not {raw!r}")
    return port


def env_seconds(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not 0 < value <= 3600:
        raise ValueError(
            f"{name} must be a number of seconds above 0 and at most 3600, not {raw!r}"
        )
    return value


def env_count(name: str, default: int, least: int = 1, most: int | None = None) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    count = whole_number(raw)
    if count is None or not least <= count <= (most if most is not None else count):
        bound = f"from {least:,} to {most:,}" if most is not None else f"of at least {least:,}"
        raise ValueError(f"{name} must be a whole number {bound}, not {raw!r}")
    return count


def env_share(name: str, default: float, most: float) -> float:
    """A fraction from 0 to ``most``."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 <= value <= most:
        raise ValueError(f"{name} must be a number from 0 to {most:g}, not {raw!r}")
    return value
