"""Who may ask remote_risk for work: delegation-token verification, the replay record,
and the issuers it trusts."""

__all__: list[str] = []
