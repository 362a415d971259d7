package proof

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisclient"
	"github.com/clustron/zaris-go/runtime"
	"github.com/clustron/zaris-go/runtime/clustermap"
	"github.com/clustron/zaris-go/tools/store"
)

// peerProxies holds the proxy in front of each node's peer port.
type peerProxies struct {
	t     *testing.T
	creds *store.Credentials // the members' credentials, the proxies' too
	mu    sync.Mutex
	by    map[int32]*peerProxy
}

// front is a store.ClusterConfig.PeerFront: one proxy per node, kept across restarts.
func (pp *peerProxies) front(id int32, addr string) string {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if p := pp.by[id]; p != nil && p.target == addr {
		return p.Addr()
	}
	p := startPeerProxy(pp.t, addr, pp.creds)
	pp.by[id] = p
	return p.Addr()
}

func (pp *peerProxies) get(id int32) *peerProxy {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	return pp.by[id]
}

// setAll switches the rule of every proxy.
func (pp *peerProxies) setAll(r peerRule) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	for _, p := range pp.by {
		p.setRule(r)
	}
}

// faults sums the faulted frames of method over every proxy.
func (pp *peerProxies) faults(method string) int {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	n := 0
	for _, p := range pp.by {
		n += p.faults(method)
	}
	return n
}

// startProxiedCluster starts a cluster of nodes nodes keeping copies copies of each segment
// (0: the default), whose peer traffic (replication, copies, map pushes, pings) all goes
// through a peerProxy per node.
func startProxiedCluster(t *testing.T, nodes, copies int) (*store.Cluster, *peerProxies) {
	ca, err := store.NewCA("proof")
	require.NoError(t, err)
	creds, err := ca.Member("member")
	require.NoError(t, err)
	pp := &peerProxies{t: t, by: map[int32]*peerProxy{}, creds: creds}
	c := store.StartCluster(t, store.ClusterConfig{
		Nodes: nodes, Segments: segments, ReplicationFactor: copies, FailureTimeout: time.Second, PeerFront: pp.front,
		Credentials: creds,
	})
	return c, pp
}

// ownerOf returns the owner of seg in the coordinator's map, or -1.
func ownerOf(c *store.Cluster, seg int32) int32 { return ownerIn(c.Map(), seg) }

// ownerIn returns the owner of seg in m, or -1.
func ownerIn(m *zaris.ClusterMap, seg int32) int32 {
	for _, s := range m.Segments {
		if s.ID == seg && s.Owner != nil {
			return *s.Owner
		}
	}
	return -1
}

// keyOwnedBy returns a key whose segment node id owns.
func keyOwnedBy(t *testing.T, c *store.Cluster, id int32) []byte {
	for i := range 1000 {
		k := []byte(fmt.Sprintf("ghost-%d", i))
		if ownerOf(c, clustermap.SegmentOf(k, segments)) == id {
			return k
		}
	}
	t.Fatalf("no key owned by node %d", id)
	return nil
}

