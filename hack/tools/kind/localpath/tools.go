//go:build tools

// Package tools pins local-path-provisioner, the kind host's default StorageClass
// (its volumes live on the node's /var, which outlives a node restart).
package tools

import _ "github.com/rancher/local-path-provisioner"
