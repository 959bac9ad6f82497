package apply_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/knest-dev/knest/internal/apply"
	"github.com/knest-dev/knest/internal/testenv"
)

// The tests apply against a real kube-apiserver: what counts as a write is what
// moves an object's resource version.

var env *testenv.Env

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	testenv.Main(m, &env)
}

const fieldOwner = "knest-apply-test"

// newOwner makes a namespace and an object in it to own what the test applies.
func newOwner(t *testing.T, g Gomega) *corev1.ConfigMap {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "apply-"}}
	g.Expect(env.Client.Create(ctx, ns)).To(Succeed())
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "owner"}}
	g.Expect(env.Client.Create(ctx, owner)).To(Succeed())
	return owner
}

func configMap(owner client.Object, data string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: owner.GetNamespace(), Name: "applied"},
		Data:       map[string]string{"key": data},
	}
}

func resourceVersion(g Gomega, obj client.Object) string {
	current := obj.DeepCopyObject().(client.Object)
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), current)).To(Succeed())
	return current.GetResourceVersion()
}

func TestApplyWritesOnlyWhatChanged(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	owner := newOwner(t, g)
	a := &apply.Applier{Client: env.Client, FieldOwner: fieldOwner}

	// First apply: written (created), controlled by the owner, managed by the
	// field owner's create manager until a change is applied.
	wrote, err := a.Apply(ctx, owner, configMap(owner, "one"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(wrote).To(BeTrue())
	got := configMap(owner, "")
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(got), got)).To(Succeed())
	g.Expect(got.Data).To(Equal(map[string]string{"key": "one"}))
	g.Expect(metav1.GetControllerOf(got)).To(HaveField("UID", owner.UID))
	g.Expect(got.Annotations).To(HaveKey(apply.HashAnnotation))
	g.Expect(got.ManagedFields).To(ConsistOf(And(HaveField("Manager", fieldOwner+"-create"), HaveField("Operation", metav1.ManagedFieldsOperationUpdate))))
	rv := got.ResourceVersion

	// The same again: no write.
	wrote, err = a.Apply(ctx, owner, configMap(owner, "one"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(wrote).To(BeFalse())
	g.Expect(resourceVersion(g, got)).To(Equal(rv))

	// Changed: written.
	wrote, err = a.Apply(ctx, owner, configMap(owner, "two"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(wrote).To(BeTrue())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(got), got)).To(Succeed())
	g.Expect(got.Data).To(Equal(map[string]string{"key": "two"}))
	g.Expect(got.ResourceVersion).NotTo(Equal(rv))
	g.Expect(got.ManagedFields).To(ConsistOf(And(HaveField("Manager", fieldOwner), HaveField("Operation", metav1.ManagedFieldsOperationApply))))
}

// An object Apply created and then applies without a field loses that field, as if
// server-side apply had created it: the fields the create wrote go to the apply
// field manager. Kept are what the API server allocated (a Service's cluster IP)
// and what another manager wrote.
func TestApplyRemovesWhatItNoLongerAsksForFromWhatItCreated(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	owner := newOwner(t, g)
	a := &apply.Applier{Client: env.Client, FieldOwner: fieldOwner, ReadBack: true}

	cm := configMap(owner, "one")
	cm.Data["dropped"] = "soon"
	_, err := a.Apply(ctx, owner, cm)
	g.Expect(err).NotTo(HaveOccurred())
	theirs := configMap(owner, "")
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(theirs), theirs)).To(Succeed())
	theirs.Data["theirs"] = "kept"
	g.Expect(env.Client.Update(ctx, theirs, client.FieldOwner("someone-else"))).To(Succeed())
	_, err = a.Apply(ctx, owner, configMap(owner, "two"))
	g.Expect(err).NotTo(HaveOccurred())
	got := configMap(owner, "")
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(got), got)).To(Succeed())
	g.Expect(got.Data).To(Equal(map[string]string{"key": "two", "theirs": "kept"}))

	service := func(ports ...int32) *corev1.Service {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: owner.Namespace, Name: "applied"}}
		for _, p := range ports {
			svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: fmt.Sprint("p", p), Port: p})
		}
		return svc
	}
	created := service(443, 8443)
	_, err = a.Apply(ctx, owner, created)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(created.Spec.ClusterIP).NotTo(BeEmpty())
	changed := service(443)
	wrote, err := a.Apply(ctx, owner, changed)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(wrote).To(BeTrue())
	g.Expect(changed.Spec.Ports).To(ConsistOf(HaveField("Port", int32(443))))
	g.Expect(changed.Spec.ClusterIP).To(Equal(created.Spec.ClusterIP))
	g.Expect(changed.Spec.SessionAffinity).To(Equal(corev1.ServiceAffinityNone), "defaults stay")
}

