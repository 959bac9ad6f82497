# shellcheck shell=bash disable=SC2034
# Settings shared by up.sh and down.sh. hack/kind.mk passes the Makefile's versions and
# paths; these defaults let the scripts run on their own (from any directory).

KNEST_CACHE=${KNEST_CACHE:-$HOME/.cache/knest}
GO=${GO:-go}

KIND_CLUSTER=${KIND_CLUSTER:-knest-e2e}
# The kind v0.31.0 node image for Kubernetes v1.34.3 (digest from kind's release notes).
KIND_IMAGE=${KIND_IMAGE:-kindest/node:v1.34.3@sha256:08497ee19eace7b4b5348db5c6a1591d7752b164530a36f855cb0f2bdcbadd48}
KIND_KUBECONFIG=${KIND_KUBECONFIG:-$KNEST_CACHE/kind/$KIND_CLUSTER.kubeconfig}
# A registry container on the kind network, published on localhost:PORT; the kind nodes
# resolve localhost:PORT to it, so one image reference works on both sides.
KIND_REGISTRY_NAME=${KIND_REGISTRY_NAME:-$KIND_CLUSTER-registry}
KIND_REGISTRY_PORT=${KIND_REGISTRY_PORT:-5001}

KUBEVIRT_VERSION=${KUBEVIRT_VERSION:-v1.7.0}
CAPI_VERSION=${CAPI_VERSION:-v1.11.4}
CAPK_VERSION=${CAPK_VERSION:-v0.11.2}
CRANE_VERSION=${CRANE_VERSION:-v0.20.7}

# The node image (make node-image) and where up.sh pushes it.
NODE_KUBE_VERSION=${NODE_KUBE_VERSION:-v1.34.3}
NODE_IMAGE_DIR=${NODE_IMAGE_DIR:-$KNEST_CACHE/node-image/out/$NODE_KUBE_VERSION}
NODE_IMAGE_REF=${NODE_IMAGE_REF:-localhost:$KIND_REGISTRY_PORT/knest/node:$NODE_KUBE_VERSION}
KERNEL_IMAGE_REF=${KERNEL_IMAGE_REF:-localhost:$KIND_REGISTRY_PORT/knest/node-kernel:$NODE_KUBE_VERSION}

# What up.sh writes last for the e2e suite and kubectl: KUBECONFIG,
# KNEST_E2E_HOST_KUBECONFIG and the node images by digest (KNEST_E2E_NODE_IMAGE,
# KNEST_E2E_KERNEL_IMAGE), so a rebuilt image is never taken for a cached one.
KIND_ENV_FILE=${KIND_ENV_FILE:-$KNEST_CACHE/kind/$KIND_CLUSTER.env}
