# The host cluster the end-to-end suite and the demo run on: kind with real KubeVirt,
# Cluster API, CAPK and knest's controller. Included from the top-level Makefile after
# images/node-image.mk, hack/providers.mk, hack/kubevirt.mk and hack/autoscaler.mk
# (whose versions and paths it passes on) and before hack/e2e.mk (whose targets use
# KIND_PREREQS, KIND_ENV and kind-host-up). Everything is built here, offline: nothing is pulled from a registry
# (docs/e2e.md). The scripts are in hack/kind; hack/kind/env.sh has their settings.

##@ Kind host with real KubeVirt (podman or Docker, offline)

KIND_CLUSTER ?= knest-e2e
KIND_DIR := $(KNEST_CACHE)/kind
KIND_KUBECONFIG ?= $(KIND_DIR)/$(KIND_CLUSTER).kubeconfig
KIND_TOOLS := hack/tools/kind
KIND_VERSION := $(shell awk '{for (i = 1; i < NF; i++) if ($$i == "sigs.k8s.io/kind") print $$(i+1)}' $(KIND_TOOLS)/kind/go.mod)
KIND := $(KIND_DIR)/bin/kind-$(KIND_VERSION)
# docker or podman; empty: docker when its engine answers, else podman.
KIND_ENGINE ?=
KIND_WORKERS ?= 0
# The kind host runs the test bed's Kubernetes (v1.34: kubelet v1.35+ refuses these
# cgroup v1 hosts); tenants run NODE_KUBE_VERSION.
KIND_NODE_DIR := $(KNEST_CACHE)/node-image/kind/$(KUBE_VERSION)
PROVIDERS_INSTALL := $(PROVIDERS_DIR)/install
# MetalLB, the host's LoadBalancer implementation (L2 mode), from the module
# hack/tools/kind/metallb pins (hack/metallb-build.sh says why not a plain go build).
METALLB_VERSION := $(shell awk '{for (i = 1; i < NF; i++) if ($$i == "go.universe.tf/metallb") print $$(i+1)}' $(KIND_TOOLS)/metallb/go.mod)
METALLB_DIR := $(KNEST_CACHE)/metallb/$(METALLB_VERSION)
# The tenant versions whose node images up.sh loads (make node-image builds
# NODE_KUBE_VERSION's, make node-images every one); make e2e-upgrade loads all of
# NODE_KUBE_VERSIONS.
NODE_IMAGE_VERSIONS ?= $(NODE_KUBE_VERSION)
# KEEP=1 keeps the cluster after `make e2e`, `make e2e-upgrade` or `make kind-checks`;
# `make kind-down` deletes it.
KEEP ?=

# Written by up.sh: KUBECONFIG and what the e2e suite reads (KNEST_E2E_HOST_KUBECONFIG,
# KNEST_E2E_NODE_IMAGE, KNEST_E2E_KERNEL_IMAGE).
KIND_ENV_FILE ?= $(KIND_DIR)/$(KIND_CLUSTER).env
# Recursive, so that a target's own KIND_CLUSTER or NODE_IMAGE_VERSIONS (make demo,
# make e2e-upgrade) reaches the scripts. Double quotes only: kind-host-up puts it in
# a single-quoted trap.
KIND_ENV = KNEST_CACHE=$(KNEST_CACHE) GO=$(GO) KIND=$(KIND) KIND_ENGINE=$(KIND_ENGINE) KIND_WORKERS=$(KIND_WORKERS) KIND_CLUSTER=$(KIND_CLUSTER) \
	KIND_KUBECONFIG=$(KIND_KUBECONFIG) KIND_ENV_FILE=$(KIND_ENV_FILE) \
	KUBEVIRT_VERSION=$(KUBEVIRT_VERSION) CAPI_VERSION=$(CAPI_VERSION) CAPK_VERSION=$(CAPK_VERSION) \
	NODE_KUBE_VERSION=$(NODE_KUBE_VERSION) NODE_IMAGE_VERSIONS="$(NODE_IMAGE_VERSIONS)" NODE_IMAGES_DIR=$(NODE_IMAGES_DIR) \
	KIND_KUBE_VERSION=$(KUBE_VERSION) KIND_NODE_DIR=$(KIND_NODE_DIR) \
	KUBEVIRT_DIR=$(KUBEVIRT_DIR) KUBEVIRT_IMAGES_DIR=$(KUBEVIRT_IMAGES_DIR) PROVIDERS_DIR=$(PROVIDERS_DIR) PROVIDERS_INSTALL=$(PROVIDERS_INSTALL) \
	AUTOSCALER_VERSION=$(AUTOSCALER_VERSION) AUTOSCALER_DIR=$(AUTOSCALER_DIR) \
	CSI_PROVISIONER=$(CSI_PROVISIONER) CSI_ATTACHER=$(CSI_ATTACHER) \
	METALLB_VERSION=$(METALLB_VERSION) METALLB_DIR=$(METALLB_DIR)

