//go:build tools

// Package tools pins kube-router for `make e2e`.
package tools

import _ "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router"
