// Package backup takes and restores snapshots of a tenant's etcd, in either
// control-plane mode: the objects that run snapshots on a schedule (a CronJob of
// the knest image, on a volume in the tenant's namespace), the ones that restore
// one, and what those Jobs run (Save, Restore, WriteDiskImage).
package backup

import (
	"crypto/x509"
	"fmt"
	"path"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/certs"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/podsec"
)

// Names of what backups add to a tenant's namespace.
func ClaimName(cluster string) string      { return cluster + "-etcd-backups" }
func CronJobName(cluster string) string    { return cluster + "-etcd-backup" }
func ClientCertName(cluster string) string { return cluster + "-etcd-backup-client" }

// RestoreJobName is the Job that restores the cluster's member-th etcd member.
func RestoreJobName(cluster string, member int) string {
	return cluster + "-etcd-restore-" + strconv.Itoa(member)
}

// ServiceName is the Service that reaches the cluster's etcd members: the hosted
// etcd's own headless Service, or, for VM control planes, one over their VMs.
func ServiceName(cluster string) string { return cluster + "-etcd" }

// EtcdPort is etcd's client port, in both modes.
const EtcdPort = 2379

// ComponentLabel tells backup and restore pods apart; with the cluster-name label
// it is what the etcd NetworkPolicies admit.
const (
	ComponentLabel   = "knest.dev/component"
	ComponentBackup  = "etcd-backup"
	ComponentRestore = "etcd-restore"
)

// Selector selects a cluster's pods of a component.
func Selector(cluster, component string) map[string]string {
	return map[string]string{clusterv1.ClusterNameLabel: cluster, ComponentLabel: component}
}

// DefaultSize of the backup volume when the spec gives none.
var DefaultSize = resource.MustParse("4Gi")

// Paths inside backup and restore pods.
const (
	certsDir   = "/etc/etcd/pki"
	backupsDir = "/backups"
	dataDir    = "/var/lib/etcd"
	diskDir    = "/disk"
	// DiskImage is KubeVirt's disk file on a filesystem-mode claim.
	DiskImage = "disk.img"
)

// Keys of the client certificate Secret.
const (
	CACertKey     = "ca.crt"
	ClientCertKey = "tls.crt"
	ClientKeyKey  = "tls.key"
)

// ServerName is the name backup clients check etcd's certificate for: kubeadm's
// etcd serving certificates (VM mode) and knest's hosted ones both carry it,
// whatever address the member has.
const ServerName = "localhost"

// Input is what the backup objects are rendered from.
type Input struct {
	NC *knestv1.NestedCluster
	// Image is the knest image, whose `knest etcd` commands the Jobs run.
	Image string
}

func (in Input) meta(name, component string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: in.NC.Namespace, Labels: Selector(in.NC.Name, component)}
}

func endpoint(cluster, ns string) string {
	return "https://" + ServiceName(cluster) + "." + ns + ".svc:" + strconv.Itoa(EtcdPort)
}

// Claim is the backup volume.
func (in Input) Claim() *corev1.PersistentVolumeClaim {
	b := in.NC.Spec.Backup
	size := DefaultSize
	if b.Size != nil {
		size = *b.Size
	}
	pvc := &corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: in.meta(ClaimName(in.NC.Name), ComponentBackup),
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
		},
	}
	if b.StorageClassName != "" {
		pvc.Spec.StorageClassName = ptr.To(b.StorageClassName)
	}
	return pvc
}

// Service reaches a VM control plane's etcd members (their virt-launcher pods,
// selected as CAPK's API Service selects them); a hosted etcd has its own.
func (in Input) Service() *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: in.meta(ServiceName(in.NC.Name), ComponentBackup),
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"cluster.x-k8s.io/role": "control-plane", clusterv1.ClusterNameLabel: in.NC.Name},
			Ports:    []corev1.ServicePort{{Name: "client", Port: EtcdPort, TargetPort: intstr.FromInt32(EtcdPort), Protocol: corev1.ProtocolTCP}},
		},
	}
}

