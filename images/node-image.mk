# Node image targets, included from the top-level Makefile. The build logic lives in
# images/build.sh (cached by inputs under $(KNEST_CACHE)/node-image); the qemu proof
# lives in the separate Go module images/tools (package nodetest).

##@ Node image

# The tenant Kubernetes versions knest builds node images for, oldest first; the last
# is the default tenant version (knestv1.DefaultVersion) and what `make node-image`,
# `make e2e` and `make demo` build. `make node-images` builds them all (make
# e2e-upgrade).
NODE_KUBE_VERSIONS := v1.34.4 v1.35.4
NODE_KUBE_VERSION ?= $(lastword $(NODE_KUBE_VERSIONS))
# Each version's node image: $(NODE_IMAGES_DIR)/<version>.
NODE_IMAGES_DIR := $(KNEST_CACHE)/node-image/out
NODE_IMAGE_DIR := $(NODE_IMAGES_DIR)/$(NODE_KUBE_VERSION)
NODE_IMAGE_TEST_TIMEOUT ?= 120m
NODE_IMAGE_TEST_FLAGS ?=

# What images/build.sh runs (it stops with this list when one is missing), and
# hack/conformance/build.sh (ip, curl: its httpd check).
NODE_IMAGE_TOOLS := mmdebstrap:mmdebstrap mkfs.ext4:e2fsprogs e2fsck:e2fsprogs debugfs:e2fsprogs \
	qemu-img:qemu-utils qemu-system-x86_64:qemu-system-x86 gcc:gcc ip:iproute2 curl:curl
# Files the cgo builds link statically (runc: libseccomp; flanneld, runc: libc).
NODE_IMAGE_LIBS := /usr/include/seccomp.h:libseccomp-dev /usr/lib/x86_64-linux-gnu/libseccomp.a:libseccomp-dev \
	/usr/lib/x86_64-linux-gnu/libc.a:libc6-dev

.PHONY: node-image-tools
node-image-tools: ## Install what the node image build needs (mmdebstrap, e2fsprogs, qemu, gcc, libseccomp-dev) from Debian packages.
	$(call apt-ensure,$(NODE_IMAGE_TOOLS))
	@missing=""; for f in $(NODE_IMAGE_LIBS); do [ -e $${f%%:*} ] || missing="$$missing $${f##*:}"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

.PHONY: node-image
node-image: node-image-tools ## Build the node image for NODE_KUBE_VERSION (default: the newest of NODE_KUBE_VERSIONS) offline.
	KNEST_CACHE=$(KNEST_CACHE) KUBE_VERSION=$(NODE_KUBE_VERSION) GO=$(GO) nice -n 10 images/build.sh
	images/scripts/check-coredns.sh $(NODE_KUBE_VERSION) $(KNEST_CACHE)/node-image/out/$(NODE_KUBE_VERSION) pkg/cluster/coredns.go

.PHONY: node-images
node-images: node-image-tools ## Build the node image of every version in NODE_KUBE_VERSIONS (for upgrades).
	for v in $(NODE_KUBE_VERSIONS); do \
		KNEST_CACHE=$(KNEST_CACHE) KUBE_VERSION=$$v GO=$(GO) nice -n 10 images/build.sh; \
		images/scripts/check-coredns.sh $$v $(KNEST_CACHE)/node-image/out/$$v pkg/cluster/coredns.go; \
	done

# What node-image-test runs: qemu, a bridge with DHCP (dnsmasq) in a network
# namespace, cloud-init seed ISOs.
HOST_TOOLS := qemu-system-x86_64:qemu-system-x86 qemu-img:qemu-utils dnsmasq:dnsmasq \
	genisoimage:genisoimage ip:iproute2

.PHONY: host-tools
host-tools: ## Install what node-image-test needs (qemu, dnsmasq, genisoimage, iproute2) from Debian packages.
	$(call apt-ensure,$(HOST_TOOLS))
	@[ "$$(id -u)" = 0 ] || { echo "node-image-test runs as root (network namespace, bridge, tap devices)"; exit 1; }

.PHONY: node-image-test
node-image-test: node-image host-tools ## Boot the node image under qemu: kubeadm init, join, pods, no pulls.
	cd images/tools && KNEST_NODE_IMAGE=$(NODE_IMAGE_DIR) KNEST_CACHE=$(KNEST_CACHE) \
		$(GO) test -count=1 -v -timeout $(NODE_IMAGE_TEST_TIMEOUT) ./nodetest $(NODE_IMAGE_TEST_FLAGS)
