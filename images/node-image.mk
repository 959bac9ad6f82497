# Node image targets, included from the top-level Makefile. The build logic lives in
# images/build.sh (cached by inputs under $(KNEST_CACHE)/node-image); the qemu proof
# lives in the separate Go module images/tools (package nodetest).

##@ Node image

NODE_KUBE_VERSION ?= $(KUBE_VERSION)
NODE_IMAGE_DIR := $(KNEST_CACHE)/node-image/out/$(NODE_KUBE_VERSION)
NODE_IMAGE_TEST_TIMEOUT ?= 120m
NODE_IMAGE_TEST_FLAGS ?=

.PHONY: node-image
node-image: ## Build the node image for NODE_KUBE_VERSION (default KUBE_VERSION) offline.
	KNEST_CACHE=$(KNEST_CACHE) KUBE_VERSION=$(NODE_KUBE_VERSION) GO=$(GO) nice -n 10 images/build.sh

.PHONY: node-image-test
node-image-test: node-image host-tools ## Boot the node image under qemu: kubeadm init, join, pods, no pulls.
	cd images/tools && KNEST_NODE_IMAGE=$(NODE_IMAGE_DIR) KNEST_CACHE=$(KNEST_CACHE) \
		$(GO) test -count=1 -v -timeout $(NODE_IMAGE_TEST_TIMEOUT) ./nodetest $(NODE_IMAGE_TEST_FLAGS)
