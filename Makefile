# Every target sets up what it needs: a fresh clone needs only `make demo` or `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed
DEV := $(BIN)/python -m gatehouse_dev
PYTEST_ARGS ?=

.PHONY: help install build control-plane promtool otelcol crds up down demo lint test test-lowest bench clean \
  cluster-up cluster-down node-packages browser-packages store-packages screenshots faults lock \
  image chart release docs docs-pages docs-check cold-start

help:
	@echo "make demo   start the local stack and show it working"
	@echo "make test   lint, type-check and run the whole suite"
	@echo "make up     start the local stack in the background (writes .gatehouse/dev/env)"
	@echo "make down   stop the local stack"
	@echo "make bench  apply-to-route latency, the proxy's added latency and its profile under load"
	@echo "make faults the fault suite alone (part of make test): Pods killed and evicted, the API"
	@echo "            server frozen, the keyring rotated and a soak (GATEHOUSE_SOAK_SECONDS), on the node"
	@echo "make cluster-up    a single-node cluster that runs Pods, with the image built from"
	@echo "                   Dockerfile (writes .gatehouse/node/env); make cluster-down stops it"
	@echo "make release       the two images (make image) and the chart package (make chart) in dist/;"
	@echo "                   BASE_IMAGE=local builds on the dev node's Debian base"
	@echo "make lock          the images' lock files (requirements/) from pyproject.toml"
	@echo "make docs          serve the documentation site on 127.0.0.1:8000 (docs/, mkdocs.yml)"
	@echo "make docs-pages    regenerate its reference pages (docs/reference/) from the code"
	@echo "make docs-check    build it strictly (part of make test): a broken link fails"
	@echo "make cold-start    time make demo (COLD_STEPS=\"demo ci\" adds .ci/run's steps) on a fresh"
	@echo "                   clone with empty caches, and print a table"

$(INSTALLED): pyproject.toml dev/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/pip install --quiet --disable-pip-version-check -e . -e ./dev
	touch $@

install: $(INSTALLED)

build: install
	$(DEV) build

# promtool, which evaluates the chart's alerts in the tests (make test), cached like the above.
promtool: install
	$(DEV) build-promtool

# The OpenTelemetry Collector the traces' e2e tests export to (make test), cached the same way.
otelcol: install
	$(DEV) build-otelcol

crds: install
	$(BIN)/python -m gatehouse_operator.api.crds
	$(BIN)/python -m gatehouse_operator.api.roles
	$(BIN)/python -m gatehouse_operator.controllers.webhook_configuration
	$(BIN)/python -m gatehouse_dev.stack_rbac

# The control plane's build needs only the standard library: on a fresh machine it compiles
# while the virtualenv and the store's package install beside it (make -j3, below).
control-plane:
	PYTHONPATH=dev $(PYTHON) -m gatehouse_dev.binaries $(CONTROL_PLANE_FLAGS)

up:
	@$(MAKE) --no-print-directory -j3 install store-packages control-plane
	$(DEV) up

down:
	@if [ -x $(BIN)/python ]; then $(DEV) down; fi

# The node needs root (namespaces, mounts) and Debian's containerd, runc, CNI plugins, iptables,
# ipset (kube-router's network policies), buildah and debootstrap: installed here when missing
# and run as root, as .ci/run does.
NODE_PACKAGES := containerd runc containernetworking-plugins iptables ipset conntrack iproute2 \
  util-linux buildah debootstrap gcc libc6-dev

