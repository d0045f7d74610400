"""``python -m remote_risk --host 127.0.0.1 --port 0``: run the risk service.

Trust: ``--trust-issuer ISSUER=JWKS_FILE_OR_URL`` (repeatable; env
``REMOTE_RISK_TRUST_ISSUERS`` when no flag is given) names whose delegation tokens are
accepted. Without one the service refuses to start unless ``--insecure-anonymous`` is
given. Own keys: ``--key-file FILE``, else ``DATA_DIR/keys`` (``--data-dir``, env
``REMOTE_RISK_DATA_DIR``, default the XDG data directory). Tasks and used tokens:
``--database-url URL`` (env ``REMOTE_RISK_DATABASE_URL``; PostgreSQL or SQLite), else
``DATA_DIR/remote-risk.db``. A model for the risk skill: ``REMOTE_RISK_MODEL_*`` (see
:func:`remote_risk.risk.interpreter.model_config_from_env`). Configuration errors end with one
line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import replace

from member_kit.command import Serve, add_listening_arguments, add_trust_arguments, run_member
from member_kit.telemetry import logs
from member_kit.trust import issuers as trust
from remote_risk.risk.interpreter import model_config_from_env
from remote_risk.settings import Settings

DATABASE_URL_ENV_VAR = "REMOTE_RISK_DATABASE_URL"
# The bearer token GET /metrics asks for; unset: /metrics is not served.
METRICS_TOKEN_ENV_VAR = "REMOTE_RISK_METRICS_TOKEN"
# The bearer token GET /audit/... asks for (the decision log's head and proofs); unset:
# those routes are not served.
AUDIT_TOKEN_ENV_VAR = "REMOTE_RISK_AUDIT_TOKEN"
# "1": refuse a send whose delegation token binds no request digest.
REQUIRE_DIGEST_ENV_VAR = "REMOTE_RISK_REQUIRE_REQUEST_DIGEST"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="remote_risk", description=(__doc__ or "").splitlines()[0]
    )
    add_listening_arguments(parser)
    parser.add_argument("--task-capacity", type=int, default=Settings.task_capacity)
    parser.add_argument("--skill-delay-seconds", type=float, default=Settings.skill_delay_seconds)
    parser.add_argument(
        "--task-lease-seconds",
        type=float,
        default=Settings.task_lease_seconds,
        help="how long an unfinished task stays with a process that stopped renewing it "
        "before another process (or this service restarted) resumes it",
    )
    parser.add_argument(
        "--idempotency-retention-seconds",
        type=int,
        default=Settings.idempotency_retention_seconds,
        help="how long an idempotency key answers its task (then it is refused as expired)",
    )
    parser.add_argument(
        "--database-url",
        help=f"keep tasks and used tokens in this database instead of DATA_DIR/remote-risk.db "
        f"(env {DATABASE_URL_ENV_VAR})",
    )
    add_trust_arguments(parser, data_dir_required=False)
    logs.add_arguments(parser)
    return parser


def settings_from(args: argparse.Namespace, environ: Mapping[str, str]) -> Settings:
    """Settings for the parsed flags, or a one-line :class:`trust.TrustConfigError`,
    :class:`ConfigurationError` or ``ValueError``."""
    from member_kit.server.app import check_secure

    trusted = trust.load_trusted_issuers(
        trust.issuer_entries(args.trust_issuer, environ),
        min_interval=trust.min_refresh_seconds(environ),
    )
    directory = trust.data_dir(args.data_dir, environ)
    settings = Settings(
        task_capacity=args.task_capacity,
        skill_delay_seconds=args.skill_delay_seconds,
        task_lease_seconds=args.task_lease_seconds,
        idempotency_retention_seconds=args.idempotency_retention_seconds,
        trusted_issuers=trusted,
        insecure_anonymous=args.insecure_anonymous,
        revocation_poll_seconds=args.revocation_poll_seconds,
        model=model_config_from_env(environ),
        data_dir=directory,
        database_url=args.database_url or environ.get(DATABASE_URL_ENV_VAR) or None,
        metrics_token=environ.get(METRICS_TOKEN_ENV_VAR) or None,
        grpc_port=args.grpc_port,
        grpc_host=args.host,
        require_request_digest=environ.get(REQUIRE_DIGEST_ENV_VAR, "") == "1",
        audit_token=environ.get(AUDIT_TOKEN_ENV_VAR) or None,
    )
    check_secure(settings)
    keys = trust.signing_keys(args.key_file, directory)
    return replace(settings, signing_keys=keys)


def main(argv: Sequence[str] | None = None) -> None:
    run_member("remote_risk", build_parser(), argv, settings_from, _serve)


def _serve() -> Serve:
    from remote_risk.service import serve

    return serve


if __name__ == "__main__":
    main()
