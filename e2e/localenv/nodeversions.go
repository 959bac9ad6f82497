package localenv

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/knest-dev/knest/internal/testenv"
	"github.com/knest-dev/knest/pkg/kubever"
)

// installNodeVersions does what config/default does on a real host for the node
// image list: the admission policy, and ConfigMap knest-system/knest-node-versions,
// here listing the versions the images directory has (make node-image's out/<version>).
func installNodeVersions(ctx context.Context, host *testenv.Env, imagesDir string) ([]string, error) {
	entries, err := os.ReadDir(imagesDir)
	if err != nil {
		return nil, fmt.Errorf("failed to list node images: %w", err)
	}
	var versions []kubever.Version
	for _, e := range entries {
		if v, err := kubever.Parse(e.Name()); err == nil {
			versions = append(versions, v)
		}
	}
	if len(versions) == 0 {
		return nil, fmt.Errorf("no node image in %s (out/<version>): run `make node-image`", imagesDir)
	}
	slices.SortFunc(versions, kubever.Version.Compare)
	names := make([]string, len(versions))
	for i, v := range versions {
		names[i] = v.String()
	}

	if err := host.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "knest-system"}}); err != nil {
		return nil, err
	}
	if _, err := host.Apply(ctx, "config/admission/node_versions_policy.yaml", nil); err != nil {
		return nil, err
	}
	if _, err := host.Apply(ctx, "config/manager/node_versions.yaml", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, strings.Join(names, " "), "data", "versions")
	}); err != nil {
		return nil, err
	}
	return names, nil
}
