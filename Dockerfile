# One image for every proofnet role; the command picks the role (`proofnet <role> ...`).
FROM python:3.11-slim-bookworm AS base
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
RUN apt-get update \
 && apt-get install -y --no-install-recommends git ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --create-home --uid 10001 proofnet
WORKDIR /app
COPY pyproject.toml requirements.lock README.md ./
COPY proofnet ./proofnet
COPY chain ./chain
COPY oracle ./oracle
COPY worker ./worker
COPY api ./api
RUN pip install -c requirements.lock .
USER proofnet
ENV PROOFNET_DATA_DIR=/var/lib/proofnet
ENTRYPOINT ["proofnet"]
CMD ["--help"]
