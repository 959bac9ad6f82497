package backup

import (
	"context"
	"crypto/tls"
	"fmt"
	"slices"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
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
		if err := othersHealthy(ctx, c, list.Members, m.ID); err != nil {
			return "", fmt.Errorf("not removing member %s (%x): %w", m.Name, m.ID, err)
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

// othersHealthy checks that every member but the one of id answers: once it is
// removed they alone hold the quorum. A member lost meanwhile (a drain evicting it
// while another is moved) would otherwise leave one of three.
func othersHealthy(ctx context.Context, c *clientv3.Client, members []*etcdserverpb.Member, id uint64) error {
	for _, o := range members {
		if o.ID == id {
			continue
		}
		if len(o.ClientURLs) == 0 {
			return fmt.Errorf("member %x has not started, and the others would not hold etcd's quorum", o.ID)
		}
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := c.Status(sctx, o.ClientURLs[0])
		cancel()
		if err != nil {
			return fmt.Errorf("member %s does not answer (%w), and the others would not hold etcd's quorum", o.Name, err)
		}
	}
	return nil
}
