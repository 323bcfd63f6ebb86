# honcho-graphql: `make run` and `make test` set up what is missing (PostgreSQL + pgvector unless
# DATABASE_URL is set, the embedding model) and then call cargo. See scripts/ for the set-up.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
# One shell per recipe, so a recipe can compute the database URL and export it to cargo.
.ONESHELL:
.DELETE_ON_ERROR:
.DEFAULT_GOAL := help

# rustup installs into ~/.cargo/bin, which non-login shells (CI, cron, IDEs) may not have on PATH.
ifeq ($(shell command -v cargo 2>/dev/null),)
export PATH := $(HOME)/.cargo/bin:$(PATH)
endif

CARGO ?= cargo
# One target dir outside the clone: every clone, worktree and CI run reuses the same builds.
export CARGO_TARGET_DIR ?= $(HOME)/.cache/honcho-graphql/target
export HONCHO_MODEL_DIR ?= $(CURDIR)/.data/models/all-MiniLM-L6-v2
# Extra arguments for cargo test, e.g. make test TEST_ARGS='search -- --nocapture'
TEST_ARGS ?=
BENCH_ARGS ?=
EVAL_ARGS ?=
# make test PLAYGROUND_TEST=0 skips the playground's tests (examples + headless Chromium).
PLAYGROUND_TEST ?= 1

# src/gql is generated (from schema.graphql, by the build) and not a source.
PLAYGROUND_SRC := $(shell find playground -path playground/node_modules -prune -o -path playground/dist -prune -o -path playground/tests -prune -o -path playground/src/gql -prune -o -type f -print 2>/dev/null)

.PHONY: help setup postgres model run test lint schema bench bench-derive bench-replicas bench-vectors bench-scale eval playground playground-test conformance

help:
	@echo "make run         set up PostgreSQL (unless DATABASE_URL is set) and the model, serve on 127.0.0.1:8000"
	@echo "make test        same set-up, then cargo test --workspace --all-targets \$$TEST_ARGS, then make playground-test"
	@echo "make lint        cargo fmt --check and clippy -D warnings"
	@echo "make schema      regenerate schema.graphql"
	@echo "make setup       only the set-up (PostgreSQL + pgvector, model files)"
	@echo "make conformance HONCHO_SDK=dir  Honcho's TypeScript SDK suite against this server (CONFORMANCE_LLM=stub: chat with a stand-in LLM)"
	@echo "make bench       run the benchmark (when bench/ exists)"
	@echo "make bench-derive  the deriver's throughput with an instant fake LLM"
	@echo "make bench-replicas  reads on the primary alone vs with a streaming standby"
	@echo "make bench-vectors  vector-leg recall and latency at 1536 and 3072 dimensions"
	@echo "make bench-scale  reads, ingest, memory and recall from 10k to 10M messages (BENCH_ARGS='--quick': to 1M)"
	@echo "make eval        search recall on generated conversational QA (EVAL_ARGS='--label x --sweep')"
	@echo "make playground  build playground/dist (when playground/ has a package.json)"
	@echo "make playground-test  examples validate against schema.graphql; browser test in headless Chromium"

setup: postgres model

# With DATABASE_URL set we never touch local clusters.
postgres:
	@if [ -z "$${DATABASE_URL:-}" ]; then scripts/setup-postgres.sh; fi

model:
	@scripts/fetch-model.sh >/dev/null

run: model playground
	if [ -z "$${DATABASE_URL:-}" ]; then
	  base=$$(scripts/setup-postgres.sh)
	  if [ -z "$$(psql "$$base/postgres" -XAtqc "select 1 from pg_database where datname = 'honcho'")" ]; then
	    psql "$$base/postgres" -Xqc 'create database honcho'
	  fi
	  export DATABASE_URL="$$base/honcho"
	fi
	# The server migrates on start.
	exec $(CARGO) run --release --bin honcho-graphql -- serve

# Honcho's TypeScript SDK suite, unchanged, against this server (README, "Honcho REST API").
conformance: model
	scripts/conformance.sh "$(HONCHO_SDK)"

# The test harness creates its own databases from this URL (one per test, from a template).
# The playground is built first: the server's tests serve the built playground/dist.
test: model playground
	if [ -z "$${DATABASE_URL:-}" ]; then
	  base=$$(scripts/setup-postgres.sh)
	  export DATABASE_URL="$$base/postgres"
	fi
	# The npm graphql-ws client for the subscription test (offline after the first install).
	scripts/setup-node-ws.sh
	# The official MCP client SDKs (npm and PyPI, pinned) for tests/it/mcp_clients.rs. Without them
	# those tests say SKIPPED, and under CI=true they fail.
	scripts/setup-mcp-clients.sh || echo "make test: the MCP client SDKs are not installed" >&2
	$(CARGO) test --workspace --all-targets $(TEST_ARGS)
	if [ "$(PLAYGROUND_TEST)" = 1 ]; then $(MAKE) --no-print-directory playground-test; fi

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

