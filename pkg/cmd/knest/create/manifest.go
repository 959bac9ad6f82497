package create

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/cluster"
	"github.com/knest-dev/knest/pkg/knest"
	"github.com/knest-dev/knest/pkg/validation"
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
	// Quantities first: the decoder's error for one that does not parse names no field.
	var content map[string]any
	if err := yaml.Unmarshal(docs[0], &content); err != nil {
		return nil, err
	}
	if errs := validation.Quantities(content); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	nc := &knestv1.NestedCluster{}
	codecs := serializer.NewCodecFactory(knest.Scheme(), serializer.EnableStrict)
	if _, _, err := codecs.UniversalDeserializer().Decode(docs[0], nil, nc); err != nil {
		return nil, err
	}
	if err := refuseDroppedZeros(docs[0], nc); err != nil {
		return nil, err
	}
	return nc, nil
}

// refuseDroppedZeros refuses fields the manifest sets to 0 or "" that the typed
// object cannot carry (omitempty): knest would otherwise send them as absent and the
// API server would default them, where `kubectl apply` of the same file sends the
// zero and is refused.
func refuseDroppedZeros(doc []byte, nc *knestv1.NestedCluster) error {
	var raw map[string]any
	if err := yaml.Unmarshal(doc, &raw); err != nil {
		return err
	}
	typed, err := toMap(nc)
	if err != nil {
		return err
	}
	defaulted := nc.DeepCopy()
	cluster.Default(defaulted)
	defaults, err := toMap(defaulted)
	if err != nil {
		return err
	}
	var msgs []string
	for _, path := range droppedZeros(raw, typed, nil) {
		value := fmt.Sprint(lookup(raw, path))
		if value == "" {
			value = `""`
		}
		msg := fmt.Sprintf("%s: %s is not accepted (kubectl apply of this file is refused too); remove the field",
			strings.ReplaceAll(strings.Join(path, "."), ".[", "["), value)
		if d := lookup(defaults, path); d != nil {
			msg += fmt.Sprintf(" to get the default (%v)", d)
		}
		msgs = append(msgs, msg+" or set another value")
	}
	if len(msgs) > 0 {
		return errors.New(strings.Join(msgs, "; "))
	}
	return nil
}

func toMap(obj any) (map[string]any, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	return m, json.Unmarshal(b, &m)
}

// droppedZeros lists the paths of raw's zero numbers and empty strings that typed
// lacks.
func droppedZeros(raw, typed any, path []string) [][]string {
	var out [][]string
	switch r := raw.(type) {
	case map[string]any:
		t, _ := typed.(map[string]any)
		for _, k := range slices.Sorted(maps.Keys(r)) {
			p := append(slices.Clone(path), k)
			tv, ok := t[k]
			switch {
			case ok:
				out = append(out, droppedZeros(r[k], tv, p)...)
			case r[k] == float64(0) || r[k] == "":
				out = append(out, p)
			}
		}
	case []any:
		t, _ := typed.([]any)
		for i, rv := range r {
			if i < len(t) {
				out = append(out, droppedZeros(rv, t[i], append(slices.Clone(path), fmt.Sprintf("[%d]", i)))...)
			}
		}
	}
	return out
}

// lookup returns the value at path in m (list indexes as "[i]"), or nil.
func lookup(v any, path []string) any {
	for _, p := range path {
		switch c := v.(type) {
		case map[string]any:
			v = c[p]
		case []any:
			var i int
			if _, err := fmt.Sscanf(p, "[%d]", &i); err != nil || i >= len(c) {
				return nil
			}
			v = c[i]
		default:
			return nil
		}
	}
	return v
}

func isOnlyComments(doc []byte) bool {
	for _, line := range strings.Split(string(doc), "\n") {
		if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
			return false
		}
	}
	return true
}
