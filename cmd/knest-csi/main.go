// knest-csi is knest's CSI driver csi.knest.dev (package pkg/csi): `knest-csi
// controller` runs on the host in a tenant's namespace beside csi-provisioner and
// csi-attacher, `knest-csi node` in the tenant on every node.
package main

import "github.com/knest-dev/knest/cmd/knest-csi/app"

func main() {
	app.Main()
}
