# The Kubernetes conformance suite on a knest tenant of the kind host (docs/conformance.md),
# included from the top-level Makefile after hack/kind.mk (KIND_PREREQS, KIND_ENV,
# kind-host-up). Built offline: hack/conformance/build.sh; run: hack/conformance/run.sh.

##@ Conformance on the kind host

CONFORMANCE_TOOLS := hack/tools/conformance
HYDROPHONE_VERSION := $(shell awk '{for (i = 1; i < NF; i++) if ($$i == "sigs.k8s.io/hydrophone") print $$(i+1)}' $(CONFORMANCE_TOOLS)/go.mod)
HYDROPHONE := $(KNEST_CACHE)/conformance/bin/hydrophone-$(HYDROPHONE_VERSION)
# The tenant's control plane: hosted or vm.
CONFORMANCE_CONTROL_PLANE ?= hosted
# A VM control plane and two workers, 2 vCPUs each, do not fit the CPU requests of a
# 2-core kind host at its default overcommit (hack/kind/env.sh): at 4 they asked 1500m
# beside the host's own 954m, and the second worker's VM stayed Pending. At 8 all
# three are placed; the cores are the same. Either mode, so that a kept host serves
# both: the ratio is in each VM's template, and changing it replaces every VM.
conformance: export KNEST_CPU_ALLOCATION_RATIO ?= 8
# What runs: ginkgo regular expressions (FOCUS defaults to every conformance spec;
# a part, e.g. FOCUS='\[sig-network\].*\[Conformance\]'), and ginkgo processes.
FOCUS ?=
SKIP ?=
PARALLEL ?= 1
# Who runs the suite: hydrophone (in a pod of the tenant) or ginkgo (on this machine,
# against the tenant's API: faster under emulation, as make e2e's smoke part runs).
RUNNER ?= hydrophone
CONFORMANCE_STATE_DIR ?= $(KNEST_CACHE)/conformance/last-run
CONFORMANCE_ENV = FOCUS='$(FOCUS)' SKIP='$(SKIP)' PARALLEL=$(PARALLEL) RUNNER=$(RUNNER) HYDROPHONE=$(HYDROPHONE) KNEST=bin/knest \
	CONFORMANCE_CONTROL_PLANE=$(CONFORMANCE_CONTROL_PLANE)

$(HYDROPHONE): $(CONFORMANCE_TOOLS)/go.mod $(CONFORMANCE_TOOLS)/go.sum
	@mkdir -p $(@D)
	cd $(CONFORMANCE_TOOLS) && CGO_ENABLED=0 $(GO) build -trimpath -o $(abspath $@).tmp sigs.k8s.io/hydrophone
	mv $@.tmp $@

.PHONY: conformance-images
conformance-images: node-image-tools node-image ## Build the conformance suite of NODE_KUBE_VERSION, its test images and the node image with them baked in, offline.
	KNEST_CACHE=$(KNEST_CACHE) KUBE_VERSION=$(NODE_KUBE_VERSION) GO=$(GO) nice -n 10 hack/conformance/build.sh

.PHONY: conformance
conformance: $(KIND_PREREQS) conformance-images $(HYDROPHONE) build ## Bring up the kind host and a tenant with two workers, run the conformance suite (FOCUS=, SKIP=, PARALLEL=, RUNNER=) with hydrophone or ginkgo, keep e2e.log and the JUnit file (KEEP=1 keeps host and tenant).
	$(call kind-host-up,$(CONFORMANCE_STATE_DIR)) \
	$(KIND_ENV) $(CONFORMANCE_ENV) hack/conformance/run.sh
