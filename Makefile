# knest Makefile. `make help` lists the targets.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

export PATH := /usr/local/go/bin:$(PATH)
GO ?= go

# Built test binaries and generated CRDs live outside the tree: they are large and
# are reused across checkouts. Each output path carries its version, so a version bump
# builds new outputs and an existing output is never rebuilt.
KNEST_CACHE ?= $(HOME)/.cache/knest
KUBE_VERSION := v1.34.4
KUBEVIRT_VERSION := v1.7.0
TESTBIN_DIR := $(KNEST_CACHE)/testbin/$(KUBE_VERSION)
KUBEVIRT_CRDS_DIR := $(KNEST_CACHE)/testbin/kubevirt-$(KUBEVIRT_VERSION)
TESTBIN := $(TESTBIN_DIR)/etcd $(TESTBIN_DIR)/kube-apiserver $(TESTBIN_DIR)/kube-controller-manager

KUBE_TOOLS := hack/tools/kube
KUBEVIRT_TOOLS := hack/tools/kubevirt

# What hack/lib/version.sh stamps in a release build; without it the binaries report
# v0.0.0-master and version-sensitive clients (kubeadm, CAPI) misbehave.
KUBE_MAJOR := $(word 1,$(subst ., ,$(patsubst v%,%,$(KUBE_VERSION))))
KUBE_MINOR := $(word 2,$(subst ., ,$(patsubst v%,%,$(KUBE_VERSION))))
KUBE_LDFLAGS := -s -w $(foreach p,k8s.io/component-base/version k8s.io/client-go/pkg/version,\
	-X $(p).gitVersion=$(KUBE_VERSION) -X $(p).gitMajor=$(KUBE_MAJOR) -X $(p).gitMinor=$(KUBE_MINOR) \
	-X $(p).gitTreeState=clean -X $(p).buildDate=1970-01-01T00:00:00Z)

TEST_TIMEOUT ?= 20m

# $(call apt-ensure,COMMAND:PACKAGE ...) installs, from Debian's packages, the package
# of each command that is not on PATH: a fresh machine has none of them.
define apt-ensure
@missing=""; for t in $(1); do command -v $${t%%:*} >/dev/null || missing="$$missing $${t##*:}"; done; \
if [ -n "$$missing" ]; then \
	echo "installing:$$missing"; apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
fi
endef

GO_TEST_FLAGS ?=

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} \
		/^[a-zA-Z_0-9-]+:.*?##/ { printf "  %-12s %s\n", $$1, $$2 } \
		/^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: fmt
fmt: ## Run gofmt on the main module.
	$(GO) fmt ./...

.PHONY: vet
vet: ## Run go vet on the main module.
	$(GO) vet ./...

# golangci-lint, built from the version hack/tools/lint pins.
LINT_TOOLS := hack/tools/lint
GOLANGCI_LINT_VERSION := $(shell awk '{for (i = 1; i < NF; i++) if ($$i == "github.com/golangci/golangci-lint/v2") print $$(i+1)}' $(LINT_TOOLS)/go.mod)
GOLANGCI_LINT := $(KNEST_CACHE)/golangci-lint/$(GOLANGCI_LINT_VERSION)/golangci-lint

.PHONY: lint
lint: $(GOLANGCI_LINT) ## gofmt, go vet and golangci-lint (.golangci.yml) over the main module, e2e tests included (in .ci/run).
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "not gofmt'ed:" $$unformatted >&2; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags e2e ./e2e/...
	$(GOLANGCI_LINT) run ./...

$(GOLANGCI_LINT):
	@mkdir -p $(@D)
	cd $(LINT_TOOLS) && $(GO) build -trimpath -o $(abspath $@).tmp github.com/golangci/golangci-lint/v2/cmd/golangci-lint
	mv $@.tmp $@

CONTROLLER_GEN := $(GO) run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.19.0

.PHONY: generate
generate: ## Regenerate deepcopy code, the CRD, the controller's ClusterRole and leader-election Role from the Go markers, and docs/api.md.
	$(CONTROLLER_GEN) object crd paths=./api/... output:crd:dir=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=knest-controller paths=./internal/controller/... paths=./internal/manager/... output:rbac:dir=config/rbac
	$(MAKE) --no-print-directory docs

