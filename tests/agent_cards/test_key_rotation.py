"""Publish first, sign later: a rotated key is in the JWK Set before it signs (issue 13)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agent_cards.keys import KeyMaterialError, load_key_set, load_or_create

NOW = datetime(2026, 1, 1, tzinfo=UTC)
GRACE = timedelta(hours=1)


def kids(jwks: dict[str, list[dict[str, str]]]) -> list[str]:
    return [jwk["kid"] for jwk in jwks["keys"]]


def test_a_published_key_is_listed_at_once_and_signs_after_its_delay(tmp_path: Path) -> None:
    original = load_or_create(tmp_path / "keys")
    published = original.publish(grace=GRACE, delay=timedelta(minutes=10), now=NOW)
    new = published.published
    assert new is not None and new.activates_at == NOW + timedelta(minutes=10)
    assert kids(published.public_jwks(NOW)) == [original.active.kid, new.key.kid]
    assert published.signing_key(NOW) == original.active
    later = NOW + timedelta(minutes=10)
    assert published.signing_key(later) == new.key
    assert kids(published.public_jwks(later)) == [new.key.kid, original.active.kid]
    after_grace = later + GRACE
    assert kids(published.public_jwks(after_grace)) == [new.key.kid]


def test_a_published_key_survives_a_restart(tmp_path: Path) -> None:
    original = load_or_create(tmp_path / "keys")
    published = original.publish(grace=GRACE, delay=timedelta(minutes=10), now=NOW)
    reloaded = load_key_set(tmp_path / "keys")
    assert reloaded.published is not None and published.published is not None
    assert reloaded.published.key.kid == published.published.key.kid
    assert reloaded.published.activates_at == published.published.activates_at
    assert reloaded.published.grace == GRACE
    assert reloaded.active.kid == original.active.kid


def test_activation_on_demand(tmp_path: Path) -> None:
    original = load_or_create(tmp_path / "keys")
    waiting = original.publish(grace=GRACE, delay=None, now=NOW)
    assert waiting.signing_key(NOW + timedelta(days=30)) == original.active
    assert waiting.published is not None
    active = waiting.activate(NOW + timedelta(minutes=1))
    assert active.active == waiting.published.key and active.published is None
    (old,) = active.retired
    assert old.key == original.active and old.not_after == NOW + timedelta(minutes=1) + GRACE
    assert load_key_set(tmp_path / "keys").active.kid == active.active.kid


def test_one_published_key_at_a_time(tmp_path: Path) -> None:
    waiting = load_or_create(tmp_path / "keys").publish(grace=GRACE, delay=None, now=NOW)
    with pytest.raises(KeyMaterialError, match="already published"):
        waiting.publish(grace=GRACE, delay=None, now=NOW)
    with pytest.raises(KeyMaterialError, match="no key is published"):
        waiting.activate(NOW).activate(NOW)


def test_rotate_still_switches_at_once(tmp_path: Path) -> None:
    original = load_or_create(tmp_path / "keys")
    rotated = original.rotate(grace=GRACE, now=NOW)
    assert rotated.signing_key(NOW) != original.active and rotated.published is None
