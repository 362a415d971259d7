package store

import (
	"bytes"
	"context"
	"crypto/tls"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/tools/gen/zarispeer"
)

// outsiders are the ways a process that is not a member reaches the cluster's ports: plain
// TCP, and TLS with a certificate of another CA (a member of another cluster).
func outsiders(t *testing.T) map[string]*tls.Config {
	ca, err := NewCA("another cluster")
	require.NoError(t, err)
	other, err := ca.Member("outsider")
	require.NoError(t, err)
	return map[string]*tls.Config{"plain": nil, "another CA": other.ClientTLS()}
}

// TestAuth_OutsidersAreRefusedAndChangeNothing sends, as an outsider, each call that changed
// the cluster when anyone could make it: a Replicate of a forged write (the real owner as
// sender, a huge version, the cluster id copied) to a replica, a PushMap of a map 1000 epochs
// ahead that gives one node every segment, a Register of an existing node from another
// address, and the churn commands MigrateSegment and Leave. Every call fails, and the data,
// the nodes' maps and the coordinator's map are as before.
func TestAuth_OutsidersAreRefusedAndChangeNothing(t *testing.T) {
	c := StartCluster(t, fastCluster())
	const seg = 0
	owner, replica, other := roles(c, seg)
	key := keyIn(seg, 16, "auth")
	put := putUntilOk(t, c.Addr(owner), key, "real", "owner")
	co := c.Coordinator()
	pm := c.Node(owner).current.Load().pm
	forgedMap := cloneMap(pm)
	forgedMap.Epoch += 1000
	for _, s := range forgedMap.Segments {
		o := other
		s.Owner, s.Replicas, s.Learners = &o, []int32{other}, []int32{}
	}
	replicaInc := c.Node(replica).incarnation

	calls := map[string]func(p *connPool) error{
		"Replicate": func(p *connPool) error {
			return p.call(c.Node(replica).PeerAddr(), time.Second, func(tc thrift.TClient) error {
				_, err := zarispeer.NewZarisPeerClient(tc).Replicate(bg, &zarispeer.ReplicateRequest{
					Sender: owner, Epoch: pm.Epoch, Segment: seg, ClusterId: pm.ClusterId,
					Entry: &zarispeer.Entry{Key: key, Value: []byte("forged"), Version: 1 << 60},
				})
				return err
			})
		},
		"PushMap": func(p *connPool) error {
			return p.call(c.Node(replica).PeerAddr(), time.Second, func(tc thrift.TClient) error {
				_, err := zarispeer.NewZarisPeerClient(tc).PushMap(bg, forgedMap, 0)
				return err
			})
		},
		"Register": func(p *connPool) error {
			return p.call(co.Addr(), time.Second, func(tc thrift.TClient) error {
				_, err := zarispeer.NewZarisCoordinatorClient(tc).Register(bg, &zarispeer.RegisterRequest{
					NodeId: replica, Incarnation: replicaInc, Host: "127.0.0.1", Port: 1, PeerAddr: "127.0.0.1:1",
				})
				return err
			})
		},
		"MigrateSegment": func(p *connPool) error {
			return p.call(co.Addr(), time.Second, func(tc thrift.TClient) error {
				_, err := zarispeer.NewZarisCoordinatorClient(tc).MigrateSegment(bg, seg, other)
				return err
			})
		},
		"Leave": func(p *connPool) error {
			return p.call(co.Addr(), time.Second, func(tc thrift.TClient) error {
				_, err := zarispeer.NewZarisCoordinatorClient(tc).Leave(bg, owner)
				return err
			})
		},
	}
	epoch := co.Map().Epoch
	for who, cfg := range outsiders(t) {
		p := newConnPool(time.Second, cfg)
		for name, call := range calls {
			assert.Error(t, call(p), "%s's %s was not refused", who, name)
		}
		p.close()
	}

	assert.Equal(t, epoch, co.Map().Epoch, "the coordinator's map changed")
	for _, id := range c.Nodes() {
		assert.Less(t, c.Node(id).Epoch(), forgedMap.Epoch, "node %d installed the forged map", id)
	}
	rs := c.Node(replica).segments()[seg]
	rs.mu.Lock()
	e := rs.data[string(key)]
	rs.mu.Unlock()
	assert.Equal(t, put.Version, e.version, "the replica applied the forged write")
	assert.True(t, bytes.Equal([]byte("real"), e.value))
	r := newRouter(c.Seeds())
	defer r.close()
	st, value, err := r.get1(string(key))
	require.NoError(t, err)
	require.Equal(t, zaris.KvStatus_Ok, st)
	require.Equal(t, "real", value)
}

// TestAuth_MembersStillTalk checks that a member's calls pass: the cluster's own traffic
// runs over the same mutual TLS (every test does), and an admin client with the members'
// credentials drives churn.
func TestAuth_MembersStillTalk(t *testing.T) {
	c := StartCluster(t, fastCluster())
	admin := DialCoordinator(c.Coordinator().Addr(), c.Credentials())
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, replica, _ := roles(c, 0)
	m, err := admin.MigrateSegment(ctx, 0, replica)
	require.NoError(t, err)
	require.Equal(t, replica, *m.Segments[0].Owner)
	outsider := DialCoordinator(c.Coordinator().Addr(), nil)
	defer outsider.Close()
	_, err = outsider.Map(ctx)
	require.Error(t, err, "an outsider read the map")
}

// TestAuth_NodeRefusesWhatItsViewRulesOut sends, as a member, what a member gone wrong
// could: a map 1000 epochs beyond the one the coordinator committed to etcd, and a write of
// a sender that does not own the segment. The node refuses both and keeps its map and data.
func TestAuth_NodeRefusesWhatItsViewRulesOut(t *testing.T) {
	c := StartCluster(t, fastCluster())
	const seg = 0
	owner, replica, other := roles(c, seg)
	key := keyIn(seg, 16, "depth")
	n := c.Node(replica)
	pm := n.current.Load().pm
	forged := cloneMap(pm)
	forged.Epoch += 1000
	p := newConnPool(time.Second, c.Credentials().ClientTLS())
	defer p.close()
	err := p.call(n.PeerAddr(), time.Second, func(tc thrift.TClient) error {
		_, err := zarispeer.NewZarisPeerClient(tc).PushMap(bg, forged, 0)
		return err
	})
	require.ErrorContains(t, err, "refused")
	require.Less(t, n.Epoch(), forged.Epoch)

	var resp *zarispeer.ReplicateResponse
	require.NoError(t, p.call(n.PeerAddr(), time.Second, func(tc thrift.TClient) error {
		var err error
		resp, err = zarispeer.NewZarisPeerClient(tc).Replicate(bg, &zarispeer.ReplicateRequest{
			Sender: other, Epoch: pm.Epoch, Segment: seg, ClusterId: pm.ClusterId,
			Entry: &zarispeer.Entry{Key: key, Value: []byte("forged"), Version: 1 << 60},
		})
		return err
	}))
	require.Equal(t, zarispeer.PeerStatus_Rejected, resp.Status)
	require.NotEqual(t, owner, other)
	rs := n.segments()[seg]
	rs.mu.Lock()
	_, ok := rs.data[string(key)]
	rs.mu.Unlock()
	require.False(t, ok, "the replica applied a write of a node that does not own the segment")
}
