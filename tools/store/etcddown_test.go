package store

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/tools/store/control"
)

// etcd itself down: a node keeps serving while its right to serve lasts (at most its lease
// TTL from its last renewal), then answers Unavailable; when etcd returns, its renewals
// succeed again and it serves again, with nothing acknowledged lost. The test logs what it
// measured.
func TestEtcdDown_NodesServeWhileTheirLeasesAllowAndRecover(t *testing.T) {
	dir := t.TempDir()
	clientURL, peerURL := "http://"+stablePort(), "http://"+stablePort()
	embed := control.EmbedConfig{Dir: dir, ClientURL: clientURL, PeerURL: peerURL, NoFsync: true, LogLevel: "fatal"}
	e, err := control.StartEmbedded(embed)
	require.NoError(t, err)
	t.Cleanup(func() { e.Close() }) // after the cluster's own cleanup
	cfg := fastCluster()
	cfg.EtcdEndpoints = e.Endpoints()
	c := StartCluster(t, cfg)
	ctx := testCtx(t)
	const seg = 0
	owner := *c.Map().Segments[seg].Owner
	cl := mustDial(t, c.Addr(owner))
	defer cl.trans.Close()
	put := func(i int) zaris.KvStatus {
		resp, err := cl.Put(ctx, &zaris.PutRequest{Key: keyIn(seg, 16, fmt.Sprint("k", i)), Value: []byte("v")})
		require.NoError(t, err)
		return resp.Status
	}
	require.Equal(t, zaris.KvStatus_Ok, put(0))

	down := time.Now()
	closed := make(chan struct{})
	go func() { e.Close(); close(closed) }()
	i := 1
	for ; put(i) == zaris.KvStatus_Ok; i++ {
		require.Less(t, time.Since(down), DefaultLeaseTTL+time.Second, "the node served past its lease with etcd down")
		time.Sleep(5 * time.Millisecond)
	}
	served := time.Since(down)
	require.Equal(t, zaris.KvStatus_Unavailable, put(i))
	t.Logf("with etcd down the owner served writes for %v more, then answered Unavailable", served)
	<-closed

	// etcd returns; the coordinator, which stopped acting when its commit failed, campaigns
	// again in zarisd: here it is restarted.
	e, err = control.StartEmbedded(embed)
	require.NoError(t, err)
	back := time.Now()
	require.NoError(t, c.RestartCoordinator())
	r := newRouter(c.Seeds())
	defer r.close()
	st, err := r.put1(string(keyIn(seg, 16, fmt.Sprint("k", i))), "v", nil)
	require.NoError(t, err)
	require.Equal(t, zaris.KvStatus_Ok, st)
	t.Logf("etcd back: writes succeeded again after %v", time.Since(back))
	for k := range i + 1 {
		st, v, err := r.get1(string(keyIn(seg, 16, fmt.Sprint("k", k))))
		require.NoError(t, err)
		require.Equal(t, zaris.KvStatus_Ok, st, "acknowledged write k%d", k)
		require.Equal(t, "v", v)
	}
}
