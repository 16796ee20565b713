"""AWS access keys as a connection stores them: how both programs read one.

The stored value is the JSON AWS's own tools write for a process that needs credentials
(``aws configure export-credentials --format process``): ``AccessKeyId``, ``SecretAccessKey`` and,
for temporary keys, ``SessionToken`` (``Version`` and ``Expiration`` may be there too, and are not
read). The operator checks it when its Secret changes; the proxy reads it to sign requests. Both
must agree, or keys the operator called ready would fail on every fetch. Messages name the field
and the rule, never a value.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

# AWS access key ids are upper case letters and digits (AKIA..., ASIA...), 16 to 128 of them.
_ACCESS_KEY_ID = re.compile(r"[A-Z0-9]{16,128}")
# What may be sent in a header, and is signed: printable ASCII, no space.
_PRINTABLE = re.compile(r"[\x21-\x7e]+")
MAX_SECRET_ACCESS_KEY_CHARS = 256
# STS session tokens run to about 1,000 characters; some services' to a few thousand.
MAX_SESSION_TOKEN_CHARS = 8192
FIELDS = ("AccessKeyId", "SecretAccessKey", "SessionToken")


class AwsKeysError(ValueError):
    """The stored value is not AWS keys; the message names the field and the rule."""


@dataclass(frozen=True, repr=False)
class AwsKeys:
    access_key_id: str
    secret_access_key: str
    session_token: str = ""

    def __repr__(self) -> str:
        return f"AwsKeys(access_key_id={self.access_key_id!r})"

    def stored(self) -> str:
        """The JSON a connection stores (the shape :meth:`parse` reads)."""
        keys = {"Version": 1, "AccessKeyId": self.access_key_id}
        keys["SecretAccessKey"] = self.secret_access_key
        if self.session_token:
            keys["SessionToken"] = self.session_token
        return json.dumps(keys, separators=(",", ":"))

    @classmethod
    def parse(cls, text: str) -> AwsKeys:
        try:
            given = json.loads(text)
        except ValueError:
            raise AwsKeysError(
                "is not JSON: AWS keys are stored as `aws configure export-credentials "
                '--format process` writes them ({"AccessKeyId": ..., "SecretAccessKey": ...})'
            ) from None
        if not isinstance(given, dict):
            raise AwsKeysError("is not a JSON object with AccessKeyId and SecretAccessKey")
        for name in FIELDS:
            if name in given and not isinstance(given[name], str):
                raise AwsKeysError(f'"{name}" must be a string')
        access_key_id = given.get("AccessKeyId", "")
        secret_access_key = given.get("SecretAccessKey", "")
        session_token = given.get("SessionToken", "")
        if not _ACCESS_KEY_ID.fullmatch(access_key_id):
            raise AwsKeysError(
                '"AccessKeyId" must be 16 to 128 upper case letters and digits (AKIA..., ASIA...)'
            )
        if not secret_access_key:
            raise AwsKeysError('"SecretAccessKey" is missing')
        if len(secret_access_key) > MAX_SECRET_ACCESS_KEY_CHARS or not _PRINTABLE.fullmatch(
            secret_access_key
        ):
            raise AwsKeysError(
                f'"SecretAccessKey" must be at most {MAX_SECRET_ACCESS_KEY_CHARS} printable '
                "characters, without spaces"
            )
        if session_token and (
            len(session_token) > MAX_SESSION_TOKEN_CHARS or not _PRINTABLE.fullmatch(session_token)
        ):
            raise AwsKeysError(
                f'"SessionToken" must be at most {MAX_SESSION_TOKEN_CHARS:,} printable '
                "characters, without spaces"
            )
        return cls(access_key_id, secret_access_key, session_token)
