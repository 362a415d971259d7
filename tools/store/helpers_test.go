package store

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/runtime/clustermap"
	"github.com/clustron/zaris-go/tools/store/control"
)

// rawClient is one connection with the generated ZarisKv client over framed binary.
type rawClient struct {
	*zaris.ZarisKvClient
	trans thrift.TTransport
}

func dialRaw(addr string) (*rawClient, error) {
	return dialRawTimeout(addr, 5*time.Second) // a loaded machine running -race is slow
}

// dialRawTimeout is dialRaw with a socket timeout of its own.
func dialRawTimeout(addr string, timeout time.Duration) (*rawClient, error) {
	cfg := &thrift.TConfiguration{ConnectTimeout: time.Second, SocketTimeout: timeout}
	sock := thrift.NewTSocketConf(addr, cfg)
	if err := sock.Open(); err != nil {
		return nil, err
	}
	trans := thrift.NewTFramedTransportConf(sock, cfg)
	return &rawClient{
		ZarisKvClient: zaris.NewZarisKvClientFactory(trans, thrift.NewTBinaryProtocolFactoryConf(cfg)),
		trans:         trans,
	}, nil
}

// mustDial dials node addr with the raw client and closes it when the test ends.
func mustDial(t testing.TB, addr string) *rawClient {
	t.Helper()
	c, err := dialRaw(addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.trans.Close() })
	return c
}

// retryable reports whether a status is churn a client under load retries.
func retryable(st zaris.KvStatus) bool {
	switch st {
	case zaris.KvStatus_Moved, zaris.KvStatus_OwnershipChanging, zaris.KvStatus_ReplicaWriteRejected,
		zaris.KvStatus_Migrating, zaris.KvStatus_Unavailable:
		return true
	}
	return false
}

// router is a test-only client under load: it routes each key by the cluster map fetched
// with GetClusterMap and retries churn statuses and transport errors (refreshing the map)
// until an answer or its deadline. It pools one raw client per borrower per node.
type router struct {
	seeds []string

	mu   sync.Mutex // protects m and idle
	m    *zaris.ClusterMap
	idle map[string][]*rawClient
}

func newRouter(seeds []string) *router {
	return &router{seeds: seeds, idle: map[string][]*rawClient{}}
}

func (r *router) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, list := range r.idle {
		for _, c := range list {
			c.trans.Close()
		}
	}
	r.idle = map[string][]*rawClient{}
}

// refreshTimeout bounds one node's answer to a router's map fetch.
const refreshTimeout = 2 * time.Second

// refresh fetches the map from every node it knows of and keeps the newest.
func (r *router) refresh() {
	r.mu.Lock()
	addrs := append([]string(nil), r.seeds...)
	if r.m != nil {
		for _, n := range r.m.Nodes {
			addrs = append(addrs, net.JoinHostPort(n.Host, strconv.Itoa(int(n.Port))))
		}
	}
	r.mu.Unlock()
	slices.Sort(addrs)
	var wg sync.WaitGroup
	for _, a := range slices.Compact(addrs) {
		wg.Go(func() {
			// A connection of its own with a short timeout: a hung node (SIGSTOP) would
			// otherwise hold every refresh for a data call's whole socket timeout, and a
			// write whose first attempt met it would spend its budget in two timeouts.
			c, err := dialRawTimeout(a, refreshTimeout)
			if err != nil {
				return
			}
			defer c.trans.Close()
			m, err := c.GetClusterMap(context.Background())
			if err != nil || m.SegmentCount == 0 {
				return
			}
			r.mu.Lock()
			if r.m == nil || m.Epoch > r.m.Epoch {
				r.m = m
			}
			r.mu.Unlock()
		})
	}
	wg.Wait()
}

func (r *router) get(addr string) (*rawClient, error) {
	r.mu.Lock()
	if list := r.idle[addr]; len(list) > 0 {
		c := list[len(list)-1]
		r.idle[addr] = list[:len(list)-1]
		r.mu.Unlock()
		return c, nil
	}
	r.mu.Unlock()
	return dialRaw(addr)
}

