// Package kubever compares the Kubernetes versions a NestedCluster names
// (v1.MINOR.PATCH) and applies the rules between them: one minor at a time forward,
// never backward, kubelets at most MaxKubeletSkew minors behind the control plane.
package kubever

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
)

var re = regexp.MustCompile(`^v1\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$`)

// Version is a parsed v1.MINOR.PATCH.
type Version struct{ Minor, Patch int }

// Parse reads v1.MINOR.PATCH; anything else is an error.
func Parse(s string) (Version, error) {
	m := re.FindStringSubmatch(s)
	if m == nil {
		return Version{}, fmt.Errorf("%q is not a Kubernetes version of the form v1.MINOR.PATCH, e.g. %s", s, knestv1.DefaultVersion)
	}
	minor, err1 := strconv.Atoi(m[1])
	patch, err2 := strconv.Atoi(m[2])
	if err1 != nil || err2 != nil {
		return Version{}, fmt.Errorf("%q has a minor or patch out of range", s)
	}
	return Version{Minor: minor, Patch: patch}, nil
}

func (v Version) String() string { return fmt.Sprintf("v1.%d.%d", v.Minor, v.Patch) }

// Compare returns -1, 0 or 1 as v is older than, equal to or newer than w.
func (v Version) Compare(w Version) int {
	switch {
	case v.Minor != w.Minor:
		return sign(v.Minor - w.Minor)
	default:
		return sign(v.Patch - w.Patch)
	}
}

func sign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}

// Older returns the older of two version strings; one that does not parse loses to
// one that does, so a typo never wins over a real version.
func Older(a, b string) string {
	va, errA := Parse(a)
	vb, errB := Parse(b)
	switch {
	case errA != nil:
		return b
	case errB != nil:
		return a
	case va.Compare(vb) <= 0:
		return a
	}
	return b
}

// Messages shared with the CRD's rules (the validation tests hold both to them).
const (
	DowngradeMessage   = "version cannot go backwards: downgrades are not supported by kubeadm"
	SkipMinorMessage   = "version can move forward by at most one minor at a time (kubeadm's upgrade rule), e.g. v1.34.x to v1.35.x"
	PoolSkewMessage    = "a worker pool's version must be no newer than spec.version and at most 3 minors older (Kubernetes' kubelet skew policy), e.g. v1.34.4 with spec.version v1.35.4"
	PoolBackMessage    = "a worker pool's version cannot go backwards (nodes cannot be downgraded); hold a pool at the version it runs, e.g. the previous spec.version"
	RangeMessage       = "version must look like v1.MINOR.PATCH with a minor from 30 to 36 (the range Cluster API v1.13 supports), e.g. " + knestv1.DefaultVersion
	MinMinor, MaxMinor = 30, 36
)

// CheckUpgrade says why a control plane at from cannot move to to, or returns nil.
// The errors say exactly what the CRD's rules say (the field path gives the value).
func CheckUpgrade(from, to Version) error {
	switch {
	case to.Compare(from) < 0:
		return errors.New(DowngradeMessage)
	case to.Minor > from.Minor+1:
		return errors.New(SkipMinorMessage)
	}
	return nil
}

// CheckPoolSkew says, as the CRD does, why a pool at pool cannot run under a control
// plane at cp.
func CheckPoolSkew(pool, cp Version) error {
	if pool.Compare(cp) > 0 || pool.Minor+knestv1.MaxKubeletSkew < cp.Minor {
		return errors.New(PoolSkewMessage)
	}
	return nil
}

// The host may publish which Kubernetes versions have knest node images: a ConfigMap
// NodeVersionsConfigMap in NodeVersionsNamespace whose key NodeVersionsKey lists
// them, separated by spaces, e.g. "v1.34.4 v1.35.4". The CLI and the controller's
// admission policy refuse a version missing from it with NoNodeImageMessage; without
// the ConfigMap every version is allowed.
const (
	NodeVersionsConfigMap = "knest-node-versions"
	NodeVersionsNamespace = "knest-system"
	NodeVersionsKey       = "versions"
)

// ParseNodeVersions splits the NodeVersionsKey value of the ConfigMap into versions.
func ParseNodeVersions(s string) []string {
	return strings.Fields(s)
}

// HasNodeImage reports whether version is among the published node versions.
func HasNodeImage(known []string, version string) bool {
	return slices.Contains(known, version)
}

// NoNodeImageMessage says that version has no node image on this host and what to do.
func NoNodeImageMessage(version string, known []string) string {
	list := strings.Join(known, " ")
	if list == "" {
		list = "none"
	}
	return fmt.Sprintf("Kubernetes %s has no knest node image on this host (node images: %s); build and publish one first (images/README.md)", version, list)
}

// HeldPoolGrowMessage says, as the CRD's transition rule does, why a pool held at
// another minor than spec.version cannot gain replicas.
const HeldPoolGrowMessage = "a worker pool held at an older minor than spec.version cannot gain replicas (nor be added with any): " +
	"Cluster API creates machines only at the control plane's minor (MachineSet preflight check KubeadmVersionSkew); " +
	"let the pool catch up first (remove workers[].version: knest upgrade --release-pool)"

// HeldPoolAutoscaledMessage says, as the CRD's rule does, why a pool held at another
// minor than spec.version cannot be autoscaled.
const HeldPoolAutoscaledMessage = "a worker pool held at an older minor than spec.version cannot be autoscaled: " +
	"Cluster API creates machines only at the control plane's minor (MachineSet preflight check KubeadmVersionSkew), so the autoscaler could add no node; " +
	"let the pool catch up first (remove workers[].version: knest upgrade --release-pool), or leave out its autoscaling"

// NewMachinesBlocked reports whether Cluster API refuses to create machines at
// version pool for a control plane at version cp: its MachineSet preflight check
// KubeadmVersionSkew lets kubeadm join a node only at the control plane's minor, so
// such a pool can neither scale up, nor have an unhealthy machine replaced, nor roll
// out a changed machine shape. Versions that do not parse block nothing.
func NewMachinesBlocked(pool, cp string) bool {
	p, errP := Parse(pool)
	c, errC := Parse(cp)
	return errP == nil && errC == nil && p.Minor != c.Minor
}
