//go:build tools

// Package tools pins kube-network-policies for `make e2e-kind`.
package tools

import _ "sigs.k8s.io/kube-network-policies/cmd"
