# make run: set up .venv if missing, install, start `mqgate serve` on the embedded default.
# make test: same set-up, then lint, type check and the whole suite.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DATA_DIR ?= data
# Debian packages the tests need; installed when missing (after apt-get update), never by hand.
DEB_PACKAGES ?= procps mosquitto mosquitto-clients openssl
# The dashboard's browser test runs Debian's Chromium through Playwright (no browser download).
DEB_PACKAGES += chromium
# The Spark sink's PySpark runs a JVM: Java 17, unless a java is already on the PATH.
DEB_PACKAGES += $(if $(shell command -v java 2>/dev/null),,openjdk-17-jre-headless)

.PHONY: run test lint deb clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

deb:
	@missing=""; for p in $(DEB_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

run: $(STAMP) deb
	$(BIN)/mqgate serve --data-dir $(DATA_DIR)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy

test: $(STAMP) deb lint
	$(BIN)/python -m pytest -q -ra

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache .hypothesis