// The first reproduction of the ghost after a delete: the first Replicate of a Put to the
// replica is held past the owner's peer timeout (a lost segment and a late retransmission);
// the owner resends it and acknowledges; the key is deleted; then the held Replicate lands.
// Once the owner is killed and the replica owns the segment, the key must still be deleted.
func TestPeerFaults_LateReplicateDoesNotResurrectADeletedKey(t *testing.T) {
	c, pp := startProxiedCluster(t, 2, 0)
	ctx := testCtx(t)
	key := keyOwnedBy(t, c, 1)
	seg := clustermap.SegmentOf(key, segments)
	cl := newClient(t, c.Seeds())

	held := make(chan struct{})
	var once sync.Once
	pp.get(2).setRule(func(method string) peerAction {
		act := peerAction{}
		if method == "Replicate" {
			once.Do(func() { act = peerAction{delay: 1200 * time.Millisecond, delivered: held} })
		}
		return act
	})
	put, err := cl.Put(ctx, &zaris.PutRequest{Key: key, Value: []byte("ghost")})
	require.NoError(t, err)
	require.Equal(t, zaris.KvStatus_Ok, put.Status)
	del, err := cl.Delete(ctx, &zaris.DeleteRequest{Key: key})
	require.NoError(t, err)
	require.Equal(t, zaris.KvStatus_Ok, del.Status)
	get, err := cl.Get(ctx, &zaris.GetRequest{Key: key})
	require.NoError(t, err)
	require.Equal(t, zaris.KvStatus_NotFound, get.Status)

	select {
	case <-held:
	case <-ctx.Done():
		t.Fatal("the held Replicate was never answered")
	}
	require.Equal(t, 1, pp.faults("Replicate"), "the first Replicate was held")

	require.NoError(t, c.Kill(1))
	require.NoError(t, c.WaitFor(ctx, func(m *zaris.ClusterMap) bool { return ownerIn(m, seg) == 2 }))
	get, err = cl.Get(ctx, &zaris.GetRequest{Key: key})
	require.NoError(t, err)
	require.Equal(t, zaris.KvStatus_NotFound, get.Status, "the deleted key came back as %q", get.Value)
}

// With three copies of each segment, every acknowledged write survives two node failures
// one after the other: the owner is killed, the new owner acknowledges "v2" while the third
// node's fetches from it are dropped, and then the new owner is killed and restarted
// empty. The third node, a replica all along, holds v2 and takes over.
func TestPeerFaults_ThreeCopiesKeepAnAcknowledgedWriteThroughTwoFailures(t *testing.T) {
	c, pp := startProxiedCluster(t, 3, 3)
	ctx := testCtx(t)
	key := keyOwnedBy(t, c, 1)
	seg := clustermap.SegmentOf(key, segments)
	var sg *zaris.SegmentInfo
	for _, s := range c.Map().Segments {
		if s.ID == seg {
			sg = s
		}
	}
	require.Len(t, sg.Replicas, 2)
	next, third := sg.Replicas[0], sg.Replicas[1]
	cl := newClient(t, c.Seeds(), runtime.WithAttemptTimeout(500*time.Millisecond))
	put, err := cl.Put(ctx, &zaris.PutRequest{Key: key, Value: []byte("v1")})
	require.NoError(t, err)
	require.Equal(t, zaris.KvStatus_Ok, put.Status)

	pp.get(next).setRule(func(method string) peerAction { return peerAction{drop: method == "Fetch"} })
	require.NoError(t, c.Kill(1))
	require.NoError(t, c.WaitFor(ctx, func(m *zaris.ClusterMap) bool { return ownerIn(m, seg) == next }))
	put, err = cl.Put(ctx, &zaris.PutRequest{Key: key, Value: []byte("v2")})
	require.NoError(t, err)
	require.Equal(t, zaris.KvStatus_Ok, put.Status, "v2 was not acknowledged")

	require.NoError(t, c.Kill(next))
	require.NoError(t, c.Coordinator().WaitNode(ctx, next, false))
	require.NoError(t, c.Restart(ctx, next))
	pp.get(next).setRule(nil)
	var got *zaris.GetResponse
	require.Eventually(t, func() bool {
		got, err = cl.Get(ctx, &zaris.GetRequest{Key: key})
		return err == nil && got.Status != zaris.KvStatus_Unavailable
	}, 20*time.Second, 50*time.Millisecond, "the segment never served again (third node %d)", third)
	require.Equal(t, "Ok v2", got.Status.String()+" "+string(got.Value),
		"the acknowledged write v2 was lost (owner now %d, third node %d)", ownerIn(c.Map(), seg), third)
}

