for phase in apiserver apiserver-kubelet-client front-proxy-client apiserver-etcd-client; do
  kubeadm init phase certs $phase --config /tmp/kubeadm.yaml
done
for conf in controller-manager scheduler; do
  kubeadm init phase kubeconfig $conf --config /tmp/kubeadm.yaml --kubeconfig-dir /kubeconfig
done
kubeadm kubeconfig user --config /tmp/kubeadm.yaml --client-name @KONNECTIVITY_USER@ >/kubeconfig/konnectivity-server.conf
sed -i "s#server: .*#server: https://127.0.0.1:@API_SERVER_PORT@#" /kubeconfig/*.conf
