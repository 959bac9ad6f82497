package create

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/knest"
)

func fromFile(cmd *cobra.Command, stdin io.Reader, path string, args []string) (*knestv1.NestedCluster, error) {
	var raw []byte
	var err error
	if path == "-" {
		raw, err = io.ReadAll(stdin)
	} else {
		raw, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("failed to read %s: %w", path, err)
	}
	nc, err := ParseManifest(raw)
	if err != nil {
		return nil, fmt.Errorf("failed to read a NestedCluster from %s: %w", displayPath(path), err)
	}
	if len(args) == 1 {
		switch {
		case nc.Name == "":
			nc.Name = args[0]
		case nc.Name != args[0]:
			return nil, fmt.Errorf("the name %s differs from the manifest's metadata.name %s; drop the argument or edit the manifest", args[0], nc.Name)
		}
	}
	if nc.Name == "" {
		return nil, fmt.Errorf("the manifest %s has no metadata.name; set it or pass the name as an argument", displayPath(path))
	}
	return nc, nil
}

func displayPath(path string) string {
	if path == "-" {
		return "stdin"
	}
	return path
}

// ParseManifest reads one NestedCluster from YAML or JSON. Unknown fields are
// errors, so a misspelt field does not silently fall back to a default.
func ParseManifest(raw []byte) (*knestv1.NestedCluster, error) {
	var docs [][]byte
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(doc)) == 0 || isOnlyComments(doc) {
			continue
		}
		docs = append(docs, doc)
	}
	switch {
	case len(docs) == 0:
		return nil, errors.New("it is empty")
	case len(docs) > 1:
		return nil, fmt.Errorf("it has %d documents; create one cluster at a time", len(docs))
	}
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(docs[0], &tm); err != nil {
		return nil, err
	}
	if want := knestv1.GroupVersion.String(); tm.APIVersion != want || tm.Kind != "NestedCluster" {
		return nil, fmt.Errorf("it is a %s %s, not a %s NestedCluster", tm.APIVersion, tm.Kind, want)
	}
	nc := &knestv1.NestedCluster{}
	codecs := serializer.NewCodecFactory(knest.Scheme(), serializer.EnableStrict)
	if _, _, err := codecs.UniversalDeserializer().Decode(docs[0], nil, nc); err != nil {
		return nil, err
	}
	return nc, nil
}

func isOnlyComments(doc []byte) bool {
	for _, line := range strings.Split(string(doc), "\n") {
		if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
			return false
		}
	}
	return true
}
