"""The risk team's remote specialist: a member of the federation built on the member kit.

Start it with ``python -m remote_risk`` (:func:`remote_risk.service.serve`), or build the
ASGI app with :func:`remote_risk.service.create_app` to run it in-process. Its skill,
``interpret-risk-policy``, is in :mod:`remote_risk.risk.skill`; everything else a member
does is :mod:`member_kit`'s. Importing this package loads none of them: each is imported
by name where it is used.
"""

__all__: list[str] = []
