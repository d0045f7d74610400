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
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace

from member_kit.errors import StorageUnavailable
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
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--public-base-url", help="URL the card advertises (default: listen URL)")
    parser.add_argument(
        "--grpc-port", type=int, help="also serve the gRPC binding on this port (same host)"
    )
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
    add_trust_arguments(parser)
    logs.add_arguments(parser)
    return parser


def add_trust_arguments(parser: argparse.ArgumentParser) -> None:
    """The trust and key flags, shared with ``federation serve risk``."""
    parser.add_argument(
        "--trust-issuer",
        action="append",
        metavar="ISSUER=JWKS_FILE_OR_URL",
        help=f"accept delegation tokens of ISSUER (repeatable; env {trust.TRUST_ENV_VAR})",
    )
    parser.add_argument(
        "--data-dir",
        help=f"where the service keeps its keys and database (env {trust.DATA_DIR_ENV_VAR})",
    )
    parser.add_argument("--key-file", help="sign with this private key (PEM or JWK) instead")
    parser.add_argument(
        "--insecure-anonymous",
        action="store_true",
        help="DEVELOPMENT ONLY: run without trusted issuers, accepting every caller",
    )


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
    args = build_parser().parse_args(argv)
    # The server is imported once the arguments are read (``--help`` starts quickly).
    from member_kit.server.app import ConfigurationError
    from remote_risk.service import serve

    logs.setup_from(args, os.environ)
    try:
        settings = settings_from(args, os.environ)
        serve(args.host, args.port, public_base_url=args.public_base_url, settings=settings)
    # TrustConfigError is a ValueError
    except (ValueError, ConfigurationError, StorageUnavailable) as exc:
        print(f"remote_risk: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    finally:  # the set-up lasts as long as the service (main may run inside another program)
        logs.reset()


if __name__ == "__main__":
    main()
