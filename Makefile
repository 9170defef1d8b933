# otelcol-ai — build, run and test the distribution.
#
# Every target installs what it needs into .tools/ and .cache/ (both ignored
# by git), idempotently, from the Go module proxy and the npm registry.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build

GO          ?= go
TOOLS       := $(CURDIR)/.tools
CACHE       := $(CURDIR)/.cache
DIST        := $(CURDIR)/dist
BIN         := $(DIST)/otelcol-ai

# The collector builder of the same release line as every module in
# builder-config.yaml.
OCB_VERSION := v0.159.0
OCB         := $(TOOLS)/builder-$(OCB_VERSION)

GOLANGCI_VERSION := v2.15.0
GOLANGCI         := $(TOOLS)/golangci-lint-$(GOLANGCI_VERSION)

# ONNX Runtime, at the C API version onnxruntime_go v1.27.0 was written for
# (ORT 1.24.x). The npm package onnxruntime-node ships the Linux x64 shared
# library; both the package and the library are checksum-pinned.
ORT_VERSION     := 1.24.1
ORT_TGZ         := $(CACHE)/onnxruntime-node-$(ORT_VERSION).tgz
ORT_TGZ_SHA256  := 57181cf6e6e711b155c5b942d591fd63ded0b5de5c4922d51fd994e7f6ac2772
ORT_LIB_MEMBER  := package/bin/napi-v6/linux/x64/libonnxruntime.so.1
ORT_LIB_SHA256  := 53ef1ac028dd1b05554b8da28d9159eb3876f99868193d2aaa6e67f0243c23d4
ORT_LIB         := $(DIST)/libonnxruntime.so.1

# The release version, from git tags: on a commit tagged vX.Y.Z it is X.Y.Z;
# N commits later X.Y.Z-N-g<sha>; with uncommitted changes to tracked files
# -dirty is added; with no tag yet 0.0.0-g<sha>. It is ocb's dist.version (in
# the generated $(BUILDER_CONFIG)), so `otelcol-ai --version` and the
# service.version of the collector's own telemetry say it, and `make chart`
# stamps it as the chart's version and appVersion. Override with VERSION=...
VERSION ?= $(shell git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null | sed 's/^v//' | grep . || \
	echo "0.0.0-g$$(git rev-parse --short=7 HEAD 2>/dev/null || echo unknown)$$(git diff --quiet HEAD 2>/dev/null || echo -dirty)")
BUILDER_CONFIG := $(DIST)/builder-config.yaml

# What the binary is built from: a change to any of these rebuilds it.
SOURCES := $(shell find . \( -path ./dist -o -path ./.tools -o -path ./.cache -o -path ./.git -o -path ./out \) -prune -o \
	-type f \( -name '*.go' -o -name '*.yaml' -o -name '*.o' -o -name '*.jfc' \) -not -name '*_test.go' -print) go.mod go.sum

# Bounded fuzzing in `make test`: every target, FUZZTIME each. A count of
# executions, not a duration: with a duration, Go 1.26's fuzzing coordinator
# can fail a target with a bare "context deadline exceeded" and no input when
# the deadline catches a busy worker (golang/go#75804, fixed in Go 1.27); it
# did so twice in a few runs here. 200000 executions take 4-15 s a target.
FUZZTIME ?= 200000x
# Minimization of each new input, as a count too: on a fresh machine (no
# corpus in the Go cache yet) a target finds a hundred or more new inputs,
# and 2 s of minimizing each made FuzzLiveChunk alone take minutes.
FUZZMINIMIZE ?= 500x

.PHONY: build run test test-deps generate fuzz bench lint fmt clean distclean tools onnxruntime gpu-check gpu-join gpu-join-dry-run version FORCE

MODELS      := $(shell find models -type f)

build: $(BIN) $(ORT_LIB) $(DIST)/models ## Build dist/otelcol-ai; place libonnxruntime.so.1 and the models beside it.

run: build ## Build, then run the collector on its embedded default config.
	cd $(CURDIR) && exec $(BIN) --config embedded:default

