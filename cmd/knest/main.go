// knest drives tenant Kubernetes clusters made of KubeVirt VMs on a host cluster.
package main

import "github.com/knest-dev/knest/pkg/cmd/knest/app"

func main() {
	app.Main()
}
