// Package nodetest proves the node image under qemu (software emulation, direct
// kernel boot): a network namespace of its own with a bridge and dnsmasq, a control
// plane booted with a CABPK-style `kubeadm init` cloud-config delivered as a
// ConfigDrive (as CAPK does), a worker that joins, pods across nodes, and no image
// pulled from a registry. Run it with `make node-image-test`; it needs root, qemu,
// dnsmasq and genisoimage, and KNEST_NODE_IMAGE pointing at a built image.
package nodetest