# Write to a temp file first so a failed build never leaves a truncated schema.graphql.
schema:
	$(CARGO) run --bin honcho-graphql -- schema > schema.graphql.tmp
	mv schema.graphql.tmp schema.graphql

bench:
	if [ ! -f bench/Cargo.toml ]; then echo "no benchmark yet (bench/Cargo.toml does not exist)"; exit 0; fi
	scripts/fetch-model.sh >/dev/null
	if [ -z "$${DATABASE_URL:-}" ]; then
	  base=$$(scripts/setup-postgres.sh)
	  export DATABASE_URL="$$base/postgres"
	fi
	$(CARGO) run --release -p honcho-bench -- $(BENCH_ARGS)

# Reads on the primary alone vs the primary + a streaming standby (scripts/standby.sh), and the
# latency of read-your-writes.
bench-replicas:
	if [ -z "$${DATABASE_URL:-}" ]; then
	  base=$$(scripts/setup-postgres.sh)
	  export DATABASE_URL="$$base/postgres"
	fi
	$(CARGO) run --release -p honcho-bench --bin honcho-bench-replicas -- $(BENCH_ARGS)

# The vector legs' recall@10 and latency at 1536 and 3072 dimensions (bench/README.md, "Wide
# embedders").
bench-vectors:
	if [ -z "$${DATABASE_URL:-}" ]; then
	  base=$$(scripts/setup-postgres.sh)
	  export DATABASE_URL="$$base/postgres"
	fi
	$(CARGO) run --release -p honcho-bench --bin honcho-bench-vectors -- $(BENCH_ARGS)

# Reads, ingest, memory and recall against the size: 10k, 100k, 1M messages in one workspace, then
# 10M over 10,000 workspaces (bench/README.md, "Scale"). The corpus database (bench_scale) is kept
# and a second run resumes it; results in bench/results/scale/.
bench-scale: model
	if [ -z "$${DATABASE_URL:-}" ]; then
	  base=$$(scripts/setup-postgres.sh)
	  export DATABASE_URL="$$base/postgres"
	fi
	$(CARGO) run --release -p honcho-bench --bin honcho-bench-scale -- $(BENCH_ARGS)

# The deriver's throughput with an instant fake LLM (queue and storage overhead per message).
bench-derive: model
	if [ -z "$${DATABASE_URL:-}" ]; then
	  base=$$(scripts/setup-postgres.sh)
	  export DATABASE_URL="$$base/postgres"
	fi
	$(CARGO) run --release -p honcho-bench --bin honcho-bench-derive -- $(BENCH_ARGS)

# Search recall on generated conversational QA, through the GraphQL API (bench/README.md,
# "Search quality"); results in bench/results/eval/.
eval: model
	if [ -z "$${DATABASE_URL:-}" ]; then
	  base=$$(scripts/setup-postgres.sh)
	  export DATABASE_URL="$$base/postgres"
	fi
	$(CARGO) run --release -p honcho-bench --bin honcho-eval -- $(EVAL_ARGS)

ifneq ($(wildcard playground/package.json),)
playground: playground/dist/index.html
playground/dist/index.html: $(PLAYGROUND_SRC) schema.graphql
	scripts/build-playground.sh
else
playground:
	@:
endif

# The playground's tests: the pages type-check against types generated from schema.graphql
# (npm run typecheck: graphql-codegen, tsc --noEmit), every example and page query validates
# against it (node --test), then tests/browser.mjs drives the pages in headless Chromium against the debug
# server on a fresh database (screenshots in target/playground-screenshots/). Debian's chromium is
# installed when missing; after the first run nothing is downloaded (npm ci reads npm's cache).
ifneq ($(wildcard playground/package.json),)
playground-test: playground
	if ! command -v chromium >/dev/null; then
	  [ "$$(id -u)" = 0 ] || { echo "playground-test: needs chromium (apt-get install chromium)" >&2; exit 1; }
	  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium
	fi
	if [ -z "$${DATABASE_URL:-}" ]; then
	  base=$$(scripts/setup-postgres.sh)
	  export DATABASE_URL="$$base/postgres"
	fi
	$(CARGO) build --bin honcho-graphql
	# Test a copy: clones and worktrees sharing CARGO_TARGET_DIR replace debug/honcho-graphql.
	mkdir -p target/playground-test
	cp "$$CARGO_TARGET_DIR/debug/honcho-graphql" target/playground-test/honcho-graphql
	export HONCHO_BIN="$(CURDIR)/target/playground-test/honcho-graphql"
	cd playground
	[ -d node_modules ] || npm ci --no-audit --no-fund --prefer-offline
	# Types generated from schema.graphql, then tsc: a schema change that breaks a page fails here.
	npm run typecheck
	npm test
	node tests/browser.mjs
else
playground-test:
	@:
endif
