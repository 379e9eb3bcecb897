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
# etcd, the consensus service automatic failover stands on (docs/cluster.md); the tests start their own, and
# `make run ETCD=local` one on loopback.
DEB_PACKAGES += etcd-server
# The dashboard's browser test runs Debian's Chromium through Playwright (no browser download).
DEB_PACKAGES += chromium
# The Spark sink's PySpark runs a JVM: Java 17, unless a java is already on the PATH.
DEB_PACKAGES += $(if $(shell command -v java 2>/dev/null),,openjdk-17-jre-headless)
# The remoting tests drive ali-ons, a RocketMQ 4 client on Node.js, installed with npm: each unless already on the
# PATH (NodeSource's nodejs package carries its own npm and conflicts with Debian's npm package).
DEB_PACKAGES += $(if $(shell command -v node 2>/dev/null),,nodejs) $(if $(shell command -v npm 2>/dev/null),,npm)

# The RocketMQ 4 clients the remoting tests drive (tests/broker_remoting/), each installed in its own directory from
# its pinned list. The Python client (rocketmq-client-python, librocketmq inside its wheel) stays out of .venv: its
# package `rocketmq` is also rocketmq-python-client's, and installed together the later one owns
# rocketmq/__init__.py (the RocketMQ 5 client's `from rocketmq import ClientConfiguration` fails when it is the 4's).
# Tests run it in a child process with PYTHONPATH=$(ROCKETMQ4_PYTHON)/site.
ROCKETMQ4_PYTHON ?= tests/broker_remoting/python
ROCKETMQ4_NODE ?= tests/broker_remoting/node
# The RocketMQ 5 Node.js client (rocketmq-client-nodejs) the gRPC tests drive, installed from its lock file too.
ROCKETMQ5_NODE ?= tests/proxy/node

.PHONY: run test lint deb clean compiled uncompiled rocketmq4-clients test-clients
# Modules compiled with mypyc from their own .py: the list is [tool.mqgate] compiled in pyproject.toml.
COMPILED := $(shell $(PYTHON) -c 'import tomllib; print(" ".join(tomllib.load(open("pyproject.toml", "rb"))["tool"]["mqgate"]["compiled"]))')
COMPILED_STAMP := $(VENV)/.compiled

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# Packages are installed with a policy-rc.d that exits 101 (Debian's way, invoke-rc.d(8), to keep services from
# starting during an install), put back as it was afterwards. A mosquitto this recipe installed is then disabled
# on a systemd host, where its service would otherwise hold 1883 at the next boot and `make run` would collide
# with it; a mosquitto that was installed before is the user's and is left alone. (A saved policy-rc.d left by
# an interrupted run is the user's: it is kept, and ours replaced.)
POLICY_RC_D ?= /usr/sbin/policy-rc.d
# A new machine often runs unattended-upgrades or cloud-init's install at first boot: apt waits this long for the
# dpkg lock they hold (apt's DPkg::Lock::Timeout) instead of giving up at once.
DPKG_LOCK_TIMEOUT_S ?= 300
# Exists when systemd is running (sd_booted(3)); a container without it starts no services.
SYSTEMD_RUN_DIR ?= /run/systemd/system
deb:
	@set -e; missing=""; for p in $(DEB_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  echo "(apt waits up to $(DPKG_LOCK_TIMEOUT_S) s for the package database when another install holds its lock)"; \
	  $$SUDO apt-get -o DPkg::Lock::Timeout=$(DPKG_LOCK_TIMEOUT_S) update -qq; \
	  policy="$(POLICY_RC_D)"; saved="$$policy.mqgate-saved"; \
	  if [ ! -e "$$saved" ] && [ -e "$$policy" ]; then $$SUDO mv "$$policy" "$$saved"; fi; \
	  restore() { $$SUDO rm -f "$$policy"; if [ -e "$$saved" ]; then $$SUDO mv "$$saved" "$$policy"; fi; }; \
	  trap restore EXIT; \
	  printf '#!/bin/sh\n# written by mqgate make deb: no service starts during this install\nexit 101\n' \
	    | $$SUDO tee "$$policy" >/dev/null; \
	  $$SUDO chmod 755 "$$policy"; \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get -o DPkg::Lock::Timeout=$(DPKG_LOCK_TIMEOUT_S) install -y -qq \
	    $$missing; \
	  case " $$missing " in *" mosquitto "*) \
	    if [ -d "$(SYSTEMD_RUN_DIR)" ]; then \
	      echo "disabling the mosquitto service this set-up installed (mqgate serves MQTT on 1883)"; \
	      $$SUDO systemctl disable --now mosquitto; \
	    fi;; \
	  esac; \
	  case " $$missing " in *" etcd-server "*) \
	    if [ -d "$(SYSTEMD_RUN_DIR)" ]; then \
	      echo "disabling the etcd service this set-up installed (the tests start their own etcd)"; \
	      $$SUDO systemctl disable --now etcd; \
	    fi;; \
	  esac; \
	fi

