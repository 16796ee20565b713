"""AWS's Signature Version 4 test vectors (aws-c-auth's signing suite, carried with the proxy's
signer tests) read as requests that arrived: each case's header-signed request, and the keys,
region, service and moment it was signed with."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from gatehouse_dev.sigv4_verifier import Account, Received

VECTORS = Path(__file__).resolve().parents[1] / "proxy" / "credentials" / "aws_sigv4_vectors"
CASES = sorted(path.name for path in VECTORS.iterdir() if path.is_dir())


@dataclass(frozen=True)
class Vector:
    received: Received
    account: Account
    now: datetime


def _received(text: str) -> Received:
    head, _, body = text.partition("\n\n")
    request_line, *lines = head.split("\n")
    # The target may hold a space (get-space-*): it runs to the protocol's name.
    method, _, rest = request_line.partition(" ")
    target = rest.rpartition(" ")[0]
    headers: list[tuple[str, str]] = []
    for line in lines:
        if line[:1] in (" ", "\t"):  # a folded line continues the field before it
            name, value = headers.pop()
            headers.append((name, f"{value} {line.strip()}"))
        else:
            name, _, value = line.partition(":")
            headers.append((name, value))
    return Received(method, target, headers, body.encode())


def vector(case: str) -> Vector:
    context = json.loads((VECTORS / case / "context.json").read_text())
    keys = context["credentials"]
    account = Account(
        access_key_id=keys["access_key_id"],
        secret_access_key=keys["secret_access_key"],
        region=context["region"],
        service=context["service"],
        session_token=keys.get("token", ""),
        normalize_path=context["normalize"],
    )
    now = datetime.fromisoformat(context["timestamp"])
    text = (VECTORS / case / "header-signed-request.txt").read_text(encoding="utf-8")
    return Vector(_received(text), account, now)
