"""The operator console in the browser, at ``/console`` of ``federation serve coordinator``.

``app`` (:class:`Console`, installed beside the API), ``routes`` (pages, polled JSON and
forms), ``guard`` (security headers, session and CSRF checks), ``sessions`` (server-side
sessions), ``throttle`` (failed logins), ``pages`` (what each page shows, from the
service's documents), ``timeline`` (a run's ledger events across lanes), ``settings``;
``templates/`` and ``static/`` ship in the package (no build step, nothing fetched from
elsewhere).
"""

__all__: list[str] = []
