"""The viewer assertion's rules, each broken once, against a real issuer serving its JWKS on
127.0.0.1 (gatehouse_dev.viewer_issuer) read through the proxy's own JWKS client."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from gatehouse_dev.viewer_issuer import ViewerIssuer, create_app, jwk, sign
from gatehouse_proxy.errors import ProxyError
from gatehouse_proxy.upstream.forwarder import tls_context
from gatehouse_proxy.viewers import assertions
from gatehouse_proxy.viewers.assertions import Verifier, Viewer
from gatehouse_proxy.viewers.jwks_http import JwksClient, issuer_loader
from gatehouse_proxy.viewers.keys import KeysUnreadable, parse_jwks
from gatehouse_proxy.viewers.trust import TrustedIssuer, ViewerSettings, issuers_from_json

APP = "team-a/DataApp/sales"


@asynccontextmanager
async def issuer_served() -> AsyncIterator[ViewerIssuer]:
    issuer = ViewerIssuer("")
    runner = web.AppRunner(create_app(issuer))
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    issuer.issuer = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        yield issuer
    finally:
        await runner.cleanup()


Scenario = Callable[[ViewerIssuer, Verifier], Awaitable[None]]


def _run(
    scenario: Scenario, max_seconds: float = 300, clock: Callable[[], float] = time.time
) -> None:
    async def main() -> None:
        async with issuer_served() as issuer:
            trusted = TrustedIssuer(
                issuer=issuer.issuer, audience="gatehouse", jwksURL=f"{issuer.issuer}/jwks"
            )
            jwks = JwksClient(tls_context())
            try:
                settings = ViewerSettings(issuers=(trusted,), max_assertion_seconds=max_seconds)
                await scenario(issuer, Verifier(settings, issuer_loader(jwks), clock))
            finally:
                await jwks.close()

    asyncio.run(main())


async def _refusal(verifier: Verifier, assertion: str, app: str = APP) -> ProxyError:
    with pytest.raises(ProxyError) as refused:
        await verifier.verified(assertion, app)
    return refused.value


def test_an_assertion_of_a_trusted_issuer_names_its_viewer_rs256_and_es256() -> None:
    async def scenario(issuer: ViewerIssuer, verifier: Verifier) -> None:
        claims = issuer.claims(APP, "u-42", "ada@example.com")
        for alg in ("RS256", "ES256"):
            viewer = await verifier.verified(issuer.assertion(claims, alg), APP)
            assert viewer == Viewer("u-42", "ada@example.com", issuer.issuer)
        no_email = issuer.claims(APP, "u-43")
        assert (await verifier.verified(issuer.assertion(no_email), APP)).email == ""

    _run(scenario)


def _expect(
    make: Callable[[ViewerIssuer], str], rule: str, app: str = APP, max_seconds: float = 300
) -> None:
    async def scenario(issuer: ViewerIssuer, verifier: Verifier) -> None:
        refused = await _refusal(verifier, make(issuer), app)
        assert refused.code == "viewer_assertion_invalid"
        assert refused.status == 401
        assert refused.message.startswith(f"viewer assertion refused: {rule}:"), refused.message

    _run(scenario, max_seconds)


def test_a_forged_signature_is_refused() -> None:
    forger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    _expect(lambda i: sign(i.claims(APP, "u-1"), forger, "rsa-1"), "signature")


def test_a_signature_of_other_claims_is_refused() -> None:
    def spliced(issuer: ViewerIssuer) -> str:
        real = issuer.assertion(issuer.claims(APP, "u-1"))
        other = issuer.assertion(issuer.claims(APP, "admin"))
        return ".".join([*other.split(".")[:2], real.split(".")[2]])

    _expect(spliced, "signature")


def test_alg_none_is_refused() -> None:
    _expect(lambda i: sign(i.claims(APP, "u-1"), None, "rsa-1", "none"), "signature")


def test_hs256_with_the_public_key_as_the_secret_is_refused() -> None:
    def confused(issuer: ViewerIssuer) -> str:
        pem = issuer.rsa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        return sign(issuer.claims(APP, "u-1"), pem, "rsa-1", "HS256")

    _expect(confused, "signature")


def test_an_alg_that_is_not_the_keys_kind_is_refused() -> None:
    # ES256 naming the RSA key's kid: no key of that kind has the kid.
    _expect(lambda i: sign(i.claims(APP, "u-1"), i.ec_key, "rsa-1", "ES256"), "signature")


def test_an_untrusted_issuer_is_refused() -> None:
    def elsewhere(issuer: ViewerIssuer) -> str:
        return issuer.assertion({**issuer.claims(APP, "u-1"), "iss": "https://evil.example"})

    _expect(elsewhere, "issuer")


def test_another_audience_is_refused() -> None:
    _expect(lambda i: i.assertion(i.claims(APP, "u-1", audience="another")), "audience")


def test_an_audience_list_naming_ours_is_taken() -> None:
    async def scenario(issuer: ViewerIssuer, verifier: Verifier) -> None:
        claims = {**issuer.claims(APP, "u-1"), "aud": ["x", "gatehouse"]}
        assert (await verifier.verified(issuer.assertion(claims), APP)).id == "u-1"

    _run(scenario)


def test_an_expired_assertion_is_refused() -> None:
    _expect(lambda i: i.assertion(i.claims(APP, "u-1", lifetime=60, issued_ago=120)), "expired")


def test_an_instant_past_a_floats_range_is_refused_not_a_crash() -> None:
    # A trusted issuer's signature over exp = 10**400: refused as a claim, not a 500.
    _expect(lambda i: i.assertion({**i.claims(APP, "u-1"), "exp": 10**400}), "claims")


def test_an_assertion_issued_in_the_future_is_refused() -> None:
    _expect(
        lambda i: i.assertion(i.claims(APP, "u-1", lifetime=60, issued_ago=-600)),
        "not yet valid",
        max_seconds=3600,
    )


def test_an_assertion_living_too_long_is_refused() -> None:
    _expect(lambda i: i.assertion(i.claims(APP, "u-1", lifetime=3600)), "lifetime")


def test_an_assertion_for_another_app_is_refused() -> None:
    _expect(lambda i: i.assertion(i.claims("team-a/DataApp/other", "u-1")), "app")
    _expect(lambda i: i.assertion(i.claims(APP, "u-1")), "app", app="team-b/DataApp/sales")


def test_claims_that_cannot_go_in_a_header_are_refused() -> None:
    _expect(lambda i: i.assertion(i.claims(APP, "u-1\r\nX-Injected: 1")), "claims")
    _expect(lambda i: i.assertion({**i.claims(APP, "u-1"), "exp": True}), "claims")


def test_malformed_assertions_are_refused_without_a_traceback() -> None:
    async def scenario(issuer: ViewerIssuer, verifier: Verifier) -> None:
        for bad in ("", "a.b", "a.b.c.d", "!!.b.c", "e30.e30.", "W10.e30.", "x" * 9000):
            refused = await _refusal(verifier, bad)
            assert refused.code == "viewer_assertion_invalid", bad
        deep = "[" * 5000
        bomb = base64.urlsafe_b64encode(deep.encode()).rstrip(b"=").decode()
        assert (await _refusal(verifier, f"{bomb}.e30.")).code == "viewer_assertion_invalid"
        crit = sign(issuer.claims(APP, "u"), issuer.rsa_key, "rsa-1", header={"crit": ["b64"]})
        assert "crit" in (await _refusal(verifier, crit)).message

    _run(scenario)


def test_a_flood_of_unknown_kids_reads_the_jwks_once_per_interval() -> None:
    async def scenario(issuer: ViewerIssuer, verifier: Verifier) -> None:
        claims = issuer.claims(APP, "u-1")
        await verifier.verified(issuer.assertion(claims), APP)
        assert issuer.jwks_reads == 1
        forged = [sign(claims, issuer.rsa_key, f"made-up-{n}") for n in range(500)]
        refusals = await asyncio.gather(*(_refusal(verifier, assertion) for assertion in forged))
        assert {refused.code for refused in refusals} == {"viewer_assertion_invalid"}
        # The set was read at the first unknown kid only (it is younger than the interval
        # after): one read, not 500.
        assert issuer.jwks_reads == 1
        # Once the interval has passed, an unknown kid may read it again: once.
        verifier.keys(issuer.issuer).refetch_seconds = 0.05
        await asyncio.sleep(0.1)
        await asyncio.gather(*(_refusal(verifier, assertion) for assertion in forged[:50]))
        assert issuer.jwks_reads == 2

    _run(scenario)


def test_a_rotated_key_is_found_by_reading_the_set_again() -> None:
    async def scenario(issuer: ViewerIssuer, verifier: Verifier) -> None:
        await verifier.verified(issuer.assertion(issuer.claims(APP, "u-1")), APP)
        verifier.keys(issuer.issuer).refetch_seconds = 0.0
        issuer.rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        rotated = sign(issuer.claims(APP, "u-2"), issuer.rsa_key, "rsa-1")
        # Same kid, new key: the held set refuses it (a kid is found, its key does not verify).
        assert (await _refusal(verifier, rotated)).message.endswith("with the issuer's key")
        renamed = sign(issuer.claims(APP, "u-2"), issuer.rsa_key, "rsa-2")
        issuer_jwks = issuer.jwks
        issuer.jwks = lambda: {"keys": [jwk(issuer.rsa_key, "rsa-2")]}  # type: ignore[method-assign]
        assert (await verifier.verified(renamed, APP)).id == "u-2"
        issuer.jwks = issuer_jwks  # type: ignore[method-assign]

    _run(scenario)


@pytest.fixture
def signature_checks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many signatures the verifier checks (the real check, counted)."""
    checks = [0]
    check = assertions._verifies

    def counted(*args: Any) -> bool:
        checks[0] += 1
        return check(*args)

    monkeypatch.setattr(assertions, "_verifies", counted)
    return checks


