//go:build e2e

package tenant_test

import (
	"fmt"
	"net"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/cert"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// expectWebhookCalled runs Kubernetes' agnhost webhook (preloaded on every node
// image) behind a Service in the tenant, registers it for ConfigMaps, and expects the
// API server to call it: the ConfigMap it refuses is refused with its reason. The
// API server reaches the tenant's Service network only through konnectivity when the
// control plane is hosted.
func expectWebhookCalled(t *testing.T, tc tenant, version string) {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	const name, ns = "agnhost-webhook", "default"
	objs, certPEM := tlsServer(t, name, ns, "", 8443, corev1.Container{
		Name: "webhook", Image: agnhostImage(version), ImagePullPolicy: corev1.PullNever,
		Args: []string{"webhook", "--tls-cert-file=/tls/tls.crt", "--tls-private-key-file=/tls/tls.key", "--port=8443"},
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: "/readyz", Port: intstr.FromInt32(8443), Scheme: corev1.URISchemeHTTPS}}},
	})
	createAvailable(t, tc, objs, ns, name)

	// Only ConfigMaps labelled for the test go to the webhook, so a failing webhook
	// cannot block the cluster's own.
	fail := admissionregistrationv1.Fail
	none := admissionregistrationv1.SideEffectClassNone
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "configmaps.knest.e2e",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{
				Service:  &admissionregistrationv1.ServiceReference{Namespace: ns, Name: name, Path: ptr.To("/configmaps")},
				CABundle: certPEM,
			},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
			}},
			ObjectSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{"knest.dev/e2e-webhook": "true"}},
			FailurePolicy:           &fail,
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](10),
		}},
	}
	g.Expect(client.IgnoreAlreadyExists(tc.Create(ctx, vwc))).To(Succeed())
	refused := func() *corev1.ConfigMap {
		return &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "refused-", Namespace: ns, Labels: map[string]string{"knest.dev/e2e-webhook": "true"}},
			Data:       map[string]string{"webhook-e2e-test": "webhook-disallow"},
		}
	}
	g.Eventually(func(g Gomega) {
		err := tc.Create(ctx, refused())
		g.Expect(err).To(HaveOccurred(), "the webhook refuses this ConfigMap")
		g.Expect(err.Error()).To(ContainSubstring("the configmap contains unwanted key and value"), "the webhook's own reason")
	}, tenantTimeout, poll).Should(Succeed())
	allowed := refused()
	allowed.Data = map[string]string{"webhook-e2e-test": "fine"}
	g.Expect(tc.Create(ctx, allowed)).To(Succeed(), "the webhook allows this one")
	g.Expect(tc.Delete(ctx, vwc)).To(Succeed())
}

// expectURLWebhooksFenced registers webhooks by URL, as a tenant admin may, at the
// host's API Service, a host node's kubelet and a closed port of that node. None may
// connect (no certificate of the host comes back), and all fail alike, so that a
// tenant cannot tell an open port of the host from a closed one: a hosted API server
// dials URLs through konnectivity from inside the tenant, where the VMs' policy
// refuses the host's addresses.
func expectURLWebhooksFenced(t *testing.T, tc tenant) {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	api := &corev1.Service{}
	g.Expect(s.host.Get(ctx, client.ObjectKey{Namespace: "default", Name: "kubernetes"}, api)).To(Succeed())
	nodes := &corev1.NodeList{}
	g.Expect(s.host.List(ctx, nodes)).To(Succeed())
	g.Expect(nodes.Items).NotTo(BeEmpty())
	var nodeIP string
	for _, a := range nodes.Items[0].Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			nodeIP = a.Address
		}
	}
	g.Expect(nodeIP).NotTo(BeEmpty(), "host node %s has no internal address", nodes.Items[0].Name)
	closed := net.JoinHostPort(nodeIP, "1")
	targets := map[string]string{
		"the host's API Service": net.JoinHostPort(api.Spec.ClusterIP, "443"),
		"a host node's kubelet":  net.JoinHostPort(nodeIP, "10250"),
	}
	// answer is a webhook's error with its address left out, after checking that
	// it shows no connection made.
	answer := func(what, addr string) string {
		err := webhookAnswer(t, tc, "https://"+addr+"/validate")
		g.Expect(err).To(HaveOccurred(), "a ConfigMap admitted by a webhook at %s (%s)", what, addr)
		msg := err.Error()
		t.Logf("webhook at %s (%s): %s", what, addr, msg)
		for _, leak := range []string{"x509", "certificate", "tls:", "EOF", "connection reset"} {
			g.Expect(msg).NotTo(ContainSubstring(leak), "the webhook at %s (%s) connected: %s", what, addr, msg)
		}
		return strings.ReplaceAll(msg, addr, "ADDR")
	}
	for what, addr := range targets {
		// A dial can time out now and then under load (the tunnel, the policy's
		// first packet) where it is otherwise refused: only a difference that comes
		// back on every try is one a tenant could scan by.
		var differ []string
		for range 3 {
			a, c := answer(what, addr), answer("a closed port of that node", closed)
			if a == c {
				break
			}
			differ = append(differ, fmt.Sprintf("%q, where the closed port gave %q", a, c))
		}
		g.Expect(len(differ)).To(BeNumerically("<", 3), "%s answers unlike a closed port on every try: %s", what, strings.Join(differ, "; "))
	}
}

