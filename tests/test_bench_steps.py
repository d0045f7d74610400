"""bench.steps: each step is timed where the request runs it, and put back afterwards."""

from __future__ import annotations

import json

import pytest

from agent_cards.telemetry import http as base_http
from bench import steps
from member_kit.telemetry import http as member_http
from member_kit.trust import verifier


def test_each_member_step_is_timed_inside_the_sends_it_serves() -> None:
    found = steps.member(steps.STEPS[steps.MEMBER], warm=2, count=4)

    assert found["requests"] == 4
    timed = found["steps"]
    assert set(timed) == set(steps.STEPS[steps.MEMBER])
    for name in ("member_kit.audit.receipts:ReceiptIssuer.stamp",
                 "member_kit.trust.verifier:DelegationVerifier.authenticate"):  # fmt: skip
        assert timed[name]["calls"] == 1.0
    assert all(0 < step["us"] <= found["wall_us"] for step in timed.values())


def test_each_coordinator_step_is_timed_inside_the_handoffs_it_serves() -> None:
    found = steps.coordinator(steps.STEPS[steps.COORDINATOR], warm=1, count=2)

    timed = found["steps"]
    assert set(timed) == set(steps.STEPS[steps.COORDINATOR])
    point = "coordinator.dispatch.attempt.attempt_state:AttemptState.durable_point"
    assert timed[point]["calls"] == 2.0  # the intent and the outcome
    assert timed["coordinator.audit.log.chain:Ledger._write"]["us"] > 0  # the writer's thread


def test_each_member_step_is_timed_inside_the_governed_sends_it_serves() -> None:
    """Timed in remote_risk's own process, while the coordinator hands off to it."""
    names = [
        "member_kit.audit.receipts:ReceiptIssuer.stamp",
        "member_kit.trust.verifier:DelegationVerifier.authenticate",
    ]
    found = steps.governed(names, warm=1, count=3)

    assert found["requests"] == 3
    timed = found["steps"]
    assert set(timed) == set(names)
    assert timed[names[1]]["calls"] == 1.0  # one token a handoff
    assert timed[names[0]]["calls"] >= 1.0  # (the run's first send streams: stamped twice)
    assert 0 < timed[names[0]]["us"] < found["cpu_us"] < found["wall_us"]


def test_every_step_is_put_back_after_the_run() -> None:
    authenticate = vars(verifier.DelegationVerifier)["authenticate"]
    names = [
        "member_kit.trust.verifier:DelegationVerifier.authenticate",
        "member_kit.telemetry.http:ObservedHTTP._record",  # inherited: timed on the subclass
    ]
    with steps.wrapped(names):
        assert vars(verifier.DelegationVerifier)["authenticate"] is not authenticate
        assert "_record" in vars(member_http.ObservedHTTP)

    assert vars(verifier.DelegationVerifier)["authenticate"] is authenticate
    assert "_record" not in vars(member_http.ObservedHTTP)
    assert member_http.ObservedHTTP._record is base_http.ObservedHTTP._record


@pytest.mark.parametrize(
    "name",
    ["member_kit.trust.verifier", "no_such_module:f", "member_kit.trust.verifier:Nope.check"],
)
def test_a_name_that_names_no_function_is_refused_before_anything_is_wrapped(name: str) -> None:
    authenticate = vars(verifier.DelegationVerifier)["authenticate"]

    names = ["member_kit.trust.verifier:DelegationVerifier.authenticate", name]
    with pytest.raises(ValueError, match=name.replace(".", r"\.")), steps.wrapped(names):
        pass
    assert vars(verifier.DelegationVerifier)["authenticate"] is authenticate


def test_the_command_takes_step_names_before_or_after_its_options(
    capsys: pytest.CaptureFixture[str],
) -> None:
    stamp = "member_kit.audit.receipts:ReceiptIssuer.stamp"
    steps.main(["member", "--warm", "0", "--count", "1", stamp])

    found = json.loads(capsys.readouterr().out)
    assert found["side"] == "member" and list(found["steps"]) == [stamp]
    with pytest.raises(SystemExit):
        steps.main(["member", "--count", "0"])
