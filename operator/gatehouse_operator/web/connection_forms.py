"""The admins' forms: the new-connection wizard, Edit (the same wizard on a stored connection),
and Delete.

Every change is made as the visitor (see gatehouse_operator.access.as_user), so RBAC, the schema's
rules and the admission webhook decide it, and it is checked with a dry run before anything is
written: a refused connection leaves no Secret behind, and a refused edit leaves the stored secret
as it was. The wizard works in read-only mode too, without its Save: a draft can still be tested and
its YAML taken to Git.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from pydantic import ValidationError
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response

from gatehouse_operator.access.as_user import as_user, refusal
from gatehouse_operator.api.auth_kinds import AUTH_KINDS
from gatehouse_operator.api.connection import (
    EXTERNAL_CONNECTION,
    HTTP_METHODS,
    MAX_HEADERS,
    ExternalConnectionSpec,
)
from gatehouse_operator.api.connection_document import as_json
from gatehouse_operator.api.connection_test import (
    DEFAULT_TEST_METHOD,
    DEFAULT_TEST_PATH,
    MAX_TEST_PATH_CHARS,
)
from gatehouse_operator.api.stored import StoredConnectionSpec
from gatehouse_operator.connections import errors
from gatehouse_operator.connections.actions import Managed
from gatehouse_operator.connections.errors import validation_message
from gatehouse_operator.connections.exfiltration import link_warning, write_methods
from gatehouse_operator.connections.models import DraftTestOutcome, DraftTestRequest, TrialRequest
from gatehouse_operator.connections.saving import Save, Saving
from gatehouse_operator.keys.sealed_values import SealedValue, SealedValueProblem
from gatehouse_operator.kube.errors import ApiError, Cause, Conflict, Forbidden, NotFound
from gatehouse_operator.web.field_problems import FieldProblems
from gatehouse_operator.web.guards import READ_ONLY, Visitor, fields_of, page_refusal
from gatehouse_operator.web.pages import Pages, trial
from gatehouse_operator.web.wizard import (
    AUTH_SECTIONS,
    AUTH_TYPE_TITLES,
    CLIENT_AUTHENTICATION_TITLES,
    CREDENTIAL_SCOPE_TITLES,
    FIELDS,
    KEY_PLACEMENT_TITLES,
    LINK_POLICY_TITLES,
    PAYLOAD_SIGNING_TITLES,
    SHOWN_LIMITS,
    SPARE_HEADER_ROWS,
    STEP_TITLES,
    STEPS,
    STORAGES,
    WizardForm,
    aws_secret,
    basic_secret,
    first_storage,
    origin_of,
    step_of,
)

# Instructions of 10,000 characters, URL-encoded, and a service account's key file fit.
WIZARD_FORM_BYTES = 256 * 1024
# The wizard has 38 fields, 5 method boxes and 20 header rows of two (83 in all).
WIZARD_FIELDS = 96
MAX_SECRET_CHARS = 64 * 1024


def server_refusal(causes: Sequence[Cause], message: str) -> FieldProblems:
    """The API server's refusal of the connection as the page finds the model's: each field
    cause under its field's title; ``message`` (the refusal's words) where it names no field, as
    a webhook's reason does not."""
    found = FieldProblems(ExternalConnectionSpec, FIELDS, AUTH_SECTIONS)
    found.caused(causes)
    if not found.listed():
        found.elsewhere.append(message)
    return found


