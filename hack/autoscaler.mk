# The upstream Kubernetes cluster-autoscaler, Cluster API provider only, that knest's
# controller runs once per tenant with autoscaled pools. Included from the top-level
# Makefile before hack/kind.mk (which builds its image on the kind host: KIND_PREREQS,
# KIND_ENV). Built from the module hack/tools/autoscaler pins by
# hack/autoscaler-build.sh, which says why not by a plain go build.

##@ Cluster autoscaler

AUTOSCALER_TOOLS := hack/tools/autoscaler
# The module version (the only one the proxy serves: a pseudo-version) and upstream's
# release at it (version/version.go there; the build checks it).
AUTOSCALER_MODULE_VERSION := $(shell awk '$$1 == "k8s.io/autoscaler/cluster-autoscaler" && $$2 ~ /^v/ {print $$2}' $(AUTOSCALER_TOOLS)/go.mod)
AUTOSCALER_RELEASE := 1.33.0
# The release, the commit and knest's fixes, e.g. v1.33.0-1959f5f61f6c-knest.1: the output directory and the
# image tag (knest.local/cluster-autoscaler:$(AUTOSCALER_VERSION) on the kind host).
# knest.N counts the fixes hack/autoscaler-build.sh applies (1: scale to zero): a new
# one builds a new output.
AUTOSCALER_VERSION := v$(AUTOSCALER_RELEASE)-$(lastword $(subst -, ,$(AUTOSCALER_MODULE_VERSION)))-knest.1
AUTOSCALER_DIR := $(KNEST_CACHE)/autoscaler/$(AUTOSCALER_VERSION)
AUTOSCALER := $(AUTOSCALER_DIR)/cluster-autoscaler

.PHONY: autoscaler
autoscaler: $(AUTOSCALER) ## Build the cluster-autoscaler (Cluster API provider only) into $(KNEST_CACHE)/autoscaler/<version>.

.PHONY: autoscaler-env
autoscaler-env: ## Print the env var that points tests at the cluster-autoscaler binary (eval "$(make -s autoscaler-env)").
	@echo export KNEST_AUTOSCALER=$(AUTOSCALER)

# As the test bed: the script builds to a temporary name, then renames.
$(AUTOSCALER):
	@mkdir -p $(@D)
	AUTOSCALER_DIR=$(AUTOSCALER_DIR) AUTOSCALER_RELEASE=$(AUTOSCALER_RELEASE) GO=$(GO) \
		nice -n 10 hack/autoscaler-build.sh $@