# Python packages the tests' workloads use (Jep: CPython embedded in a JVM),
# built against the JDK on PATH.
JEP_VERSION := 4.3.2
# The end-to-end containers test's SDKs (internal/e2etest/containers_test.go).
OTEL_JAVAAGENT_VERSION          := 2.22.0
OTEL_JAVA_API_VERSION           := 1.56.0
OTEL_PYTHON_VERSION             := 1.45.2
OTEL_PYTHON_CONTAINERID_VERSION := 0.66b1
E2E_VENV                        := $(CACHE)/e2e-containers/venv

# Packages whose tests time real threads under live eBPF probes: run after
# the others, one at a time, so the JVM-heavy packages do not preempt them.
PROBE_PKGS := ./receiver/pythongilreceiver/...

test: build test-deps ## Build the binary once, then run every test against it.
	OTELCOL_AI_BIN=$(BIN) OTELCOL_AI_ONNXRUNTIME_LIB=$(ORT_LIB) OTELCOL_AI_VERSION=$$(cat $(DIST)/.version) \
		$(GO) test -count=1 -timeout 60m $$($(GO) list ./... | grep -v /receiver/pythongilreceiver)
	OTELCOL_AI_BIN=$(BIN) OTELCOL_AI_ONNXRUNTIME_LIB=$(ORT_LIB) \
		$(GO) test -count=1 -timeout 30m -p 1 $(PROBE_PKGS)
	@$(MAKE) --no-print-directory fuzz

