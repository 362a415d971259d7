package store

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/tools/gen/zarispeer"
)

// TestProcess_OutsidersAreRefusedByMembersWithCredentials runs zarisd processes with a
// cluster CA and member certificates, and sends as an outsider (plain TCP, and TLS with
// another CA's certificate) a forged Replicate and PushMap to a node, and a Register,
// MigrateSegment and Leave to the coordinator, with the cluster id copied. Each is refused;
// the map is as before and the forged write is nowhere; a member's admin client still works.
func TestProcess_OutsidersAreRefusedByMembersWithCredentials(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs zarisd processes")
	}
	bin := buildZarisd(t)
	dir := t.TempDir()
	ca, err := NewCA("process test")
	require.NoError(t, err)
	certPEM, keyPEM, err := ca.IssuePEM("member", "127.0.0.1")
	require.NoError(t, err)
	files := map[string][]byte{"ca.pem": ca.CertPEM(), "member.pem": certPEM, "member-key.pem": keyPEM}
	for name, b := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), b, 0o600))
	}
	creds := []string{"--cluster-ca", filepath.Join(dir, "ca.pem"), "--member-cert", filepath.Join(dir, "member.pem"),
		"--member-key", filepath.Join(dir, "member-key.pem"), "--etcd-tls=false"}
	etcd := append(etcdArgs(t), creds...)
	co := startProc(t, bin, append([]string{"coordinator", "--listen", stablePort(), "--nodes", "3", "--segments", "16",
		"--failure-timeout", "1s"}, etcd...)...)
	for id := 1; id <= 3; id++ {
		startProc(t, bin, append([]string{"node", "--id", strconv.Itoa(id), "--listen", "127.0.0.1:0",
			"--coordinator", co.addr}, etcd...)...)
	}
	member, err := NewCredentials(files["ca.pem"], certPEM, keyPEM)
	require.NoError(t, err)
	admin := DialCoordinator(co.addr, member)
	t.Cleanup(func() { admin.Close() })
	waitPeerMap(t, admin, "the cluster did not come up", func(pm *zarispeer.PeerMap) bool {
		for _, s := range pm.Segments {
			if s.Owner == nil || len(s.Replicas) != 1 {
				return false
			}
		}
		return len(pm.Nodes) == 3
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pm, err := admin.PeerMap(ctx)
	require.NoError(t, err)
	const seg = 0
	owner, replica := *pm.Segments[seg].Owner, pm.Segments[seg].Replicas[0]
	nodeByID := map[int32]*zarispeer.PeerNode{}
	for _, n := range pm.Nodes {
		nodeByID[n.ID] = n
	}
	key := keyIn(seg, 16, "forged")
	forged := cloneMap(pm)
	forged.Epoch += 1000

	for who, cfg := range outsiders(t) {
		p := newConnPool(time.Second, cfg)
		peer := func(fn func(*zarispeer.ZarisPeerClient) error) error {
			return p.call(nodeByID[replica].PeerAddr, time.Second, func(tc thrift.TClient) error {
				return fn(zarispeer.NewZarisPeerClient(tc))
			})
		}
		coord := func(fn func(*zarispeer.ZarisCoordinatorClient) error) error {
			return p.call(co.addr, time.Second, func(tc thrift.TClient) error {
				return fn(zarispeer.NewZarisCoordinatorClient(tc))
			})
		}
		assert.Error(t, peer(func(c *zarispeer.ZarisPeerClient) error {
			_, err := c.Replicate(ctx, &zarispeer.ReplicateRequest{Sender: owner, Epoch: pm.Epoch, Segment: seg,
				ClusterId: pm.ClusterId, Entry: &zarispeer.Entry{Key: key, Value: []byte("forged"), Version: 1 << 60}})
			return err
		}), "%s's Replicate", who)
		assert.Error(t, peer(func(c *zarispeer.ZarisPeerClient) error {
			_, err := c.PushMap(ctx, forged, 0)
			return err
		}), "%s's PushMap", who)
		assert.Error(t, coord(func(c *zarispeer.ZarisCoordinatorClient) error {
			_, err := c.Register(ctx, &zarispeer.RegisterRequest{NodeId: replica, Host: "127.0.0.1", Port: 1, PeerAddr: "127.0.0.1:1"})
			return err
		}), "%s's Register", who)
		assert.Error(t, coord(func(c *zarispeer.ZarisCoordinatorClient) error {
			_, err := c.MigrateSegment(ctx, seg, replica)
			return err
		}), "%s's MigrateSegment", who)
		assert.Error(t, coord(func(c *zarispeer.ZarisCoordinatorClient) error {
			_, err := c.Leave(ctx, owner)
			return err
		}), "%s's Leave", who)
		p.close()
	}

	after, err := admin.PeerMap(ctx)
	require.NoError(t, err)
	assert.Equal(t, pm.Epoch, after.Epoch, "the map changed")
	// The replica takes the segment over; the forged write is not there.
	m, err := admin.MigrateSegment(ctx, seg, replica)
	require.NoError(t, err)
	require.Equal(t, replica, *m.Segments[seg].Owner)
	n := nodeByID[replica]
	cl := mustDial(t, net.JoinHostPort(n.Host, strconv.Itoa(int(n.Port))))
	get, err := cl.Get(ctx, &zaris.GetRequest{Key: key})
	require.NoError(t, err)
	assert.Equal(t, zaris.KvStatus_NotFound, get.Status, "the forged write is there")
}