// An object the cache has not seen yet but the API server has is applied, not
// refused: the controller's next reconcile often runs before its cache caught up.
func TestApplyAppliesWhatExistsUnseen(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	owner := newOwner(t, g)
	a := &apply.Applier{Client: env.Client, FieldOwner: fieldOwner}
	_, err := a.Apply(ctx, owner, configMap(owner, "one"))
	g.Expect(err).NotTo(HaveOccurred())
	unseen := &apply.Applier{Client: notFoundReader{env.Client}, FieldOwner: fieldOwner}
	wrote, err := unseen.Apply(ctx, owner, configMap(owner, "two"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(wrote).To(BeTrue())
	got := configMap(owner, "")
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(got), got)).To(Succeed())
	g.Expect(got.Data).To(Equal(map[string]string{"key": "two"}))
}

// notFoundReader is a client whose reads find nothing, as a cache that is behind.
type notFoundReader struct{ client.Client }

func (c notFoundReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	return apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, key.Name)
}

func TestApplyRefusesWhatItDidNotCreate(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	owner := newOwner(t, g)
	theirs := configMap(owner, "theirs")
	g.Expect(env.Client.Create(ctx, theirs)).To(Succeed())

	a := &apply.Applier{Client: env.Client, FieldOwner: fieldOwner}
	wrote, err := a.Apply(ctx, owner, configMap(owner, "ours"))
	g.Expect(wrote).To(BeFalse())
	var notOwned *apply.NotOwnedError
	g.Expect(errors.As(err, &notOwned)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).To(HavePrefix("ConfigMap applied already exists and does not belong to ConfigMap owner"))

	after := configMap(owner, "")
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(after), after)).To(Succeed())
	g.Expect(after.ResourceVersion).To(Equal(theirs.ResourceVersion))
	g.Expect(after.Data).To(Equal(map[string]string{"key": "theirs"}))
	g.Expect(after.OwnerReferences).To(BeEmpty())
}

// PlainOwner: an owner reference without the controller flag.
func TestApplyAsPlainOwner(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	owner := newOwner(t, g)
	a := &apply.Applier{Client: env.Client, FieldOwner: fieldOwner, PlainOwner: func(client.Object) bool { return true }}
	_, err := a.Apply(ctx, owner, configMap(owner, "one"))
	g.Expect(err).NotTo(HaveOccurred())
	got := configMap(owner, "")
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(got), got)).To(Succeed())
	g.Expect(got.OwnerReferences).To(ConsistOf(HaveField("UID", owner.UID)))
	g.Expect(metav1.GetControllerOf(got)).To(BeNil())
}

// ReadBack: the applied object holds what the server has, written or not.
func TestApplyReadsBack(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	owner := newOwner(t, g)
	a := &apply.Applier{Client: env.Client, FieldOwner: fieldOwner, ReadBack: true}
	service := func() *corev1.Service {
		return &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: owner.Namespace, Name: "applied"},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 443}}},
		}
	}
	for _, wantWrite := range []bool{true, false} {
		svc := service()
		wrote, err := a.Apply(ctx, owner, svc)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(wrote).To(Equal(wantWrite))
		g.Expect(svc.Spec.ClusterIP).NotTo(BeEmpty(), "written %v", wrote)
		g.Expect(svc.ResourceVersion).NotTo(BeEmpty())
		g.Expect(svc.Kind).To(Equal("Service"))
	}

	// A read-back object (resource version, managed fields) is accepted again.
	svc := service()
	_, err := a.Apply(ctx, owner, svc)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = a.Apply(ctx, owner, svc)
	g.Expect(err).NotTo(HaveOccurred())
}
