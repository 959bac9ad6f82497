# The end-to-end suite and the demo on the kind host with real KubeVirt, included from
# the top-level Makefile after hack/kind.mk (the host: KIND_PREREQS, KIND_ENV,
# kind-host-up): `make e2e` (in .ci/run), `make e2e-vm`, `make e2e-full`, `make
# e2e-upgrade` and `make e2e-faults` and `make demo`. The suite e2e/tenant:
# TestHostedCluster (a hosted control plane) run by e2e and e2e-full,
# TestTenantCluster (a VM control plane) by e2e, e2e-vm and e2e-full, TestUpgrade by
# e2e-upgrade and e2e-full, TestFaults, TestHostRestart and TestVolumeWorkerKilled by
# e2e-faults; e2e and e2e-vm also run the kind checks (e2e/kind) first.

##@ End to end and demo on the kind host

E2E_TIMEOUT ?= 180m
# 1: every step (make e2e-full).
KNEST_E2E_FULL ?=
# false: a full run without its second cluster (two do not fit 2 emulated cores).
KNEST_E2E_SECOND_CLUSTER ?=
# make e2e-upgrade: a cluster at the oldest of NODE_KUBE_VERSIONS upgraded to the
# newest. Create (up to 50 min), upgrade (up to 90) and delete.
E2E_UPGRADE_TIMEOUT ?= 150m
E2E_UPGRADE_STATE_DIR ?= $(KNEST_CACHE)/e2e/upgrade-last-run
# Where the upgraded cluster's control plane runs: hosted (pods on the host) or vm;
# a control-plane VM's surge does not fit 2 emulated cores.
KNEST_E2E_CONTROL_PLANE_MODE ?= hosted
DEMO_DIR ?= $(KNEST_CACHE)/demo
# The demo's own kind cluster, so that make e2e neither reuses nor deletes it.
DEMO_CLUSTER ?= knest-demo
# The demo tenant's control plane: vm or hosted; empty: hosted where the kind host
# emulates its VMs (one guest to emulate instead of two), vm under KVM.
DEMO_CONTROL_PLANE ?=

# The tenant tests make e2e runs. Empty: a hosted tenant, then one with a VM control
# plane where the host runs its VMs under KVM; under emulation the hosted tenant alone
# (on a 2-core machine without /dev/kvm it took 30 minutes and the VM tenant 17 to
# create, past CI's budget: make e2e-vm runs it).
E2E_TESTS ?=
E2E_TESTS_KVM = TestHostedCluster|TestTenantCluster
E2E_TESTS_TCG = TestHostedCluster

# The hosted tenant's worker boots the node image with the conformance suite's images
# (make conformance-images), on which TestHostedCluster runs the suite's smoke part;
# the image is loaded into the kind host only when that test runs (not by make e2e-vm).
E2E_CONFORMANCE_ENV = KNEST_E2E_CONFORMANCE=$(KNEST_CACHE)/conformance/$(NODE_KUBE_VERSION) \
	KNEST_E2E_CONFORMANCE_NODE_IMAGE=docker.io/knest/node-conformance:$(NODE_KUBE_VERSION)

.PHONY: e2e
e2e: $(KIND_PREREQS) conformance-images ## Bring up the kind host, run the kind checks, then a hosted tenant cluster (create, the conformance smoke, faults, backup, load balancers, scale, delete) and, where guests run under KVM, one with a VM control plane (create, isolation, its qemu killed, delete) with the CLI (in .ci/run; KEEP=1 keeps the host).
	$(call kind-host-up,$(E2E_STATE_DIR)) $(KIND_CHECKS); \
	tests='$(E2E_TESTS)'; [ -n "$$tests" ] || { [ "$$KNEST_E2E_ACCEL" = kvm ] && tests='$(E2E_TESTS_KVM)' || tests='$(E2E_TESTS_TCG)'; }; \
	echo "e2e: $$tests (guests under $$KNEST_E2E_ACCEL)"; \
	case "$$tests" in *TestHostedCluster*) $(KIND_ENV) hack/conformance/load.sh;; esac; \
	KNEST_E2E_STATE_DIR=$(E2E_STATE_DIR) KNEST_E2E_FULL=$(KNEST_E2E_FULL) KNEST_E2E_SECOND_CLUSTER=$(KNEST_E2E_SECOND_CLUSTER) $(E2E_CONFORMANCE_ENV) \
		$(GO) test -tags e2e -count=1 -v -timeout $(E2E_TIMEOUT) -run "^($$tests)\$$" $(GO_TEST_FLAGS) ./e2e/tenant 2>&1 | tee $(E2E_STATE_DIR)/e2e.log \
		|| { status=$$?; hack/test-failures.sh $(E2E_STATE_DIR)/e2e.log; exit $$status; }

.PHONY: e2e-vm
e2e-vm: ## As e2e, with only the tenant whose control plane is a VM.
	$(MAKE) e2e E2E_TESTS=TestTenantCluster

# The name issues and docs use for make e2e.
.PHONY: e2e-kind
e2e-kind: e2e

.PHONY: e2e-full
e2e-full: ## As e2e and e2e-vm, plus a second cluster at once, a controller restart mid-create and a worker VM killed two ways; then e2e-upgrade.
	$(MAKE) e2e KNEST_E2E_FULL=1 E2E_TIMEOUT=240m E2E_TESTS='TestTenantCluster|TestHostedCluster'
	$(MAKE) e2e-upgrade