# Built again when a listed .py changes. Where mypyc or the C compiler fails, the interpreted modules run (say so
# and go on): the .py files are the same code.
$(COMPILED_STAMP): $(STAMP) $(COMPILED) pyproject.toml mqgate/compile_modules.py
	@echo "compiling $(words $(COMPILED)) modules with mypyc (log: $(VENV)/mypyc.log)"
	@# setuptools keeps an unchanged build's old time stamp: touched, the modules are newer than their sources.
	@if $(BIN)/python -m mqgate.compile_modules --log $(VENV)/mypyc.log; then \
	  for source in $(COMPILED); do touch "$${source%.py}".cpython-*.so; done; touch $@; \
	else echo "mypyc failed (see $(VENV)/mypyc.log): the interpreted modules run"; $(MAKE) --no-print-directory uncompiled; fi

compiled: $(COMPILED_STAMP)

# Installed again when the pinned list is newer than the installation (a directory's time is its last install).
$(ROCKETMQ4_PYTHON)/site: $(ROCKETMQ4_PYTHON)/requirements.txt | $(BIN)/python
	rm -rf $@
	$(BIN)/python -m pip install --quiet --no-deps --target $@ -r $<
	touch $@

$(ROCKETMQ4_NODE)/node_modules: $(ROCKETMQ4_NODE)/package-lock.json | deb
	cd $(ROCKETMQ4_NODE) && npm ci --no-audit --no-fund
	touch $@

rocketmq4-clients: $(ROCKETMQ4_PYTHON)/site $(ROCKETMQ4_NODE)/node_modules

$(ROCKETMQ5_NODE)/node_modules: $(ROCKETMQ5_NODE)/package-lock.json | deb
	cd $(ROCKETMQ5_NODE) && npm ci --no-audit --no-fund
	touch $@

test-clients: rocketmq4-clients $(ROCKETMQ5_NODE)/node_modules

uncompiled:
	rm -f $(foreach source,$(COMPILED),$(basename $(source)).cpython-*.so) core/mypyc_runtime__mypyc.cpython-*.so \
	  $(COMPILED_STAMP)

# Under automatic failover (docs/cluster.md): `make run ETCD=HOST:PORT BROKER_ID=N` serves as broker N of its group
# with that etcd; ETCD=local starts one on 127.0.0.1:2379 first (its data in DATA_DIR/etcd, its log in
# DATA_DIR/etcd.log), unless one answers there already; it keeps running after serve stops.
ETCD ?=
BROKER_ID ?= 1
LOCAL_ETCD := 127.0.0.1:2379
run: $(STAMP) $(COMPILED_STAMP) deb
ifeq ($(ETCD),)
	$(BIN)/mqgate serve --data-dir $(DATA_DIR)
else ifeq ($(ETCD),local)
	@mkdir -p $(DATA_DIR)
	@if ! $(BIN)/python -c "import socket; socket.create_connection(('127.0.0.1', 2379), 1)" 2>/dev/null; then \
	  echo "starting etcd on $(LOCAL_ETCD) (data in $(DATA_DIR)/etcd)"; \
	  nohup etcd --data-dir $(DATA_DIR)/etcd --listen-client-urls http://$(LOCAL_ETCD) \
	    --advertise-client-urls http://$(LOCAL_ETCD) --listen-peer-urls http://127.0.0.1:2380 \
	    > $(DATA_DIR)/etcd.log 2>&1 & \
	  for _ in $$(seq 50); do grep -q "ready to serve client requests" $(DATA_DIR)/etcd.log && break; sleep 0.2; done; \
	fi
	$(BIN)/mqgate serve --data-dir $(DATA_DIR) --etcd $(LOCAL_ETCD) --broker-id $(BROKER_ID)
else
	$(BIN)/mqgate serve --data-dir $(DATA_DIR) --etcd $(ETCD) --broker-id $(BROKER_ID)
endif

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy

# The suite runs in TEST_WORKERS processes, each test file whole in one of them (its module fixtures start once):
# most tests wait on servers, clients and child processes, so two workers keep two cores busy.
TEST_WORKERS ?= 2
test: $(STAMP) $(COMPILED_STAMP) deb lint test-clients
	$(BIN)/python -m pytest -q -ra -n $(TEST_WORKERS) --dist loadfile

clean: uncompiled
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache .hypothesis build $(ROCKETMQ4_PYTHON)/site \
	  $(ROCKETMQ4_NODE)/node_modules $(ROCKETMQ5_NODE)/node_modules
