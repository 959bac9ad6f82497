#!/usr/bin/env bash
# Deletes what up.sh made: the kind cluster, its kubeconfig and env file. The node
# image stays in the container engine (up.sh imports it again only when it changed).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
kind_engine
"$KIND" delete cluster --name "$KIND_CLUSTER" --kubeconfig "$KIND_KUBECONFIG"
rm -f "$KIND_KUBECONFIG" "$KIND_ENV_FILE"
