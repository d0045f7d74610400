"""The coordinator's HTTP API against its own OpenAPI document, by generated requests.

Schemathesis reads ``/openapi.json`` from a real coordinator on loopback (remote_risk
registered behind it) and sends what the schema allows and what it does not, checking
every answer: documented status, documented shape, no server error, bad input refused,
the operator token enforced. Registering an agent is left out: its generated URLs would
make the coordinator fetch cards from addresses off this machine (tests/coordinator/
test_api.py covers it by hand).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.core.parameters import ParameterLocation
from schemathesis.specs.openapi.checks import ignored_auth, positive_data_acceptance

from coordinator.storage.datadir import DataDir
from tests.coordinator.test_api import TOKEN, Deployment, deployed


@pytest.fixture
def api_schema(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[schemathesis.BaseSchema]:
    for name in ("FEDERATION_SERVER", "FEDERATION_OPERATOR_TOKEN", "FEDERATION_DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    with deployed(DataDir(tmp_path / "data")) as deployment:
        assert deployment.register().status_code == 200
        assert deployment.delegate(wait=True).status_code == 200
        schema = schemathesis.openapi.from_url(f"{deployment.api}/openapi.json")
        yield schema.exclude(method="POST", path="/v1/agents")


# A cursor is an opaque token: the schema can only say "a string", so a made-up one is
# schema-valid and still refused (422 bad_cursor). Likewise the HTTP edge holds every
# JSON number to the I-JSON range (docs/limits.md), which the schema of a free-form
# object such as a delegation's input cannot state, and a signed tree head is a string
# that must verify (head_invalid, untrusted_key). Those are the refusals of
# schema-valid data allowed here; schemathesis's own check would count them. A run list's
# ``state`` is matched in any case, which a schema's enum cannot say, so a made-up one
# is refused as bad_state. A delegation's Idempotency-Key is for a submission only
# ("wait": false) and is refused with another request than the one it was first sent
# with, which a header's schema cannot say either.
ALLOWED_REFUSALS = {
    "bad_cursor",
    "json_number_out_of_range",
    "head_invalid",
    "untrusted_key",
    "bad_state",
    "idempotency_key_invalid",
    "idempotency_key_reused",
}


def refused_valid_data(case: schemathesis.Case, response: Any) -> None:
    """schemathesis's positive-data check, with the one exception above."""
    if case.meta is not None and not case.meta.generation.mode.is_positive:
        return
    if response.status_code in (400, 422):
        reason = response.json().get("error", {}).get("reason")
        assert reason in ALLOWED_REFUSALS, f"schema-valid request refused: {response.text}"


# What a request with a wrong operator token may be answered: refused as unauthenticated,
# or, once that wrong token has missed five times, throttled (docs/limits.md). The
# same wrong token is sent for every case, so it is throttled after its fifth miss.
WRONG_TOKEN_ANSWERS = {401, 403, 429}


def wrong_token_refused(case: schemathesis.Case) -> None:
    """Our form of schemathesis's ``ignored_auth``: on a route that refuses a request
    without a token, a wrong token is never served either."""
    if case.call().status_code not in (401, 403):
        return  # a public route (the card, the JWK Set, health, the reference page)
    wrong = case.call(headers={"Authorization": "Bearer not-the-operator-token"})
    assert wrong.status_code in WRONG_TOKEN_ANSWERS, (case.path, wrong.status_code)
    if wrong.status_code == 429:
        assert wrong.json()["error"]["reason"] == "token_throttled", wrong.text


def operator_headers(case: schemathesis.Case) -> dict[str, str]:
    """The operator's token, unless the case is a negative one that leaves the required
    ``Authorization`` header out on purpose: adding it back would make the request valid
    and its 200 a false "schema-violating request accepted"."""
    header_negative = case.meta is not None and case.meta.is_negative_at(ParameterLocation.HEADER)
    if header_negative and "authorization" not in {name.lower() for name in case.headers or {}}:
        return {}
    return {"Authorization": f"Bearer {TOKEN}"}


def test_every_route_keeps_to_its_schema(api_schema: schemathesis.BaseSchema) -> None:
    """Every operation, positive and negative data, every check schemathesis has."""
    checked = []
    for result, mode in itertools.product(api_schema.get_all_operations(), GenerationMode):
        operation = result.ok()

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(
            max_examples=25,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def check(case: schemathesis.Case) -> None:
            response = case.call_and_validate(
                headers=operator_headers(case),
                excluded_checks=[positive_data_acceptance, ignored_auth],
            )
            refused_valid_data(case, response)
            wrong_token_refused(case)

        try:
            check()
        except Unsatisfiable:
            # A route without parameters or a body has no invalid request to make.
            assert mode is GenerationMode.NEGATIVE, operation.label
            continue
        checked.append(f"{operation.label} ({mode.value})")
    assert len(checked) >= 12, checked


def test_the_reference_page_is_served_offline(tmp_path: Path) -> None:
    import httpx

    with deployed(DataDir(tmp_path / "data")) as deployment:
        page = httpx.get(f"{deployment.api}/docs", timeout=30)
    assert page.status_code == 200 and "GET /v1/runs" in page.text
    assert "<script" not in page.text and "http://" not in page.text.replace(deployment.api, "")


_ = Deployment  # the fixture's type, imported for readers
