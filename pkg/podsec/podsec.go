// Package podsec holds the Pod Security Standards' restricted profile as knest's
// host pods run it.
package podsec

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// NonRootUID is the uid and gid knest's host containers run as: the distroless
// images' nonroot user.
const NonRootUID = 65532

// Pod is the restricted profile's pod part for uid: no root, the runtime's
// seccomp profile, and volumes group-owned by uid's group.
func Pod(uid int64) *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To(uid), RunAsGroup: ptr.To(uid),
		FSGroup:        ptr.To(uid),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// Container is its container part: no privilege escalation, no capabilities, and a
// read-only root file system, the writable paths being volumes.
func Container() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		ReadOnlyRootFilesystem:   ptr.To(true),
	}
}
