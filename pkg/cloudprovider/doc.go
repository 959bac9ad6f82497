// Package cloudprovider is knest's cloud provider for tenant clusters: a
// k8s.io/cloud-provider Interface, in the design of the KubeVirt cloud controller
// manager, that Kubernetes' own service controller and cloud node controllers
// drive. It implements LoadBalancer and InstancesV2 and nothing else (no Zones,
// Routes or Clusters).
//
// # Where it runs
//
// One provider serves one tenant. It runs on the host, in the tenant's host
// namespace, and is given two clients: the tenant's (the cloud-controller-manager
// framework watches the tenant's Services and Nodes through it; the provider reads
// the tenant's EndpointSlices) and the host's, used only in the tenant's namespace
// (Services and EndpointSlices written; VirtualMachines and VirtualMachineInstances
// read). The provider takes clients and names only; it has no other tie to the host.
//
// # Load balancers
//
// A tenant Service of type LoadBalancer becomes a host Service of type LoadBalancer
// in the tenant's host namespace, which the host's load balancer (MetalLB, a
// cloud's) gives an address; that address is the tenant Service's
// status.loadBalancer. The host Service:
//
//   - is named cloudprovider.DefaultLoadBalancerName of the tenant Service ("a" and
//     its UID without dashes, 32 characters): deterministic, unique across tenants;
//   - is labelled with the tenant cluster (ClusterLabel) and the tenant Service's
//     namespace, name and UID. The provider reads, changes and deletes only host
//     objects with its cluster's label and the Service's UID, so tenants sharing a
//     host namespace never touch each other's load balancers;
//   - has one port per tenant port, same port number and protocol, whose target
//     port is the tenant port's node port: the host load balancer sends traffic to
//     the tenant's kube-proxy on the VMs, as a cloud load balancer sends it to
//     nodes;
//   - copies loadBalancerSourceRanges.
//
// It is written with server-side apply under one field manager, so a port removed
// from the tenant Service goes from the host Service too. While the host load
// balancer has no address, EnsureLoadBalancer returns a RetryError: the service
// controller asks again every few seconds instead of recording an empty status.
//
// With externalTrafficPolicy Cluster (the default), the host Service selects the
// virt-launcher pods of the tenant's worker VMs: WorkerPodSelector, the labels
// cluster.x-k8s.io/cluster-name=<cluster> and kubevirt.io=virt-launcher plus
// Options.WorkerSelector (default cluster.x-k8s.io/role=worker, which CAPK sets on
// the VMs of non-control-plane machines). Nodes that the service controller
// leaves out (excluded by label, being deleted by the autoscaler) still get
// traffic; with Cluster they forward it like any other node.
//
// # externalTrafficPolicy Local
//
// The kubevirt cloud controller manager lacks this. With Local the tenant's
// kube-proxy drops node-port traffic on a node without a ready endpoint, so the
// host must send the traffic only to the VMs that have one, and keep the client's
// address. The provider then writes:
//
//   - the host Service with externalTrafficPolicy Local and no selector, so the
//     host's kube-proxy and load balancer neither masquerade the client's address
//     nor forward to another host node;
//   - one EndpointSlice of that Service (managed-by cloudprovider.knest.dev, owned
//     by the host Service), listing for each tenant Node that the service
//     controller passes and that runs a ready endpoint of the Service (from the
//     tenant's EndpointSlices) the address of its worker VM on the pod network,
//     with the host node the VM runs on as the endpoint's nodeName (the host's
//     kube-proxy and MetalLB's L2 speaker decide locality by it). With KubeVirt's
//     bridge binding the guest owns the virt-launcher pod's address, which the VMI
//     reports in its status; the packet reaches the guest with the client's
//     address, and the tenant's kube-proxy keeps it.
//
// The service controller calls the provider when a Service or the set of Nodes
// changes, not when endpoints move between Nodes. Initialize therefore starts a
// loop that watches the tenant's EndpointSlices and rewrites the host
// EndpointSlice of every Local Service it has seen, with the Nodes of the service
// controller's last call; it also recomputes all of them every 30 seconds, which
// catches host-side changes (a VM restarted with a new address, migrated). The
// healthCheckNodePort of the tenant Service is not used: a host Service has no way
// to health-check its endpoints, and the tenant's EndpointSlices say the same
// thing sooner.
//
// # Instances
//
// A tenant Node is the host VirtualMachine named by its provider ID
// (kubevirt://<name>, which CAPK sets) or, without one, by the Node's name, in the
// tenant's namespace and with the tenant's cluster label. InstanceExists is false
// when that VM is gone, so the cloud node lifecycle controller deletes the Node;
// InstanceShutdown is true when the VM has no VMI or its VMI has ended;
// InstanceMetadata gives the provider ID, the VM's instance type if it names one,
// and the addresses the VMI reports on its declared interfaces, plus the Node's
// hostname. There are no zones or regions.
//
// # Not done yet
//
//   - Wiring: a cloud-controller-manager binary (or a `knest cloud-controller-manager`
//     subcommand) built on k8s.io/cloud-provider/app, run per tenant in its host
//     namespace with the tenant's kubeconfig, started by the knest controller.
//   - RBAC on the host namespace for that binary: services and endpointslices
//     (get, create, patch, delete; services/status is the host load balancer's),
//     virtualmachines and virtualmachineinstances (get, list). In the tenant, the
//     cloud-controller-manager's usual role plus list and watch on endpointslices.
//   - The tenants' kubelets with --cloud-provider=external (and the
//     node.cloudprovider.kubernetes.io/uninitialized taint the cloud node
//     controller then removes).
//   - A NetworkPolicy that lets load-balancer traffic reach the tenant's VMs on
//     their node ports when the tenant's host namespace is isolated.
//   - IPv6 and dual-stack (the Local endpoints are IPv4 only), and per-Service
//     options through annotations (a fixed address, the host load balancer class).
//   - Local with interface bindings other than bridge (knest's VMs use bridge):
//     untried; the endpoint address is the one the VMI reports on its pod network.
//   - The whole path on a real host: MetalLB (or another load balancer), the
//     host's kube-proxy and the tenant's, with traffic and the client's address
//     checked end to end. The tests here run the provider and the real service
//     controller against a real API server, with VMI status written by the test.
package cloudprovider
