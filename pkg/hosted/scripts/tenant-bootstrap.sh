for conf in admin super-admin; do kubeadm init phase kubeconfig $conf --config /tmp/kubeadm.yaml; done
kubeadm init phase upload-config kubeadm --config /tmp/kubeadm.yaml
kubeadm init phase upload-config kubelet --config /tmp/kubeadm.yaml
kubeadm init phase bootstrap-token --config /tmp/kubeadm.yaml --skip-token-print
kubeadm init phase addon kube-proxy --config /tmp/kubeadm.yaml
kubeadm init phase addon coredns --config /tmp/kubeadm.yaml
