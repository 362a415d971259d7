package store

import (
	"net"
	"os"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/tools/gen/zarispeer"
	"github.com/clustron/zaris-go/tools/store/control"
)

// TestMain stops the etcd the tests share (control.ForTest), then fails on any goroutine
// left running.
func TestMain(m *testing.M) {
	code := m.Run()
	control.CloseShared()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			println("goroutines left after the tests:", err.Error())
			code = 1
		}
	}
	os.Exit(code)
}

func TestCluster_PutThenGet(t *testing.T) {
	c := StartCluster(t, fastCluster())
	r := newRouter(c.Seeds())
	defer r.close()
	st, err := r.put1("k", "v", nil)
	require.NoError(t, err)
	require.Equal(t, zaris.KvStatus_Ok, st)
	st, v, err := r.get1("k")
	require.NoError(t, err)
	require.Equal(t, zaris.KvStatus_Ok, st)
	require.Equal(t, "v", v)
}

func TestCluster_CloseLeavesNoListener(t *testing.T) {
	c, err := NewCluster(testCtx(t), fastCluster())
	require.NoError(t, err)
	addrs := append(c.Seeds(), c.Coordinator().Addr())
	for _, id := range c.Nodes() {
		addrs = append(addrs, c.Node(id).PeerAddr())
	}
	require.NoError(t, c.Close())
	for _, a := range addrs {
		conn, err := net.DialTimeout("tcp", a, time.Second)
		if err == nil {
			conn.Close()
		}
		require.Error(t, err, "%s still accepts connections after Close", a)
	}
	// goleak (TestMain) checks that no goroutine is left.
}

func TestPeer_RefusesAnotherClustersTraffic(t *testing.T) {
	a := StartCluster(t, fastCluster())
	cfg := fastCluster()
	cfg.Credentials = a.Credentials() // one CA: another cluster's member certificate passes
	b := StartCluster(t, cfg)
	na := a.Node(1)
	foreign := cloneMap(b.Node(1).current.Load().pm)
	foreign.Epoch = na.Epoch() + 100

	pool := newConnPool(time.Second, b.Credentials().ClientTLS())
	defer pool.close()
	err := pool.call(na.PeerAddr(), time.Second, func(c thrift.TClient) error {
		_, err := zarispeer.NewZarisPeerClient(c).PushMap(bg, foreign, 0)
		return err
	})
	require.Error(t, err, "a node installed another cluster's map")
	err = pool.call(na.PeerAddr(), time.Second, func(c thrift.TClient) error {
		_, err := zarispeer.NewZarisPeerClient(c).Replicate(bg, &zarispeer.ReplicateRequest{
			Sender: 2, Epoch: 1, Segment: 0, ClusterId: foreign.ClusterId,
			Entry: &zarispeer.Entry{Key: []byte("k"), Value: []byte("v"), Version: 1},
		})
		return err
	})
	require.Error(t, err, "a node applied another cluster's write")
	require.Less(t, na.Epoch(), foreign.Epoch)
}
