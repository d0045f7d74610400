"""One bounded request to a chat-completions service over the official ``openai`` client.

What :class:`ModelClient` guarantees to the service that uses it:

* ``openai`` is imported only when a client is built (a model is configured);
* client retries are off, so one :meth:`ModelClient.send` is at most one request;
* a total deadline around the whole request, body included (``asyncio.timeout``);
* the reply body is read with a byte cap before anyone parses it, compressed bodies are
  capped on their decoded size (:mod:`agent_cards.bounded_replies`);
* every transport failure is a :class:`~agent_cards.errors.ModelFailure` with a stable
  reason (``model_timeout``, ``model_unavailable``, ``model_reply_too_large``,
  ``model_reply_malformed``), never another exception.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, cast

import httpx

from agent_cards.bounded_replies import BoundedTransport
from agent_cards.errors import ModelFailure
from agent_cards.models.settings import ModelSettings

if TYPE_CHECKING:  # openai is loaded only when a model is configured (a client is built)
    import openai

__all__ = ["MODEL_TIMEOUT", "MODEL_UNAVAILABLE", "ModelClient", "ModelSession"]

MODEL_TIMEOUT = "model_timeout"
MODEL_UNAVAILABLE = "model_unavailable"


class ModelClient:
    """A client for the model service of ``settings``: no retries, capped replies."""

    def __init__(self, settings: ModelSettings) -> None:
        import openai

        self.settings = settings
        transport = BoundedTransport(settings.max_reply_bytes, ModelFailure)
        self._client = openai.AsyncOpenAI(
            api_key=settings.api_key,
            base_url=settings.base_url,
            timeout=settings.timeout_seconds,
            max_retries=0,
            http_client=cast(Any, httpx.AsyncClient(transport=transport)),
        )

    def __repr__(self) -> str:
        return f"ModelClient({self.settings!r})"

    async def aclose(self) -> None:
        await self._client.close()

    async def send(
        self,
        messages: Sequence[Mapping[str, Any]],
        seconds: float,
        max_tokens: int,
        options: Mapping[str, Any],
    ) -> bytes:
        """The raw body of one request's reply (capped), within ``seconds`` in total."""
        import openai

        try:
            async with asyncio.timeout(seconds):
                raw = await self._client.chat.completions.with_raw_response.create(
                    model=self.settings.model,
                    messages=cast(Any, list(messages)),
                    max_tokens=max_tokens,
                    timeout=seconds,
                    **options,
                )
                return bytes(raw.http_response.content)
        except ModelFailure:
            raise
        except (TimeoutError, openai.APITimeoutError):
            message = f"no complete reply within the {seconds:.1f} s deadline"
            raise ModelFailure(MODEL_TIMEOUT, message) from None
        except openai.OpenAIError as exc:
            raise ModelFailure(MODEL_UNAVAILABLE, _unavailable(exc)) from None


class ModelSession:
    """What a service's model adapter is: an async context that closes its client."""

    _client: ModelClient

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._client.aclose()


def _unavailable(exc: openai.OpenAIError) -> str:
    import openai

    if isinstance(exc, openai.APIConnectionError):
        return "cannot connect to the model service"
    if isinstance(exc, openai.APIStatusError):
        return f"the model service answered HTTP {exc.status_code}"
    return f"the model service answered badly ({type(exc).__name__})"
