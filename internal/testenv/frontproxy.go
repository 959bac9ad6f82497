package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/util/cert"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// configureRequestHeader gives kube-apiserver a front-proxy CA and the request-header
// flags kubeadm sets. Aggregated API servers and webhooks that authenticate the API
// server's proxied requests (KubeVirt's virt-api refuses to start without it) read them
// from the extension-apiserver-authentication ConfigMap.
func configureRequestHeader(api *envtest.APIServer, dir string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	ca, err := cert.NewSelfSignedCACert(cert.Config{CommonName: "front-proxy-ca"}, key)
	if err != nil {
		return fmt.Errorf("failed to create the front-proxy CA: %w", err)
	}
	pem, err := cert.EncodeCertificates(ca)
	if err != nil {
		return err
	}
	path := filepath.Join(dir, "front-proxy-ca.crt")
	if err := os.WriteFile(path, pem, 0o600); err != nil {
		return err
	}
	args := api.Configure()
	args.Set("requestheader-client-ca-file", path)
	args.Set("requestheader-allowed-names", "front-proxy-client")
	args.Set("requestheader-username-headers", "X-Remote-User")
	args.Set("requestheader-group-headers", "X-Remote-Group")
	args.Set("requestheader-extra-headers-prefix", "X-Remote-Extra-")
	return nil
}
