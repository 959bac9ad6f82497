//go:build tools

// Package tools pins MetalLB, the kind host's LoadBalancer implementation (L2 mode):
// its controller and speaker are built from this module.
package tools

import (
	_ "go.universe.tf/metallb/controller"
	_ "go.universe.tf/metallb/speaker"
)
