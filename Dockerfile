# One image for both programs: `python -m gatehouse_operator` and `python -m gatehouse_proxy`.
# BASE_IMAGE: any Debian-like image with Python 3.11 and its venv module. The dev node builds this
# very file with buildah on a locally made Debian bookworm base (`make cluster-up`).
ARG BASE_IMAGE=python:3.11-slim

FROM ${BASE_IMAGE} AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY operator ./operator
COPY proxy ./proxy
COPY contract ./contract
RUN python3 -m venv /opt/build \
 && /opt/build/bin/pip wheel --no-cache-dir --disable-pip-version-check --wheel-dir /wheels .

FROM ${BASE_IMAGE}
# A virtualenv, so that nothing shadows or is shadowed by the base image's own Python packages.
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    python3 -m venv /opt/gatehouse \
 && /opt/gatehouse/bin/pip install --no-cache-dir --disable-pip-version-check \
      --no-index --find-links /wheels gatehouse
ENV PATH=/opt/gatehouse/bin:$PATH PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
# A uid with no passwd entry, as most hardened bases give: nothing may need one.
USER 65532:65532
ENTRYPOINT []
