"""The webhook process (``--role=webhook``): start-up and shut-down of the admission handlers.

It holds no state, no keyring and no routes: the API client the checks read and ask through,
and the webhook server. Its replicas serve one certificate (see webhook.shared_certificate) and
each writes that certificate's CA into the installer's webhook configuration, the same value.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import signal
import tempfile
from pathlib import Path
from typing import Any

import kopf

from gatehouse_operator.access.reviews import Access
from gatehouse_operator.access.webhook_clients import (
    CA_CERT,
    TLS_CERT,
    TLS_KEY,
    client_certificate_authority,
)
from gatehouse_operator.access.webhook_server import (
    WebhookServer,
    shared_certificate,
    store_certificate,
)
from gatehouse_operator.controllers.admission import REGISTRY
from gatehouse_operator.kube import API_ERRORS, Kube, api_client, failure
from gatehouse_operator.kube.errors import ApiError
from gatehouse_operator.settings import WebhookSettings

log = logging.getLogger("gatehouse.webhook")
# How often a replica checks that it serves the certificate the others serve.
CHECK_SECONDS = 30


@kopf.on.login(registry=REGISTRY)
def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    """As kopf's default registry logs in (a registry of one's own has no login handler)."""
    return kopf.login_via_client(**kwargs)


@kopf.on.startup(registry=REGISTRY)
async def start(settings: kopf.OperatorSettings, memo: Any, **_: Any) -> None:
    options: WebhookSettings = memo.options
    api = await api_client()
    kube = Kube.of(api)
    memo.api, memo.kube, memo.access, memo.tasks = api, kube, Access(api), []

    async def on_ca_bundle(ca_bundle: str) -> None:
        memo.tasks.append(
            asyncio.create_task(_install_ca_bundle(kube, options, ca_bundle), name="webhook-ca")
        )

    files: dict[str, Any] = {}
    if options.tls_secret:
        try:
            certificate, key = await shared_certificate(
                kube,
                options.tls_secret,
                WebhookServer.hostnames(options.service),
                options.configuration,
            )
        except ApiError as error:
            raise kopf.TemporaryError(
                f"cannot read or make the webhook certificate Secret {options.tls_secret} "
                f"({failure(error)})",
                delay=5,
            ) from None
        # kopf's server loads its certificate from files: an emptyDir in the Pod.
        folder = Path(tempfile.mkdtemp(prefix="gatehouse-webhook-"))
        (folder / TLS_CERT).write_bytes(certificate)
        (folder / TLS_KEY).write_bytes(key)
        (folder / TLS_KEY).chmod(0o600)
        files = {"certfile": folder / TLS_CERT, "pkeyfile": folder / TLS_KEY}
        memo.tasks.append(
            asyncio.create_task(_serve_the_shared(kube, options, certificate, key), name="tls")
        )
    client_ca_file, client_ca_source = options.client_ca_file, ""
    if options.client_secret:
        client_ca_file = await _client_ca_of_secret(kube, options.client_secret)
        client_ca_source = (
            f"from Secret {options.client_secret} ({TLS_CERT}, {TLS_KEY}; its {CA_CERT} "
            "signed it and nothing else)"
        )
    settings.admission.server = WebhookServer(
        addr=options.host,
        port=options.port,
        service=options.service,
        on_ca_bundle=on_ca_bundle,
        client_ca_file=client_ca_file,
        client_ca_source=client_ca_source,
        client_names=options.client_names,
        **files,
    )
    if client_ca_file is None:
        log.warning(
            "the webhook answers any caller that reaches its port (no client CA): see the "
            'docs, security/who-may-do-what.md, "Who may call the admission webhook"'
        )
    else:
        log.info(
            "the webhook answers only clients with a certificate %s%s",
            client_ca_source or f"of the CAs in {client_ca_file}",
            f" named {', '.join(options.client_names)}" if options.client_names else "",
        )


async def _client_ca_of_secret(kube: Kube, ref: str) -> Path:
    """The CA of the API server's client certificate in the Secret ``ref`` (made when absent),
    in a file for the server's TLS context."""
    try:
        ca = await client_certificate_authority(kube, ref)
    except ApiError as error:
        raise kopf.TemporaryError(
            f"cannot read or make the Secret {ref} of the API server's client certificate "
            f"({failure(error)})",
            delay=5,
        ) from None
    except ValueError as error:  # a Secret of that name without the three: said until fixed
        raise kopf.TemporaryError(str(error), delay=30) from None
    path = Path(tempfile.mkdtemp(prefix="gatehouse-webhook-clients-")) / CA_CERT
    path.write_bytes(ca)
    return path


async def _serve_the_shared(
    kube: Kube, options: WebhookSettings, certificate: bytes, key: bytes
) -> None:
    """Keeps every replica on the one certificate the configuration trusts.

    Every CHECK_SECONDS: a Secret deleted meanwhile is made again with this replica's
    certificate (which the others serve too); one that now holds another certificate (made while
    this replica ran: a reinstall replaced the configuration that owned it) means this replica
    serves one the configuration will not trust, so it stops and restarts on the new one.
    """
    namespace, name = options.tls_secret.split("/", 1)
    while True:
        await asyncio.sleep(CHECK_SECONDS)
        try:
            found = await kube.secrets.secret_data(namespace, name)
            if found is None:
                if await store_certificate(
                    kube, options.tls_secret, options.configuration, certificate, key
                ):
                    log.warning("made the webhook certificate Secret %s again", options.tls_secret)
                # Otherwise another replica made it: the next check compares its certificate.
            elif found.get(TLS_CERT) != certificate:
                log.warning(
                    "the webhook certificate Secret %s holds another certificate: restarting "
                    "to serve it",
                    options.tls_secret,
                )
                os.kill(os.getpid(), signal.SIGTERM)  # kopf stops cleanly; the Pod restarts
                return
        except API_ERRORS as error:
            log.warning("cannot check the webhook certificate Secret (%s)", failure(error))


async def _install_ca_bundle(kube: Kube, options: WebhookSettings, ca_bundle: str) -> None:
    """Writes the webhook certificate's CA into the installer's webhook configuration.

    Until it is there the API server cannot call the webhooks, and (failure policy Fail) refuses
    the changes they check: retried, and said, until it succeeds.
    """
    name = options.configuration
    for delay in itertools.chain((1.0, 2.0, 5.0, 10.0), itertools.repeat(30.0)):
        try:
            await kube.resources.set_webhook_ca(name, ca_bundle)
        except API_ERRORS as error:
            log.error(
                "cannot write the webhook certificate into ValidatingWebhookConfiguration %s "
                "(%s); retrying in %.0fs: until then links, tests and project files are refused",
                name,
                failure(error),
                delay,
            )
            await asyncio.sleep(delay)
        else:
            log.info("webhook certificate written into ValidatingWebhookConfiguration %s", name)
            return


@kopf.on.cleanup(registry=REGISTRY)
async def stop(memo: Any, **_: Any) -> None:
    for task in memo.tasks:
        task.cancel()
    await asyncio.gather(*memo.tasks, return_exceptions=True)
    await memo.api.close()
