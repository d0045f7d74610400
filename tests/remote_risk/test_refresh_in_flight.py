"""A request refused for an unknown kid is not answered by a fetch older than itself.

While a fetch of an issuer's JWK Set is in flight, a request that meets an unknown kid
waits for it. If that fetch started before the request (it may hold the set as it was
before the issuer published the key), the set is fetched again, rate limit allowing;
a fetch that started after the request is taken as it is.
"""

from __future__ import annotations

import asyncio
import json

from agent_cards.keys import SigningKey, TrustedKeys
from member_kit.trust.refresh import Fetched, IssuerDirectory, IssuerSource

ISSUER = "urn:example:issuer"
A, B = SigningKey.generate(), SigningKey.generate()


class Publisher:
    """The issuer's JWK Set as fetched; the first fetch is held until released."""

    def __init__(self) -> None:
        self.keys = [A.public_jwk()]
        self.fetches = 0
        self.release = asyncio.Event()

    async def fetch(self, url: str, etag: str | None) -> Fetched:
        self.fetches += 1
        body = json.dumps({"keys": self.keys}).encode()  # the set as it is when asked
        if self.fetches == 1:
            await self.release.wait()
        return Fetched(200, body, {})


def directory(publisher: Publisher, min_interval: float) -> IssuerDirectory:
    keys = TrustedKeys.from_json(json.dumps({"keys": [A.public_jwk()]}).encode())
    source = IssuerSource(keys, url="https://issuer.example/jwks.json")
    return IssuerDirectory({ISSUER: source}, min_interval=min_interval, fetcher=publisher.fetch)


async def refused_during_an_older_fetch(min_interval: float) -> tuple[Publisher, bool]:
    publisher = Publisher()
    issuers = directory(publisher, min_interval)
    older = asyncio.create_task(issuers.refresh(ISSUER, unknown_kid=True))
    await asyncio.sleep(0)  # the older fetch is in flight, with the set before B
    publisher.keys = [A.public_jwk(), B.public_jwk()]
    later = asyncio.create_task(issuers.refresh(ISSUER, unknown_kid=True))
    await asyncio.sleep(0)
    publisher.release.set()
    await asyncio.gather(older, later)
    return publisher, B.kid in {key.kid for key in issuers[ISSUER]}


def test_a_request_waiting_on_an_older_fetch_fetches_again() -> None:
    publisher, knows_b = asyncio.run(refused_during_an_older_fetch(min_interval=0.0))
    assert publisher.fetches == 2 and knows_b


def test_the_rate_limit_still_holds_after_waiting() -> None:
    publisher, knows_b = asyncio.run(refused_during_an_older_fetch(min_interval=60.0))
    assert publisher.fetches == 1 and not knows_b
