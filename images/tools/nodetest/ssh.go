package nodetest

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"net"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
)

// sshKey is the key CAPK generates per cluster; its public half goes into the `capk`
// user of the bootstrap data.
type sshKey struct {
	signer ssh.Signer
	public string
}

func newSSHKey() (*sshKey, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return nil, err
	}
	return &sshKey{signer: signer, public: strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey())))}, nil
}

// run executes cmd on the guest as user capk (the way CAPK's bootstrap check does)
// and returns its combined output.
func (n *network) run(key *sshKey, ip, cmd string) (string, error) {
	conn, err := n.dial(net.JoinHostPort(ip, "22"), 10*time.Second)
	if err != nil {
		return "", err
	}
	cfg := &ssh.ClientConfig{
		User:            "capk",
		Auth:            []ssh.AuthMethod{ssh.PublicKeys(key.signer)},
		HostKeyCallback: ssh.InsecureIgnoreHostKey(), // a throwaway guest on a private bridge
		Timeout:         20 * time.Second,
	}
	c, chans, reqs, err := ssh.NewClientConn(conn, ip, cfg)
	if err != nil {
		conn.Close()
		return "", err
	}
	client := ssh.NewClient(c, chans, reqs)
	defer client.Close()
	s, err := client.NewSession()
	if err != nil {
		return "", err
	}
	defer s.Close()
	var out bytes.Buffer
	s.Stdout, s.Stderr = &out, &out
	if err := s.Run(cmd); err != nil {
		return out.String(), fmt.Errorf("%q on %s: %w: %s", cmd, ip, err, out.String())
	}
	return out.String(), nil
}
