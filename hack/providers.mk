# Cluster API provider managers for the end-to-end tests, included from the top-level
# Makefile. Built from their Go modules at the versions the tools modules under
# hack/tools/providers pin (each with its own go.mod, so each manager is built from
# the dependencies its release pins); the package e2e/providers runs them.

##@ Cluster API providers

CAPI_VERSION := v1.13.6
CAPK_VERSION := v0.11.2
PROVIDERS_DIR := $(KNEST_CACHE)/providers/capi-$(CAPI_VERSION)-capk-$(CAPK_VERSION)
CAPI_TOOLS := hack/tools/providers/capi
CAPK_TOOLS := hack/tools/providers/capk
PROVIDERS := $(PROVIDERS_DIR)/cluster-api-manager $(PROVIDERS_DIR)/kubeadm-bootstrap-manager \
	$(PROVIDERS_DIR)/kubeadm-control-plane-manager $(PROVIDERS_DIR)/capk-manager

# What cluster-api's hack/version.sh stamps into a release build.
CAPI_MAJOR := $(word 1,$(subst ., ,$(patsubst v%,%,$(CAPI_VERSION))))
CAPI_MINOR := $(word 2,$(subst ., ,$(patsubst v%,%,$(CAPI_VERSION))))
CAPI_LDFLAGS := -s -w $(foreach kv,gitVersion=$(CAPI_VERSION) gitMajor=$(CAPI_MAJOR) gitMinor=$(CAPI_MINOR) \
	gitTreeState=clean buildDate=1970-01-01T00:00:00Z,-X sigs.k8s.io/cluster-api/version.$(kv))

# Builds share 2 cores with other work; go easy on them.
PROVIDERS_GO := nice -n 10 $(GO)

.PHONY: providers
providers: $(PROVIDERS) $(PROVIDERS_DIR)/VERSIONS ## Build the CAPI core, kubeadm bootstrap, kubeadm control-plane and CAPK managers.

.PHONY: providers-env
providers-env: ## Print the env var that points tests at the provider managers (eval "$(make -s providers-env)").
	@echo export KNEST_PROVIDERS=$(PROVIDERS_DIR)

# The main package of each manager, by output name.
cluster-api-manager_PKG := sigs.k8s.io/cluster-api
kubeadm-bootstrap-manager_PKG := sigs.k8s.io/cluster-api/bootstrap/kubeadm
kubeadm-control-plane-manager_PKG := sigs.k8s.io/cluster-api/controlplane/kubeadm

# Like the test bed: build to a temporary name, then rename, so an interrupted build
# leaves nothing that would later be taken as complete.
$(PROVIDERS_DIR)/cluster-api-manager $(PROVIDERS_DIR)/kubeadm-bootstrap-manager $(PROVIDERS_DIR)/kubeadm-control-plane-manager:
	@mkdir -p $(@D)
	cd $(CAPI_TOOLS) && test "$$($(GO) list -m -f '{{.Version}}' sigs.k8s.io/cluster-api)" = $(CAPI_VERSION)
	cd $(CAPI_TOOLS) && CGO_ENABLED=0 $(PROVIDERS_GO) build -trimpath -ldflags '$(CAPI_LDFLAGS)' -o $@.tmp $($(@F)_PKG)
	mv $@.tmp $@

$(PROVIDERS_DIR)/capk-manager:
	@mkdir -p $(@D)
	cd $(CAPK_TOOLS) && test "$$($(GO) list -m -f '{{.Version}}' sigs.k8s.io/cluster-api-provider-kubevirt)" = $(CAPK_VERSION)
	cd $(CAPK_TOOLS) && CGO_ENABLED=0 $(PROVIDERS_GO) build -trimpath -ldflags '-s -w' -o $@.tmp sigs.k8s.io/cluster-api-provider-kubevirt
	mv $@.tmp $@

# The module versions the managers were built from; e2e/providers refuses to run them
# with webhook and CRD manifests of other versions (those come from the main go.mod).
$(PROVIDERS_DIR)/VERSIONS: $(CAPI_TOOLS)/go.mod $(CAPK_TOOLS)/go.mod
	@mkdir -p $(@D)
	{ cd $(CAPI_TOOLS) && $(GO) list -m sigs.k8s.io/cluster-api; } > $@.tmp
	{ cd $(CAPK_TOOLS) && $(GO) list -m sigs.k8s.io/cluster-api-provider-kubevirt; } >> $@.tmp
	mv $@.tmp $@

E2E_CAPI_TIMEOUT ?= 20m

.PHONY: e2e-capi
e2e-capi: testbin providers kubevirt ## Run knest with the real Cluster API, CAPK and KubeVirt (virt-api, virt-controller) on the test bed (no VMs boot).
	KNEST_TESTBIN=$(TESTBIN_DIR) KNEST_KUBEVIRT_CRDS=$(KUBEVIRT_CRDS_DIR) KNEST_PROVIDERS=$(PROVIDERS_DIR) KNEST_KUBEVIRT=$(KUBEVIRT_DIR) \
		$(GO) test -tags e2e -count=1 -v -timeout $(E2E_CAPI_TIMEOUT) $(GO_TEST_FLAGS) ./e2e/capi ./e2e/kubevirt
