# The end-to-end suite against a real KubeVirt in kind, included from the top-level
# Makefile after images/node-image.mk and hack/providers.mk (whose versions and paths it
# passes on). Needs Docker and internet, so it cannot run on the build machine
# (docs/e2e.md). The scripts are in hack/kind; hack/kind/env.sh has their settings.

##@ End to end on kind (Docker and internet)

KIND_CLUSTER ?= knest-e2e
KIND_KUBECONFIG ?= $(KNEST_CACHE)/kind/$(KIND_CLUSTER).kubeconfig
KIND_REGISTRY_PORT ?= 5001
E2E_KIND_TIMEOUT ?= 180m
# The suite's logs and timeline report, kept after the cluster is gone.
E2E_KIND_STATE_DIR ?= $(KNEST_CACHE)/e2e/kind-last-run
# KEEP=1 keeps the cluster after `make e2e-kind`; `make kind-down` deletes it.
KEEP ?=

# Written by up.sh: KUBECONFIG and what the e2e suite reads (KNEST_E2E_HOST_KUBECONFIG,
# KNEST_E2E_NODE_IMAGE, KNEST_E2E_KERNEL_IMAGE; the images by digest).
KIND_ENV_FILE ?= $(KNEST_CACHE)/kind/$(KIND_CLUSTER).env
KIND_ENV := KNEST_CACHE=$(KNEST_CACHE) GO=$(GO) KIND_CLUSTER=$(KIND_CLUSTER) \
	KIND_KUBECONFIG=$(KIND_KUBECONFIG) KIND_ENV_FILE=$(KIND_ENV_FILE) KIND_REGISTRY_PORT=$(KIND_REGISTRY_PORT) \
	KUBEVIRT_VERSION=$(KUBEVIRT_VERSION) CAPI_VERSION=$(CAPI_VERSION) CAPK_VERSION=$(CAPK_VERSION) \
	NODE_KUBE_VERSION=$(NODE_KUBE_VERSION) NODE_IMAGE_DIR=$(NODE_IMAGE_DIR)

.PHONY: kind-up
kind-up: node-image ## Create or update the kind host cluster: KubeVirt, CAPI + CAPK, knest, node image.
	$(KIND_ENV) hack/kind/up.sh

.PHONY: kind-down
kind-down: ## Delete the kind host cluster and its registry.
	$(KIND_ENV) hack/kind/down.sh

.PHONY: kind-env
kind-env: ## Print the env vars for kubectl and the e2e suite against it (eval "$(make -s kind-env)").
	@cat $(KIND_ENV_FILE)

.PHONY: e2e-kind
e2e-kind: node-image ## Run the e2e suite against KubeVirt in kind (KEEP=1 keeps the cluster; KNEST_E2E_FULL=1).
	rm -rf $(E2E_KIND_STATE_DIR) && mkdir -p $(E2E_KIND_STATE_DIR)
	$(if $(filter 1,$(KEEP)),,trap '$(KIND_ENV) hack/kind/down.sh' EXIT;) \
	$(KIND_ENV) hack/kind/up.sh; \
	source $(KIND_ENV_FILE); \
	KNEST_E2E_STATE_DIR=$(E2E_KIND_STATE_DIR) KNEST_E2E_FULL=$(KNEST_E2E_FULL) \
		$(GO) test -tags e2e -count=1 -v -timeout $(E2E_KIND_TIMEOUT) $(GO_TEST_FLAGS) ./e2e/tenant/...
