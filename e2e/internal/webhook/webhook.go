// Package webhook holds what the end-to-end packages need to run a component's
// admission or conversion webhooks as a local process instead of behind a Service:
// a serving certificate for 127.0.0.1, a free port, a wait until the TLS server
// answers, and the rewrite of a webhook's clientConfig to call the process directly.
package webhook

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/util/cert"
	"sigs.k8s.io/yaml"

	"github.com/knest-dev/knest/internal/childproc"
)

// WriteServingCert writes tls.crt (the serving certificate for 127.0.0.1 followed by
// its CA) and tls.key into dir and returns the CA certificate, PEM encoded.
func WriteServingCert(dir string) ([]byte, error) {
	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey("127.0.0.1", nil, []string{"localhost"})
	if err != nil {
		return nil, fmt.Errorf("failed to generate the webhook serving certificate: %w", err)
	}
	_, rest := pem.Decode(certPEM)
	ca, _ := pem.Decode(rest)
	if ca == nil {
		return nil, errors.New("generated certificate chain has no CA")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), certPEM, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), keyPEM, 0o600); err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(ca), nil
}

// FreePort returns a TCP port on 127.0.0.1 that is free now; another process may
// take it before the caller binds it.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// WaitForServer waits until https://127.0.0.1:port/ answers with a certificate
// caBundle trusts (any HTTP status), proc exits, ctx ends or timeout passes.
func WaitForServer(ctx context.Context, proc *childproc.Process, port int, caBundle []byte, timeout time.Duration) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caBundle)
	hc := &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
	}
	defer hc.CloseIdleConnections()
	url := fmt.Sprintf("https://127.0.0.1:%d/", port)
	deadline := time.After(timeout)
	var last error
	for {
		select {
		case <-proc.Done():
			return proc.ExitError()
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return fmt.Errorf("server on port %d did not answer within %s: %v", port, timeout, last)
		case <-time.After(200 * time.Millisecond):
		}
		resp, err := hc.Get(url)
		if err != nil {
			// Not listening yet, or another process's port (then the component exits).
			last = err
			continue
		}
		resp.Body.Close()
		return nil
	}
}

// PointAt makes cc call https://127.0.0.1:port at the path of the Service it names.
func PointAt(cc *admissionregistrationv1.WebhookClientConfig, port int, caBundle []byte) error {
	if cc.Service == nil || cc.Service.Path == nil {
		return errors.New("no service path to rewrite")
	}
	u := fmt.Sprintf("https://127.0.0.1:%d%s", port, *cc.Service.Path)
	cc.URL = &u
	cc.Service = nil
	cc.CABundle = caBundle
	return nil
}

// ReadYAMLDocs returns the non-empty documents of a YAML file, as JSON.
func ReadYAMLDocs(path string) ([][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := utilyaml.NewYAMLReader(bufio.NewReader(f))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		j, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if string(j) != "null" {
			docs = append(docs, j)
		}
	}
}