def test_an_assertion_sent_again_is_answered_without_checking_its_signature_again(
    signature_checks: list[int],
) -> None:
    async def scenario(issuer: ViewerIssuer, verifier: Verifier) -> None:
        assertion = issuer.assertion(issuer.claims(APP, "u-1", "ada@example.com"))
        for _ in range(100):
            viewer = await verifier.verified(assertion, APP)
            assert viewer == Viewer("u-1", "ada@example.com", issuer.issuer)
        assert signature_checks[0] == 1
        # Through another app's token it is refused, remembered or not.
        refused = await _refusal(verifier, assertion, "team-a/DataApp/other")
        assert refused.message.startswith("viewer assertion refused: app:"), refused.message
        # A refusal is never remembered: a forged one is checked each time it is sent.
        forger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        forged = sign(issuer.claims(APP, "u-1"), forger, "rsa-1")
        checked = signature_checks[0]
        for _ in range(3):
            assert "signature" in (await _refusal(verifier, forged)).message
        assert signature_checks[0] == checked + 3

    _run(scenario)


def test_a_remembered_assertion_is_refused_once_it_expires() -> None:
    now = [time.time()]

    async def scenario(issuer: ViewerIssuer, verifier: Verifier) -> None:
        claims = issuer.claims(APP, "u-1", lifetime=60)
        assertion = issuer.assertion(claims)
        assert (await verifier.verified(assertion, APP)).id == "u-1"
        now[0] = claims["exp"] + 30  # its exp and the leeway: still good
        assert (await verifier.verified(assertion, APP)).id == "u-1"
        now[0] += 1
        refused = await _refusal(verifier, assertion)
        assert refused.message.startswith("viewer assertion refused: expired:"), refused.message

    _run(scenario, clock=lambda: now[0])


