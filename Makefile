# Sluice — build and test. `make test` is what CI runs (.ci/run).
GO ?= go
PKGS := ./...

.PHONY: all build quick test vet-untested lab-quick test-oip test-security test-s3 test-postgres test-features fmt-check vet unit fuzz-smoke bench-xgboost clean test-kube image test-kube-image test-openapi test-ui

all: build

build:
	$(GO) build -o bin/sluice ./cmd/sluice

# The full check CI runs: formatting, vet, and every test with the race
# detector. go vet runs inside go test (-vet=all: every analyzer of go vet,
# on each package as go test type-checks it for the race build), so the
# module is not type-checked a second time without -race; vet-untested
# vets the packages go test does not build (no test files). `make vet` is
# the same vet on its own.
test: fmt-check vet-untested unit

# The inner loop, not CI: gofmt and go vet of the Go files changed
# against $(QUICK_BASE) (committed or not, untracked included) and their
# packages, then every ./internal/... test once, without the race detector
# and in -short mode. The e2e tests of ./cmd/sluice (the real binary) and
# the race detector are `make test`'s.
QUICK_BASE ?= main
quick:
	@files="$$( { git diff --name-only --diff-filter=d $(QUICK_BASE) -- '*.go'; git ls-files --others --exclude-standard -- '*.go'; } | sort -u)"; \
	if [ -n "$$files" ]; then \
		out="$$(gofmt -l $$files)"; \
		if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi; \
		pkgs="$$(for f in $$files; do echo ./$$(dirname $$f); done | sort -u)"; \
		echo "go vet" $$pkgs; $(GO) vet $$pkgs || exit 1; \
	else echo "no Go file changed against $(QUICK_BASE): nothing to gofmt or vet"; fi; \
	lib="$${SLUICE_ONNXRUNTIME_LIB:-}"; \
	if [ -z "$$lib" ] || [ ! -f "$$lib" ]; then lib="$$(bash scripts/fetch-onnxruntime.sh | tail -1)" || exit 1; fi; \
	SLUICE_ONNXRUNTIME_LIB="$$lib" $(GO) test -short -count=1 ./internal/...

fmt-check:
	@out="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"; \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

vet-untested:
	@pkgs="$$($(GO) list -f '{{if and (not .TestGoFiles) (not .XTestGoFiles)}}{{.ImportPath}}{{end}}' $(PKGS))"; \
	if [ -n "$$pkgs" ]; then echo "go vet (packages without tests):" $$pkgs; $(GO) vet $$pkgs; fi

# The onnx runtime's tests need ONNX Runtime's shared library: unless
# SLUICE_ONNXRUNTIME_LIB names an existing file, scripts/fetch-onnxruntime.sh
# fetches it once into its cache folder (a no-op when it is there already).
# The OIP gRPC e2e tests drive grpcurl: unless SLUICE_GRPCURL names it,
# scripts/install-grpcurl.sh builds it once into its cache folder.
unit:
	@lib="$${SLUICE_ONNXRUNTIME_LIB:-}"; \
	if [ -z "$$lib" ] || [ ! -f "$$lib" ]; then \
		lib="$$(bash scripts/fetch-onnxruntime.sh)" || { echo "make: scripts/fetch-onnxruntime.sh failed: the onnx tests need ONNX Runtime (docs/onnx.md)"; exit 1; }; \
		lib="$$(printf '%s\n' "$$lib" | tail -1)"; \
	fi; \
	echo "ONNX Runtime: $$lib"; \
	grpcurl="$${SLUICE_GRPCURL:-}"; \
	if [ -z "$$grpcurl" ] || [ ! -x "$$grpcurl" ]; then \
		grpcurl="$$(bash scripts/install-grpcurl.sh | tail -1)" || { echo "make: scripts/install-grpcurl.sh failed: the OIP gRPC e2e tests need grpcurl"; exit 1; }; \
	fi; \
	echo "grpcurl: $$grpcurl"; \
	SLUICE_ONNXRUNTIME_LIB="$$lib" SLUICE_GRPCURL="$$grpcurl" $(GO) test -race -vet=all -count=1 -p 1 -timeout 15m $(PKGS) && \
	echo "the serving e2e suite again, replicas on 2 worker processes:" && \
	SLUICE_E2E_WORKERS=2 SLUICE_ONNXRUNTIME_LIB="$$lib" SLUICE_GRPCURL="$$grpcurl" $(GO) test -race -vet=off -count=1 -timeout 15m ./cmd/sluice/

