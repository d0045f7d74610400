"""Redaction walks an event's data only when its JSON text may hold a secret (issue 34):
data with none is sealed as it is, without the walk, and whatever the data, what is
sealed (its JSON text) is exactly what the full walk gives."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from coordinator.audit.log import events
from coordinator.audit.log.events import _redacted, redact_secrets

CASES: dict[str, dict[str, Any]] = {
    "plain": {"skill": "risk.assess", "n": 3, "ok": True, "none": None, "list": [1, "a"]},
    "counts-named-like-tokens": {"model_tokens": 4096, "with_token": True},
    "secret-field": {"Authorization": "x"},
    "secret-field-dashes": {"X-Api-Key": "k"},
    "secret-field-nested": {"a": [{"b": {"Client-Secret": "s"}}]},
    "bearer-value": {"note": "bearer tok-abc"},
    "basic-value-spaced": {"note": "  Basic  x"},
    "jwt-value": {"grant": "eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJ4In0.c2ln"},
    "jwt-looking-but-not": {"grant": "eyJ-not-a-token"},
    "escaped-whitespace": {"note": "\tbearer x"},
    "non-ascii-key": {"API_\u212aEY": "folds to api_key"},
    "non-ascii-value": {"city": "Zürich"},
    "quote-in-value": {"note": 'say "bearer x"'},
    "tuple": {"pair": (1, 2)},
    "int-key": {"map": {1: "x"}},
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_what_is_sealed_is_what_the_full_walk_gives(name: str) -> None:
    data = CASES[name]
    sealed = redact_secrets({"data": data})["data"]
    assert json.dumps(sealed, sort_keys=True) == json.dumps(_redacted(data), sort_keys=True)


def test_data_without_secrets_is_not_walked(monkeypatch: pytest.MonkeyPatch) -> None:
    walked: list[object] = []

    def counting(value: Any) -> Any:
        walked.append(value)
        return _redacted(value)

    monkeypatch.setattr(events, "_redacted", counting)
    redact_secrets({"data": CASES["plain"]})
    redact_secrets({"data": CASES["counts-named-like-tokens"]})
    assert walked == []
    redact_secrets({"data": CASES["secret-field"]})
    assert walked == [CASES["secret-field"]]


def _texts_near_the_names() -> list[str]:
    """Each secret name and its near misses (a character dropped, doubled, changed, a
    prefix, "-" for "_"), as a key, as a value and run into other text, and the starts
    of credentials, all lower-cased as the pre-check reads them."""
    words: set[str] = {"bearer x", "basic x", "eyj", " bearer\tx", "bearerx", "ey", "token"}
    for name in events.SECRET_FIELDS:
        words |= {name, name.replace("_", "-"), name + "s", "x" + name, name[:-1]}
        for at in range(len(name)):
            words |= {name[:at] + name[at + 1 :], name[:at] + name[at] * 2 + name[at + 1 :]}
            words.add(name[:at] + "q" + name[at + 1 :])
    texts: list[str] = []
    for word in sorted(words):
        texts += [f'{{"{word}":1}}', f'{{"a":"{word}"}}', f'"{word}', f'{{"a{word}":"b"}}']
    return texts


def test_the_factored_pattern_finds_what_the_plain_alternation_finds() -> None:
    """The pre-check's pattern is the names factored by their prefixes, with a lookahead
    on the first character: it must find exactly what one alternative per name finds."""
    names = "|".join(re.escape(name).replace("_", "[-_]") for name in sorted(events.SECRET_FIELDS))
    plain = re.compile(f'"(?:{names})"|"\\s*(?:bearer|basic)\\s|"eyj[\\w-]*\\.[\\w-]+\\.[\\w-]*"')
    for text in _texts_near_the_names():
        assert bool(events._MAYBE_SECRET.search(text)) == bool(plain.search(text)), text


def test_a_flattened_jws_is_not_walked(monkeypatch: pytest.MonkeyPatch) -> None:
    """A receipt's parts start like a JWT (``eyJ``) but none holds the two dots a JWT
    value has: its data shows nothing to redact, and is sealed without the walk."""
    walked: list[object] = []

    def counting(value: Any) -> Any:
        walked.append(value)
        return _redacted(value)

    monkeypatch.setattr(events, "_redacted", counting)
    receipt = {"receipt": {"protected": "eyJhbGciOiJFZERTQSJ9", "payload": "eyJ4Ijp7fX0"}}
    redact_secrets({"data": receipt})
    record = {name: None for name in events.CORRELATION_FIELDS}
    record.update(event_type="handoff.receipt", recorded_at="2026-12-05T07:00:00.000000Z")
    record.update(actor="coordinator", data=receipt)
    assert isinstance(events.prepared(record), events.Prepared)
    assert walked == []
    redact_secrets({"data": CASES["jwt-value"]})
    assert walked[0] == CASES["jwt-value"]  # a JWT is walked (and redacted) as before
