# One image for both services: `federation serve coordinator` and `federation serve risk`.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
# Every dependency at the version the tests ran with (constraints.txt), not the newest.
COPY pyproject.toml README.md constraints.txt ./
COPY contracts ./contracts
COPY agent_cards ./agent_cards
COPY member_kit ./member_kit
COPY coordinator ./coordinator
COPY remote_risk ./remote_risk
RUN pip install --constraint constraints.txt . \
    && useradd --system --uid 10001 --home-dir /var/lib/federation federation \
    && mkdir -p /var/lib/federation /var/lib/remote-risk \
    && chown federation:federation /var/lib/federation /var/lib/remote-risk

USER federation
ENTRYPOINT ["federation"]
CMD ["--help"]