test-deps: ## Install what the tests' workloads need (idempotent).
	@# the pythongil receiver's default wait_source (futex) attaches syscall
	@# tracepoints, whose ids only tracefs gives: mounted where a host has not.
	@mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing || \
		echo "tracefs not mounted at /sys/kernel/tracing: the pythongil futex tests will fail" >&2
	@# distribution/security_test.go runs the chart's Localhost seccomp
	@# profile under runc (Debian's package).
	@command -v runc >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq runc; }
	@# the timeline page's tests: headless Chromium (Debian's package).
	@command -v chromium >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }
	@# distribution/dashboards_test.go and internal/e2etest/dashboards_test.go:
	@# promtool and a real Prometheus (Debian's package).
	@command -v prometheus >/dev/null && command -v promtool >/dev/null || \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus; }
	@# internal/gil TestStaticFunctionsFoundInDebianLibPython: Debian's
	@# libpython3.11 (release, stripped as shipped; -dbg, with its symbol
	@# table) for amd64 and arm64, unpacked, never installed.
	@for arch in amd64 arm64; do \
		dir=$(CACHE)/debian-libpython/$$arch; \
		ls $$dir/usr/lib/*-linux-gnu/libpython3.11d.so.1.0 >/dev/null 2>&1 && continue; \
		dpkg --print-foreign-architectures | grep -qx $$arch || [ $$arch = $$(dpkg --print-architecture) ] || \
			{ dpkg --add-architecture $$arch && apt-get update -qq; }; \
		tmp=$$(mktemp -d) && (cd $$tmp && apt-get download -qq libpython3.11:$$arch libpython3.11-dbg:$$arch) && \
		mkdir -p $$dir && for deb in $$tmp/*.deb; do dpkg-deb -x $$deb $$dir; done; rm -rf $$tmp; \
	done
	@python3 -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('jep') is None)" || \
		JAVA_HOME=$$(dirname $$(dirname $$(readlink -f $$(command -v javac)))) \
		python3 -m pip install --quiet jep==$(JEP_VERSION)
	@# internal/e2etest TestContainersCorrelation: the OpenTelemetry Java agent and
	@# the API it bundles (Maven Central), and a venv of the OpenTelemetry Python
	@# SDK with its container-id detector (PyPI), made from python3 (pyenv's,
	@# which the pythongil receiver probes). Versions as in containers_test.go.
	@[ -f $(HOME)/.m2/repository/io/opentelemetry/javaagent/opentelemetry-javaagent/$(OTEL_JAVAAGENT_VERSION)/opentelemetry-javaagent-$(OTEL_JAVAAGENT_VERSION).jar ] || \
		mvn -q dependency:get -Dartifact=io.opentelemetry.javaagent:opentelemetry-javaagent:$(OTEL_JAVAAGENT_VERSION)
	@[ -f $(HOME)/.m2/repository/io/opentelemetry/opentelemetry-common/$(OTEL_JAVA_API_VERSION)/opentelemetry-common-$(OTEL_JAVA_API_VERSION).jar ] || \
		mvn -q dependency:get -Dartifact=io.opentelemetry:opentelemetry-api:$(OTEL_JAVA_API_VERSION)
	@$(E2E_VENV)/bin/python -c "import opentelemetry.sdk, opentelemetry.exporter.otlp.proto.grpc, opentelemetry.resource.detector.containerid" 2>/dev/null || { \
		rm -rf $(E2E_VENV) && mkdir -p $(dir $(E2E_VENV)) && \
		$$(python3 -c 'import sys; print(sys.executable)') -m venv $(E2E_VENV) && \
		$(E2E_VENV)/bin/pip install --quiet opentelemetry-sdk==$(OTEL_PYTHON_VERSION) \
			opentelemetry-exporter-otlp-proto-grpc==$(OTEL_PYTHON_VERSION) \
			opentelemetry-resource-detector-containerid==$(OTEL_PYTHON_CONTAINERID_VERSION); }

fuzz: ## Run every fuzz target for FUZZTIME.
	@for pkg in $$($(GO) list ./...); do \
		dir=$$($(GO) list -f '{{.Dir}}' $$pkg); \
		for target in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go 2>/dev/null | sed 's/^func //'); do \
			echo "fuzz $$pkg $$target ($(FUZZTIME))"; \
			$(GO) test -run='^$$' -fuzz="^$$target$$" -fuzztime=$(FUZZTIME) -fuzzminimizetime=$(FUZZMINIMIZE) $$pkg; \
		done; \
	done

bench: build ## Run the benchmarks, each against the reference its issue names.
	# pkg/jfr against the JDK's RecordingFile on one large recording (made once, cached).
	JFR_BENCH_DIR=$(CACHE)/jfr-bench sh bench/jfr/jfr.sh
	# jfrstat print --json against the JDK 17 and JDK 25 jfr tools on the same recording (time, CPU, peak RSS; output equal to JDK 25's).
	JFR_BENCH_DIR=$(CACHE)/jfr-bench sh bench/jfr/print.sh
	# The inference processor against raw ONNX Runtime Run calls (#7).
	OTELCOL_AI_ONNXRUNTIME_LIB=$(ORT_LIB) sh bench/inference/inference.sh
	# The zero-touch JFR recording's cost to a GC-heavy JVM, with/without (#16).
	$(GO) test -run='^$$' -bench='^BenchmarkZeroTouchOverhead$$' -benchtime=1x ./receiver/jfrreceiver
	# pythongil: cost per GIL release cycle per mechanism against the uprobe floor measured first, probed/unprobed in one run (#19).
	$(GO) test -run='^$$' -bench='^BenchmarkReleaseCycle$$' -benchtime=1x ./receiver/pythongilreceiver/
	# Every go benchmark; pkg/jfr's use the same recording. Among them: BenchmarkOracleVsJDK (pkg/jfr's readers
	# against the JDK's RecordingFile on every JFR oracle recording, first pass and warmed, as ratios),
	# BenchmarkChunkCost (receiver/jfrreceiver: the receiver's decode cost per chunk and per event type it reads,
	# on pkg/jfr's testdata recordings and this one) and
	# BenchmarkPrintLargeRecording (cmd/jfrstat: print --json on 1 GB, equal to JDK 25's, peak RSS under 64 MB).
	JFR_BENCH_FILE=$(CACHE)/jfr-bench/g1-profile-mixed.jfr OTELCOL_AI_BIN=$(BIN) OTELCOL_AI_ONNXRUNTIME_LIB=$(ORT_LIB) \
		$(GO) test -run='^$$' -bench=. -benchmem -timeout 60m ./...

generate: ## Regenerate the committed eBPF objects for amd64 and arm64 (installs clang, llvm, libbpf-dev, linux-libc-dev-arm64-cross if missing).
	@command -v clang >/dev/null && [ -f /usr/include/bpf/bpf_helpers.h ] && [ -f /usr/aarch64-linux-gnu/include/asm/ptrace.h ] || \
		{ apt-get update -qq && apt-get install -y -qq clang llvm libbpf-dev linux-libc-dev-arm64-cross; }
	$(GO) generate ./receiver/pythongilreceiver/...
	$(GO) generate ./internal/procevents/

# Release artifacts: slow, so not part of `make test`. The image and the
# chart are built from the same VERSION as the binary.
IMAGE_DIR    := $(DIST)/image
IMAGE_OCI    := $(IMAGE_DIR)/oci
IMAGE_ARCHES ?= amd64 arm64
IMAGETOOL    := $(CACHE)/imagetool
# Every mtime in the image and its creation time: the commit's time, so that
# one commit builds one image digest (`make image` twice: the same index).
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
ARM64_DIR    := $(DIST)/linux-arm64
ARM64_BIN    := $(ARM64_DIR)/otelcol-ai
ARM64_CC     ?= aarch64-linux-gnu-gcc
# ONNX Runtime's arm64 library, from the same checksum-pinned npm package.
ORT_LIB_MEMBER_ARM64 := package/bin/napi-v6/linux/arm64/libonnxruntime.so.1
ORT_LIB_SHA256_ARM64 := 7954e8bdedb497f830c6a679e818d98399b7f4d81ade1126c3e0be74d28111ab
ORT_LIB_ARM64        := $(ARM64_DIR)/libonnxruntime.so.1
CHART_DIR    := $(DIST)/chart

.PHONY: image image-reproducible image-test arm64 arm64-smoke chart

arm64: $(ARM64_BIN) $(ORT_LIB_ARM64) ## Cross-build dist/linux-arm64/otelcol-ai with cgo, and ONNX Runtime's arm64 library beside it.

# The sources ocb generated for the host build, compiled again for arm64 with
# Debian's cross compiler (ocb's own flags: -trimpath, -ldflags=-s -w).
$(ARM64_BIN): $(BIN)
	@command -v $(ARM64_CC) >/dev/null || { apt-get update -qq && apt-get install -y -qq gcc-aarch64-linux-gnu libc6-dev-arm64-cross; }
	mkdir -p $(ARM64_DIR)
	cd $(DIST) && CGO_ENABLED=1 GOOS=linux GOARCH=arm64 CC=$(ARM64_CC) \
		$(GO) build -trimpath -ldflags="-s -w" -o $@ .

$(ORT_LIB_ARM64): $(ORT_TGZ)
	mkdir -p $(ARM64_DIR) $(CACHE)/ort
	tar -xzf $(ORT_TGZ) -C $(CACHE)/ort $(ORT_LIB_MEMBER_ARM64)
	echo "$(ORT_LIB_SHA256_ARM64)  $(CACHE)/ort/$(ORT_LIB_MEMBER_ARM64)" | sha256sum --check --quiet
	install -m 0644 $(CACHE)/ort/$(ORT_LIB_MEMBER_ARM64) $@

arm64-smoke: arm64 $(DIST)/models ## Run the arm64 binary under qemu-user-static: version, components, validate, a model.
	@command -v qemu-aarch64-static >/dev/null || { apt-get update -qq && apt-get install -y -qq qemu-user-static; }
	ARM64_BIN=$(ARM64_BIN) ARM64_ORT_LIB=$(ORT_LIB_ARM64) ARM64_SYSROOT=/usr/aarch64-linux-gnu VERSION=$(VERSION) \
		$(GO) test -count=1 -tags arm64smoke -v -run . ./distribution/image/arm64smoke

$(IMAGETOOL): $(shell find distribution/image/imagetool -name '*.go')
	mkdir -p $(CACHE)
	$(GO) build -o $@ ./distribution/image/imagetool

image: build $(if $(filter arm64,$(IMAGE_ARCHES)),arm64) $(IMAGETOOL) ## Build the OCI image (amd64 + arm64 index) into dist/image/oci, with SPDX SBOMs, without a container daemon.
	@command -v mmdebstrap >/dev/null && command -v umoci >/dev/null || { apt-get update -qq && apt-get install -y -qq mmdebstrap umoci; }
	rm -rf $(IMAGE_DIR) && mkdir -p $(IMAGE_DIR)
	for arch in $(IMAGE_ARCHES); do \
		if [ $$arch = arm64 ]; then bin=$(ARM64_BIN) ort=$(ORT_LIB_ARM64); else bin=$(BIN) ort=$(ORT_LIB); fi; \
		SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) IMAGETOOL=$(IMAGETOOL) ORT_VERSION=$(ORT_VERSION) DEB_CACHE=$(CACHE)/debs \
			distribution/image/build.sh $$arch $$bin $$ort $(DIST)/models $(VERSION) $(IMAGE_OCI) $(CACHE)/image-work; \
		cp $(CACHE)/image-work/otelcol-ai-$(VERSION)-linux-$$arch.spdx.json $(IMAGE_DIR)/; \
	done
	$(IMAGETOOL) index -layout $(IMAGE_OCI) -tag $(VERSION) -refs $$(for a in $(IMAGE_ARCHES); do printf '%s,' $(VERSION)-$$a; done | sed 's/,$$//') > $(IMAGE_DIR)/digest
	umoci gc --layout $(IMAGE_OCI)
	@echo "image $(IMAGE_OCI):$(VERSION) index $$(cat $(IMAGE_DIR)/digest), $$(du -sh $(IMAGE_OCI) | cut -f1) on disk"

image-reproducible: image ## Build the image again into dist/image-again; fail unless the index digest is the same.
	$(MAKE) --no-print-directory image IMAGE_DIR=$(DIST)/image-again
	cmp $(IMAGE_DIR)/digest $(DIST)/image-again/digest && echo "reproducible: $$(cat $(IMAGE_DIR)/digest)"

image-test: ## Run the amd64 image under runc as the DaemonSet would (read-only root, the chart's capabilities, seccomp) and send it OTLP.
	@command -v runc >/dev/null && command -v umoci >/dev/null || { apt-get update -qq && apt-get install -y -qq runc umoci; }
	[ -f $(IMAGE_OCI)/index.json ] || $(MAKE) --no-print-directory image
	OTELCOL_AI_IMAGE_LAYOUT=$(IMAGE_OCI) OTELCOL_AI_IMAGE_REF=$(VERSION)-amd64 OTELCOL_AI_IMAGE_VERSION=$(VERSION) \
		$(GO) test -count=1 -tags imagetest -v -run . ./distribution/image/imagetest

chart: $(IMAGETOOL) ## Package the Helm chart (version and appVersion = VERSION) with a repository index into dist/chart.
	rm -rf $(CHART_DIR) && mkdir -p $(CHART_DIR)
	$(IMAGETOOL) chart -chart distribution/helm/otelcol-ai -version $(VERSION) -o $(CHART_DIR)

gpu-check: ## On a machine with NVIDIA GPUs: compare the nvml receiver with nvidia-smi for a minute.
	mkdir -p $(CACHE)
	$(GO) build -o $(CACHE)/gpucheck ./cmd/gpucheck
	cmd/gpucheck/gpu-check.sh $(CACHE)/gpucheck $(CURDIR)/out/gpu-check

gpu-join: $(BIN) ## On a machine with an NVIDIA GPU: a JVM's GPU leak joined to its JNI references, end to end (a few minutes).
	cmd/gpucheck/gpu-join.sh $(BIN) $(CURDIR)/out/gpu-join

gpu-join-dry-run: $(BIN) ## gpu-join's plumbing without a GPU: fake CUDA, stub NVML (checks the script, not the GPU).
	GPU_JOIN_DRY_RUN=1 cmd/gpucheck/gpu-join.sh $(BIN) $(CURDIR)/out/gpu-join-dry-run

lint: $(GOLANGCI) ## gofmt, go vet and golangci-lint.
	@out=$$(gofmt -l $$(find . -name '*.go' -not -path './dist/*' -not -path './.*')); \
		if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GOLANGCI) run ./...

fmt:
	gofmt -w $$(find . -name '*.go' -not -path './dist/*' -not -path './.*')

clean: ## Remove build outputs (keeps the tool and download caches).
	rm -rf $(DIST) out

distclean: clean ## Remove build outputs, tools and downloads.
	rm -rf $(TOOLS) $(CACHE)

tools: $(OCB)

onnxruntime: $(ORT_LIB)

$(BIN): $(OCB) $(SOURCES) builder-config.yaml $(DIST)/.version
	mkdir -p $(DIST)
	sed 's/^  version: .*/  version: "$(VERSION)"/' builder-config.yaml > $(BUILDER_CONFIG)
	$(OCB) --config $(BUILDER_CONFIG)
	touch $@