.PHONY: kind-tools
kind-tools: $(KIND) ## Build kind from its module; install podman and runc unless a Docker engine answers.
	@if [ -z "$(KIND_ENGINE)" ] && docker info >/dev/null 2>&1; then echo "using docker"; \
	elif [ "$(KIND_ENGINE)" != docker ]; then $(MAKE) -s kind-podman; fi

.PHONY: kind-podman
kind-podman:
	$(call apt-ensure,podman:podman runc:runc)

$(KIND):
	@mkdir -p $(@D)
	cd $(KIND_TOOLS)/kind && CGO_ENABLED=0 $(GO) build -trimpath -o $(abspath $@).tmp sigs.k8s.io/kind
	mv $@.tmp $@

.PHONY: kind-node-image
kind-node-image: node-image-tools ## Build the kind node image (tenant node base, kind's node files, kube-router), offline.
	KNEST_CACHE=$(KNEST_CACHE) KUBE_VERSION=$(KUBE_VERSION) GO=$(GO) KNEST_KIND_NODE=true nice -n 10 images/build.sh

.PHONY: metallb
metallb: $(METALLB_DIR)/speaker ## Build MetalLB's controller and speaker (the kind host's LoadBalancers) into $(KNEST_CACHE)/metallb/<version>.

# The script builds into a temporary directory, then renames.
$(METALLB_DIR)/speaker: $(KIND_TOOLS)/metallb/go.mod $(KIND_TOOLS)/metallb/go.sum hack/metallb-build.sh
	GO=$(GO) nice -n 10 hack/metallb-build.sh $(METALLB_DIR)

# The Cluster API and CAPK install manifests, without cert-manager (hack/tools/kind/providers).
$(PROVIDERS_INSTALL)/components.yaml: $(KIND_TOOLS)/providers/go.mod $(wildcard $(KIND_TOOLS)/providers/*.go)
	rm -rf $(@D).tmp
	cd $(KIND_TOOLS)/providers && $(GO) run . -out $(@D).tmp
	rm -rf $(@D) && mv $(@D).tmp $(@D)

# Its tests apply the output to a real API server with a real kubectl (the test bed's).
.PHONY: kind-providers-test
kind-providers-test: testbin node-image
	cd $(KIND_TOOLS)/providers && KNEST_TESTBIN=$(abspath $(TESTBIN_DIR)) KUBECTL=$(KNEST_CACHE)/node-image/kube/$(KUBE_VERSION)/kubectl \
		$(GO) test -count=1 .

# Everything up.sh needs, for NODE_KUBE_VERSION (make e2e-upgrade adds node-images).
KIND_PREREQS := kind-tools kind-node-image node-image kubevirt-images providers kind-providers-test \
	$(PROVIDERS_INSTALL)/components.yaml autoscaler csi-sidecars metallb

.PHONY: kind-up
kind-up: $(KIND_PREREQS) ## Create or update the kind host cluster: KubeVirt, CAPI + CAPK, knest, the cluster-autoscaler image, node images (NODE_IMAGE_VERSIONS).
	$(KIND_ENV) hack/kind/up.sh

.PHONY: kind-down
kind-down: $(KIND) ## Delete the kind host cluster.
	$(KIND_ENV) hack/kind/down.sh

.PHONY: kind-env
kind-env: ## Print the env vars for kubectl and the e2e suite against it (eval "$(make -s kind-env)").
	@cat $(KIND_ENV_FILE)

# $(call kind-host-up,STATE_DIR) empties STATE_DIR, brings up the host cluster
# (hack/kind/up.sh, its output also in STATE_DIR/up.log), has the shell delete it on
# exit unless KEEP=1, and sources the env file up.sh writes. It ends in `;`: what
# follows it in the same shell line runs against the cluster.
kind-host-up = rm -rf $(1) && mkdir -p $(1); \
	$(if $(filter 1,$(KEEP)),,trap '$(KIND_ENV) hack/kind/down.sh' EXIT;) \
	$(KIND_ENV) hack/kind/up.sh 2>&1 | tee $(1)/up.log; \
	source $(KIND_ENV_FILE);

# The checks that need only real KubeVirt and the host's NetworkPolicy enforcer
# (e2e/kind): a node VM boots, knest's isolation policy holds. After kind-host-up.
KIND_CHECKS = $(GO) test -tags e2e -count=1 -v -timeout 30m $(GO_TEST_FLAGS) ./e2e/kind/...

# up.sh's log, the suite's timeline report and tenant state, kept after the cluster
# is gone.
E2E_STATE_DIR ?= $(KNEST_CACHE)/e2e/last-run

.PHONY: kind-checks
kind-checks: $(KIND_PREREQS) ## Bring up the kind host, boot a node VM under real KubeVirt, check isolation by its enforcer (KEEP=1 keeps the host).
	$(call kind-host-up,$(E2E_STATE_DIR)) $(KIND_CHECKS)
