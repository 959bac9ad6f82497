package backup

import (
	"context"
	"net/url"
	"testing"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// A member of three whose data is gone (its pod moved to an empty volume) comes
// back: ReplaceMember removes it and adds it again, a second call changes nothing,
// and the member started on an empty directory as joining an existing cluster gets
// every key, those written while it was away included. A try that removed but
// could not add yet is finished by the next.
func TestReplacedMemberJoinsOnAnEmptyVolumeWithEveryKey(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	members, peers, initial, etcds, c := runThree(t)
	defer etcds[1].Close()
	_, err := c.Put(ctx, "/registry/configmaps/default/before", "v")
	g.Expect(err).NotTo(HaveOccurred())

	// Its volume is lost with its node.
	etcds[2].Close()
	_, err = c.Put(ctx, "/registry/configmaps/default/while-away", "v")
	g.Expect(err).NotTo(HaveOccurred())

	// etcd adds a voting member only once every other has been connected for 5 s
	// (ErrUnhealthy before); the Job tries again, and a try after the removal adds.
	var msg string
	g.Eventually(func() (err error) {
		msg, err = ReplaceMember(ctx, zap.NewNop(), c.Endpoints(), nil, members[2].PeerURL)
		return err
	}, "30s", "1s").Should(Succeed())
	g.Expect(msg).To(MatchRegexp(`added member [0-9a-f]+ of ` + members[2].PeerURL + `$`))
	again, err := ReplaceMember(ctx, zap.NewNop(), c.Endpoints(), nil, members[2].PeerURL)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(ContainSubstring("waits for its first start"))
	list, err := c.MemberList(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(list.Members).To(HaveLen(3))

	e, u := startMember(t, t.TempDir(), members[2].Name, peers[2], initial, func(cfg *embed.Config) {
		cfg.ClusterState = embed.ClusterStateFlagExisting
	})
	ready(t, e)
	c2, stop2 := connect(t, u, e)
	defer stop2()
	got, err := c2.Get(ctx, "/registry/configmaps/default/", clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithSerializable())
	g.Expect(err).NotTo(HaveOccurred())
	var keys []string
	for _, kv := range got.Kvs {
		keys = append(keys, string(kv.Key))
	}
	g.Expect(keys).To(ConsistOf("/registry/configmaps/default/before", "/registry/configmaps/default/while-away"))
	list, err = c.MemberList(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	var names []string
	for _, m := range list.Members {
		names = append(names, m.Name)
	}
	g.Expect(names).To(ConsistOf("m-0", "m-1", "m-2"))
}

// A member is not taken out while another is down (a drain evicting it while the
// first is moved): the two left would not hold the quorum. The member stays, and
// the try is refused with the member that does not answer named.
func TestReplaceMemberKeepsAStartedMemberWhileAnotherIsDown(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	members, _, _, etcds, c := runThree(t)
	defer etcds[2].Close()

	etcds[1].Close()
	_, err := ReplaceMember(ctx, zap.NewNop(), c.Endpoints(), nil, members[2].PeerURL)
	g.Expect(err).To(MatchError(ContainSubstring("member m-1 does not answer")))
	list, err := c.MemberList(clientv3.WithRequireLeader(ctx))
	g.Expect(err).NotTo(HaveOccurred())
	var names []string
	for _, m := range list.Members {
		names = append(names, m.Name)
	}
	g.Expect(names).To(ConsistOf("m-0", "m-1", "m-2"), "m-2 still a member")
}

// runThree starts a cluster of three members and connects to the first, which is
// stopped with the client when the test ends; the others are the test's to stop.
func runThree(t *testing.T) ([]Member, []url.URL, string, []*embed.Etcd, *clientv3.Client) {
	t.Helper()
	members, peers, initial := threeMembers(t)
	etcds := make([]*embed.Etcd, 3)
	urls := make([]url.URL, 3)
	for i, m := range members {
		etcds[i], urls[i] = startMember(t, t.TempDir(), m.Name, peers[i], initial)
	}
	for _, e := range etcds {
		ready(t, e)
	}
	c, stop := connect(t, urls[0], etcds[0])
	t.Cleanup(stop)
	return members, peers, initial, etcds, c
}
