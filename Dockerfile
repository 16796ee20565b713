# Two images, one per program, from one file: `--target proxy` and `--target operator` (the last
# stage, so the default). `make image` builds both; the dev node builds this very file with buildah
# on a locally made Debian bookworm base (`make cluster-up`).
#
# Reproducible: the base is pinned by digest, every Python package is a locked wheel checked
# against its sha256 (requirements/, `make lock`), and a builder that stamps every file and the
# image with one fixed time (`buildah build --layers --no-cache --timestamp 0`; `docker buildx
# build --no-cache` with SOURCE_DATE_EPOCH=0 and rewrite-timestamp) gives one image digest per
# commit. The commit's time is a label (CREATED).
#
# BASE_IMAGE: any Debian-like image with Python 3.11 and its venv module. Renovate (renovate.json)
# moves the digest when the tag moves. Not checked from the machine that wrote it (no registry
# there): the digest docker-library's maintainers printed for this tag.
ARG BASE_IMAGE=docker.io/library/python:3.11-slim-bookworm@sha256:6d2502238109c929569ae99355e28890c438cb11bc88ef02cd189c173b3db07c

# pip and setuptools, locked: only the build stages have them. /opt/gatehouse is the images'
# Python: a virtualenv, so that nothing shadows or is shadowed by the base image's own packages,
# and with no pip in it.
FROM ${BASE_IMAGE} AS tools
# Set, so that compiled modules record their sources' hashes, not times; its value is no input.
ENV SOURCE_DATE_EPOCH=0 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
COPY requirements/build.txt /locks/
RUN python3 -m venv /opt/build \
 && /opt/build/bin/pip install --quiet --require-hashes --only-binary=:all: --no-deps \
      -r /locks/build.txt \
 && python3 -m venv --without-pip /opt/gatehouse

# The proxy's dependencies: a layer that changes only with requirements/proxy.txt, shared by both
# images.
FROM tools AS proxy-deps
COPY requirements/proxy.txt /locks/
RUN /opt/build/bin/pip --python /opt/gatehouse/bin/python install --quiet --require-hashes \
      --only-binary=:all: --no-deps -r /locks/proxy.txt

# What the operator extra adds (the Kubernetes client, kopf, ...), in a directory of its own so
# that it is a layer of its own.
FROM proxy-deps AS operator-deps
COPY requirements/operator.txt /locks/
RUN /opt/build/bin/pip --python /opt/gatehouse/bin/python install --quiet --require-hashes \
      --only-binary=:all: --no-deps --prefix /opt/layer -r /locks/operator.txt

# Gatehouse itself: source last, so that a change to it rebuilds only this and the top layer.
# `pip check` then sees the three layers as they will be merged.
FROM operator-deps AS app
COPY pyproject.toml README.md LICENSE /src/
COPY contract /src/contract
COPY operator /src/operator
COPY proxy /src/proxy
RUN /opt/build/bin/pip wheel --quiet --no-deps --no-build-isolation --wheel-dir /wheels /src \
 && /opt/build/bin/pip --python /opt/gatehouse/bin/python install --quiet --no-deps \
      --no-index --find-links /wheels --prefix /opt/app gatehouse \
 && PYTHONPATH=/opt/layer/lib/python3.11/site-packages:/opt/app/lib/python3.11/site-packages \
      /opt/build/bin/pip --python /opt/gatehouse/bin/python check

FROM ${BASE_IMAGE} AS runtime
ARG BASE_IMAGE
ARG VERSION=0.0.0
ARG REVISION=unknown
ARG CREATED=1970-01-01T00:00:00Z
LABEL org.opencontainers.image.source="https://github.com/gatehouse-dev/gatehouse" \
      org.opencontainers.image.url="https://github.com/gatehouse-dev/gatehouse" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.vendor="Gatehouse" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.base.name="${BASE_IMAGE}"
ENV PATH=/opt/gatehouse/bin:$PATH PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
COPY --from=proxy-deps /opt/gatehouse /opt/gatehouse
# A uid with no passwd entry, as most hardened bases give: nothing may need one.
USER 65532:65532

FROM runtime AS proxy
LABEL org.opencontainers.image.title="gatehouse-proxy" \
      org.opencontainers.image.description="Gatehouse's proxy: pins hosts and injects credentials server-side."
COPY --from=app /opt/app /opt/gatehouse
CMD ["python", "-m", "gatehouse_proxy"]

FROM runtime AS operator
LABEL org.opencontainers.image.title="gatehouse-operator" \
      org.opencontainers.image.description="Gatehouse's operator, admission webhook and CLIs."
COPY --from=operator-deps /opt/layer /opt/gatehouse
COPY --from=app /opt/app /opt/gatehouse
CMD ["python", "-m", "gatehouse_operator"]