# Open Inference Protocol conformance (issue 23; not part of `make test`,
# as it installs protoc): the requests of tritonclient http/grpc and the
# KServe SDK (internal/oip/testdata/clients, from their sources) replayed
# against the handlers and through the real binary, then a Go client
# generated from proto/inference by protoc (Debian protobuf-compiler) and
# the Go plugins from the module proxy, in a temporary module, calling a
# real `sluice serve --grpc-addr` (scripts/test-oip.sh).
test-oip:
	bash scripts/test-oip.sh

# The regression suite of issue 18's attacks (not part of `make test`: the
# file has the build tag `security`): cmd/sluice/security_e2e_test.go, one
# TestSecurity* test per finding, each through the real binaries (a rogue
# worker, forged heartbeats, registration and heartbeat floods, the
# worker's own service, a 900 KB OIP model_name, 3,000 trickling bodies,
# 40,000 stalled streams, 19,000 idle gRPC connections), with RSS,
# descriptors and goroutines read from /proc and /metrics. -v prints the
# figures docs/benchmarks.md quotes. Without -race: the gateway and workers
# under attack are the binary TestMain builds (never with -race), so the
# detector would only instrument this process, the attacker, whose floods
# it would slow several times over (past the suite's ~5 minutes on 2
# cores) while checking no code the suite is about; `make test` runs the
# same harness and its helpers with -race.
# A TypeScript client generated from a real server's /openapi.json
# (openapi-typescript + openapi-fetch, pinned in scripts/openapi-client)
# is type-checked and passes a smoke test against `sluice serve`. Needs
# node and npm (.ci/run installs Debian's).
test-openapi:
	./scripts/test-openapi.sh

test-security:
	$(GO) vet -tags security ./cmd/sluice/
	$(GO) test -tags security -count=1 -p 1 -timeout 10m -run '^TestSecurity' -v ./cmd/sluice/

# The Model Serving Lab, short (not part of `make test`; .ci/run runs it):
# sluice lab --quick into a temporary folder (it starts its own servers
# and workers on loopback ports of their choosing; under 5 minutes on 2
# cores), then scripts/check-lab-report.sh checks the report's shape: three
# sections with charts and findings, the CSV and JSON beside it, nothing
# that leaves the page. Not its numbers: they are the machine's.
# LAB_OUT=DIR keeps the report there.
lab-quick:
	$(GO) build -ldflags "-X main.version=$$(git describe --always --dirty 2>/dev/null || echo dev)" -o bin/sluice ./cmd/sluice
	@out="$${LAB_OUT:-$$(mktemp -d)}"; echo "lab report: $$out/report.html"; \
	bin/sluice lab --quick --out "$$out/report.html" --note "make lab-quick" && \
	bash scripts/check-lab-report.sh "$$out/report.html"

# Sluice on a real Kubernetes control plane (not part of `make test`):
# scripts/install-kube.sh builds etcd, kube-apiserver, controller-manager,
# scheduler, kubectl and kwok once into ~/.cache/sluice/kube (about 5.5
# minutes cold on 2 cores, a no-op after); the test applies
# deploy/kubernetes/overlays/e2e and runs the pods' real processes
# (docs/kubernetes.md, "What is tested").
test-kube:
	@bin="$$(bash scripts/install-kube.sh | tail -1)" || { echo "make: scripts/install-kube.sh failed"; exit 1; }; \
	echo "Kubernetes binaries: $$bin"; \
	SLUICE_KUBE_BIN="$$bin" $(GO) test -count=1 -timeout 15m -run 'TestKubernetes|TestExtractEntrypoint' -v ./internal/kube/kubetest/

# The OCI image as a tarball (ko, no Docker daemon): scripts/build-image.sh
# writes bin/sluice-image.tar.
image:
	bash scripts/build-image.sh

# The image, then the Kubernetes e2e with the pods running the image's
# own entrypoint binary (what CI runs).
test-kube-image: image
	SLUICE_IMAGE_TAR="$(CURDIR)/bin/sluice-image.tar" $(MAKE) test-kube

