package hostaccess_test

import (
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/knest-dev/knest/pkg/hostaccess"
	"github.com/knest-dev/knest/pkg/podsec"
)

func TestComponentDeploymentRunsOneRestrictedReplicaAsItsServiceAccount(t *testing.T) {
	g := NewWithT(t)
	c := hostaccess.Component{Name: "a-ccm", Namespace: "t1", Cluster: "a", App: "ccm",
		Labels: map[string]string{"cluster.x-k8s.io/cluster-name": "a"}}
	containers := []corev1.Container{
		{Name: "main", VolumeMounts: []corev1.VolumeMount{hostaccess.KubeconfigMount()}},
		{Name: "sidecar", SecurityContext: &corev1.SecurityContext{Privileged: new(bool)}},
	}
	d := c.Deployment(corev1.PodSpec{
		Containers: containers,
		Volumes:    []corev1.Volume{hostaccess.KubeconfigVolume("a-kubeconfig")},
	})

	g.Expect(d.Name).To(Equal("a-ccm"))
	g.Expect(d.Namespace).To(Equal("t1"))
	g.Expect(d.Labels).To(Equal(map[string]string{"app.kubernetes.io/name": "ccm", "app.kubernetes.io/part-of": "knest", "cluster.x-k8s.io/cluster-name": "a"}))
	g.Expect(*d.Spec.Replicas).To(BeEquivalentTo(1))
	g.Expect(d.Spec.Strategy.Type).To(Equal(appsv1.RecreateDeploymentStrategyType), "never two at once")
	g.Expect(d.Spec.Selector.MatchLabels).To(Equal(map[string]string{"app.kubernetes.io/name": "ccm", "knest.dev/cluster": "a"}))
	// The pods carry the selector even when the caller's labels do not, in a map of
	// their own.
	g.Expect(d.Spec.Template.Labels).To(HaveKeyWithValue("knest.dev/cluster", "a"))
	g.Expect(d.Spec.Template.Labels).To(HaveKeyWithValue("cluster.x-k8s.io/cluster-name", "a"))
	d.Spec.Template.Labels["x"] = "y"
	g.Expect(d.Labels).NotTo(HaveKey("x"))

	pod := d.Spec.Template.Spec
	g.Expect(pod.ServiceAccountName).To(Equal(c.Access("ccm", nil).ServiceAccount.Name))
	g.Expect(pod.SecurityContext).To(Equal(podsec.Pod(podsec.NonRootUID)))
	g.Expect(*pod.SecurityContext.RunAsUser).To(BeEquivalentTo(65532))
	g.Expect(pod.Containers).To(HaveLen(2))
	for _, ctr := range pod.Containers {
		g.Expect(ctr.SecurityContext).To(Equal(podsec.Container()), ctr.Name)
	}
	g.Expect(containers[1].SecurityContext.AllowPrivilegeEscalation).To(BeNil(), "the caller's containers are not written to")
	g.Expect(pod.Volumes[0].Secret.SecretName).To(Equal("a-kubeconfig"))
}

// The mount names the volume, and the file the components are given is in it.
func TestKubeconfigMountIsTheVolumesFile(t *testing.T) {
	g := NewWithT(t)
	v, m := hostaccess.KubeconfigVolume("a-kubeconfig"), hostaccess.KubeconfigMount()
	g.Expect(m.Name).To(Equal(v.Name))
	g.Expect(m.ReadOnly).To(BeTrue())
	g.Expect(v.Secret.Items).To(ConsistOf(corev1.KeyToPath{Key: "value", Path: "value"}))
	g.Expect(hostaccess.KubeconfigFile).To(Equal(m.MountPath + "/" + v.Secret.Items[0].Path))
}

func TestComponentAccessIsRenderOfItsMeta(t *testing.T) {
	g := NewWithT(t)
	c := hostaccess.Component{Name: "a-csi", Namespace: "t1", Cluster: "a", App: "knest-csi-controller"}
	o := c.Access("csi", nil)
	g.Expect(o.Role.ObjectMeta).To(Equal(c.Meta()))
	g.Expect(o.RoleBinding.Labels).To(HaveKeyWithValue(hostaccess.Label, "csi"))
}

func TestKubeconfigDeploymentMountsTheKubeconfigLast(t *testing.T) {
	g := NewWithT(t)
	c := hostaccess.Component{Name: "a-ccm", Namespace: "t1", Cluster: "a", App: "ccm"}
	// Room for one more: an append in place would write into the caller's array.
	own := append(make([]corev1.VolumeMount, 0, 2), corev1.VolumeMount{Name: "scratch", MountPath: "/tmp"})
	d := c.KubeconfigDeployment(corev1.Container{Name: "main", VolumeMounts: own}, "a-kubeconfig")
	pod := d.Spec.Template.Spec
	g.Expect(pod.Containers).To(HaveLen(1))
	g.Expect(pod.Containers[0].VolumeMounts).To(Equal([]corev1.VolumeMount{own[0], hostaccess.KubeconfigMount()}))
	g.Expect(pod.Volumes).To(Equal([]corev1.Volume{hostaccess.KubeconfigVolume("a-kubeconfig")}))
	g.Expect(own[:2][1]).To(BeZero(), "the caller's mounts are its own")
	g.Expect(pod.ServiceAccountName).To(Equal("a-ccm"), "as Deployment")
}

func TestHealthProbesUseThePortNamedHealth(t *testing.T) {
	g := NewWithT(t)
	live, ready := hostaccess.HealthProbes("/healthz", "/readyz")
	g.Expect(live.HTTPGet.Path).To(Equal("/healthz"))
	g.Expect(ready.HTTPGet.Path).To(Equal("/readyz"))
	g.Expect(live.HTTPGet.Port.StrVal).To(Equal("health"))
	g.Expect(ready.HTTPGet.Port.StrVal).To(Equal("health"))
	g.Expect(live.FailureThreshold).To(BeNumerically(">", ready.FailureThreshold), "restarted later than taken out of service")
}
