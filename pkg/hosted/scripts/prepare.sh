set -eu
mkdir -p /tmp /etc/kubernetes/pki/etcd
cp /secrets/ca/tls.crt /etc/kubernetes/pki/ca.crt; cp /secrets/ca/tls.key /etc/kubernetes/pki/ca.key
[ ! -d /secrets/proxy ] || { cp /secrets/proxy/tls.crt /etc/kubernetes/pki/front-proxy-ca.crt; cp /secrets/proxy/tls.key /etc/kubernetes/pki/front-proxy-ca.key; }
[ ! -d /secrets/etcd ] || { cp /secrets/etcd/tls.crt /etc/kubernetes/pki/etcd/ca.crt; cp /secrets/etcd/tls.key /etc/kubernetes/pki/etcd/ca.key; }
[ ! -d /secrets/sa ] || { cp /secrets/sa/tls.crt /etc/kubernetes/pki/sa.pub; cp /secrets/sa/tls.key /etc/kubernetes/pki/sa.key; }
sed -e "s/@POD_IP@/${POD_IP:-}/g" -e "s/@POD_NAME@/${POD_NAME:-kubeadm}/g" /config/kubeadm.yaml >/tmp/kubeadm.yaml