node-packages:
	@missing=$$(for p in $(NODE_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" != 0 ]; then echo "the dev node needs root and: $$missing"; exit 1; fi; \
	  echo "installing $$missing"; apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

# The connections page's browser tests drive Debian's chromium through Playwright. The binary is
# checked, not dpkg's record: a removed package keeps its record while its config files stay.
browser-packages:
	@command -v chromium >/dev/null || { \
	  if [ "$$(id -u)" != 0 ]; then echo "the browser tests need Debian's chromium"; exit 1; fi; \
	  echo "installing chromium"; apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

# The proxies' shared store in the dev stack and the tests: Debian's redis-server.
store-packages:
	@command -v redis-server >/dev/null || test -x /usr/bin/redis-server || { \
	  if [ "$$(id -u)" != 0 ]; then echo "the dev stack and the tests need Debian's redis-server"; exit 1; fi; \
	  echo "installing redis-server"; apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; }

cluster-up: install node-packages
	$(DEV) cluster-up

cluster-down:
	@if [ -x $(BIN)/python ]; then $(DEV) cluster-down; fi

demo:
	@$(MAKE) --no-print-directory -j3 install store-packages control-plane CONTROL_PLANE_FLAGS=--no-helm
	$(DEV) demo

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

# --durations: where the suite's time goes, in every CI log (docs/development/local-control-plane.md,
# "Cold start").
test: lint node-packages browser-packages store-packages
	$(DEV) build-all
	$(BIN)/pytest --durations=30 $(PYTEST_ARGS)

faults: install build node-packages
	$(DEV) build-node
	$(BIN)/pytest -s tests/node/test_faults_on_node.py

# The documentation site. Its reference pages are generated (a test fails when they are stale);
# the strict build also runs in the tests (tests/dev/test_docs.py), so make test checks both.
docs: install
	$(BIN)/mkdocs serve --dev-addr 127.0.0.1:8000

docs-pages: install
	$(DEV) docs

docs-check: install
	$(BIN)/mkdocs build --strict --site-dir $(VENV)/site

# The pictures in docs/concepts/connections-page.md, taken by its browser tests.
screenshots: build browser-packages
	GATEHOUSE_SCREENSHOTS_DIR=$(CURDIR)/docs/screenshots $(BIN)/pytest tests/e2e/test_connections_page.py

# The images' lock files: pins with hashes for the Dockerfile, resolved for its platforms.
lock: install
	$(BIN)/python -m gatehouse_dev.lock

# Release artifacts in dist/: the images need buildah (installed with the node's packages).
image: install node-packages
	$(BIN)/python -m gatehouse_dev.release image

chart: install
	$(BIN)/python -m gatehouse_dev.release chart

release: install node-packages
	$(BIN)/python -m gatehouse_dev.release all

# Every direct dependency at its declared lower bound, and the tests that need no cluster on them.
LOWEST := .venv-lowest
test-lowest: install store-packages
	rm -rf $(LOWEST)
	$(PYTHON) -m venv $(LOWEST)
	$(BIN)/python -m gatehouse_dev.lowest pyproject.toml > $(LOWEST)/constraints.txt
	$(LOWEST)/bin/pip install --quiet --disable-pip-version-check \
	  -c $(LOWEST)/constraints.txt -e . -e ./dev
	$(LOWEST)/bin/pytest -p no:cacheprovider tests/operator tests/proxy tests/dev

# wrk and nginx are Debian's (apt-get as root, as .ci/run does); anyone else is told to install them.
bench: install build otelcol store-packages
	@{ command -v wrk && { command -v nginx || test -x /usr/sbin/nginx; }; } >/dev/null \
	  || [ "$$(id -u)" != 0 ] || { echo "installing wrk and nginx-light"; apt-get update -qq \
	  && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk nginx-light >/dev/null; }
	$(BIN)/python -m gatehouse_dev.bench

# A fresh machine's first run, timed: a clone with caches of its own (gatehouse_dev.cold_start).
# Only the standard library: it needs no virtualenv of this checkout.
COLD_STEPS ?= demo
cold-start:
	PYTHONPATH=dev $(PYTHON) -m gatehouse_dev.cold_start $(COLD_STEPS)

clean: down
	rm -rf $(VENV) $(LOWEST) .gatehouse dist .mypy_cache .ruff_cache .pytest_cache