func (r *router) put(addr string, c *rawClient, ok bool) {
	if !ok {
		c.trans.Close()
		return
	}
	r.mu.Lock()
	r.idle[addr] = append(r.idle[addr], c)
	r.mu.Unlock()
}

// owner returns the data address of key's owner in the router's map, or "".
func (r *router) owner(key []byte) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		return ""
	}
	seg := r.m.Segments[clustermap.SegmentOf(key, r.m.SegmentCount)]
	if seg.Owner == nil {
		return ""
	}
	for _, n := range r.m.Nodes {
		if n.ID == *seg.Owner {
			return net.JoinHostPort(n.Host, strconv.Itoa(int(n.Port)))
		}
	}
	return ""
}

// epochSeen records, for one goroutine, the highest mapEpoch each node answered with; a
// node's answers to one goroutine never carry an older epoch than before (epoch 0, a node
// that holds no map yet, aside). nil records nothing.
type epochSeen struct {
	max      map[string]int64
	wentBack int
}

func (e *epochSeen) note(addr string, epoch int64) {
	if e == nil || epoch == 0 {
		return
	}
	if epoch < e.max[addr] {
		e.wentBack++
	}
	e.max[addr] = max(e.max[addr], epoch)
}

// do runs call against key's owner until it gets an answer (a status a client returns to
// the application) or the 10 s budget runs out.
func (r *router) do(key []byte, seen *epochSeen, call func(c *rawClient) (zaris.KvStatus, int64, error)) (zaris.KvStatus, error) {
	deadline := time.Now().Add(10 * time.Second)
	var last error
	for attempt := 0; time.Now().Before(deadline); attempt++ {
		if attempt > 0 {
			time.Sleep(time.Duration(min(attempt, 10)) * 2 * time.Millisecond)
		}
		addr := r.owner(key)
		if addr == "" {
			r.refresh()
			if addr = r.owner(key); addr == "" {
				last = fmt.Errorf("no owner for %q", key)
				continue
			}
		}
		c, err := r.get(addr)
		if err != nil {
			last = err
			r.refresh()
			continue
		}
		st, epoch, err := call(c)
		r.put(addr, c, err == nil)
		if err != nil {
			last = err
			r.refresh()
			continue
		}
		seen.note(addr, epoch)
		if retryable(st) {
			last = fmt.Errorf("status %v", st)
			if st != zaris.KvStatus_Migrating && st != zaris.KvStatus_Unavailable {
				r.refresh()
			}
			continue
		}
		return st, nil
	}
	return 0, fmt.Errorf("key %q: out of time, last: %w", key, last)
}

func (r *router) put1(key, value string, seen *epochSeen) (zaris.KvStatus, error) {
	return r.do([]byte(key), seen, func(c *rawClient) (zaris.KvStatus, int64, error) {
		resp, err := c.Put(context.Background(), &zaris.PutRequest{Key: []byte(key), Value: []byte(value)})
		if err != nil {
			return 0, 0, err
		}
		return resp.Status, resp.MapEpoch, nil
	})
}

// putKeys writes keys k0..k(n-1) with values v0..v(n-1) through r, requiring each to be
// acknowledged, and returns them.
func (r *router) putKeys(t testing.TB, n int) map[string]string {
	t.Helper()
	acked := make(map[string]string, n)
	for i := range n {
		k, v := fmt.Sprintf("k%d", i), fmt.Sprintf("v%d", i)
		st, err := r.put1(k, v, nil)
		require.NoError(t, err)
		require.Equal(t, zaris.KvStatus_Ok, st)
		acked[k] = v
	}
	return acked
}

func (r *router) get1(key string) (zaris.KvStatus, string, error) {
	var value string
	st, err := r.do([]byte(key), nil, func(c *rawClient) (zaris.KvStatus, int64, error) {
		resp, err := c.Get(context.Background(), &zaris.GetRequest{Key: []byte(key)})
		if err != nil {
			return 0, 0, err
		}
		value = string(resp.Value)
		return resp.Status, resp.MapEpoch, nil
	})
	return st, value, err
}

