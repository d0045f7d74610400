# One image for both services: `federation serve coordinator` and `federation serve risk`.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
COPY pyproject.toml README.md ./
COPY contracts ./contracts
COPY agent_cards ./agent_cards
COPY coordinator ./coordinator
COPY remote_risk ./remote_risk
RUN pip install . \
    && useradd --system --uid 10001 --home-dir /var/lib/federation federation \
    && mkdir -p /var/lib/federation /var/lib/remote-risk \
    && chown federation:federation /var/lib/federation /var/lib/remote-risk

USER federation
ENTRYPOINT ["federation"]
CMD ["--help"]
