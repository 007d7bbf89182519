# One image for every proofnet role; the command picks the role (`proofnet <role> ...`).
#
# BASE_IMAGE is any Debian-like image with python3.11 (and its venv module): the official
# python:3.11-slim-bookworm for real deployments, proofnet/python-base:local where no
# registry can be reached (scripts/ci/build-base-images.sh). deploy/wheelhouse may hold
# wheels for the dependencies; with PIP_OFFLINE=1 pip installs from them only.
ARG BASE_IMAGE=python:3.11-slim-bookworm

# Only the dependency list of pyproject.toml, so that editing anything else in it (tool
# settings, markers) keeps the cached dependency layer below.
FROM ${BASE_IMAGE} AS requirements
COPY pyproject.toml /src/
# proofnet-pot is a distribution of this repository (libs/pot), installed from source below.
RUN python3 -c 'import tomllib; p = tomllib.load(open("/src/pyproject.toml", "rb")); print("\n".join(d for d in p["build-system"]["requires"] + p["project"]["dependencies"] if not d.startswith("proofnet-pot")))' >/requirements.txt

FROM ${BASE_IMAGE} AS build
ARG PIP_OFFLINE=
ENV PYTHONDONTWRITEBYTECODE=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python3 -m venv /opt/proofnet
WORKDIR /src
COPY deploy/wheelhouse /wheels
COPY requirements.lock ./
COPY --from=requirements /requirements.txt ./
# Dependencies first, in their own layer: a code change rebuilds only the layers below.
RUN /opt/proofnet/bin/pip install ${PIP_OFFLINE:+--no-index} --find-links /wheels \
      -c requirements.lock -r requirements.txt
COPY pyproject.toml README.md ./
COPY libs/pot ./libs/pot
COPY proofnet ./proofnet
COPY chain ./chain
COPY oracle ./oracle
COPY worker ./worker
COPY api ./api
RUN /opt/proofnet/bin/pip install --no-deps --no-build-isolation ./libs/pot . \
 && /opt/proofnet/bin/proofnet --help >/dev/null

FROM ${BASE_IMAGE}
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PATH=/opt/proofnet/bin:$PATH \
    PROOFNET_DATA_DIR=/var/lib/proofnet PROOFNET_CACHE_DIR=/var/lib/proofnet/cache
# git fetches job repositories (worker, oracle spot checks); the local base has it already.
RUN if ! command -v git >/dev/null || [ ! -e /etc/ssl/certs/ca-certificates.crt ]; then \
      apt-get update \
      && apt-get install -y --no-install-recommends git ca-certificates \
      && rm -rf /var/lib/apt/lists/*; \
    fi \
 && useradd --create-home --uid 10001 --user-group proofnet \
 && install -d -o proofnet -g proofnet -m 0750 /var/lib/proofnet
COPY --from=build /opt/proofnet /opt/proofnet
USER proofnet
# Every default path is under PROOFNET_DATA_DIR / PROOFNET_CACHE_DIR, in the service's
# volume; the working dir is too, for `.env` and relative paths given to a command.
WORKDIR /var/lib/proofnet
ENTRYPOINT ["proofnet"]
CMD ["--help"]
