# The two commands of the README: `make demo` and `make test`. Both install
# what they need first (Debian, as root).
GO ?= go
# CI adds -v: its log then names every test's duration (scripts/test-summary).
GOTESTFLAGS ?=
# One static binary, and one that can drop its capabilities in every
# thread once attached (the Go runtime cannot with cgo).
export CGO_ENABLED = 0

.PHONY: demo test deps roots build generate check-generated check-gofmt unit fuzz bench-overhead

demo: deps
	$(GO) run ./cmd/dbiolat demo

test: deps roots .tools/prometheus3 .tools/otelcol .tools/jaeger check-generated check-gofmt
	$(GO) vet ./...
	# -p 1: the tests share one kernel and page cache (drop_caches, block I/O by
	# other processes); packages must not run at the same time. -parallel 3:
	# the tests that can run side by side (cmd/dbiolat's sideBySide) mostly wait.
	$(GO) test -p 1 -parallel 3 -count=1 -timeout 40m $(GOTESTFLAGS) ./...
	$(MAKE) fuzz

deps:
	scripts/install-deps

# Tests only: the Debian sid roots the tests start MySQL 9.7, MariaDB 11.8
# and PostgreSQL 18 and 19 in (internal/sidroot), built once per machine
# into /var/cache/dbiolat/roots and rebuilt only when their package lists
# change: a few minutes the first time, nothing after.
roots: deps
	scripts/sid-root

# Tests only: Prometheus 3 (Debian's is 2.42), from the Go module proxy, to
# scrape serve's classic histograms as native ones (TestDashboardQueriesReturnData).
# No service discovery: the test names its target.
PROMETHEUS3 = github.com/prometheus/prometheus/cmd/prometheus@v0.316.0
.tools/prometheus3:
	GOBIN=$(CURDIR)/.tools/go $(GO) install -tags remove_all_sd $(PROMETHEUS3)
	mv .tools/go/prometheus $@

# Tests only: the OpenTelemetry Collector, built by its own builder (ocb) with
# just the components of deploy/otel/builder.yaml: the OTLP exporter's tests
# send to it (internal/oteltest) and it validates deploy/otel/collector.yaml.
OCB = go.opentelemetry.io/collector/cmd/builder@v0.165.0
.tools/otelcol: deploy/otel/builder.yaml
	GOBIN=$(CURDIR)/.tools/go $(GO) install $(OCB)
	rm -rf .tools/otelcol-build
	.tools/go/builder --config deploy/otel/builder.yaml
	mv .tools/otelcol-build/otelcol $@
	rm -rf .tools/otelcol-build

# Tests only: Jaeger v2 (a Collector distribution: OTLP in, traces in memory,
# its HTTP query API), where the tests read a trace's spans and their parents
# back. Its go.mod has a replace directive, which go install refuses: built
# from a throwaway module that requires it, with the same replacement.
JAEGER = github.com/jaegertracing/jaeger/cmd/jaeger
JAEGER_VERSION = v1.76.0
.tools/jaeger:
	tmp=$$(mktemp -d) && out=$(CURDIR)/$@ && cd $$tmp && \
	$(GO) mod init jaeger-build && \
	$(GO) mod edit -replace github.com/Shopify/sarama=github.com/Shopify/sarama@v1.33.0 && \
	$(GO) get $(JAEGER)@$(JAEGER_VERSION) && \
	$(GO) build -trimpath -ldflags='-s -w' -o $$out.tmp $(JAEGER) && \
	mv $$out.tmp $$out; s=$$?; rm -rf $$tmp; exit $$s

build:
	$(GO) build -o dbiolat ./cmd/dbiolat

# The container image (Containerfile): make build's static binary alone,
# FROM scratch. Named as Kubernetes names the manifest's `dbiolat:latest`
# (podman would say localhost/dbiolat:latest, which a node's containerd
# does not match when the image is loaded into it: deploy/README.md).
# CONTAINER=docker builds it the same way.
CONTAINER ?= podman
IMAGE ?= docker.io/library/dbiolat:latest
.PHONY: image
image: build
	$(CONTAINER) build -t $(IMAGE) \
	  --build-arg VERSION=$$(git describe --always --dirty 2>/dev/null || echo dev) \
	  --build-arg REVISION=$$(git rev-parse HEAD 2>/dev/null || echo unknown) .

# Regenerate the BPF objects and their Go bindings (needs clang).
generate:
	$(GO) generate ./internal/probe/

# The generated files must be what the sources beside them give (on a clean
# clone, CI: what was committed). Only the generated files are compared: an
# edited source regenerated, not yet committed, is not stale.
GENERATED = internal/probe/dbiolat_x86_bpfel.go internal/probe/dbiolat_x86_bpfel.o
check-generated:
	@tmp=$$(mktemp -d) && cp $(GENERATED) $$tmp/ && $(MAKE) -s generate && \
	for f in $(GENERATED); do \
	  cmp -s $$tmp/$$(basename $$f) $$f || { echo "$$f is stale: run make generate and commit it"; rm -rf $$tmp; exit 1; }; \
	done; rm -rf $$tmp

# Every Go file gofmt'ed: the ones that are not are listed. The go tool's
# packages, so .tools (and whatever it holds) is not walked.
check-gofmt:
	@files=$$(gofmt -l $$($(GO) list -f '{{.Dir}}' ./...)); \
	if [ -n "$$files" ]; then echo "not gofmt'ed (run gofmt -w on them):"; echo "$$files"; exit 1; fi

# The tests that need neither root nor a database server, in every package:
# -short skips the others (testenv.NotShort), as root too.
unit:
	$(GO) test -short -count=1 ./...

# Bounded fuzzing of the parsers that read foreign input. Minimizing a new
# input may take a minute by default, during which nothing is fuzzed (the
# recording reader's "0/sec"): keep it short, the time is for fuzzing.
# Budgets are counts of inputs, not durations: Go before 1.27 fails a
# duration's fuzzing by chance when the deadline catches a busy worker
# ("context deadline exceeded", golang/go#75804). Each is about 15 s here.
FUZZ = $(GO) test -run '^$$' -timeout 10m -fuzzminimizetime 3s -fuzz
fuzz:
	$(FUZZ) FuzzParseArg -fuzztime 300000x ./internal/usdt/
	$(FUZZ) FuzzReadProbes -fuzztime 100000x ./internal/usdt/
	$(FUZZ) FuzzNormalize -fuzztime 200000x ./internal/sqlnorm/
	$(FUZZ) FuzzLiteralPrivacy -fuzztime 30000x ./internal/sqlnorm/
	$(FUZZ) FuzzTraceParent -fuzztime 300000x ./internal/sqlnorm/
	$(FUZZ) FuzzParseRoundTrip -fuzztime 300000x ./internal/postgres/
	$(FUZZ) FuzzParseCommand -fuzztime 200000x ./internal/mysql/
	$(FUZZ) FuzzOpen -fuzztime 2000x ./internal/record/

bench-overhead: deps
	$(GO) run ./bench/overhead
