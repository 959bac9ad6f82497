package hosted

import (
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/backup"
)

// A member of a three-member etcd whose volume is bound to a host node it cannot
// run on any more (drained, lost) is replaced, not waited for: the controller runs
// EtcdReplaceJob, which removes the member from etcd and adds it again, then
// deletes the member's claim and pod. The StatefulSet makes both anew on another
// node, and the member joins on its empty volume because EtcdJoin tells it to.

// EtcdJoinName is the ConfigMap that makes a member with an empty volume join the
// cluster instead of founding one: the controller makes it once every member has
// been ready, and etcd ignores it where the volume has data.
func EtcdJoinName(cluster string) string { return EtcdName(cluster) + "-join" }

// etcdInitialClusterState is the key of EtcdJoin, as an etcd environment variable
// (etcd reads ETCD_<FLAG> for a flag not on its command line).
const etcdInitialClusterState = "ETCD_INITIAL_CLUSTER_STATE"

// EtcdJoin is the ConfigMap of EtcdJoinName.
func (in Input) EtcdJoin() *corev1.ConfigMap {
	meta := in.meta(EtcdJoinName(in.Cluster), ComponentEtcd)
	// The label the controller's ConfigMap cache selects.
	meta.Labels[knestv1.ClusterNameLabel] = in.Cluster
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: meta,
		Data:       map[string]string{etcdInitialClusterState: "existing"},
	}
}

// etcdJoinEnv reads EtcdJoin when it exists; before, a member founds the cluster
// with its peers (etcd's default state, new).
func etcdJoinEnv(cluster string) corev1.EnvVar {
	return corev1.EnvVar{Name: etcdInitialClusterState, ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: EtcdJoinName(cluster)},
		Key:                  etcdInitialClusterState, Optional: ptr.To(true),
	}}}
}

// EtcdReplaceJobName is the Job that replaces member i.
func EtcdReplaceJobName(cluster string, i int) string {
	return EtcdName(cluster) + "-replace-" + strconv.Itoa(i)
}

// EtcdReplaceClaimAnnotation on a replace Job is the UID of the claim it was made
// for: a Job left from an earlier replacement of the same member is not taken for
// this one's.
const EtcdReplaceClaimAnnotation = "controlplane.knest.dev/etcd-claim"

// EtcdMoveAnnotation on a member's claim says the member is being replaced only to
// spread the members across host nodes; its value is when that was decided.
// EtcdMovedAtAnnotation on the HostedControlPlane is when the last such move began.
const (
	EtcdMoveAnnotation    = "controlplane.knest.dev/etcd-move"
	EtcdMovedAtAnnotation = "controlplane.knest.dev/etcd-moved-at"
)

// ComponentEtcdReplace labels the replace Jobs' pods, which etcd's policy admits.
const ComponentEtcdReplace = "etcd-replace"

// EtcdReplaceJob runs `knest etcd replace-member` (image: the knest image) for
// member i, whose claim has UID claimUID, against the other members, as a client
// with etcd's own serving certificate (also a client certificate).
func (in Input) EtcdReplaceJob(i int, claimUID, image string) *batchv1.Job {
	c := in.Cluster
	const certs = "/etc/etcd/pki"
	meta := in.meta(EtcdReplaceJobName(c, i), ComponentEtcdReplace)
	meta.Annotations = map[string]string{EtcdReplaceClaimAnnotation: claimUID}
	return &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: meta,
		Spec: batchv1.JobSpec{
			BackoffLimit:          ptr.To[int32](3),
			ActiveDeadlineSeconds: ptr.To[int64](900),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: selector(c, ComponentEtcdReplace)},
				Spec: corev1.PodSpec{
					RestartPolicy:                corev1.RestartPolicyNever,
					AutomountServiceAccountToken: ptr.To(false),
					EnableServiceLinks:           ptr.To(false),
					SecurityContext:              restrictedPod(),
					Containers: []corev1.Container{{
						Name: "replace-member", Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
						Args: []string{"etcd", "replace-member",
							"--endpoint=https://" + EtcdName(c) + "." + in.ns() + ".svc:" + strconv.Itoa(EtcdPort),
							"--certs=" + certs, "--peer-url=" + EtcdMember(c, in.ns(), i).PeerURL},
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
							Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
						},
						SecurityContext:          restrictedContainer(),
						TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
						VolumeMounts:             []corev1.VolumeMount{{Name: "certs", MountPath: certs, ReadOnly: true}},
					}},
					Volumes: []corev1.Volume{{Name: "certs", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
						SecretName: EtcdCertsName(c), DefaultMode: ptr.To[int32](0o440),
						// The names `knest etcd` reads a client certificate by.
						Items: []corev1.KeyToPath{
							{Key: EtcdCACertKey, Path: backup.CACertKey},
							{Key: EtcdServerCertKey, Path: backup.ClientCertKey},
							{Key: EtcdServerKeyKey, Path: backup.ClientKeyKey},
						},
					}}}},
				},
			},
		},
	}
}