// webhookAnswer registers one validating webhook for labelled ConfigMaps at url and
// returns the error of a ConfigMap create it must judge; the webhook is deleted after.
func webhookAnswer(t *testing.T, tc tenant, url string) error {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	fail := admissionregistrationv1.Fail
	none := admissionregistrationv1.SideEffectClassNone
	labels := map[string]string{"knest.dev/e2e-url-webhook": "true"}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "knest-e2e-url-webhook"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:         "url.knest.e2e",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
			}},
			ObjectSelector:          &metav1.LabelSelector{MatchLabels: labels},
			FailurePolicy:           &fail,
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](5),
		}},
	}
	g.Eventually(func() error { return client.IgnoreAlreadyExists(tc.Create(ctx, vwc.DeepCopy())) }, tenantTimeout, poll).Should(Succeed())
	defer func() {
		g.Eventually(func() error { return client.IgnoreNotFound(tc.Delete(ctx, vwc.DeepCopy())) }, tenantTimeout, poll).Should(Succeed())
	}()
	var err error
	// The API server sees the new webhook within a moment: until it fails, retry.
	g.Eventually(func() error {
		err = tc.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "url-webhook-", Namespace: "default", Labels: labels}})
		if err == nil {
			return fmt.Errorf("admitted: the webhook at %s is not in force yet, or it answered", url)
		}
		if !strings.Contains(err.Error(), "url.knest.e2e") {
			return fmt.Errorf("not the webhook's error: %w", err)
		}
		return nil
	}, tenantTimeout, poll).Should(Succeed())
	return err
}

// tlsServer is a server in the tenant behind a Service, as a webhook or an aggregated
// API server runs: a Secret with a certificate for the Service's name, a Deployment of
// one pod whose containers find it at /tls, and the Service on port 443 to targetPort.
// certPEM, its CA included, is what a caBundle trusts.
func tlsServer(t *testing.T, name, ns, serviceAccount string, targetPort int32, containers ...corev1.Container) (objs []client.Object, certPEM []byte) {
	t.Helper()
	host := name + "." + ns + ".svc"
	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey(host, nil, []string{host})
	if err != nil {
		t.Fatal(err)
	}
	for i := range containers {
		containers[i].VolumeMounts = append(containers[i].VolumeMounts, corev1.VolumeMount{Name: "tls", MountPath: "/tls", ReadOnly: true})
	}
	labels := map[string]string{"app": name}
	return []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Data: map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM}},
		&appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{
						ServiceAccountName: serviceAccount,
						Containers:         containers,
						Volumes:            []corev1.Volume{{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: name}}}},
					},
				},
			},
		},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 443, TargetPort: intstr.FromInt32(targetPort)}}}},
	}, certPEM
}

// createAvailable creates objs in the tenant, keeping those already there, and waits
// until the Deployment ns/name among them has its replica available.
func createAvailable(t *testing.T, tc tenant, objs []client.Object, ns, name string) {
	t.Helper()
	for _, o := range objs {
		if err := tc.Create(t.Context(), o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
	NewWithT(t).Eventually(func(g Gomega) {
		d := &appsv1.Deployment{}
		g.Expect(tc.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, d)).To(Succeed())
		g.Expect(d.Status.AvailableReplicas).To(BeEquivalentTo(1), "deployment %s/%s available", ns, name)
	}, tenantTimeout, poll).Should(Succeed())
}