// chaos is a rule that delays, duplicates (the copy lands late, after newer frames: a
// reordering) and drops some Replicate, Fetch and PushMap frames.
func chaos(seed uint64) peerRule {
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, 13))
	return func(method string) peerAction {
		if method != "Replicate" && method != "Fetch" && method != "PushMap" {
			return peerAction{}
		}
		mu.Lock()
		defer mu.Unlock()
		switch p := rng.IntN(100); {
		case p < 10:
			return peerAction{delay: time.Duration(1+rng.IntN(20)) * time.Millisecond}
		case p < 18:
			return peerAction{dup: time.Duration(1+rng.IntN(300)) * time.Millisecond}
		case p < 20 && method != "PushMap":
			return peerAction{drop: true}
		case p < 21 && method == "Replicate":
			// held past the owner's peer timeout, so it lands after the resend
			return peerAction{delay: 700 * time.Millisecond}
		}
		return peerAction{}
	}
}

// runProxied is runChurn on a cluster of three nodes keeping copies copies of each segment
// (0: the default), whose peer traffic goes through proxies set to rule.
func runProxied(t *testing.T, copies int, rule peerRule, churn func(ctx context.Context, c *store.Cluster, w *workload)) *peerProxies {
	c, pp := startProxiedCluster(t, 3, copies)
	ctx := testCtx(t)
	clients := []*zarisclient.Client{newClient(t, c.Seeds())}
	w := startWorkload(t, clients, 4, testKeys)
	pp.setAll(rule)
	require.NoError(t, w.h.waitCalls(ctx, calls))
	churn(ctx, c, w)
	require.NoError(t, w.h.waitCalls(ctx, calls))
	ops := w.finish()
	pp.setAll(nil)
	require.Equal(t, porcupine.Ok, check(t, ops, porcupine.Ok), "the history is not linearizable")
	return pp
}

// Faults on the store's own peer traffic (replication, copies, map pushes) under a workload
// with a migration and a failover: the history stays linearizable.
func TestPeerFaults_ReplicationAndCopiesDelayedDuplicatedDropped(t *testing.T) {
	pp := runProxied(t, 0, chaos(uint64(time.Now().UnixNano())), func(ctx context.Context, c *store.Cluster, w *workload) {
		steps(t, ctx, w, migrate(c, ctx, "k0", "k1"), kill(c, ctx, 3), restart(c, ctx, 3), failback(c, ctx, 3))
	})
	require.Positive(t, pp.faults("Replicate"), "no Replicate was faulted")
	require.Positive(t, pp.faults("PushMap"), "no PushMap was faulted")
}

// The same faults with three copies of each segment, through a failover (whose other
// replica then fetches its copy again), a restart, a failback and a migration.
func TestPeerFaults_ThreeCopiesUnderFaultsAndChurn(t *testing.T) {
	pp := runProxied(t, 3, chaos(uint64(time.Now().UnixNano())), func(ctx context.Context, c *store.Cluster, w *workload) {
		steps(t, ctx, w, kill(c, ctx, 3), restart(c, ctx, 3), failback(c, ctx, 3), migrate(c, ctx, "k0", "k1"))
	})
	require.Positive(t, pp.faults("Replicate"), "no Replicate was faulted")
}

// A delayed coordinator: every map push and ping reaches the nodes late, each node by a
// different amount, so nodes install each map at different times, while segments migrate.
func TestPeerFaults_DelayedMapPushes(t *testing.T) {
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	rule := func(method string) peerAction {
		if method != "PushMap" && method != "Ping" {
			return peerAction{}
		}
		mu.Lock()
		defer mu.Unlock()
		return peerAction{delay: time.Duration(rng.IntN(40)) * time.Millisecond}
	}
	pp := runProxied(t, 0, rule, func(ctx context.Context, c *store.Cluster, w *workload) {
		steps(t, ctx, w, migrate(c, ctx, "k0", "k1", "k2", "k3"), join(c, ctx))
	})
	require.Positive(t, pp.faults("PushMap"), "no PushMap was delayed")
}

