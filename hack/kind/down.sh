#!/usr/bin/env bash
# Deletes what up.sh made: the kind cluster, its registry container, kubeconfig and env file.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

kind delete cluster --name "$KIND_CLUSTER" --kubeconfig "$KIND_KUBECONFIG"
if docker inspect "$KIND_REGISTRY_NAME" >/dev/null 2>&1; then
  docker rm -f "$KIND_REGISTRY_NAME" >/dev/null
fi
rm -f "$KIND_KUBECONFIG" "$KIND_ENV_FILE"
