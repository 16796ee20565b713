"""The connection wizard's form: its fields, the spec they make, and the YAML that would be applied.

One form serves every step: the steps the visitor is not on are hidden, not left out, so each
post carries every field and no step's input is lost on the way between them. The secret is the
exception: it is never rendered back, only kept sealed (see Sessions.seal_draft_secret).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

import yaml
from starlette.datastructures import FormData

from gatehouse_operator.api.connection import MAX_INSTRUCTIONS
from gatehouse_operator.api.connection_test import SAMPLE_LABEL_CHARS
from gatehouse_operator.connections.drafts import manifest
from gatehouse_operator.kube import WATCHED_SELECTOR

STEPS = ("api", "auth", "access", "test", "review")
STEP_TITLES = {
    "api": "API",
    "auth": "Authentication",
    "access": "Access",
    "test": "Test",
    "review": "Review",
}
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
LINK_POLICIES = ("AdminsOnly", "Builders")
AUTH_TYPES = {
    "none": "None (a public API)",
    "apiKey": "API key",
    "bearer": "Bearer token",
    "googleServiceAccount": "Google service account",
}
# Where the credential is kept: a Secret the wizard writes, or sealed to the operator in the
# connection itself (what a GitOps team commits; the default in read-only mode).
STORAGES = {
    "secret": "In a Secret of this namespace",
    "sealed": "Sealed into the connection (safe to commit to Git)",
}
# The Secret the wizard writes the credential to, labelled so that deleting the connection from
# the page deletes it too (and owned by the connection, for the cluster's garbage collector).
SECRET_SUFFIX = "-credential"  # noqa: S105 (a name suffix, not a secret)
CREATED_BY_LABEL = "app.kubernetes.io/managed-by"
CREATED_BY = "gatehouse-page"
CONNECTION_LABEL = "gatehouse.dev/connection"
_NAME_CHARS = re.compile(r"[^a-z0-9]+")


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def name_from(display_name: str) -> str:
    """A Kubernetes name for a display name: "Payments API (EU)" becomes payments-api-eu."""
    return _NAME_CHARS.sub("-", display_name.lower()).strip("-")[:63].rstrip("-")


@dataclass(frozen=True)
class WizardForm:
    name: str = ""
    display_name: str = ""
    base_url: str = ""
    allowed_methods: tuple[str, ...] = ("GET",)
    allowed_paths: str = ""
    auth_type: str = "none"
    api_key_name: str = ""
    api_key_in: str = "header"
    scopes: str = ""
    # No preselected value, as the reference has none: who may link is the admin's choice.
    link_policy: str = ""
    allow_public_images: bool = False
    instructions: str = ""
    draft_secret: str = ""
    storage: str = "secret"
    # The secret sealed to the operator for this connection (the page seals an entered one);
    # empty: the stored one, if any.
    sealed_value: str = ""
    # An edit's starting point: the spec as stored (limits, the Secret it names) and its version.
    stored: dict[str, Any] = field(default_factory=dict)
    resource_version: str = ""
    test_method: str = "GET"
    test_path: str = "/"
    test_body: str = ""
    # Given after a passing draft test: the saved connection's sample, from a test on Save.
    sample_label: str = ""

    @classmethod
    def posted(cls, fields: FormData, stored: dict[str, Any]) -> WizardForm:
        def text(key: str, default: str = "") -> str:
            return str(fields.get(key, default))

        return cls(
            name=text("name").strip(),
            display_name=text("display_name").strip(),
            base_url=text("base_url").strip(),
            allowed_methods=tuple(m for m in METHODS if m in fields.getlist("allowed_methods")),
            allowed_paths=text("allowed_paths"),
            auth_type=text("auth_type", "none"),
            api_key_name=text("api_key_name").strip(),
            api_key_in=text("api_key_in", "header"),
            scopes=text("scopes"),
            link_policy=text("link_policy"),
            allow_public_images=fields.get("allow_public_images") == "on",
            instructions=text("instructions").replace("\r\n", "\n"),
            draft_secret=text("draft_secret"),
            storage=text("storage", "secret"),
            stored=stored,
            resource_version=text("resource_version"),
            test_method=text("test_method", "GET"),
            test_path=text("test_path", "/").strip() or "/",
            test_body=text("test_body"),
            sample_label=text("sample_label").strip(),
        )

    @classmethod
    def of(cls, body: dict[str, Any]) -> WizardForm:
        """An existing connection, to edit."""
        spec = body.get("spec", {})
        auth = spec.get("auth") or {}
        api_key = auth.get("apiKey") or {}
        return cls(
            name=body["metadata"]["name"],
            display_name=spec.get("displayName", ""),
            base_url=spec.get("baseURL", ""),
            allowed_methods=tuple(spec.get("allowedMethods") or ["GET"]),
            allowed_paths="\n".join(spec.get("allowedPaths") or []),
            auth_type=auth.get("type", "none"),
            api_key_name=api_key.get("name", ""),
            api_key_in=api_key.get("in", "header"),
            scopes="\n".join((auth.get("googleServiceAccount") or {}).get("scopes") or []),
            link_policy=spec.get("linkPolicy", "AdminsOnly"),
            allow_public_images=bool(spec.get("allowPublicImages")),
            instructions=spec.get("instructions", ""),
            storage="sealed" if auth.get("sealedSecret") else "secret",
            stored=spec,
            resource_version=body["metadata"]["resourceVersion"],
        )

    @property
    def editing(self) -> bool:
        return bool(self.resource_version)

    def named(self) -> WizardForm:
        """With a name made from the display name when none was given."""
        if self.name or self.editing:
            return self
        return replace(self, name=name_from(self.display_name))

    @property
    def sealed(self) -> bool:
        """Whether the credential is sealed into the connection rather than kept in a Secret."""
        return self.auth_type != "none" and self.storage == "sealed"

    def stored_sealed(self) -> str:
        return str((self.stored.get("auth") or {}).get("sealedSecret") or "")

    def secret_ref(self) -> dict[str, str] | None:
        """Where the credential is: the stored spec's Secret, else one named after the
        connection; None for auth type none, or when it is sealed into the connection."""
        if self.auth_type == "none" or self.sealed:
            return None
        stored = (self.stored.get("auth") or {}).get("secretRef")
        key = "key.json" if self.auth_type == "googleServiceAccount" else "token"
        if stored and stored.get("key") == key:
            return dict(stored)
        return {"name": f"{self.name}{SECRET_SUFFIX}", "key": key}

    def keeps_stored_secret(self) -> bool:
        """An edit that uses the Secret the connection already names: whether it holds a value
        is the connection's CredentialReady condition to say, not the wizard's to look up."""
        ref = self.secret_ref()
        return (
            self.editing
            and ref is not None
            and ref == (self.stored.get("auth") or {}).get("secretRef")
        )

    def with_secret_ref(self, ref: dict[str, str]) -> WizardForm:
        """With the credential in another Secret (a new one, written on Save)."""
        auth = {**(self.stored.get("auth") or {}), "secretRef": ref}
        return replace(self, stored={**self.stored, "auth": auth})

    def spec(self) -> dict[str, Any]:
        """The ExternalConnection spec these fields make; on an edit, fields the wizard does not
        show (limits) stay as stored."""
        auth: dict[str, Any] = {"type": self.auth_type}
        if self.auth_type == "apiKey":
            auth["apiKey"] = {"name": self.api_key_name, "in": self.api_key_in}
        if self.auth_type == "googleServiceAccount":
            auth["googleServiceAccount"] = {"scopes": _lines(self.scopes)}
        ref = self.secret_ref()
        if ref is not None:
            auth["secretRef"] = ref
        if self.sealed and (self.sealed_value or self.stored_sealed()):
            auth["sealedSecret"] = self.sealed_value or self.stored_sealed()
        spec: dict[str, Any] = {
            "displayName": self.display_name,
            "baseURL": self.base_url,
            "allowedMethods": list(self.allowed_methods),
        }
        if _lines(self.allowed_paths):
            spec["allowedPaths"] = _lines(self.allowed_paths)
        spec["auth"] = auth
        spec["linkPolicy"] = self.link_policy
        if self.allow_public_images:
            spec["allowPublicImages"] = True
        if self.instructions.strip():
            spec["instructions"] = self.instructions
        if "limits" in self.stored:
            spec["limits"] = self.stored["limits"]
        return spec

    def problems(self) -> list[str]:
        """What the page can tell before the API server is asked, each naming its field."""
        found = []
        if not self.display_name:
            found.append("Display name: required")
        if not self.base_url:
            found.append("Base URL: required, an origin such as https://api.example.com")
        if not self.allowed_methods:
            found.append(f"Allowed methods: at least one of {', '.join(METHODS)}")
        if len(self.sample_label) > SAMPLE_LABEL_CHARS:
            found.append(f"Sample label: at most {SAMPLE_LABEL_CHARS} characters")
        if len(self.instructions) > MAX_INSTRUCTIONS:
            found.append(
                f"Instructions: at most {MAX_INSTRUCTIONS:,} characters "
                f"({len(self.instructions):,} given)"
            )
        for title, value, allowed in (
            ("Auth type", self.auth_type, AUTH_TYPES),
            ("Keep the secret", self.storage, STORAGES),
            ("API key: sent in", self.api_key_in, ("header", "query")),
            ("Who can link it", self.link_policy, LINK_POLICIES),
        ):
            if value not in allowed:
                found.append(f"{title}: one of {', '.join(allowed)}")
        if self.auth_type == "apiKey" and not self.api_key_name:
            found.append("Parameter name: required for an API key")
        if self.auth_type == "googleServiceAccount" and not _lines(self.scopes):
            found.append("Scopes: at least one for a Google service account")
        if self.sealed and not (self.sealed_value or self.stored_sealed()):
            found.append("Secret: required, to be sealed into the connection")
        return found

    def yaml(self, namespace: str) -> str:
        """What would be applied, for teams that commit it to Git; the secret is not in it."""
        document = manifest(self.name or "my-connection", self.spec())
        document["metadata"]["namespace"] = namespace
        text = yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=100)
        if self.sealed:
            return (
                f"{text}# auth.sealedSecret opens in the operator only, and only for this "
                "connection's\n# namespace, name and baseURL: safe to commit.\n"
                if "sealedSecret" in document["spec"]["auth"]
                else f"{text}# Enter the secret (Authentication) to have it sealed here.\n"
            )
        ref = self.secret_ref()
        if ref is None:
            return text
        return (
            f"{text}---\n"
            f"# The credential is never shown. Keep it in Secret {ref['name']}, key {ref['key']},\n"
            "# for example (or with your cluster's secret manager), labelled for the operator's\n"
            "# watch so that a rotation reaches the proxy at once:\n"
            f"#   kubectl create secret generic {ref['name']} -n {namespace} "
            f"--from-file={ref['key']}=<file>\n"
            f"#   kubectl label secret {ref['name']} -n {namespace} {WATCHED_SELECTOR}\n"
        )
