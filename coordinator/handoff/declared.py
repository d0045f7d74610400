"""Return contracts as an operator declares them: per skill at registration, or per delegation.

The command line reads the schema files and the HTTP API takes the schemas in its body;
both arrive here as JSON values and leave as :class:`~contracts.returns.ReturnContract`
values, or as a :class:`~coordinator.errors.UsageError` naming what is wrong.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from contracts.returns import ReturnContract, ReturnContractError, finding_contract, schema_contract
from coordinator.errors import UsageError


def declared_contracts(
    schemas: Mapping[str, object], finding_skills: Iterable[str] = ()
) -> dict[str, ReturnContract]:
    """Per skill: a JSON Schema contract for each of ``schemas``, the Finding contract
    (evidence among the records sent) for each of ``finding_skills``."""
    contracts = {skill: finding_contract(source="registration") for skill in finding_skills}
    for skill, schema in schemas.items():
        if skill in contracts:
            raise UsageError(
                f"skill {skill!r} is given both a return schema and the finding contract",
                "return_contract_conflict",
            )
        contracts[skill] = _schema(schema, f"return schema of skill {skill!r}", "registration")
    return contracts


def delegation_contract(schema: object | None) -> ReturnContract | None:
    """The contract of one delegation (``--return-schema FILE``), or None if none given."""
    if schema is None:
        return None
    return _schema(schema, "return schema", "delegation")


def _schema(schema: object, what: str, source: str) -> ReturnContract:
    try:
        return schema_contract(schema, source)
    except ReturnContractError as exc:
        raise UsageError(f"{what}: {exc}", exc.reason) from None
