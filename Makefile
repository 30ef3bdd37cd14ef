# keyshard developer targets. `make` (or `make help`) lists them.
#
# The tests, the demo and the benchmark start their own throwaway MariaDB
# servers with scripts/backends.sh (never the system service, never port
# 3306) and install mariadb-server, mariadb-client and sysbench with apt-get
# when they are missing.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

GO      ?= go
BIN     := bin/keyshard
VERSION := $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)

# staticcheck 2026.1 (module v0.7.0) is the first release that reads Go 1.26
# code; `go run pkg@version` builds it without touching go.mod. The module
# proxy does not serve @latest lists here, so the version is exact.
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.7.0

# Every .go file in the tree except testdata (which may hold deliberately
# odd sources).
GOFILES = $(shell find . -name '*.go' -not -path './.git/*' -not -path '*/testdata/*' -not -path './.tmp/*')

.PHONY: help build test fuzz fuzz-sql torture lint fmtcheck vet demo demo-cluster bench compat install uninstall docker clean

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z][a-zA-Z_-]*:.*## / {printf "  make %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## build bin/keyshard (version from git describe)
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/keyshard

test: fmtcheck vet ## gofmt check, go vet, go test -race ./... (end-to-end tests start their own MariaDB), 5s of each fuzz target, then the driver matrix
	scripts/backends.sh install
	scripts/etcd.sh install
	$(GO) test -race -count=1 -timeout 20m ./...
	# Without -race too: the race build reads and writes sockets through package syscall, the release one with raw system calls (backend/sock).
	$(GO) test -count=1 ./backend/... ./proxy/
	GO="$(GO)" scripts/install_test.sh
	FUZZTIME=5s GO="$(GO)" scripts/fuzz.sh
	test/drivers/run.sh

# FUZZTIME is how long each fuzz target runs; FUZZ (a regexp) picks targets.
# A crasher is written under the package's testdata/fuzz/ (scripts/fuzz.sh).
FUZZTIME ?= 2m
fuzz: ## run every Go fuzz target for FUZZTIME each (default 2m; e.g. make fuzz FUZZ=Dispatch FUZZTIME=10m)
	FUZZTIME="$(FUZZTIME)" FUZZ="$(FUZZ)" GO="$(GO)" scripts/fuzz.sh

# The differential SQL fuzzer (test/fuzzsql): random schemas and rows over
# every rule type, random statements through keyshard and on one MariaDB,
# answers compared. make test runs its fixed seeds (a few seconds, in go
# test ./...); this runs seed after seed from FUZZSQL_SEED (default: the
# time) for FUZZTIME, FUZZSQL_STATEMENTS (1000) each. A difference fails the run and is written, minimized,
# to test/fuzzsql/testdata/regressions.json.
fuzz-sql: ## differential SQL fuzzer, keyshard vs one MariaDB, for FUZZTIME (default 2m; FUZZSQL_SEED=n replays from seed n)
	$(GO) test -count=1 -timeout 0 -v -run '^TestFuzzSQL$$' ./test/fuzzsql \
		-fuzzsql.time="$(FUZZTIME)" -fuzzsql.seed="$(or $(FUZZSQL_SEED),$(shell date +%s))" \
		-fuzzsql.statements="$(or $(FUZZSQL_STATEMENTS),1000)"

# The fault torture for transactions (test/torture): bank transfers and
# ledger inserts through keyshard (a real process, two instances on etcd
# for part of the run) while keyshard and the backends are SIGKILLed,
# SIGSTOPped and restarted; then the invariants are checked. make test runs
# it for 30s (in go test ./...); this runs its storm for TORTURE_TIME.
# TORTURE_SEED=n replays the controller's and the clients' choices.
TORTURE_TIME ?= 30m
torture: ## fault torture for XA transactions: storm of kills for TORTURE_TIME (default 30m), then the invariants checked
	$(GO) test -count=1 -timeout 0 -v -run '^TestTorture$$' ./test/torture \
		-torture.time="$(TORTURE_TIME)" -torture.seed="$(or $(TORTURE_SEED),0)"

lint: fmtcheck vet ## gofmt check, go vet, staticcheck
	$(GO) run $(STATICCHECK) ./...

fmtcheck: ## fail, listing the files, if gofmt would change any
	@files=$$(gofmt -l $(GOFILES)); \
	if [[ -n $$files ]]; then echo "gofmt needed on:"; echo "$$files"; exit 1; fi

