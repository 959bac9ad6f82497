# The upstream CSI sidecars that run beside knest's CSI controller (cmd/knest-csi) in
# each tenant's host namespace: external-provisioner and external-attacher, which
# watch the tenant's API and call knest's controller service over a shared unix
# socket (pkg/csi/deploy renders the Deployment). Built from the modules the Go
# proxy serves, each in its own tools module (hack/tools/csi/provisioner, .../attacher)
# with upstream's replace lines: the two pin different Kubernetes minors (v0.33 and
# v0.37), so one build list cannot hold both. Included from the top-level Makefile
# before hack/kind.mk.

##@ CSI sidecars

CSI_TOOLS := hack/tools/csi
# $(call csi-module-version,TOOLS_DIR,MODULE): the version the tools module requires.
csi-module-version = $(shell awk '$$1 == "$(2)" && $$2 ~ /^v/ {print $$2}' $(1)/go.mod)
CSI_PROVISIONER_MODULE := github.com/kubernetes-csi/external-provisioner/v5
CSI_ATTACHER_MODULE := github.com/kubernetes-csi/external-attacher/v4
CSI_PROVISIONER_VERSION := $(call csi-module-version,$(CSI_TOOLS)/provisioner,$(CSI_PROVISIONER_MODULE))
CSI_ATTACHER_VERSION := $(call csi-module-version,$(CSI_TOOLS)/attacher,$(CSI_ATTACHER_MODULE))
# Each output path carries its version, so a version bump builds a new one and an
# existing one is never rebuilt. Images on the kind host:
# knest.local/csi-provisioner:$(CSI_PROVISIONER_VERSION), knest.local/csi-attacher:$(CSI_ATTACHER_VERSION).
CSI_PROVISIONER := $(KNEST_CACHE)/csi/provisioner/$(CSI_PROVISIONER_VERSION)/csi-provisioner
CSI_ATTACHER := $(KNEST_CACHE)/csi/attacher/$(CSI_ATTACHER_VERSION)/csi-attacher

.PHONY: csi-sidecars
csi-sidecars: $(CSI_PROVISIONER) $(CSI_ATTACHER) ## Build csi-provisioner and csi-attacher into $(KNEST_CACHE)/csi/<name>/<version>.

# As upstream's release-tools/build.make: CGO off, the version stamped into
# main.version (upstream stamps `git describe`, which for a release is the tag).
# Built to a temporary name, then renamed, as the test bed.
$(CSI_PROVISIONER):
	@mkdir -p $(@D)
	cd $(CSI_TOOLS)/provisioner && CGO_ENABLED=0 nice -n 10 $(GO) build -trimpath \
		-ldflags '-s -w -X main.version=$(CSI_PROVISIONER_VERSION)' -o $@.tmp $(CSI_PROVISIONER_MODULE)/cmd/csi-provisioner
	mv $@.tmp $@

$(CSI_ATTACHER):
	@mkdir -p $(@D)
	cd $(CSI_TOOLS)/attacher && CGO_ENABLED=0 nice -n 10 $(GO) build -trimpath \
		-ldflags '-s -w -X main.version=$(CSI_ATTACHER_VERSION)' -o $@.tmp $(CSI_ATTACHER_MODULE)/cmd/csi-attacher
	mv $@.tmp $@

# knest-csi's node plugin run as its DaemonSet runs it (an image of the binary alone,
# the node's userland mounted in), through a volume's life on a loop device: root.
.PHONY: csi-node-smoke
csi-node-smoke: ## Run knest-csi's node plugin as on a tenant node against a loop device (root; hack/csi-node-smoke.sh).
	GO=$(GO) nice -n 10 hack/csi-node-smoke.sh
