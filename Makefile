# Switchyard — `make` (or `make help`) lists the targets. See docs/operations.md.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

GO ?= go
# ./<module>/... for every module in go.work, so vet and lint cover them all.
PKGS = $(shell scripts/modules.sh)
MODULE_DIRS = $(patsubst ./%/...,%,$(PKGS))

.PHONY: help build run start stop status test conformance faults bench-handoff fmt vet lint clean

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-13s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## build every binary (<module>/cmd/<name>) into .run/bin
	scripts/build.sh

run: ## run the whole platform in the foreground (Ctrl-C stops it all); SWITCHYARD_GPU=1 adds executor-gpu
	scripts/run.sh run

start: ## like run, but return once everything is ready and leave it running
	scripts/run.sh start

stop: ## stop the services and the run profile's Postgres and Redis
	scripts/run.sh stop

status: ## show which services are running
	scripts/run.sh status

test: ## go vet + go test over every module (and web/ tests) against a throwaway Postgres/Redis
	scripts/test.sh

conformance: ## GitHub's ${{ }} expression cases through package expr: N passed, N failed (cases from ../shared/conformance/gha-expressions, or the folder in SWITCHYARD_EXPR_CORPUS)
	$(GO) test ./dispatcher/internal/workflow/expr -run '^TestConformance$$' -count=1 -v | grep -v -E '^(=== RUN|--- PASS|PASS$$|ok )'

faults: ## the fault suite on a platform of its own (docs/faults.md); e.g. FAULTS_FLAGS='-faults pg-stop -load 60s'
	$(GO) run ./bench/cmd/faults $(FAULTS_FLAGS)

bench-handoff: ## chain hand-off, Switchyard beside Temporal's dev server (docs/PERFORMANCE.md); e.g. HANDOFF_FLAGS='-systems temporal'
	bench/cmd/handoff/run.sh $(HANDOFF_FLAGS)

fmt: ## gofmt every module
	gofmt -l -w $(MODULE_DIRS)

vet: ## go vet every module
	$(GO) vet $(PKGS)

lint: ## fail on unformatted Go files, then go vet every module
	@out=$$(gofmt -l $(MODULE_DIRS)); if [ -n "$$out" ]; then echo "gofmt: these files need formatting (make fmt):"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

clean: ## stop the run, test and faults profiles and remove .run (binaries, data, logs, keys)
	scripts/run.sh stop
	scripts/stack.sh stop test
	scripts/stack.sh stop faults
	rm -rf .run