# The artifact store on S3 (internal/registry/s3) against a real
# S3-compatible server, not part of `make test`: scripts/install-seaweedfs.sh
# builds SeaweedFS's weed once into ~/.cache/sluice/bin (about 6.5 minutes
# cold on 2 cores), scripts/start-seaweedfs.sh starts it in a fresh folder
# and sets SLUICE_S3_ENDPOINT and the test keys, and the tests run with
# SLUICE_S3_REQUIRED=1, so they fail instead of skipping without a server:
# the registry's Artifacts conformance suite and the S3 store's own tests,
# then the e2e through the real binaries (serve --artifacts s3://… with 2
# workers, corruption, the store stopped) and two gateways on one
# PostgreSQL (scripts/start-postgres.sh, as make test-postgres) sharing the
# bucket. SeaweedFS is stopped after.
test-s3:
	@weed="$$(bash scripts/install-seaweedfs.sh | tail -1)" || { echo "make: scripts/install-seaweedfs.sh failed: the S3 tests need SeaweedFS's weed"; exit 1; }; \
	pg="$$(bash scripts/start-postgres.sh | tail -1)" || { echo "make: scripts/start-postgres.sh failed: the two-gateway S3 test needs PostgreSQL"; exit 1; }; \
	dir="$$(mktemp -d)"; \
	trap 'bash scripts/stop-seaweedfs.sh "$$dir"; rm -rf "$$dir"' EXIT; \
	SLUICE_WEED="$$weed" bash scripts/start-seaweedfs.sh "$$dir" >/dev/null || exit 1; \
	. "$$dir/env"; \
	echo "SeaweedFS S3: $$SLUICE_S3_ENDPOINT"; \
	SLUICE_WEED="$$weed" SLUICE_S3_REQUIRED=1 $(GO) test -race -count=1 -timeout 10m ./internal/registry/s3/... ./internal/jobs/jobio/ && \
	SLUICE_WEED="$$weed" SLUICE_S3_REQUIRED=1 SLUICE_TEST_POSTGRES="$$pg" SLUICE_TEST_POSTGRES_REQUIRED=1 \
		$(GO) test -count=1 -timeout 10m -run 'TestS3' -v ./cmd/sluice/

# The PostgreSQL suites (not part of `make test`, which needs no database):
# scripts/start-postgres.sh starts (installing it if needed) a PostgreSQL 15
# in $(SLUICE_PG_DIR) on 127.0.0.1:$(SLUICE_PG_PORT); then the registry and
# records conformance suites run on it, and the e2e of two gateways on one
# database (it stops and starts the server) in both serving modes.
# SLUICE_TEST_POSTGRES_REQUIRED makes those tests fail, not skip, if the
# database is missing.
SLUICE_PG_DIR ?= $(HOME)/.cache/sluice/postgres
SLUICE_PG_PORT ?= 55432
export SLUICE_PG_DIR SLUICE_PG_PORT

test-postgres:
	@url="$$(bash scripts/start-postgres.sh)" || { echo "make: scripts/start-postgres.sh failed: the PostgreSQL tests need a server"; exit 1; }; \
	echo "PostgreSQL: $$url"; \
	export SLUICE_TEST_POSTGRES="$$url" SLUICE_TEST_POSTGRES_REQUIRED=1; \
	$(GO) test -race -count=1 -p 1 -run 'Postgres' -v ./internal/registry/ ./internal/records/recordsdb/ ./internal/outcomes/outcomesdb/ ./internal/jobs/jobsdb/ ./internal/jobs/ && \
	$(GO) test -race -count=1 -run 'Postgres' -v -timeout 10m ./cmd/sluice/ && \
	echo "the PostgreSQL e2e again, replicas on 2 worker processes:" && \
	SLUICE_E2E_WORKERS=2 $(GO) test -race -count=1 -run 'Postgres' -v -timeout 10m ./cmd/sluice/

