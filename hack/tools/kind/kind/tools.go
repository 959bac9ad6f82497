//go:build tools

// Package tools pins the kind CLI for `make e2e`.
package tools

import _ "sigs.k8s.io/kind"
