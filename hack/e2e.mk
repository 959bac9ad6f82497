# The local host environment with real VMs, included from the top-level Makefile after
# images/node-image.mk and hack/providers.mk: `make demo` (the README's main command),
# `make e2e` (in .ci/run), `make e2e-upgrade` and `make e2e-full`. Package e2e/localenv
# brings up the test bed, the Cluster API and CAPK managers, the KubeVirt stand-in
# (e2e/standin) and knest's controller; docs/e2e.md says what the stand-in does
# differently from KubeVirt. The suite e2e/tenant has two tests, each run by its own
# target: TestTenantCluster (e2e, e2e-full) and TestUpgrade (e2e-upgrade, e2e-full).

##@ Local host environment with real VMs

DEMO_DIR ?= $(KNEST_CACHE)/demo
E2E_TIMEOUT ?= 150m
# 1: every step (make e2e-full).
KNEST_E2E_FULL ?=
# false: a full run without its second cluster (two do not fit 2 emulated cores).
KNEST_E2E_SECOND_CLUSTER ?=
# Keeps VM consoles, component logs and the timeline report (default: a temp dir).
E2E_STATE_DIR ?= $(KNEST_CACHE)/e2e/last-run
# make e2e-upgrade: a cluster at the oldest of NODE_KUBE_VERSIONS upgraded to the
# newest. Create (up to 50 min), upgrade (up to 90) and delete.
E2E_UPGRADE_TIMEOUT ?= 150m
E2E_UPGRADE_STATE_DIR ?= $(KNEST_CACHE)/e2e/upgrade-last-run
KUBECTL := $(KNEST_CACHE)/node-image/kube/$(NODE_KUBE_VERSION)/kubectl
NODE_IMAGES_DIR := $(KNEST_CACHE)/node-image/out
# Prefixes a command that brings up the local environment. It first decides qemu's
# accelerator for the stand-in's VMs: kvm only where a kernel boots under it
# (images/scripts/kvm-probe.sh, up to 30 s; KNEST_ACCEL=tcg or kvm skips the probe).
# The probe runs as its own command so that its failure (a bad KNEST_ACCEL) stops
# make instead of leaving the variable empty.
LOCALENV_ENV := accel=$$(images/scripts/kvm-probe.sh $(NODE_IMAGE_DIR)/vmlinuz) && \
	KNEST_ACCEL=$$accel KNEST_TESTBIN=$(TESTBIN_DIR) KNEST_KUBEVIRT_CRDS=$(KUBEVIRT_CRDS_DIR) \
	KNEST_PROVIDERS=$(PROVIDERS_DIR) KNEST_NODE_IMAGES=$(NODE_IMAGES_DIR)
# What the stand-in runs: qemu, a bridge with DHCP, cloud-init seed ISOs, nftables
# for NetworkPolicy.
HOST_TOOLS := qemu-system-x86_64:qemu-system-x86 qemu-img:qemu-utils dnsmasq:dnsmasq \
	genisoimage:genisoimage ip:iproute2 nft:nftables

.PHONY: host-tools
host-tools: ## Install what the KubeVirt stand-in needs (qemu, dnsmasq, genisoimage, nftables) from Debian packages.
	$(call apt-ensure,$(HOST_TOOLS))
	@[ "$$(id -u)" = 0 ] || { echo "the local host environment runs as root (bridge, tap devices)"; exit 1; }

.PHONY: demo
demo: testbin providers node-image host-tools build ## Bring up the local host environment and a tenant cluster (1 control plane + 1 worker) in VMs.
	$(GO) build -o bin/localenv ./hack/localenv
	$(LOCALENV_ENV) bin/localenv up -state $(DEMO_DIR)
	@if bin/knest --kubeconfig $(DEMO_DIR)/host.kubeconfig get demo >/dev/null 2>&1; then \
		echo "NestedCluster demo exists already:"; bin/knest --kubeconfig $(DEMO_DIR)/host.kubeconfig get demo; \
	else \
		bin/knest --kubeconfig $(DEMO_DIR)/host.kubeconfig create demo \
			--worker-cpu 1 --worker-memory 2Gi --control-plane-memory 3Gi --timeout 60m; \
	fi
	bin/knest --kubeconfig $(DEMO_DIR)/host.kubeconfig kubeconfig demo --output-file $(DEMO_DIR)/demo.kubeconfig
	$(KUBECTL) --kubeconfig $(DEMO_DIR)/demo.kubeconfig get nodes -o wide
	@echo; echo "Tenant:  $(KUBECTL) --kubeconfig $(DEMO_DIR)/demo.kubeconfig get pods -A"; \
	echo "Host:    bin/knest --kubeconfig $(DEMO_DIR)/host.kubeconfig get demo"; \
	echo "Stop everything: make demo-down"

.PHONY: demo-down
demo-down: ## Stop the local host environment: every VM, manager and the test bed.
	$(GO) build -o bin/localenv ./hack/localenv
	bin/localenv down -state $(DEMO_DIR)

.PHONY: e2e
e2e: testbin providers node-image host-tools ## Create, scale and delete a tenant cluster of real VMs with the CLI (in .ci/run).
	rm -rf $(E2E_STATE_DIR) && mkdir -p $(E2E_STATE_DIR)
	$(LOCALENV_ENV) KNEST_E2E_STATE_DIR=$(E2E_STATE_DIR) KNEST_E2E_FULL=$(KNEST_E2E_FULL) KNEST_E2E_SECOND_CLUSTER=$(KNEST_E2E_SECOND_CLUSTER) \
		$(GO) test -tags e2e -count=1 -v -timeout $(E2E_TIMEOUT) -run '^TestTenantCluster$$' $(GO_TEST_FLAGS) ./e2e/tenant

.PHONY: e2e-upgrade
e2e-upgrade: testbin providers node-images host-tools ## Upgrade a tenant cluster of real VMs (oldest → newest of NODE_KUBE_VERSIONS) while a workload is polled; report its disruption.
	rm -rf $(E2E_UPGRADE_STATE_DIR) && mkdir -p $(E2E_UPGRADE_STATE_DIR)
	$(LOCALENV_ENV) KNEST_E2E_STATE_DIR=$(E2E_UPGRADE_STATE_DIR) \
		KNEST_E2E_UPGRADE_FROM=$(firstword $(NODE_KUBE_VERSIONS)) KNEST_E2E_UPGRADE_TO=$(lastword $(NODE_KUBE_VERSIONS)) \
		$(GO) test -tags e2e -count=1 -v -timeout $(E2E_UPGRADE_TIMEOUT) -run '^TestUpgrade$$' $(GO_TEST_FLAGS) ./e2e/tenant

.PHONY: e2e-full
e2e-full: ## As e2e, plus a second cluster at once, a controller restart mid-create and a killed worker VM; then e2e-upgrade.
	$(MAKE) e2e KNEST_E2E_FULL=1 E2E_TIMEOUT=240m
	$(MAKE) e2e-upgrade