// workload writes unique keys from several goroutines through a router and remembers every
// write that was acknowledged (Ok).
type workload struct {
	r    *router
	stop chan struct{}
	wg   sync.WaitGroup

	cluster *Cluster // optional: lets a failure say where a lost key is

	mu            sync.Mutex // protects acked, failed and epochWentBack
	acked         map[string]string
	failed        []error
	epochWentBack int
}

func startWorkload(t testing.TB, seeds []string, writers int) *workload {
	w := &workload{r: newRouter(seeds), stop: make(chan struct{}), acked: map[string]string{}}
	w.r.refresh()
	for g := range writers {
		w.wg.Go(func() {
			seen := &epochSeen{max: map[string]int64{}}
			defer func() {
				w.mu.Lock()
				w.epochWentBack += seen.wentBack
				w.mu.Unlock()
			}()
			for i := 0; ; i++ {
				select {
				case <-w.stop:
					return
				default:
				}
				key, value := fmt.Sprintf("w%d-%d", g, i), fmt.Sprintf("value-%d-%d", g, i)
				st, err := w.r.put1(key, value, seen)
				w.mu.Lock()
				switch {
				case err != nil:
					w.failed = append(w.failed, err)
				case st == zaris.KvStatus_Ok:
					w.acked[key] = value
				default:
					w.failed = append(w.failed, fmt.Errorf("put %s: %v", key, st))
				}
				w.mu.Unlock()
			}
		})
	}
	t.Cleanup(w.r.close)
	return w
}

// where describes, for a failure message, which nodes of w.cluster hold key and in what role.
func (w *workload) where(key string) string {
	if w.cluster == nil {
		return ""
	}
	m := w.cluster.Map()
	seg := clustermap.SegmentOf([]byte(key), m.SegmentCount)
	out := fmt.Sprintf("\n  segment %d: owner %v replicas %v (epoch %d)", seg, *m.Segments[seg].Owner, m.Segments[seg].Replicas, m.Epoch)
	for _, id := range w.cluster.Nodes() {
		n := w.cluster.Node(id)
		sg := n.segments()[seg]
		sg.mu.Lock()
		e, ok := sg.lookup([]byte(key))
		sg.mu.Unlock()
		out += fmt.Sprintf("\n  node %d (epoch %d): has %v version %d", id, n.Epoch(), ok, e.version)
	}
	return out
}

// count returns how many writes were acknowledged so far.
func (w *workload) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}

// waitAcked waits until at least n more writes were acknowledged than when it was called.
func (w *workload) waitAcked(t testing.TB, n int) {
	t.Helper()
	base := w.count()
	require.Eventually(t, func() bool { return w.count() >= base+n }, 20*time.Second, time.Millisecond,
		"the workload made no progress")
}

// finish stops the writers and checks that every acknowledged write reads back.
func (w *workload) finish(t testing.TB) {
	t.Helper()
	close(w.stop)
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	require.Empty(t, w.failed, "writes that got no answer within the router's budget")
	require.NotEmpty(t, w.acked)
	lost := 0
	for k, v := range w.acked {
		st, got, err := w.r.get1(k)
		if err != nil || st != zaris.KvStatus_Ok || got != v {
			lost++
			if lost <= 5 {
				t.Errorf("acknowledged write lost: %s: status %v, value %q, err %v%s", k, st, got, err, w.where(k))
			}
		}
	}
	require.Zero(t, lost, "acknowledged writes lost, of %d", len(w.acked))
	require.Zero(t, w.epochWentBack, "a node answered with an older map epoch than before")
}

// epochWatch records the coordinator's map epoch as it changes.
type epochWatch struct {
	stop chan struct{}
	done chan struct{}
	seen []int64
}

