"""How a member's names derive from its own name (member_kit.telemetry.names), table-driven,
and that each app's telemetry object keeps its own registry."""

from __future__ import annotations

import pytest

from member_kit.errors import MemberNameInvalid
from member_kit.telemetry.names import REMOTE_RISK, TelemetryNames
from member_kit.telemetry.observed import Telemetry

# member name -> (metrics prefix, span prefix, service.name, access logger, env prefix);
# remote_risk's are the ones its dashboards, docs and tests use: unchanged.
NAMES = {
    "remote_risk": ("remote_risk_", "remote_risk.", "remote-risk", "remote_risk.access"),
    "legal_terms": ("legal_terms_", "legal_terms.", "legal-terms", "legal_terms.access"),
    "legal-terms": ("legal_terms_", "legal_terms.", "legal-terms", "legal_terms.access"),
    "guard": ("guard_", "guard.", "guard", "guard.access"),
    "sdk-member": ("sdk_member_", "sdk_member.", "sdk-member", "sdk_member.access"),
    "Word Counter": ("word_counter_", "word_counter.", "word-counter", "word_counter.access"),
}
ENV_PREFIXES = {
    "remote_risk": "REMOTE_RISK_",
    "legal_terms": "LEGAL_TERMS_",
    "legal-terms": "LEGAL_TERMS_",
    "guard": "GUARD_",
    "sdk-member": "SDK_MEMBER_",
    "Word Counter": "WORD_COUNTER_",
}


@pytest.mark.parametrize(("member", "expected"), NAMES.items())
def test_every_name_derives_from_the_members_own(member: str, expected: tuple[str, ...]) -> None:
    names = TelemetryNames.of(member)
    derived = (names.metrics_prefix, names.span_prefix, names.service_name, names.access_logger)
    assert derived == expected
    assert names.env_prefix == ENV_PREFIXES[member]


def test_remote_risks_names_are_the_documented_ones() -> None:
    assert TelemetryNames.of("remote_risk") == REMOTE_RISK
    assert REMOTE_RISK.metrics_realm == "remote-risk-metrics"
    assert REMOTE_RISK.audit_realm == "remote-risk-audit"
    assert REMOTE_RISK.instrumentation == "remote_risk"


@pytest.mark.parametrize("member", ["", "9lives", "--", "_"])
def test_a_name_that_cannot_name_a_metric_is_refused(member: str) -> None:
    with pytest.raises(MemberNameInvalid) as refused:
        TelemetryNames.of(member)
    assert refused.value.reason == "member_name_invalid"
    assert str(refused.value).startswith("member_name_invalid: ")


def test_each_app_has_its_own_registry_and_its_services_tracing() -> None:
    """Two telemetry objects of one member share the service's tracer provider (one per
    service in a process), never a registry; another member's has its own tracing."""
    first, second = Telemetry.of("legal_terms"), Telemetry.of("legal_terms")
    assert first.metrics.registry is not second.metrics.registry
    assert first.tracing is second.tracing
    assert first.tracing.default_service_name == "legal-terms"
    assert Telemetry.of("remote_risk").tracing is not first.tracing
    first.metrics.a2a_requests("GetTask", "ok").inc()
    labels = {"method": "GetTask", "outcome": "ok"}
    assert first.metrics.registry.get_sample_value("legal_terms_a2a_requests_total", labels) == 1
    assert (
        second.metrics.registry.get_sample_value("legal_terms_a2a_requests_total", labels) is None
    )