// Schedule is the CronJob schedule for an interval (robfig/cron's @every, which
// the CronJob controller parses), and whether it is suspended (0: no schedule).
func Schedule(b knestv1.BackupSpec) (string, bool) {
	d := knestv1.DefaultBackupInterval
	if b.Interval != nil {
		d = b.Interval.Duration
	}
	if d == 0 {
		return "@every " + knestv1.DefaultBackupInterval.String(), true
	}
	return "@every " + d.String(), false
}

func keep(b knestv1.BackupSpec) int32 {
	if b.Keep > 0 {
		return b.Keep
	}
	return knestv1.DefaultBackupKeep
}

func claimVolume(name, claim string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}
}

// CronJob takes a snapshot every interval (suspended for 0s); `knest backup` makes
// a Job from its template.
func (in Input) CronJob() *batchv1.CronJob {
	c, ns := in.NC.Name, in.NC.Namespace
	schedule, suspend := Schedule(in.NC.Spec.Backup)
	return &batchv1.CronJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "CronJob"},
		ObjectMeta: in.meta(CronJobName(c), ComponentBackup),
		Spec: batchv1.CronJobSpec{
			Schedule: schedule,
			Suspend:  ptr.To(suspend),
			// One snapshot at a time; a slot missed by more than this is skipped.
			ConcurrencyPolicy:          batchv1.ForbidConcurrent,
			StartingDeadlineSeconds:    ptr.To[int64](300),
			SuccessfulJobsHistoryLimit: ptr.To[int32](3),
			FailedJobsHistoryLimit:     ptr.To[int32](3),
			JobTemplate: batchv1.JobTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: Selector(c, ComponentBackup)},
				Spec: in.jobSpec(ComponentBackup, 900, podsec.Pod(podsec.NonRootUID), corev1.Container{
					Name: "snapshot",
					Args: []string{"etcd", "snapshot", "--endpoint=" + endpoint(c, ns), "--certs=" + certsDir,
						"--dir=" + backupsDir, "--keep=" + strconv.Itoa(int(keep(in.NC.Spec.Backup)))},
					Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
						Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
					},
					SecurityContext: podsec.Container(),
					VolumeMounts: []corev1.VolumeMount{
						{Name: "certs", MountPath: certsDir, ReadOnly: true},
						{Name: "backups", MountPath: backupsDir},
					},
				}, []corev1.Volume{
					{Name: "certs", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
						SecretName: ClientCertName(c), DefaultMode: ptr.To[int32](0o440),
					}}},
					claimVolume("backups", ClaimName(c)),
				}),
			},
		},
	}
}

// jobSpec is a backup or restore Job's: one pod, one container of the knest
// image, no service account token, tried thrice at most.
func (in Input) jobSpec(component string, deadlineSeconds int64, podSecurity *corev1.PodSecurityContext, c corev1.Container, volumes []corev1.Volume) batchv1.JobSpec {
	c.Image, c.ImagePullPolicy = in.Image, corev1.PullIfNotPresent
	// A failure's last words become the message status shows.
	c.TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
	return batchv1.JobSpec{
		BackoffLimit:          ptr.To[int32](2),
		ActiveDeadlineSeconds: ptr.To(deadlineSeconds),
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: Selector(in.NC.Name, component)},
			Spec: corev1.PodSpec{
				RestartPolicy:                corev1.RestartPolicyNever,
				AutomountServiceAccountToken: ptr.To(false),
				EnableServiceLinks:           ptr.To(false),
				SecurityContext:              podSecurity,
				Containers:                   []corev1.Container{c},
				Volumes:                      volumes,
			},
		},
	}
}

// JobFromCronJob is a backup Job taken now (`knest backup`), as
// `kubectl create job --from=cronjob/...` makes one: the CronJob's template, owned
// by the CronJob so that it goes with the cluster.
func JobFromCronJob(cj *batchv1.CronJob, now time.Time) *batchv1.Job {
	j := &batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            fmt.Sprintf("%s-manual-%d", cj.Name, now.Unix()),
			Namespace:       cj.Namespace,
			Labels:          cj.Spec.JobTemplate.Labels,
			Annotations:     map[string]string{"cronjob.kubernetes.io/instantiate": "manual"},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(cj, batchv1.SchemeGroupVersion.WithKind("CronJob"))},
		},
		Spec: *cj.Spec.JobTemplate.Spec.DeepCopy(),
	}
	return j
}