# Rewritten only when VERSION changes, so that a new commit or tag rebuilds.
$(DIST)/.version: FORCE
	@mkdir -p $(DIST)
	@[ "$$(cat $@ 2>/dev/null)" = "$(VERSION)" ] || echo "$(VERSION)" > $@

version: ## Print the version the build stamps (from git tags).
	@echo $(VERSION)

FORCE:

# The shipped model repository, next to the binary where onnxinference looks.
$(DIST)/models: $(MODELS)
	rm -rf $@.tmp && mkdir -p $(DIST) && cp -R models $@.tmp && rm -rf $@ && mv $@.tmp $@

$(OCB):
	mkdir -p $(TOOLS)
	GOBIN=$(TOOLS) $(GO) install go.opentelemetry.io/collector/cmd/builder@$(OCB_VERSION)
	mv $(TOOLS)/builder $@

$(GOLANGCI):
	mkdir -p $(TOOLS)
	GOBIN=$(TOOLS) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_VERSION)
	mv $(TOOLS)/golangci-lint $@

$(ORT_TGZ):
	mkdir -p $(CACHE)
	cd $(CACHE) && npm pack --silent onnxruntime-node@$(ORT_VERSION) >/dev/null
	echo "$(ORT_TGZ_SHA256)  $@" | sha256sum --check --quiet || { rm -f $@; exit 1; }

