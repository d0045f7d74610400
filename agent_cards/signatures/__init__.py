"""Every JWS signature of the project, made and checked in one place.

* :mod:`agent_cards.signatures.primitive`: sign and verify a signing input with a
  project key (Ed25519 through libsodium, ES256 through ``cryptography``);
* :mod:`agent_cards.signatures.pyjwt_framing`: PyJWT's objects with that primitive in
  place of their own, for the JWS whose bytes and checks PyJWT makes.
"""

__all__: list[str] = []
