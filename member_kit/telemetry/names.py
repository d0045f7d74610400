"""The names a member reports under, derived once from the member's own name.

A member's name (``Member.name``, e.g. ``legal_terms`` or ``legal-terms``) is folded to
lower-case words joined by ``_``, the base; everything an operator sees is named from it
(remote_risk's, then the legal team's member's):

- Prometheus metrics ``BASE_*``: ``remote_risk_*``, ``legal_terms_*``;
- span names and attributes ``BASE.*``: ``remote_risk.skill``, ``legal_terms.skill``;
- the OTel ``service.name`` default, ``_`` as ``-``: ``remote-risk``, ``legal-terms``;
- the access logger ``BASE.access``: ``remote_risk.access``, ``legal_terms.access``;
- environment variables ``UPPER_BASE_*``: ``REMOTE_RISK_*``, ``LEGAL_TERMS_*``;

so remote_risk keeps exactly the names its operators' dashboards and the docs use. A name
that cannot name a metric (empty, or not starting with a letter) is refused with
:class:`~member_kit.errors.MemberNameInvalid` when the app is built.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from member_kit.errors import MemberNameInvalid

__all__ = ["REMOTE_RISK", "TelemetryNames"]

_SEPARATORS = re.compile(r"[^a-z0-9]+")
_BASE = re.compile(r"[a-z][a-z0-9]*(_[a-z0-9]+)*")


@dataclass(frozen=True)
class TelemetryNames:
    """One member's names, all from ``base`` (lower-case words joined by ``_``)."""

    base: str

    @classmethod
    def of(cls, member_name: str) -> TelemetryNames:
        """The names of the member called ``member_name`` (``-``, spaces and the like
        become ``_``, letters lower case)."""
        base = _SEPARATORS.sub("_", member_name.lower()).strip("_")
        if not _BASE.fullmatch(base):
            raise MemberNameInvalid(
                f"member_name_invalid: member name {member_name!r} cannot name metrics:"
                " it needs letters or digits, starting with a letter"
            )
        return cls(base)

    @property
    def metrics_prefix(self) -> str:
        return self.base + "_"

    @property
    def span_prefix(self) -> str:
        return self.base + "."

    @property
    def instrumentation(self) -> str:
        return self.base

    @property
    def service_name(self) -> str:
        """The OTel ``service.name`` default (``OTEL_SERVICE_NAME`` overrides it)."""
        return self.base.replace("_", "-")

    @property
    def access_logger(self) -> str:
        return self.base + ".access"

    @property
    def env_prefix(self) -> str:
        return self.base.upper() + "_"

    @property
    def metrics_realm(self) -> str:
        """The ``WWW-Authenticate`` realm of ``GET /metrics``."""
        return self.service_name + "-metrics"

    @property
    def audit_realm(self) -> str:
        """The ``WWW-Authenticate`` realm of the ``GET /audit/...`` routes."""
        return self.service_name + "-audit"


REMOTE_RISK = TelemetryNames.of("remote_risk")