# The host with the node images of every version; the machines boot each version's
# default images, so the env file's KNEST_E2E_NODE_IMAGE and KNEST_E2E_KERNEL_IMAGE,
# which pin one, are unset.
.PHONY: e2e-upgrade
e2e-upgrade: NODE_IMAGE_VERSIONS = $(NODE_KUBE_VERSIONS)
e2e-upgrade: $(KIND_PREREQS) node-images ## Upgrade a tenant cluster on the kind host (oldest → newest of NODE_KUBE_VERSIONS) while a workload is polled; report its disruption.
	$(call kind-host-up,$(E2E_UPGRADE_STATE_DIR)) \
	unset KNEST_E2E_NODE_IMAGE KNEST_E2E_KERNEL_IMAGE; \
	KNEST_E2E_STATE_DIR=$(E2E_UPGRADE_STATE_DIR) KNEST_E2E_CONTROL_PLANE_MODE=$(KNEST_E2E_CONTROL_PLANE_MODE) \
		KNEST_E2E_UPGRADE_FROM=$(firstword $(NODE_KUBE_VERSIONS)) KNEST_E2E_UPGRADE_TO=$(lastword $(NODE_KUBE_VERSIONS)) \
		$(GO) test -tags e2e -count=1 -v -timeout $(E2E_UPGRADE_TIMEOUT) -run '^TestUpgrade$$' $(GO_TEST_FLAGS) ./e2e/tenant

# make e2e-faults: faults injected at random points of hosted clusters' creates and
# scales (e2e/tenant/faults_test.go); KNEST_E2E_FAULTS_SEED replays a run's points. Then
# the kind node restarted under a tenant of each mode (e2e/tenant/hostrestart_test.go),
# and the worker VM of a pod writing to a volume killed (e2e/tenant/volumefault_test.go).
E2E_FAULTS_TIMEOUT ?= 200m
E2E_FAULTS_STATE_DIR ?= $(KNEST_CACHE)/e2e/faults-last-run
KNEST_E2E_FAULTS_SEED ?=

.PHONY: e2e-faults
e2e-faults: $(KIND_PREREQS) ## Kill controllers, KubeVirt's node agent, launcher pods and API servers, freeze the host's API server and delete mid-create, at random points; expect convergence and nothing leaked (table in the state dir's faults.md); then restart the kind node under a tenant of each mode and expect their objects back; kill the worker VM of a pod writing to a volume and expect every fsync'ed record back on the other worker.
	$(call kind-host-up,$(E2E_FAULTS_STATE_DIR)) \
	KNEST_E2E_STATE_DIR=$(E2E_FAULTS_STATE_DIR) KNEST_E2E_FAULTS_SEED=$(KNEST_E2E_FAULTS_SEED) \
		$(GO) test -tags e2e -count=1 -v -timeout $(E2E_FAULTS_TIMEOUT) -run '^(TestFaults|TestHostRestart|TestVolumeWorkerKilled)$$' $(GO_TEST_FLAGS) ./e2e/tenant

.PHONY: demo
demo demo-down: KIND_CLUSTER = $(DEMO_CLUSTER)
demo: $(KIND_PREREQS) build ## Bring up a kind host (DEMO_CLUSTER) and a tenant cluster on it (1 control plane, DEMO_CONTROL_PLANE, + 1 worker) with a sample app: hack/kind/demo.sh.
	$(KIND_ENV) hack/kind/up.sh
	$(KIND_ENV) KNEST=bin/knest DEMO_DIR=$(DEMO_DIR) DEMO_CONTROL_PLANE=$(DEMO_CONTROL_PLANE) hack/kind/demo.sh

.PHONY: demo-down
demo-down: $(KIND) ## Delete the demo's kind host and the tenant cluster on it.
	$(KIND_ENV) hack/kind/down.sh

##@ Host maintenance on a kind host of three nodes

E2E_HOST_STATE_DIR ?= $(KNEST_CACHE)/e2e/host-last-run

.PHONY: e2e-host
e2e-host: KIND_WORKERS = 2
e2e-host: $(KIND_PREREQS) build ## Bring up a 3-node kind host and a hosted tenant (3 API servers, 3 etcd members, 2 workers, two apps); drain a worker VM's node twice, then lose a node, measuring what the tenant and its apps saw (hack/kind/e2e-host.sh; E2E_HOST_STEPS="drain drain lose" picks; E2E_HOST_CONTROL_PLANE=vm drains a control-plane VM's node; KEEP=1 keeps the host).
	$(call kind-host-up,$(E2E_HOST_STATE_DIR)) \
	$(KIND_ENV) KNEST=bin/knest hack/kind/e2e-host.sh 2>&1 | tee $(E2E_HOST_STATE_DIR)/e2e-host.log

##@ Density on the kind host

# make bench-density: N hosted tenants without workers on the kind host, created in
# steps (DENSITY_STEPS, then N; each step's new tenants at once), measured at rest
# after each (hack/bench/density; docs/benchmark.md). KEEP=1 keeps the host and the
# tenants; the report is in DENSITY_STATE_DIR.
N ?= 20
DENSITY_STEPS ?= 1,5,10
DENSITY_FLAGS ?=
DENSITY_STATE_DIR ?= $(KNEST_CACHE)/bench/density-last-run

.PHONY: bench-density
bench-density: $(KIND_PREREQS) ## Create N hosted tenants (default 20) on the kind host in steps; report time to Ready, per-tenant cost at rest (kubelet metrics), the host's room, the controller's cost and tenant GET latency.
	$(call kind-host-up,$(DENSITY_STATE_DIR)) \
	$(GO) run ./hack/bench/density -n $(N) -steps $(DENSITY_STEPS) -out $(DENSITY_STATE_DIR)/density.md $(if $(filter 1,$(KEEP)),-keep) $(DENSITY_FLAGS)