func watchEpochs(c *Cluster) *epochWatch {
	e := &epochWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(e.done)
		for {
			ep := c.Map().Epoch
			if len(e.seen) == 0 || ep != e.seen[len(e.seen)-1] {
				e.seen = append(e.seen, ep)
			}
			select {
			case <-e.stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	return e
}

// finish checks that the epoch only ever grew, and grew at least once.
func (e *epochWatch) finish(t testing.TB) {
	t.Helper()
	close(e.stop)
	<-e.done
	require.Greater(t, len(e.seen), 1, "the epoch never changed")
	for i := 1; i < len(e.seen); i++ {
		require.Greater(t, e.seen[i], e.seen[i-1], "epoch went back: %v", e.seen)
	}
}

// testCtx returns a context that ends with the test or after 30 s.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// fastCluster is the configuration most tests use: 16 segments, the default heartbeat, and a
// failure timeout long enough that a loaded test machine does not fail live nodes over. A
// killed node is still failed over at once: its port refuses the coordinator's probe.
func fastCluster() ClusterConfig {
	return ClusterConfig{Nodes: 3, Segments: 16, FailureTimeout: time.Second, Logger: testLogger()}
}

// testLogger logs to stderr when ZARIS_STORE_TEST_LOG is set (to a slog level), else nowhere.
func testLogger() *slog.Logger {
	var level slog.Level
	if v := os.Getenv("ZARIS_STORE_TEST_LOG"); v == "" || level.UnmarshalText([]byte(v)) != nil {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// keyIn returns a key that falls in segment seg of a segCount-segment map.
func keyIn(seg, segCount int32, prefix string) []byte {
	for i := 0; ; i++ {
		k := []byte(fmt.Sprintf("%s-%d", prefix, i))
		if clustermap.SegmentOf(k, segCount) == seg {
			return k
		}
	}
}

// giveUp does what the coordinator does with a node it gave up on while the node runs: it
// revokes the node's etcd lease, waits its TTL out and fails the node over. The node learns
// of the loss at its next renewal and registers again.
func giveUp(t testing.TB, co *Coordinator, id int32) {
	t.Helper()
	co.mu.Lock()
	rec := co.nodes[id]
	co.mu.Unlock()
	require.True(t, co.revokeNodeLease(testCtx(t), rec), "revoking node %d's lease", id)
	co.mu.Lock()
	if rec.alive {
		co.failLocked(rec, "test")
	}
	co.mu.Unlock()
}

// testClock is a node's clock for tests: the system's, moved forward by Jump (a stall the
// node did not see) and with its wall clock skewed by wallSkew.
type testClock struct {
	base     control.Clock
	wallSkew time.Duration
	offset   atomic.Int64
}

func newTestClock(wallSkew time.Duration) *testClock {
	return &testClock{base: control.SystemClock(), wallSkew: wallSkew}
}

func (c *testClock) Mono() time.Duration { return c.base.Mono() + time.Duration(c.offset.Load()) }
func (c *testClock) Wall() time.Time     { return c.base.Wall().Add(c.wallSkew) }

// Jump moves the clock forward by d at once.
func (c *testClock) Jump(d time.Duration) { c.offset.Add(int64(d)) }

// waitFailedOver waits until node id was failed over at least once more than before. A node
// the coordinator gives up on while it runs registers again at once, so WaitNode(false)
// may miss the moment it was out.
func waitFailedOver(t testing.TB, co *Coordinator, id int32, before int64) {
	t.Helper()
	require.Eventually(t, func() bool { return failovers(co, id) > before }, 20*time.Second, time.Millisecond,
		"node %d was not failed over", id)
}

// failovers returns how often node id was failed over.
func failovers(co *Coordinator, id int32) int64 {
	if n, ok := co.failovers.Load(id); ok {
		return n.(*atomic.Int64).Load()
	}
	return 0
}

// TryLock takes the lock if it is free, and reports whether it did.
func (l *writeLock) TryLock() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held {
		return false
	}
	l.held, l.free = true, make(chan struct{})
	return true
}
