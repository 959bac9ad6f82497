package nestedcluster

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func metaEachListItem(list client.ObjectList, fn func(client.Object)) error {
	return meta.EachListItem(list, func(o runtime.Object) error {
		fn(o.(client.Object))
		return nil
	})
}

func kindKey(kind, name string) string { return kind + "/" + name }