$(ORT_LIB): $(ORT_TGZ)
	mkdir -p $(DIST) $(CACHE)/ort
	tar -xzf $(ORT_TGZ) -C $(CACHE)/ort $(ORT_LIB_MEMBER)
	echo "$(ORT_LIB_SHA256)  $(CACHE)/ort/$(ORT_LIB_MEMBER)" | sha256sum --check --quiet
	install -m 0644 $(CACHE)/ort/$(ORT_LIB_MEMBER) $@

# --- A one-node Kubernetes on this machine (issue #26) ----------------------
# Real upstream parts built from pinned Go modules, Debian's containerd, runc
# and CNI plugins; everything under .cache/cluster. distribution/cluster/README.md
# says what each target does, what it leaves on the machine (nothing after
# cluster-down) and how long it takes.
.PHONY: cluster-build cluster-up cluster-down cluster-smoke cluster-test

cluster-build: ## Build kube-apiserver/-controller-manager/-scheduler/-proxy, kubelet, kubectl, etcd, helm, crictl into .cache/cluster/bin (cached per pinned version).
	GO=$(GO) distribution/cluster/build.sh

cluster-up: cluster-build ## Start the one-node cluster (root), install the chart with the agent image; prints the kubeconfig path when the DaemonSet is ready.
	$(MAKE) --no-print-directory image chart IMAGE_ARCHES=amd64 VERSION=$(VERSION)
	OTELCOL_AI_VERSION=$(VERSION) OTELCOL_AI_IMAGE_OCI=$(IMAGE_OCI) OTELCOL_AI_CHART=$(CHART_DIR)/otelcol-ai-$(VERSION).tgz \
		distribution/cluster/up.sh

cluster-test: ## cluster-up, the scenario in real pods (internal/e2etest TestCluster), cluster-down (also when the scenario fails).
	$(MAKE) --no-print-directory cluster-up
	rc=0; OTELCOL_AI_CLUSTER=$(CACHE)/cluster OTELCOL_AI_VERSION=$(VERSION) OTELCOL_AI_CHART=$(CHART_DIR)/otelcol-ai-$(VERSION).tgz \
		$(GO) test -count=1 -timeout 30m -v -run '^TestCluster$$' ./internal/e2etest/ 2>&1 | tee $(CACHE)/cluster/log/cluster-test.log || rc=$$?; \
		rm -rf $(CACHE)/cluster/log/export && cp -R $(CACHE)/cluster/ns/varlib/otelcol-ai-export $(CACHE)/cluster/log/export || true; \
		distribution/cluster/down.sh; exit $$rc

cluster-down: ## Stop the cluster and remove every process, mount, cgroup, interface, iptables chain and state it made; check none is left.
	distribution/cluster/down.sh

cluster-smoke: ## On a running cluster: a locally built pod Running, reached over the bridge, its hostPort and the kubernetes Service.
	distribution/cluster/smoke.sh