# Feature enrichment against real stores (not part of `make test`):
# scripts/start-redis.sh installs Debian's redis-server if missing (the
# tests start their own servers with it, to stop and kill them) and
# scripts/start-postgres.sh starts PostgreSQL; the conformance suites of
# redisfeat and pgfeat, then the e2e through the real binary (every tier,
# defaults, stale values, records, OIP, the CLI; Redis stopped with SIGSTOP
# under load and killed and restarted).
test-features:
	@bash scripts/start-redis.sh >/dev/null || { echo "make: scripts/start-redis.sh failed: the feature tests need redis-server"; exit 1; }; \
	url="$$(bash scripts/start-postgres.sh)" || { echo "make: scripts/start-postgres.sh failed: the feature tests need PostgreSQL"; exit 1; }; \
	export SLUICE_TEST_POSTGRES="$$url" SLUICE_TEST_POSTGRES_REQUIRED=1 SLUICE_TEST_REDIS_REQUIRED=1 SLUICE_TEST_FEATURES=1; \
	$(GO) test -race -count=1 -v ./internal/features/... && \
	$(GO) test -race -count=1 -run 'TestFeatures' -v -timeout 10m ./cmd/sluice/ && \
	echo "the feature e2e again, replicas on 2 worker processes:" && \
	SLUICE_E2E_WORKERS=2 $(GO) test -race -count=1 -run 'TestFeatures' -v -timeout 10m ./cmd/sluice/

# The web console in a real browser (not part of `make test`: it needs
# chromium): scripts/install-chromium.sh installs Debian's chromium and
# fonts-dejavu-core if missing; cmd/sluice/ui_e2e_test.go (build tag ui)
# drives it headless through chromedp against the real binary: every page,
# every action, a rollout advancing live, a read-only key, 500 models.
# Screenshots and timings land in $(UI_ARTIFACTS); docs/screenshots holds
# the committed ones (make test-ui UI_ARTIFACTS=docs/screenshots).
UI_ARTIFACTS ?= bin/ui-artifacts
test-ui:
	@bin="$$(bash scripts/install-chromium.sh | tail -1)" || { echo "make: scripts/install-chromium.sh failed: the console test needs chromium"; exit 1; }; \
	echo "chromium: $$bin"; mkdir -p $(UI_ARTIFACTS); \
	SLUICE_CHROMIUM="$$bin" SLUICE_UI_ARTIFACTS="$(abspath $(UI_ARTIFACTS))" $(GO) test -tags ui -count=1 -timeout 15m -run '^TestUI' -v ./cmd/sluice/

# A short run of every fuzz target (not part of `make test`; run before releases).
fuzz-smoke:
	$(GO) test -run x -fuzz FuzzDecodePredict -fuzztime 30s ./internal/server/
	$(GO) test -run x -fuzz FuzzDecodeJSON -fuzztime 30s ./internal/oip/
	$(GO) test -run x -fuzz FuzzBinaryInfer -fuzztime 30s ./internal/oip/
	$(GO) test -run x -fuzz FuzzOIPDecodeSame -fuzztime 30s ./internal/oip/
	$(GO) test -run x -fuzz FuzzParse -fuzztime 30s ./internal/modelpkg/
	$(GO) test -run x -fuzz FuzzReadTarGz -fuzztime 30s ./internal/modelpkg/
	$(GO) test -run x -fuzz FuzzLoad -fuzztime 30s ./internal/runtime/xgboost/
	$(GO) test -run x -fuzz FuzzLoad -fuzztime 30s ./internal/runtime/sklearn/
	$(GO) test -run x -fuzz FuzzTreeShape -fuzztime 30s ./internal/runtime/sklearn/
	$(GO) test -run x -fuzz FuzzTreeShape -fuzztime 10s ./internal/runtime/xgboost/
	$(GO) test -run x -fuzz FuzzCategorical -fuzztime 10s ./internal/runtime/xgboost/
	$(GO) test -run x -fuzz FuzzDecode -fuzztime 30s ./internal/runtime/oip/
	$(GO) test -run x -fuzz FuzzOutput -fuzztime 30s ./internal/runtime/oip/
	$(GO) test -run x -fuzz FuzzBatchReader -fuzztime 10s ./internal/records/recordsdb/
	$(GO) test -run x -fuzz FuzzEvaluate -fuzztime 10s ./internal/abstat/

clean:
	rm -rf bin .sluice-data