.PHONY: docs
docs: ## Regenerate docs/api.md (from the CRDs) and docs/cli.md (from the commands); a test fails when they are stale.
	$(GO) run ./hack/docgen

.PHONY: build
build: ## Build the knest CLI into bin/knest.
	$(GO) build -o bin/knest ./cmd/knest

.PHONY: test
test: testbin ## Run all tests against the integration test bed.
	KNEST_TESTBIN=$(TESTBIN_DIR) KNEST_KUBEVIRT_CRDS=$(KUBEVIRT_CRDS_DIR) \
		$(GO) test -count=1 -timeout $(TEST_TIMEOUT) $(GO_TEST_FLAGS) ./...

##@ Image

# The controller image for a host cluster of your own: the Dockerfile, built and pushed
# with podman or docker (CONTAINER_ENGINE; empty: docker when its engine answers, else
# podman). Needs the base images golang and gcr.io/distroless/static-debian12 from a
# registry. hack/kind/up.sh builds the same image without an engine.
IMG ?=
CONTAINER_ENGINE ?=

.PHONY: image
image: ## Build the controller image IMG=registry/name:tag from the Dockerfile (podman or docker).
	@[ -n "$(IMG)" ] || { echo "set IMG, e.g. make $@ IMG=registry.example.com/knest:v0.1.0" >&2; exit 1; }
	@engine="$(CONTAINER_ENGINE)"; \
	if [ -z "$$engine" ]; then if docker info >/dev/null 2>&1; then engine=docker; else engine=podman; fi; fi; \
	set -x; $$engine build --build-arg GO_VERSION=$$(awk '$$1 == "go" {print $$2}' go.mod) -t $(IMG) .

.PHONY: image-push
image-push: image ## Build the controller image IMG=registry/name:tag and push it (podman or docker; log in first).
	@engine="$(CONTAINER_ENGINE)"; \
	if [ -z "$$engine" ]; then if docker info >/dev/null 2>&1; then engine=docker; else engine=podman; fi; fi; \
	set -x; $$engine push $(IMG)

##@ Test bed

.PHONY: testbin
testbin: $(TESTBIN) $(KUBEVIRT_CRDS_DIR) ## Build etcd, kube-apiserver, kube-controller-manager and the KubeVirt CRDs.

.PHONY: testbin-env
testbin-env: ## Print the env vars that point tests at the test bed (eval "$(make -s testbin-env)").
	@echo export KNEST_TESTBIN=$(TESTBIN_DIR) KNEST_KUBEVIRT_CRDS=$(KUBEVIRT_CRDS_DIR)

# Builds go to a temporary name first so an interrupted build leaves no output that
# would later be taken as complete.
$(TESTBIN_DIR)/etcd:
	@mkdir -p $(@D)
	cd $(KUBE_TOOLS) && CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o $@.tmp go.etcd.io/etcd/server/v3
	mv $@.tmp $@

$(TESTBIN_DIR)/kube-apiserver $(TESTBIN_DIR)/kube-controller-manager:
	@mkdir -p $(@D)
	cd $(KUBE_TOOLS) && CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(KUBE_LDFLAGS)' -o $@.tmp k8s.io/kubernetes/cmd/$(@F)
	mv $@.tmp $@

$(KUBEVIRT_CRDS_DIR):
	rm -rf $@.tmp
	cd $(KUBEVIRT_TOOLS) && $(GO) run ./manifests -crds $@.tmp
	mv $@.tmp $@
include images/node-image.mk

##@ Benchmark

# Extra flags for hack/bench, e.g. BENCH_FLAGS='-n 100 -runs 1 -qps -1'.
BENCH_FLAGS ?=
BENCH_REPORT ?= bin/bench-report.md

.PHONY: bench
bench: testbin ## Benchmark the controller against the test bed (docs/benchmark.md; BENCH_FLAGS, BENCH_REPORT).
	$(GO) build -o bin/bench ./hack/bench
	KNEST_TESTBIN=$(TESTBIN_DIR) KNEST_KUBEVIRT_CRDS=$(KUBEVIRT_CRDS_DIR) \
		bin/bench -out $(BENCH_REPORT) $(BENCH_FLAGS)
include hack/providers.mk
include hack/kubevirt.mk
include hack/autoscaler.mk
include hack/csi.mk
include hack/kind.mk
include hack/e2e.mk
include hack/conformance.mk