// slowOldOwner runs the workload of four clients (each with its own map, so some go on
// routing by an older one) with two workers each against a fresh cluster; rounds times,
// churn names the nodes to slow down by d (the old owners) and the step to run, after which
// they are restored. The history must be linearizable.
func slowOldOwner(t *testing.T, d time.Duration, rounds int, churn func(ctx context.Context, c *store.Cluster) (slow []int32, step func() error)) {
	c := startCluster(t)
	ctx := testCtx(t)
	var clients []*zarisclient.Client
	for range 4 {
		clients = append(clients, newClient(t, c.Seeds()))
	}
	w := startWorkload(t, clients, 2, testKeys)
	require.NoError(t, w.h.waitCalls(ctx, calls))
	for range rounds {
		slow, step := churn(ctx, c)
		for _, id := range slow {
			require.True(t, c.SlowDown(id, d), "node %d is not running", id)
		}
		err := step()
		for _, id := range slow {
			c.SlowDown(id, 0)
		}
		require.NoError(t, err)
		require.NoError(t, w.h.waitCalls(ctx, calls/4))
	}
	require.NoError(t, w.h.waitCalls(ctx, calls))
	ops := w.finish()
	require.Equal(t, porcupine.Ok, check(t, ops, porcupine.Ok), "the history is not linearizable")
}

// migrateOff moves the segment of each of keys to a node that holds no copy of it, so the old
// owner drops its copy and the new owner takes writes without it.
func migrateOff(c *store.Cluster, ctx context.Context, keys ...string) func() error {
	return func() error {
		for _, k := range keys {
			seg := clustermap.SegmentOf([]byte(k), segments)
			m := c.Map()
			to := int32(-1)
			for _, id := range c.Nodes() {
				if id != ownerIn(m, seg) && !slices.Contains(m.Segments[seg].Replicas, id) {
					to = id
				}
			}
			if to < 0 {
				return fmt.Errorf("no node without a copy of segment %d", seg)
			}
			if err := c.MigrateSegment(ctx, seg, to); err != nil {
				return fmt.Errorf("migrating segment %d to node %d: %w", seg, to, err)
			}
		}
		return nil
	}
}

// The second reproduction: a migration cut-over whose old owner installs maps a few
// milliseconds late must not serve a read the new owner has moved past.
func TestCutover_SlowOldOwner_Migrate(t *testing.T) {
	for _, d := range []time.Duration{2 * time.Millisecond, 10 * time.Millisecond} {
		t.Run(d.String(), func(t *testing.T) {
			slowOldOwner(t, d, 3, func(ctx context.Context, c *store.Cluster) ([]int32, func() error) {
				var slow []int32
				for _, k := range testKeys {
					slow = append(slow, ownerOf(c, clustermap.SegmentOf([]byte(k), segments)))
				}
				return slow, migrateOff(c, ctx, testKeys...)
			})
		})
	}
}

func TestCutover_SlowOldOwner_Join(t *testing.T) {
	slowOldOwner(t, 10*time.Millisecond, 1, func(ctx context.Context, c *store.Cluster) ([]int32, func() error) {
		return c.Nodes(), join(c, ctx)
	})
}

func TestCutover_SlowOldOwner_Failback(t *testing.T) {
	slowOldOwner(t, 10*time.Millisecond, 1, func(ctx context.Context, c *store.Cluster) ([]int32, func() error) {
		require.NoError(t, kill(c, ctx, 2)())
		require.NoError(t, restart(c, ctx, 2)())
		return []int32{1, 3}, failback(c, ctx, 2)
	})
}

func TestCutover_SlowOldOwner_Leave(t *testing.T) {
	slowOldOwner(t, 10*time.Millisecond, 1, func(ctx context.Context, c *store.Cluster) ([]int32, func() error) {
		return []int32{1}, leave(c, ctx, 1)
	})
}
