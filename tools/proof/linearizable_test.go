package proof

import (
	"context"
	"fmt"
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
	"github.com/clustron/zaris-go/tools/store/control"
)

// segments is the segment count of the test clusters: few, so that every node owns some
// of the keys and every churn moves some of them.
const segments = 16

// testKeys are the keys the workload uses: few, so that operations on one key overlap.
var testKeys = []string{"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7"}

// calls is how many calls the workload completes between two churn steps.
const calls = 400

func startCluster(t *testing.T) *store.Cluster {
	return store.StartCluster(t, store.ClusterConfig{Nodes: 3, Segments: segments, FailureTimeout: time.Second})
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// runChurn runs the workload of two clients with three workers each (one speaking framed
// binary, the default, the other THeader) against a fresh cluster while churn runs, and
// requires the history to be linearizable.
func runChurn(t *testing.T, churn func(ctx context.Context, c *store.Cluster, w *workload)) {
	runChurnOn(t, startCluster(t), churn)
}

// runChurnOn is runChurn on the cluster c.
func runChurnOn(t *testing.T, c *store.Cluster, churn func(ctx context.Context, c *store.Cluster, w *workload)) {
	ctx := testCtx(t)
	clients := []*zarisclient.Client{
		newClient(t, c.Seeds()),
		newClient(t, c.Seeds(), runtime.WithProtocol(runtime.ProtocolHeader)),
	}
	w := startWorkload(t, clients, 3, testKeys)
	require.NoError(t, w.h.waitCalls(ctx, calls))
	churn(ctx, c, w)
	require.NoError(t, w.h.waitCalls(ctx, calls))
	ops := w.finish()
	require.Equal(t, porcupine.Ok, check(t, ops, porcupine.Ok), "the history is not linearizable")
}

// steps runs each churn step in turn with the workload running calls calls after each.
func steps(t *testing.T, ctx context.Context, w *workload, steps ...func() error) {
	t.Helper()
	for i, s := range steps {
		require.NoError(t, s(), "churn step %d", i+1)
		require.NoError(t, w.h.waitCalls(ctx, calls))
	}
}

func kill(c *store.Cluster, ctx context.Context, id int32) func() error {
	return func() error {
		if err := c.Kill(id); err != nil {
			return err
		}
		if err := c.Coordinator().WaitNode(ctx, id, false); err != nil {
			return err
		}
		return c.WaitSettled(ctx)
	}
}

func restart(c *store.Cluster, ctx context.Context, id int32) func() error {
	return func() error {
		if err := c.Restart(ctx, id); err != nil {
			return err
		}
		return c.WaitSettled(ctx)
	}
}

func failback(c *store.Cluster, ctx context.Context, id int32) func() error {
	return func() error { return c.Failback(ctx, id) }
}

func join(c *store.Cluster, ctx context.Context) func() error {
	return func() error {
		_, err := c.Join(ctx)
		return err
	}
}

func leave(c *store.Cluster, ctx context.Context, id int32) func() error {
	return func() error { return c.Leave(ctx, id) }
}

// migrate moves the segment of each of keys to a live node that does not own it.
func migrate(c *store.Cluster, ctx context.Context, keys ...string) func() error {
	return func() error {
		for _, k := range keys {
			seg := clustermap.SegmentOf([]byte(k), segments)
			to, err := otherNode(c, seg)
			if err != nil {
				return err
			}
			if err := c.MigrateSegment(ctx, seg, to); err != nil {
				return fmt.Errorf("migrating segment %d to node %d: %w", seg, to, err)
			}
		}
		return nil
	}
}

// otherNode returns a running node that is not the owner of seg.
func otherNode(c *store.Cluster, seg int32) (int32, error) {
	var owner int32 = -1
	for _, s := range c.Map().Segments {
		if s.ID == seg && s.Owner != nil {
			owner = *s.Owner
		}
	}
	for _, id := range c.Nodes() {
		if id != owner {
			return id, nil
		}
	}
	return 0, fmt.Errorf("no node other than %d to move segment %d to", owner, seg)
}

// stall stands the owner of key's segment still for d (Cluster.Stall, as SIGSTOP would),
// waits it out, and waits for the cluster to settle (a stall past the lease has the node
// failed over, then back as a learner).
func stall(c *store.Cluster, ctx context.Context, key string, d time.Duration) func() error {
	return func() error {
		seg := clustermap.SegmentOf([]byte(key), segments)
		s := c.Map().Segments[seg]
		if s.Owner == nil {
			return fmt.Errorf("segment %d has no owner to stall", seg)
		}
		if err := c.Stall(*s.Owner, d); err != nil {
			return err
		}
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
		return c.WaitSettled(ctx)
	}
}

// A stalled owner, for half, one and three lease TTLs (rule B6 of the client): the
// history stays linearizable, so no acknowledged write is lost and no read is stale.
func TestLinearizable_StalledOwner(t *testing.T) {
	for _, f := range []float64{0.5, 1, 3} {
		d := time.Duration(f * float64(store.DefaultLeaseTTL))
		t.Run(d.String(), func(t *testing.T) {
			runChurn(t, func(ctx context.Context, c *store.Cluster, w *workload) {
				steps(t, ctx, w, stall(c, ctx, "k0", d), stall(c, ctx, "k5", d))
			})
		})
	}
}

func TestLinearizable_KillAndFailover(t *testing.T) {
	runChurn(t, func(ctx context.Context, c *store.Cluster, w *workload) {
		steps(t, ctx, w, kill(c, ctx, 2))
	})
}

func TestLinearizable_Join(t *testing.T) {
	runChurn(t, func(ctx context.Context, c *store.Cluster, w *workload) {
		steps(t, ctx, w, join(c, ctx))
	})
}

func TestLinearizable_RestartAndFailback(t *testing.T) {
	runChurn(t, func(ctx context.Context, c *store.Cluster, w *workload) {
		steps(t, ctx, w, kill(c, ctx, 1), restart(c, ctx, 1), failback(c, ctx, 1))
	})
}

func TestLinearizable_Leave(t *testing.T) {
	runChurn(t, func(ctx context.Context, c *store.Cluster, w *workload) {
		steps(t, ctx, w, leave(c, ctx, 3))
	})
}

func TestLinearizable_MigrateSegment(t *testing.T) {
	runChurn(t, func(ctx context.Context, c *store.Cluster, w *workload) {
		steps(t, ctx, w, migrate(c, ctx, "k0", "k1", "k2"))
	})
}

// skewedClock is a node's clock whose wall clock is skew off the system's.
type skewedClock struct {
	control.Clock
	skew time.Duration
}

func (c skewedClock) Wall() time.Time { return c.Clock.Wall().Add(c.skew) }

// Node clocks ten seconds ahead of or behind the coordinator's change nothing: a node's
// right to serve is measured on its own monotonic clock from its etcd lease renewals, never
// against an instant another host chose.
func TestLinearizable_NodeClocksSkewedTenSeconds(t *testing.T) {
	for _, skew := range []time.Duration{10 * time.Second, -10 * time.Second} {
		t.Run(skew.String(), func(t *testing.T) {
			cfg := store.ClusterConfig{Nodes: 3, Segments: segments, FailureTimeout: time.Second}
			cfg.Node.Clock = skewedClock{control.SystemClock(), skew}
			runChurnOn(t, store.StartCluster(t, cfg), func(ctx context.Context, c *store.Cluster, w *workload) {
				steps(t, ctx, w, kill(c, ctx, 2), restart(c, ctx, 2), failback(c, ctx, 2), migrate(c, ctx, "k1", "k5"))
			})
		})
	}
}

func TestLinearizable_AllChurnInOneRun(t *testing.T) {
	runChurn(t, func(ctx context.Context, c *store.Cluster, w *workload) {
		steps(t, ctx, w,
			kill(c, ctx, 2),
			restart(c, ctx, 2),
			failback(c, ctx, 2),
			join(c, ctx),
			migrate(c, ctx, "k3", "k4"),
			leave(c, ctx, 1),
			kill(c, ctx, 3),
		)
	})
}

// The checker bites: the same workload through a deliberately broken store must be found
// not linearizable.

func TestChecker_BitesOnAcknowledgedButLostWrites(t *testing.T) {
	runBroken(t, func(kv zaris.ZarisKv, b *broken) zaris.ZarisKv { return &losesWrites{ZarisKv: kv, b: b} }, 0)
}

func TestChecker_BitesOnStaleReads(t *testing.T) {
	runBroken(t, func(kv zaris.ZarisKv, b *broken) zaris.ZarisKv { return &staleReads{ZarisKv: kv, b: b} }, 0)
}

// runBroken runs the workload (without churn), plus batchWorkers batch workers per client,
// against a cluster whose every connection goes through wrap, and requires porcupine to
// find the history not linearizable.
func runBroken(t *testing.T, wrap func(zaris.ZarisKv, *broken) zaris.ZarisKv, batchWorkers int) {
	c := startCluster(t)
	ctx := testCtx(t)
	b := &broken{reads: map[string]*zaris.GetResponse{}}
	cfg, err := runtime.NewConfig(runtime.WithService(zarisclient.Service), runtime.WithSeeds(c.Seeds()...))
	require.NoError(t, err)
	base := runtime.DefaultDialer(cfg)
	dialer := func(ctx context.Context, addr string) (runtime.Conn, error) {
		conn, err := base(ctx, addr)
		if err != nil {
			return nil, err
		}
		return brokenConn{Conn: conn, kv: wrap(conn.Client().(zaris.ZarisKv), b)}, nil
	}
	clients := []*zarisclient.Client{
		newClient(t, c.Seeds(), runtime.WithDialer(dialer)),
		newClient(t, c.Seeds(), runtime.WithDialer(dialer)),
	}
	w := startWorkload(t, clients, 3, testKeys)
	if batchWorkers > 0 {
		w.startBatchWorkers(clients, batchWorkers, 100)
	}
	require.NoError(t, w.h.waitCalls(ctx, 3*calls))
	ops := w.finish()
	require.Equal(t, porcupine.Illegal, check(t, ops, porcupine.Illegal),
		"porcupine did not notice the broken store")
}

// brokenConn is a connection whose client is a broken ZarisKv.
type brokenConn struct {
	runtime.Conn
	kv zaris.ZarisKv
}

func (c brokenConn) Client() any { return c.kv }

// broken is the state the broken stores share across connections.
type broken struct {
	mu    sync.Mutex // protects puts and reads
	puts  int
	reads map[string]*zaris.GetResponse
}

// losesWrites acknowledges every third unguarded Put without sending it, with a version
// above any it has seen: a store that acknowledges before the write is durable and then
// loses it.
type losesWrites struct {
	zaris.ZarisKv
	b *broken
}

func (l *losesWrites) Put(ctx context.Context, req *zaris.PutRequest) (*zaris.PutResponse, error) {
	if !req.IsSetIfMatchVersion() && !req.GetIfAbsent() {
		l.b.mu.Lock()
		l.b.puts++
		lose := l.b.puts%3 == 0
		l.b.mu.Unlock()
		if lose {
			return &zaris.PutResponse{Status: zaris.KvStatus_Ok, Version: 1 << 40}, nil
		}
	}
	return l.ZarisKv.Put(ctx, req)
}

// staleReads answers every other Get of a key with the first answer it got for that key:
// a store that serves reads from a stale replica.
type staleReads struct {
	zaris.ZarisKv
	b *broken
}

func (s *staleReads) Get(ctx context.Context, req *zaris.GetRequest) (*zaris.GetResponse, error) {
	s.b.mu.Lock()
	s.b.puts++
	old, ok := s.b.reads[string(req.Key)]
	stale := ok && s.b.puts%2 == 0
	s.b.mu.Unlock()
	if stale {
		return old, nil
	}
	resp, err := s.ZarisKv.Get(ctx, req)
	if err == nil && resp.Status == zaris.KvStatus_Ok {
		s.b.mu.Lock()
		if _, ok := s.b.reads[string(req.Key)]; !ok {
			s.b.reads[string(req.Key)] = resp
		}
		s.b.mu.Unlock()
	}
	return resp, err
}