def test_a_remembered_assertion_is_verified_again_when_the_keys_are_read_again(
    signature_checks: list[int],
) -> None:
    async def scenario(issuer: ViewerIssuer, verifier: Verifier) -> None:
        assertion = issuer.assertion(issuer.claims(APP, "u-1"))
        await verifier.verified(assertion, APP)
        # The issuer withdraws its RSA key; the set is due to be read again.
        issuer_jwks = issuer.jwks
        issuer.jwks = lambda: {"keys": [jwk(issuer.ec_key, "ec-1")]}  # type: ignore[method-assign]
        verifier.keys(issuer.issuer).fresh_seconds = 0.0
        refused = await _refusal(verifier, assertion)
        assert refused.message.startswith("viewer assertion refused: signature:"), refused.message
        assert issuer.jwks_reads == 2
        # Back, and read again: verified again (its signature checked), then remembered.
        issuer.jwks = issuer_jwks  # type: ignore[method-assign]
        verifier.keys(issuer.issuer).fresh_seconds = 300.0
        verifier.keys(issuer.issuer).refetch_seconds = 0.0
        checked = signature_checks[0]
        fresh = issuer.assertion(issuer.claims(APP, "u-2"))
        for _ in range(3):
            assert (await verifier.verified(fresh, APP)).id == "u-2"
        assert signature_checks[0] == checked + 1

    _run(scenario)


def test_the_assertions_remembered_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(assertions, "MOST_REMEMBERED", 8)

    async def scenario(issuer: ViewerIssuer, verifier: Verifier) -> None:
        for sub in range(40):
            assertion = issuer.assertion(issuer.claims(APP, f"u-{sub}"), "ES256")
            assert (await verifier.verified(assertion, APP)).id == f"u-{sub}"
            assert len(verifier._remembered) <= 8
        # The latest is remembered, the first long let go.
        assert len(verifier._remembered) >= 1

    _run(scenario)