class Wizard:
    """One post of the wizard: the form as sent, what the visitor asked, and what it led to."""

    def __init__(self, form: WizardForm, secret: str | None, step: str) -> None:
        self.form = form
        self.secret = secret  # decrypted from the draft's field; None when none was entered
        self.step = step
        self.errors: list[str] = []
        # The problems by the path of the field they are shown next to (wizard.FIELDS).
        self.at: dict[str, list[str]] = {}
        self.outcome: DraftTestOutcome | None = None
        self.check = ""

    def add(self, found: FieldProblems) -> None:
        """Problems to list, and to show next to their fields."""
        self.errors += found.listed()
        for path, lines in found.found.items():
            self.at.setdefault(path, []).extend(lines)

    def note(self, path: str, line: str) -> None:
        """One problem of the page's own, of the field at ``path``."""
        self.errors.append(line)
        self.at.setdefault(path, []).append(line)

    def problems_at(self, *prefixes: str) -> list[str]:
        """The problems of the fields at ``prefixes`` and under them, for the page to show
        there."""
        return [
            line
            for path, lines in self.at.items()
            if any(path == prefix or path.startswith(f"{prefix}.") for prefix in prefixes)
            for line in lines
        ]


class ConnectionForms:
    def __init__(self, pages: Pages) -> None:
        self.pages = pages
        self.saving = Saving(pages.actions.runtime.kube)

    # Pages.

    async def new(self, request: Request, visitor: Visitor) -> Response:
        namespace = request.path_params["namespace"]
        await self._may_create(visitor, namespace)
        can_seal = self.pages.actions.runtime.sealing.sealing_keys() is not None
        form = WizardForm(storage=first_storage(read_only=self.pages.read_only, can_seal=can_seal))
        return self._render(visitor, namespace, Wizard(form, None, STEPS[0]))

    async def edit(self, request: Request, visitor: Visitor) -> Response:
        namespace, name = request.path_params["namespace"], request.path_params["name"]
        managed = await self._managed(visitor, namespace, name)
        form = WizardForm.of(managed.connection, managed.resource_version)
        return self._render(visitor, namespace, Wizard(form, None, STEPS[0]))

    # Forms.

    async def new_posted(self, request: Request, visitor: Visitor) -> Response:
        namespace = request.path_params["namespace"]
        await self._may_create(visitor, namespace)
        return await self._posted(request, visitor, namespace, None)

    async def edit_posted(self, request: Request, visitor: Visitor) -> Response:
        namespace, name = request.path_params["namespace"], request.path_params["name"]
        managed = await self._managed(visitor, namespace, name)
        return await self._posted(request, visitor, namespace, managed)

    async def delete(self, request: Request, visitor: Visitor) -> Response:
        """Deletes the connection as the visitor, and the Secret the wizard made for it."""
        namespace, name = request.path_params["namespace"], request.path_params["name"]
        managed = await self._managed(visitor, namespace, name)
        fields = await fields_of(request)
        if str(fields.get("confirm", "")).strip() != name:
            raise page_refusal(422, f"confirm: type the connection's name, {name}, to delete it")
        notice = f"Deleted connection {name}."
        async with as_user(
            self.pages.operator, visitor.credentials.token, visitor.credentials.impersonated
        ) as kube:
            try:
                await kube.delete_custom(EXTERNAL_CONNECTION, namespace, name, managed.uid)
            except (Forbidden, NotFound, Conflict) as error:
                raise page_refusal(error.status, f"not deleted: {refusal(error)}") from None
            secret = managed.connection.spec.secret_ref_name
            if secret:
                notice += await self.saving.delete_made_secret(kube, namespace, name, secret)
        return self.pages.back_to(visitor, namespace, "", notice)

    # The wizard.

    async def _posted(
        self,
        request: Request,
        visitor: Visitor,
        namespace: str,
        managed: Managed | None,
    ) -> Response:
        fields = await fields_of(request, WIZARD_FORM_BYTES, WIZARD_FIELDS)  # as the route read it
        stored = managed.connection if managed is not None else None
        form = WizardForm.posted(fields, stored.spec if stored else StoredConnectionSpec())
        if managed is not None and stored is not None:
            # The name is the resource's; the version is the one the visitor started from,
            # unless only the status changed since (the spec's generation is the same): the
            # operator's status write is not a change the visitor's save would undo.
            form = replace(form, name=stored.name)
            if form.editing and form.generation == str(stored.generation):
                form = replace(form, resource_version=managed.resource_version)
        form = form.named()
        sessions, credentials = self.pages.sessions, visitor.credentials
        entered = str(fields.get("secret", ""))
        problem = ""
        if form.known_auth_type == "basic":
            pair, problem = basic_secret(str(fields.get("basic_user", "")), entered)
            entered = pair or ""
        elif form.known_auth_type == "awsSigV4":
            keys, problem = aws_secret(
                str(fields.get("aws_access_key_id", "")),
                entered,
                str(fields.get("aws_session_token", "")),
            )
            entered = keys or ""
        if len(entered) > MAX_SECRET_CHARS:
            raise page_refusal(413, f"secret: at most {MAX_SECRET_CHARS:,} characters")
        if entered.strip():
            form = replace(form, draft_secret=sessions.encrypt_draft_secret(credentials, entered))
        secret = sessions.decrypt_draft_secret(credentials, form.draft_secret)
        action = str(fields.get("action", ""))
        step = str(fields.get("step", STEPS[0]))
        wizard = Wizard(form, secret, step if step in STEPS else STEPS[0])
        if form.draft_secret and secret is None:
            wizard.form = replace(form, draft_secret="")
            wizard.note("secret", "Secret: the one entered expired after an hour: enter it again")
        if problem:
            wizard.note("secret", problem)
        self._seal(wizard, namespace)
        if action.startswith("go:") and action[3:] in STEPS:
            wizard.step = action[3:]
        elif action == "next" and wizard.step != STEPS[-1]:
            await self._leave(wizard, visitor, namespace)
        elif action == "test":
            wizard.step = "test"
            await self._try(wizard, visitor, namespace, fields)
        elif action == "save":
            if self.pages.read_only:
                raise page_refusal(403, READ_ONLY)
            saved = await self._save(wizard, visitor, namespace)
            if saved is not None:
                return saved
            wizard.step = "review"
        if wizard.step == "review" and action != "save":
            await self._check(wizard, visitor, namespace)
        return self._render(visitor, namespace, wizard)

    async def _try(
        self, wizard: Wizard, visitor: Visitor, namespace: str, fields: FormData
    ) -> None:
        """Test this draft: through the service API's draft test, as the visitor."""
        form = wizard.form
        wizard.add(form.field_problems())
        if wizard.errors:
            return
        try:
            request = trial(
                str(fields.get("test_method", DEFAULT_TEST_METHOD)),
                str(fields.get("test_path", DEFAULT_TEST_PATH)),
                str(fields.get("test_body", "")),
            )
            draft = DraftTestRequest(
                name=form.name,
                spec=as_json(form.spec()),
                secret=wizard.secret if form.known_auth_type != "none" else None,
                replaces=form.editing,
                request=request,
            )
            await self.pages.actions.may_draft(visitor.user, namespace)
            wizard.outcome = await self.pages.actions.test_draft(
                visitor.user, visitor.credentials.token, namespace, draft
            )
        except errors.Refused as refused:
            wizard.add(server_refusal(refused.causes, refused.message))
        except ValidationError as error:
            wizard.errors.append(validation_message(error))

    def _seal(self, wizard: Wizard, namespace: str) -> None:
        """Seals an entered secret into the connection, for its namespace, name and origin (and
        an OAuth 2.0 client secret for its token URL and client id), with the operator's public
        key; or checks that the stored sealed value, while it is kept, still fits them."""
        form = wizard.form
        if not form.sealed:
            return
        scope = form.seal_scope(namespace)
        if scope is None:
            return  # problems() names the field it cannot be sealed for (unsealable)
        if wizard.secret is not None:
            keys = self.pages.actions.runtime.sealing.sealing_keys()
            if keys is None:
                wizard.note(
                    "secret", "Secret: this installation has no sealing keys; keep it in a Secret"
                )
                return
            sealed = keys.public().seal(wizard.secret.strip().encode(), scope)
            wizard.form = replace(form, sealed_value=sealed)
            return
        stored = form.stored_sealed()
        if not stored:
            return
        try:
            sealed_for = SealedValue.parse(stored).scope
        except SealedValueProblem:
            return  # the connection's CredentialReady says so
        if sealed_for != scope:
            wizard.note(
                "secret",
                f"Secret: the stored one is sealed for {sealed_for}; enter it again to seal it "
                f"for {scope}",
            )

    async def _leave(self, wizard: Wizard, visitor: Visitor, namespace: str) -> None:
        """Next: the step's own fields checked by the model's rules (and, leaving the API step,
        by the API server's dry run as the visitor, which alone checks the resource's name and
        the schema's rules the model leaves to it); on to the next step when none has a
        problem, else the step again with each problem next to its field."""
        step = wizard.step
        found = wizard.form.field_problems().only(lambda path: step_of(path) == step)
        if not found.listed() and step == "api" and wizard.form.name:
            refused = await self._dry_run(wizard, visitor, namespace)
            if refused is not None:
                found = refused.only(lambda path: step_of(path) == step)
        wizard.add(found)
        if not any(step_of(path) == step for path in wizard.at):
            wizard.step = STEPS[STEPS.index(step) + 1]

    async def _dry_run(
        self, wizard: Wizard, visitor: Visitor, namespace: str
    ) -> FieldProblems | None:
        """The API server's refusal of the connection as it stands, as the visitor; None when
        it would take it."""
        form = wizard.form
        async with as_user(
            self.pages.operator, visitor.credentials.token, visitor.credentials.impersonated
        ) as kube:
            try:
                await self.saving.dry_run(
                    kube, namespace, form.name, form.spec(), form.resource_version
                )
            except ApiError as error:
                return server_refusal(error.causes, refusal(error))
        return None

    async def _check(self, wizard: Wizard, visitor: Visitor, namespace: str) -> None:
        """The review step's word from the API server, would it take this connection, with
        every problem the page found itself: the server's causes on the fields the page named
        no problem of (the resource's name, the schema's rules the model leaves to it), but not
        its rule that the auth needs a secretRef or a sealedSecret when a secret was typed (Save
        writes or seals it; a field that keeps it from being sealed is named)."""
        found = wizard.form.field_problems()
        wizard.add(found)
        if not wizard.form.name:
            return  # named by the display name's problem
        refused = await self._dry_run(wizard, visitor, namespace)
        if refused is not None:
            typed = wizard.secret is not None
            wizard.add(
                refused.only(
                    lambda path: path not in found.found and not (typed and path == "auth"),
                    elsewhere=not found.listed(),
                )
            )
        elif not wizard.errors:
            wizard.check = "The Kubernetes API server accepts this connection (a dry run as you)."

    async def _save(self, wizard: Wizard, visitor: Visitor, namespace: str) -> Response | None:
        """Creates or replaces the connection, and writes a newly entered secret; a redirect to
        the connection, or None with wizard.errors saying why not."""
        wizard.add(wizard.form.field_problems())
        if wizard.errors:
            return None
        form, secret = wizard.form, wizard.secret
        ref = form.secret_ref()
        # Sealed into the connection from now on: the Secret the wizard made for it goes
        # once the connection no longer names it (a value left in it would still be read
        # by whoever may get Secrets).
        stored_ref = form.stored_secret_ref()
        replaced = stored_ref["name"] if form.sealed and form.editing and stored_ref else None
        # Nothing here reads a Secret with the operator's rights on the visitor's behalf: an
        # answer would tell someone who may not get Secrets which exist.
        missing = ""
        # The auth type is known here: problems() named any other.
        auth_type = form.known_auth_type
        if ref is not None and auth_type and secret is None and not form.keeps_stored_secret():
            missing = (
                f"Secret: required for {AUTH_TYPE_TITLES[auth_type]} authentication; "
                "it is stored in a Secret and never shown again"
            )
        sample: TrialRequest | str | None = None
        if form.save_sample:
            try:
                sample = trial(form.test_method, form.test_path, form.test_body)
            except errors.Refused as refused:
                sample = refused.message
        save = Save(
            namespace=namespace,
            name=form.name,
            spec=form.spec(),
            resource_version=form.resource_version,
            editing=form.editing,
            sealed=form.sealed,
            secret=secret,
            secret_ref=ref,
            replaced=replaced,
            missing_secret=missing,
            respec=lambda new_ref: form.with_secret_ref(new_ref).spec(),
            sample=sample,
            sample_label=form.sample_label,
            requested_by=visitor.user.name,
        )
        async with as_user(
            self.pages.operator, visitor.credentials.token, visitor.credentials.impersonated
        ) as kube:
            saved = await self.saving.save(kube, save)
        if saved.refused is not None:
            wizard.add(server_refusal(saved.refused.causes, refusal(saved.refused)))
        if saved.errors or saved.refused is not None:
            for line in saved.errors:  # each of the Secret the connection's secret goes to
                wizard.note("secret", line)
            return None
        return self.pages.back_to(visitor, namespace, form.name, saved.notice)

    # Helpers.

    async def _may_create(self, visitor: Visitor, namespace: str) -> None:
        if not await self.pages.may(visitor, "create", EXTERNAL_CONNECTION.plural, namespace):
            raise page_refusal(
                403, f"{visitor.user.name} may not create connections in namespace {namespace}"
            )

    async def _managed(self, visitor: Visitor, namespace: str, name: str) -> Managed:
        """The connection as read, for its manager."""
        managed, can_manage = await self.pages.actions.visible_to_manage(
            visitor.user, namespace, name
        )
        if not can_manage:
            raise page_refusal(403, f"{visitor.user.name} may not edit connection {name}")
        return managed

    def _render(self, visitor: Visitor, namespace: str, wizard: Wizard) -> Response:
        form = wizard.form
        changed = form.changed_for_secret()
        header_rows = min(MAX_HEADERS, len(form.headers) + SPARE_HEADER_ROWS)
        origin = origin_of(form.base_url) or "its base URL"
        return self.pages.renderer.render(
            "wizard.html",
            status=422 if wizard.errors else 200,
            visitor=visitor,
            namespace=namespace,
            wizard=wizard,
            form=form,
            steps=STEPS,
            step_titles=STEP_TITLES,
            methods=HTTP_METHODS,
            auth_types=AUTH_TYPE_TITLES,
            client_authentications=CLIENT_AUTHENTICATION_TITLES,
            credential_scopes=CREDENTIAL_SCOPE_TITLES,
            key_placements=KEY_PLACEMENT_TITLES,
            payload_signings=PAYLOAD_SIGNING_TITLES,
            link_policies=LINK_POLICY_TITLES,
            test_path_chars=MAX_TEST_PATH_CHARS,
            storages=STORAGES,
            shown_limits=SHOWN_LIMITS,
            headers=[
                (*(form.headers[i] if i < len(form.headers) else ("", "")), i)
                for i in range(max(header_rows, len(form.headers)))
            ],
            header_problems=form.header_problems(),
            max_headers=MAX_HEADERS,
            secret_state=(
                "entered"
                if wizard.secret is not None
                else "changed"
                if changed and form.known_auth_type != "none"
                else "stored"
                if form.keeps_stored_secret() or (form.sealed and form.stored_sealed())
                else "none"
            ),
            changed=changed,
            warning=link_warning(origin, form.allowed_methods),
            writes=write_methods(form.allowed_methods),
            yaml_text=form.yaml(namespace),
            auth_kinds=AUTH_KINDS,
            # The steps with a problem, marked in the list of steps.
            steps_with_problems={step_of(path) for path in wizard.at},
            action=(
                f"/ui/namespaces/{namespace}/connections/{form.name}/edit"
                if form.editing
                else f"/ui/namespaces/{namespace}/new-connection"
            ),
        )
