"""``python -m remote_risk --host 127.0.0.1 --port 0``: run the risk service."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from remote_risk.app import serve
from remote_risk.settings import Settings


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="remote_risk", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--public-base-url", help="URL the card advertises (default: listen URL)")
    parser.add_argument("--task-capacity", type=int, default=Settings.task_capacity)
    parser.add_argument("--skill-delay-seconds", type=float, default=Settings.skill_delay_seconds)
    args = parser.parse_args(argv)
    settings = Settings(
        task_capacity=args.task_capacity, skill_delay_seconds=args.skill_delay_seconds
    )
    serve(args.host, args.port, public_base_url=args.public_base_url, settings=settings)


if __name__ == "__main__":
    main()
