package backup

import (
	"context"
	"crypto/tls"
	"fmt"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// ReplaceMember makes room in the cluster for a member that lost its data (its
// volume was on a host node that is drained or gone): the member of peerURL is
// removed and added again, unstarted, under a new ID. A member started anew on an
// empty data directory with --initial-cluster-state=existing then joins and copies
// the others' data. The remaining members must hold a quorum.
//
// Done already (a member of peerURL is there, not started) it changes nothing, so a
// Job that runs it again does no harm. It returns what it did.
func ReplaceMember(ctx context.Context, lg *zap.Logger, endpoints []string, tlsConfig *tls.Config, peerURL string) (string, error) {
	c, err := clientv3.New(clientv3.Config{Endpoints: endpoints, TLS: tlsConfig, DialTimeout: 30 * time.Second, Logger: lg})
	if err != nil {
		return "", err
	}
	defer c.Close()
	list, err := c.MemberList(ctx)
	if err != nil {
		return "", fmt.Errorf("failed to list etcd's members: %w", err)
	}
	var done string
	for _, m := range list.Members {
		if !slices.Contains(m.PeerURLs, peerURL) {
			continue
		}
		// An unstarted member has no name yet: added, waiting for its pod.
		if m.Name == "" {
			return fmt.Sprintf("member %x of %s is added and waits for its first start", m.ID, peerURL), nil
		}
		if _, err := c.MemberRemove(ctx, m.ID); err != nil {
			return "", fmt.Errorf("failed to remove member %s (%x): %w", m.Name, m.ID, err)
		}
		done = fmt.Sprintf("removed member %s (%x); ", m.Name, m.ID)
	}
	added, err := c.MemberAdd(ctx, []string{peerURL})
	if err != nil {
		return "", fmt.Errorf("%sfailed to add a member of %s: %w", done, peerURL, err)
	}
	return fmt.Sprintf("%sadded member %x of %s", done, added.Member.ID, peerURL), nil
}
