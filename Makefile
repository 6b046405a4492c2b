# The two commands of README.md: `make demo` and `make test`. Everything else is their set-up.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test test-long round round-quick setup build build-and-test system-deps clean

demo: setup build
	$(BIN)/esbperf demo

# esbperf Round 2 (docs/round-2/README.md), as root: under 2 hours; the quick variant about 15 minutes.
# Round 1, as published then: make round ROUND=round-1.
ROUND ?= round-2

round: setup system-deps build
	$(BIN)/esbperf round --round $(ROUND)

round-quick: setup system-deps build
	$(BIN)/esbperf round --round $(ROUND) --quick

test: setup system-deps build-and-test
	$(BIN)/pytest

# The long fault and ssh cases that `make test` deselects (it names them at the end).
test-long: setup system-deps build
	ESBPERF_LONG_TESTS=1 $(BIN)/pytest -m long

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $@

build:
	mvn -q -B -DskipTests package

# The Java unit tests run here; the end-to-end tests are in tests/ (pytest).
build-and-test:
	mvn -q -B package

# Debian packages the tests use: ip/tc (emulated testbed), chromium (report check), OpenSSH's
# client and server and rsync (the emulated testbed's ssh mode), wrk (--cross-check wrk), nginx and
# HAProxy (the floors). Installed packages are not started: esbperf starts its own, by pid.
system-deps:
	@command -v ip >/dev/null && command -v tc >/dev/null && command -v chromium >/dev/null \
	  && command -v ssh >/dev/null && test -x /usr/sbin/sshd && command -v rsync >/dev/null \
	  && command -v wrk >/dev/null && command -v nginx >/dev/null && command -v haproxy >/dev/null || { \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2 chromium \
	    openssh-client openssh-server rsync wrk nginx haproxy >/dev/null; }

clean:
	mvn -q -B clean
	rm -rf $(VENV) .esbperf