vet: ## go vet ./...
	$(GO) vet ./...

demo: ## build, start 2 backends (3307, 3308) and keyshard on :9696 with etc/ks.yaml; Ctrl-C stops all
	scripts/demo.sh

demo-cluster: ## as demo, with etcd on :2479 holding etc/ks.yaml and two keyshard instances (:9696, :9697) sharing it; Ctrl-C stops all
	scripts/demo-cluster.sh

# OUT is where bench/run.sh appends its markdown results; see bench/README.md
# for WORKLOADS, THREADS, TIME, ROUNDS, SKIP_BIG and the rest.
OUT ?= bench/RESULTS.md
bench: ## sysbench direct vs keyshard + 1M-row streaming test; appends to bench/RESULTS.md
	OUT="$(OUT)" bench/run.sh

compat: ## driver matrix alone: real client drivers direct vs through keyshard (test/drivers/run.sh; make test runs it too)
	test/drivers/run.sh

# make install [PREFIX=/usr/local] [DESTDIR=] [SYSTEMD_DIR=/lib/systemd/system]:
# the binary to $(PREFIX)/bin, the unit to $(SYSTEMD_DIR) with ExecStart
# on that binary, and etc/ks.yaml to /etc/keyshard/ks.yaml unless a config
# is there already. DESTDIR prefixes every path (staging, packaging). See
# docs/deploy.md; scripts/install_test.sh checks it.
PREFIX      ?= /usr/local
SYSTEMD_DIR ?= /lib/systemd/system
install: build ## install bin/keyshard, /etc/keyshard/ks.yaml (never overwritten) and the systemd unit (PREFIX, DESTDIR)
	install -D -m 0755 $(BIN) "$(DESTDIR)$(PREFIX)/bin/keyshard"
	sed 's|^ExecStart=/usr/local/bin/keyshard |ExecStart=$(PREFIX)/bin/keyshard |' etc/keyshard.service > bin/keyshard.service
	install -D -m 0644 bin/keyshard.service "$(DESTDIR)$(SYSTEMD_DIR)/keyshard.service"
	@if [[ -e "$(DESTDIR)/etc/keyshard/ks.yaml" ]]; then \
		echo "kept $(DESTDIR)/etc/keyshard/ks.yaml (the sample is etc/ks.yaml)"; \
	else \
		echo install -D -m 0644 etc/ks.yaml "$(DESTDIR)/etc/keyshard/ks.yaml"; \
		install -D -m 0644 etc/ks.yaml "$(DESTDIR)/etc/keyshard/ks.yaml"; \
	fi
	@if [[ -z "$(DESTDIR)" ]]; then echo "next: systemctl daemon-reload && systemctl enable --now keyshard"; fi

uninstall: ## remove the installed binary and systemd unit (the config in /etc/keyshard stays)
	rm -f "$(DESTDIR)$(PREFIX)/bin/keyshard" "$(DESTDIR)$(SYSTEMD_DIR)/keyshard.service"
	@echo "kept $(DESTDIR)/etc/keyshard"

# IMAGE is the image name; it is tagged with VERSION and latest. The build
# context is the tree without .git, bin/, .tmp/ (a GB and more) and the
# other build output, sent as a tar: the legacy builder reads no
# scripts/Dockerfile.dockerignore (only BuildKit does).
IMAGE ?= keyshard
DOCKER_CONTEXT_EXCLUDES := --exclude=./.git --exclude=./.tmp --exclude=./bin --exclude=./go \
	--exclude=./keyshard --exclude='./*.test' --exclude='./*.prof'
docker: ## build the container image keyshard:VERSION and :latest from scripts/Dockerfile (needs docker; IMAGE renames it)
	@command -v docker >/dev/null || { echo "make docker: docker is not installed" >&2; exit 1; }
	tar -c $(DOCKER_CONTEXT_EXCLUDES) . | docker build -f scripts/Dockerfile \
		--build-arg VERSION="$(VERSION)" -t "$(IMAGE):$(VERSION)" -t "$(IMAGE):latest" -

clean: ## remove bin/ and the demo/bench/compat scratch dirs (backends stay: scripts/backends.sh down)
	rm -rf bin .tmp/demo .tmp/demo-cluster .tmp/bench .tmp/compat