def test_an_oversized_jwks_is_not_read_and_says_so() -> None:
    async def scenario(issuer: ViewerIssuer, verifier: Verifier) -> None:
        issuer.oversized = True
        refused = await _refusal(verifier, issuer.assertion(issuer.claims(APP, "u-1")))
        assert refused.code == "viewer_keys_unavailable"
        assert refused.status == 503
        assert "over 65536 bytes" in refused.message
        assert refused.headers["Retry-After"]
        # Not read again at once for the next request: a JWKS URL that is down or hostile is
        # asked once per interval.
        await _refusal(verifier, issuer.assertion(issuer.claims(APP, "u-1")))
        assert issuer.jwks_reads == 1

    _run(scenario)


def test_key_sets_are_read_within_bounds() -> None:
    small = rsa.generate_private_key(public_exponent=65537, key_size=1024)  # noqa: S505
    with pytest.raises(KeysUnreadable, match="1024 bits"):
        parse_jwks(_jwks(jwk(small, "weak")))
    key = ec.generate_private_key(ec.SECP256R1())
    with pytest.raises(KeysUnreadable, match="more than 32"):
        parse_jwks(_jwks(*[jwk(key, str(n)) for n in range(33)]))
    with pytest.raises(KeysUnreadable, match="not JSON"):
        parse_jwks(b"[" * 60_000)
    off_curve = {**jwk(ec.generate_private_key(ec.SECP256R1()), "e"), "y": "AAAA"}
    with pytest.raises(KeysUnreadable, match="not usable"):
        parse_jwks(_jwks(off_curve))
    # Keys for encryption, or of kinds assertions are not signed with, are passed over.
    mixed = _jwks(
        {**jwk(ec.generate_private_key(ec.SECP256R1()), "enc"), "use": "enc"},
        {"kty": "oct", "k": "c2VjcmV0"},
        jwk(rsa.generate_private_key(public_exponent=65537, key_size=2048), "sig"),
    )
    assert [key.kid for key in parse_jwks(mixed)] == ["sig"]


def _jwks(*keys: dict[str, Any]) -> bytes:
    return json.dumps({"keys": list(keys)}).encode()


def test_keys_from_a_mounted_secret_file(tmp_path: Path) -> None:
    async def main() -> None:
        issuer = ViewerIssuer("https://bi.example")
        keys = tmp_path / "jwks.json"
        keys.write_bytes(_jwks(*issuer.jwks()["keys"]))
        trusted = TrustedIssuer(issuer=issuer.issuer, audience="gatehouse", keysFile=keys)
        jwks = JwksClient(tls_context())
        verifier = Verifier(ViewerSettings(issuers=(trusted,)), issuer_loader(jwks))
        viewer = await verifier.verified(issuer.assertion(issuer.claims(APP, "u-9")), APP)
        assert viewer.id == "u-9"
        await jwks.close()

    asyncio.run(main())


def test_the_issuers_setting_names_the_entry_and_the_rule() -> None:
    assert issuers_from_json("", allow_http=False) == ()
    with pytest.raises(ValueError, match=r"\[0\].*exactly one of jwksURL and keysFile"):
        issuers_from_json('[{"issuer": "i", "audience": "a"}]', allow_http=False)
    with pytest.raises(ValueError, match=r"\[0\]\.jwksURL must be an https URL"):
        issuers_from_json(
            '[{"issuer": "i", "audience": "a", "jwksURL": "http://x/jwks"}]', allow_http=False
        )
    one = '{"issuer": "i", "audience": "a", "jwksURL": "https://x/jwks"}'
    with pytest.raises(ValueError, match="twice"):
        issuers_from_json(f"[{one}, {one}]", allow_http=False)


def test_verifying_an_rs256_assertion_takes_well_under_a_millisecond() -> None:
    async def scenario(issuer: ViewerIssuer, verifier: Verifier) -> None:
        for alg in ("RS256", "ES256"):
            await verifier.verified(issuer.assertion(issuer.claims(APP, "u-1"), alg), APP)
            rounds = 200
            # Each a new assertion: one sent again is remembered, not verified again.
            sent = [issuer.assertion(issuer.claims(APP, f"u-{n}"), alg) for n in range(rounds)]
            started = time.perf_counter()
            for assertion in sent:
                await verifier.verified(assertion, APP)
            each = (time.perf_counter() - started) / rounds
            print(f"{alg}: {each * 1e6:.0f} µs per verification")
            assert each < 0.002

    _run(scenario)
