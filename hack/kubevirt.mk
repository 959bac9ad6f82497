# KubeVirt's own components for the end-to-end tests, included from the top-level
# Makefile. virt-api (its admission webhooks) and virt-controller (VM → VMI →
# virt-launcher pod) are built from the kubevirt.io/kubevirt module at KUBEVIRT_VERSION
# in the tools module hack/tools/kubevirt (which carries KubeVirt's replace block), and
# run as processes by package e2e/kubevirt.

##@ KubeVirt

KUBEVIRT_DIR := $(KNEST_CACHE)/kubevirt/$(KUBEVIRT_VERSION)
KUBEVIRT_COMPONENTS := virt-api virt-controller
# A file only the current manifests tool writes stands for the install directory, so
# one written by an older tool is generated again (the directory appears whole, by rename).
KUBEVIRT_INSTALL := $(KUBEVIRT_DIR)/install/rbac-virt-controller.yaml
KUBEVIRT := $(addprefix $(KUBEVIRT_DIR)/bin/,$(KUBEVIRT_COMPONENTS)) $(KUBEVIRT_INSTALL)
# What KubeVirt's hack/version.sh stamps into a release build.
KUBEVIRT_LDFLAGS := -s -w $(foreach kv,gitVersion=$(KUBEVIRT_VERSION) gitTreeState=clean \
	buildDate=1970-01-01T00:00:00Z,-X kubevirt.io/client-go/version.$(kv))

.PHONY: kubevirt
kubevirt: $(KUBEVIRT) ## Build virt-api, virt-controller and their install manifests (CRDs, webhooks).

.PHONY: kubevirt-env
kubevirt-env: ## Print the env var that points tests at the KubeVirt components (eval "$(make -s kubevirt-env)").
	@echo export KNEST_KUBEVIRT=$(KUBEVIRT_DIR)

# As the test bed: build to a temporary name, then rename.
$(addprefix $(KUBEVIRT_DIR)/bin/,$(KUBEVIRT_COMPONENTS)):
	@mkdir -p $(@D)
	cd $(KUBEVIRT_TOOLS) && test "$$($(GO) list -m -f '{{.Version}}' kubevirt.io/kubevirt)" = $(KUBEVIRT_VERSION)
	cd $(KUBEVIRT_TOOLS) && CGO_ENABLED=0 nice -n 10 $(GO) build -trimpath -ldflags '$(KUBEVIRT_LDFLAGS)' \
		-o $@.tmp kubevirt.io/kubevirt/cmd/$(@F)
	mv $@.tmp $@

$(KUBEVIRT_INSTALL):
	rm -rf $(@D).tmp
	cd $(KUBEVIRT_TOOLS) && $(GO) run ./manifests -install $(@D).tmp
	rm -rf $(@D) && mv $(@D).tmp $(@D)

# KubeVirt's images for `make e2e` (hack/kubevirt-images.sh): every component;
# virt-launcher and virt-handler with cgo, against libvirt's headers (they link
# libvirt.so.0, whose ABI only grows, so bookworm's headers serve trixie's libvirt 11.3
# in the images).
KUBEVIRT_IMAGE_BINS := virt-operator virt-chroot virt-launcher-monitor virt-probe virt-tail virt-freezer
# KubeVirt's bridge binding, which knest's VMs use, makes a dummy link in each launcher
# pod. Where this kernel has no dummy driver (the kind node shares it), virt-handler is
# built from a copy of the module with that link an empty bridge (eth0-bridge,
# hack/kubevirt-handler-bridge.sh, docs/e2e.md); elsewhere it is upstream's. Set
# VIRT_HANDLER_VARIANT to build for another kernel than this one.
VIRT_HANDLER_VARIANT ?= $(shell ip link add knest-probe0 type dummy 2>/dev/null && ip link del knest-probe0 && echo upstream || echo eth0-bridge)
VIRT_HANDLER_BIN := $(KUBEVIRT_DIR)/bin/$(if $(filter eth0-bridge,$(VIRT_HANDLER_VARIANT)),virt-handler-eth0-bridge,virt-handler)
KUBEVIRT_IMAGES_DIR := $(KUBEVIRT_DIR)/images/$(VIRT_HANDLER_VARIANT)
KUBEVIRT_IMAGES := $(KUBEVIRT_IMAGES_DIR)/kubevirt-images.tar

.PHONY: kubevirt-images
kubevirt-images: $(KUBEVIRT_IMAGES) ## Build KubeVirt's images and operator manifest offline (binaries from the module, Debian trixie userland).

.PHONY: kubevirt-images-tools
kubevirt-images-tools:
	$(call apt-ensure,mmdebstrap:mmdebstrap gcc:gcc setcap:libcap2-bin)
	@dpkg -s libvirt-dev >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libvirt-dev; }

$(addprefix $(KUBEVIRT_DIR)/bin/,$(KUBEVIRT_IMAGE_BINS)):
	@mkdir -p $(@D)
	cd $(KUBEVIRT_TOOLS) && CGO_ENABLED=0 nice -n 10 $(GO) build -trimpath -ldflags '$(KUBEVIRT_LDFLAGS)' \
		-o $@.tmp kubevirt.io/kubevirt/cmd/$(@F)
	mv $@.tmp $@

$(KUBEVIRT_DIR)/bin/virt-launcher $(KUBEVIRT_DIR)/bin/virt-handler: | kubevirt-images-tools
	@mkdir -p $(@D)
	cd $(KUBEVIRT_TOOLS) && CGO_ENABLED=1 nice -n 10 $(GO) build -trimpath -ldflags '$(KUBEVIRT_LDFLAGS)' \
		-o $@.tmp kubevirt.io/kubevirt/cmd/$(@F)
	mv $@.tmp $@

$(KUBEVIRT_DIR)/bin/virt-handler-eth0-bridge: hack/kubevirt-handler-bridge.sh | kubevirt-images-tools
	@mkdir -p $(@D)
	KUBEVIRT_DIR=$(KUBEVIRT_DIR) KUBEVIRT_VERSION=$(KUBEVIRT_VERSION) KUBEVIRT_LDFLAGS='$(KUBEVIRT_LDFLAGS)' GO=$(GO) \
		nice -n 10 hack/kubevirt-handler-bridge.sh $@

$(KUBEVIRT_IMAGES): $(KUBEVIRT) $(addprefix $(KUBEVIRT_DIR)/bin/,$(KUBEVIRT_IMAGE_BINS) virt-launcher) $(VIRT_HANDLER_BIN) \
		hack/kubevirt-images.sh | kubevirt-images-tools
	KUBEVIRT_DIR=$(KUBEVIRT_DIR) KUBEVIRT_VERSION=$(KUBEVIRT_VERSION) GO=$(GO) VIRT_HANDLER_VARIANT=$(VIRT_HANDLER_VARIANT) \
		KUBEVIRT_IMAGES_DIR=$(KUBEVIRT_IMAGES_DIR) nice -n 10 hack/kubevirt-images.sh

.PHONY: kubevirt-images-check
kubevirt-images-check: $(KUBEVIRT_IMAGES) ## Smoke-test KubeVirt's images without a cluster (podman, a storage of its own) and the operator manifest.
	$(call apt-ensure,podman:podman runc:runc jq:jq)
	KUBEVIRT_DIR=$(KUBEVIRT_DIR) KUBEVIRT_VERSION=$(KUBEVIRT_VERSION) KUBEVIRT_IMAGES_DIR=$(KUBEVIRT_IMAGES_DIR) GO=$(GO) \
		hack/kubevirt-images-check.sh