// RestoreTarget is the etcd member a restore writes: its data claim and identity.
type RestoreTarget struct {
	// Claim holds the member's data: a hosted member's data directory, or a VM's
	// etcd disk (VM true), whose disk image the Job replaces.
	Claim string
	VM    bool
	Member
	// Index is the member's place among the members, which names its Job.
	Index int
	// InitialCluster is every member (InitialCluster), each restored by its own Job
	// from the same snapshot; empty for a member alone.
	InitialCluster string
}

// RestoreJob restores snapshot into target, with etcd stopped (the hosted
// StatefulSet at zero, the VM halted). It runs as root: etcd's data is root's.
func (in Input) RestoreJob(snapshot string, target RestoreTarget) *batchv1.Job {
	c := in.NC.Name
	args := []string{"etcd", "restore", "--snapshot=" + path.Join(backupsDir, snapshot),
		"--name=" + target.Name, "--peer-url=" + target.PeerURL}
	if target.InitialCluster != "" {
		args = append(args, "--initial-cluster="+target.InitialCluster)
	}
	mounts := []corev1.VolumeMount{{Name: "backups", MountPath: backupsDir, ReadOnly: true}}
	volumes := []corev1.Volume{claimVolume("backups", ClaimName(c))}
	if target.VM {
		args = append(args, "--data-dir=/tmp/etcd", "--disk-image="+path.Join(diskDir, DiskImage))
		mounts = append(mounts, corev1.VolumeMount{Name: "disk", MountPath: diskDir}, corev1.VolumeMount{Name: "tmp", MountPath: "/tmp"})
		volumes = append(volumes, claimVolume("disk", target.Claim), corev1.Volume{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	} else {
		args = append(args, "--data-dir="+dataDir, "--owner="+strconv.Itoa(NonRootUser))
		mounts = append(mounts, corev1.VolumeMount{Name: "data", MountPath: dataDir})
		volumes = append(volumes, claimVolume("data", target.Claim))
	}
	sc := podsec.Container()
	sc.Capabilities.Add = []corev1.Capability{"CHOWN", "DAC_OVERRIDE", "FOWNER"}
	return &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: in.meta(RestoreJobName(c, target.Index), ComponentRestore),
		Spec: in.jobSpec(ComponentRestore, 1800, &corev1.PodSecurityContext{
			RunAsUser: ptr.To[int64](0), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		}, corev1.Container{
			Name:            "restore",
			Args:            args,
			Resources:       corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("64Mi")}},
			SecurityContext: sc,
			VolumeMounts:    mounts,
		}, volumes),
	}
}

// ClientCertificate makes the backup client's certificate Secret data, signed by
// the cluster's etcd CA (Cluster API's `<cluster>-etcd` Secret, PEM). etcd lets
// any client its CA signed read everything, which a snapshot needs.
func ClientCertificate(caCertPEM, caKeyPEM []byte) (map[string][]byte, error) {
	cert, key, err := EtcdCA{Cert: caCertPEM, Key: caKeyPEM}.Sign(clientCert)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{CACertKey: caCertPEM, ClientCertKey: cert, ClientKeyKey: key}, nil
}

// clientCert is the backup client's certificate: for no names, as etcd checks only
// that its CA signed it.
var clientCert = certs.Config{CommonName: "knest-etcd-backup", Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}

// ClientCertificateCurrent tells whether data holds a client certificate of this
// CA that is not to be made anew yet (EtcdCA.Current).
func ClientCertificateCurrent(data map[string][]byte, caCertPEM []byte, now time.Time) bool {
	return string(data[CACertKey]) == string(caCertPEM) && EtcdCA{Cert: caCertPEM}.Current(data[ClientCertKey], clientCert, now)
}
