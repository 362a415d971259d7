package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisclient"
	"github.com/clustron/zaris-go/gen/zarisserver"
	"github.com/clustron/zaris-go/middleware"
	mwt "github.com/clustron/zaris-go/middleware/middlewaretest"
	"github.com/clustron/zaris-go/runtime"
	"github.com/clustron/zaris-go/runtime/clock"
	"github.com/clustron/zaris-go/runtime/clustermap"
)

// These tests run the engine under the default middleware stack and the typed client,
// against fake nodes whose view of the cluster changes with a fake clock.

// churnNode is a fake node: it serves the map its view returns at the fake time, answers
// Get for the segments that map gives it, and Moved for the others.
type churnNode struct {
	zarisserver.UnimplementedZarisKv
	id   int32
	view func() *zaris.ClusterMap
	maps atomic.Int32 // GetClusterMap calls
	// hold, when set, runs at the start of every Get (to line calls up).
	hold func()
}

func (n *churnNode) Get(_ context.Context, req *zaris.GetRequest) (*zaris.GetResponse, error) {
	if n.hold != nil {
		n.hold()
	}
	m := n.view()
	s := m.Segments[clustermap.SegmentOf(req.Key, m.SegmentCount)]
	if s.Owner == nil || *s.Owner != n.id {
		return &zaris.GetResponse{Status: zaris.KvStatus_Moved, MapEpoch: m.Epoch}, nil
	}
	return &zaris.GetResponse{Status: zaris.KvStatus_Ok, Value: []byte(fmt.Sprint(n.id)), MapEpoch: m.Epoch}, nil
}

func (n *churnNode) GetClusterMap(context.Context) (*zaris.ClusterMap, error) {
	n.maps.Add(1)
	return n.view(), nil
}

func (n *churnNode) Put(context.Context, *zaris.PutRequest) (*zaris.PutResponse, error) {
	return nil, thrift.NewTApplicationException(thrift.UNKNOWN_METHOD, "not served")
}

func (n *churnNode) Delete(context.Context, *zaris.DeleteRequest) (*zaris.DeleteResponse, error) {
	return nil, thrift.NewTApplicationException(thrift.UNKNOWN_METHOD, "not served")
}

func (n *churnNode) Increment(context.Context, *zaris.IncrementRequest) (*zaris.IncrementResponse, error) {
	return nil, thrift.NewTApplicationException(thrift.UNKNOWN_METHOD, "not served")
}

type churnConn struct{ kv zaris.ZarisKv }

func (c churnConn) Client() any  { return c.kv }
func (c churnConn) Close() error { return nil }

// twoNodeMap has node 1 own the even segments and node 2 the odd ones, unless owner is
// set, in which case it owns them all.
func twoNodeMap(epoch int64, owner int32) *zaris.ClusterMap {
	m := &zaris.ClusterMap{Epoch: epoch, SegmentCount: 8, Nodes: []*zaris.NodeInfo{
		{ID: 1, Host: "node1", Port: 7001}, {ID: 2, Host: "node2", Port: 7002},
	}}
	for s := int32(0); s < 8; s++ {
		o := s%2 + 1
		if owner != 0 {
			o = owner
		}
		m.Segments = append(m.Segments, &zaris.SegmentInfo{ID: s, Owner: &o, Replicas: []int32{1, 2}})
	}
	return m
}

// keyIn returns a key whose segment (of 8) has the given parity.
func keyIn(odd bool) string {
	for i := 0; ; i++ {
		k := fmt.Sprintf("key-%d", i)
		if (clustermap.SegmentOf([]byte(k), 8)%2 == 1) == odd {
			return k
		}
	}
}

// TestB1_LateFailoverIsFoundThroughOtherTraffic is rule B1's scenario: node 1 dies at t0;
// the store fails its segments over to node 2 only at t0+250ms, so the first refresh (at
// t0+100ms, after the first backoff) still names node 1, and under R6 alone the refresh
// before attempt 3 (t0+300ms) would be debounced and attempt 3 would go back to the dead
// node. Other traffic answered by node 2 after the failover carries epoch 2; that evidence
// refreshes the map past the debounce, and the call succeeds on its third attempt. B7 is
// off in the first two cases, to show B1 and R6 alone; with the default settings (B7) the
// call needs no other traffic: once its dial is refused it waits for the first fetch of the
// next window (t0+500ms), which names node 2, and succeeds on its second attempt.
func TestB1_LateFailoverIsFoundThroughOtherTraffic(t *testing.T) {
	noOwnerWait := runtime.DefaultRetryPolicy
	noOwnerWait.OwnerWait = 0
	for _, tc := range []struct {
		name         string
		otherTraffic bool
		ownerWait    bool
	}{
		{"with other traffic", true, false},
		{"without other traffic the debounce holds", false, false},
		{"without other traffic B7 waits for the failover", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := mwt.NewClock()
			t0 := mwt.Epoch.Add(time.Second) // well past the bootstrap's debounce window
			failover := t0.Add(250 * time.Millisecond)
			view := func() *zaris.ClusterMap {
				if clock.Now().Before(failover) {
					return twoNodeMap(1, 0)
				}
				return twoNodeMap(2, 2)
			}
			nodes := map[string]*churnNode{"node1:7001": {id: 1, view: view}, "node2:7002": {id: 2, view: view}}
			var dead atomic.Bool
			dial := func(_ context.Context, addr string) (runtime.Conn, error) {
				if addr == "node1:7001" && dead.Load() {
					return nil, errors.New("connection refused")
				}
				return churnConn{nodes[addr]}, nil
			}
			opts := []runtime.Option{runtime.WithEnv(func(string) (string, bool) { return "", false }),
				runtime.WithSeeds("node1:7001", "node2:7002"), runtime.WithDialer(dial), runtime.WithClock(clock)}
			if !tc.ownerWait {
				opts = append(opts, runtime.WithRetryPolicy(noOwnerWait))
			}
			client, err := zarisclient.Dial(context.Background(), opts...)
			require.NoError(t, err)
			defer client.Close()
			engine := client.Engine()

			clock.Advance(t0.Sub(clock.Now()))
			dead.Store(true)
			if tc.otherTraffic {
				clock.OnSleep = func(_ context.Context, d time.Duration) {
					// While the call backs off before attempt 3, time reaches the failover
					// and a call for a node-2 key comes back Ok from epoch 2.
					if d != 200*time.Millisecond {
						return
					}
					clock.Advance(failover.Sub(clock.Now()))
					resp, err := client.Get(context.Background(), &zaris.GetRequest{Key: []byte(keyIn(true))})
					require.NoError(t, err)
					require.Equal(t, int64(2), resp.MapEpoch)
					// Observe refreshes in the background; wait for it (synchronisation only).
					deadline := time.Now().Add(10 * time.Second)
					for engine.Refresher().Epoch() != 2 && time.Now().Before(deadline) {
						time.Sleep(time.Millisecond)
					}
				}
			}

			var last atomic.Pointer[runtime.Call]
			kv := zarisclient.New(middleware.Default(engine.Invoke, engine.Refresher(), withCallMiddleware(client, lastCall(&last))))
			resp, err := kv.Get(context.Background(), &zaris.GetRequest{Key: []byte(keyIn(false))})
			if tc.ownerWait {
				require.NoError(t, err)
				assert.Equal(t, "2", string(resp.Value), "served by the new owner")
				assert.Equal(t, []time.Duration{500 * time.Millisecond}, clock.Sleeps(), "the wait for the next window's fetch, no backoff")
				call := last.Load()
				require.Len(t, call.Attempts, 2)
				assert.Equal(t, []int32{1, 2}, []int32{call.Attempts[0].Node, call.Attempts[1].Node})
				assert.Equal(t, 1, call.Stats.OwnerWaits)
				assert.Equal(t, 500*time.Millisecond, call.Stats.OwnerWait)
				assert.Equal(t, uint64(2), engine.Refresher().Stats().Performed, "at t0, still naming node 1, and at t0+500ms")
				return
			}
			if tc.otherTraffic {
				require.NoError(t, err)
				assert.Equal(t, zaris.KvStatus_Ok, resp.Status)
				assert.Equal(t, "2", string(resp.Value), "served by the new owner")
				assert.Equal(t, int64(2), engine.Map().Epoch)
				assert.Equal(t, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond}, clock.Sleeps())
				return
			}
			var ce *runtime.CallError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, runtime.BoundAttempts, ce.Bound)
			require.Len(t, ce.Attempts, 3)
			for _, a := range ce.Attempts {
				assert.Equal(t, int32(1), a.Node, "every attempt went to the dead node")
				assert.ErrorIs(t, a.Err, runtime.ErrNodeUnavailable)
				assert.False(t, a.Sent)
			}
			st := engine.Refresher().Stats()
			assert.Equal(t, uint64(1), st.Performed, "the refresh at t0+100ms")
			assert.Equal(t, uint64(1), st.Debounced, "the refresh at t0+300ms")
		})
	}
}

// TestR6_ThousandCallsHittingMovedRideOneMapFetch: 1000 concurrent calls through the full
// stack all get Moved from the old owner at once; between them they cause one
// GetClusterMap, and every call then succeeds at the new owner.
func TestR6_ThousandCallsHittingMovedRideOneMapFetch(t *testing.T) {
	const n = 1000
	// The calls back off at the same time: a clock whose time stands still while they
	// sleep (a fake clock that advances on each sleep would add their sleeps up).
	clock := &frozenClock{now: mwt.Epoch}
	var moved atomic.Bool
	view := func() *zaris.ClusterMap {
		if moved.Load() {
			return twoNodeMap(2, 2)
		}
		return twoNodeMap(1, 0)
	}
	var arrived atomic.Int32
	all := make(chan struct{})
	node1 := &churnNode{id: 1, view: view, hold: func() {
		if arrived.Add(1) == n {
			close(all)
		}
		<-all
	}}
	nodes := map[string]*churnNode{"node1:7001": node1, "node2:7002": {id: 2, view: view}}
	dial := func(_ context.Context, addr string) (runtime.Conn, error) { return churnConn{nodes[addr]}, nil }
	client, err := zarisclient.Dial(context.Background(), runtime.WithEnv(func(string) (string, bool) { return "", false }),
		runtime.WithSeeds("node2:7002"), runtime.WithDialer(dial), runtime.WithClock(clock), runtime.WithPoolSize(n))
	require.NoError(t, err)
	defer client.Close()
	engine := client.Engine()
	clock.set(mwt.Epoch.Add(time.Second)) // past the bootstrap's debounce window
	// The segments move to node 2; the client's map still says node 1.
	moved.Store(true)
	maps0 := node1.maps.Load() + nodes["node2:7002"].maps.Load()

	key := keyIn(false)
	errs := make(chan error, n)
	for range n {
		go func() {
			resp, err := client.Get(context.Background(), &zaris.GetRequest{Key: []byte(key)})
			if err == nil && string(resp.Value) != "2" {
				err = fmt.Errorf("served by node %s", resp.Value)
			}
			errs <- err
		}()
	}
	for range n {
		require.NoError(t, <-errs)
	}
	assert.Equal(t, int32(n), arrived.Load(), "every call hit Moved at the old owner")
	fetches := node1.maps.Load() + nodes["node2:7002"].maps.Load() - maps0
	assert.Equal(t, int32(1), fetches, "one map fetch for 1000 calls")
	st := engine.Refresher().Stats()
	assert.Equal(t, uint64(n), st.Requested)
	assert.Equal(t, uint64(1), st.Performed)
	// The fetch was led by one of the requests or by the middleware's Observe of the first
	// Moved from epoch 2; every other request joined it or came after it.
	assert.GreaterOrEqual(t, st.Coalesced+st.Debounced, uint64(n-1), "%+v", st)
}

// frozenClock is a clock.Clock whose time moves only when set: sleeps return at once and
// timers never fire.
type frozenClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *frozenClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *frozenClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

func (c *frozenClock) Sleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

func (c *frozenClock) NewTimer(time.Duration) clock.Timer { return frozenTimer{} }

type frozenTimer struct{}

func (frozenTimer) C() <-chan time.Time { return nil }
func (frozenTimer) Stop() bool          { return true }

// loopbackNode serves one node's map naming itself, over the header server on loopback,
// and returns its address.
// (The test binary's init in thrift_test.go turns off the server's connectivity check.)
func loopbackNode(b *testing.B) string {
	sock, err := thrift.NewTServerSocket("127.0.0.1:0")
	require.NoError(b, err)
	require.NoError(b, sock.Listen())
	addr := sock.Addr().(*net.TCPAddr)
	owner := int32(1)
	m := &zaris.ClusterMap{Epoch: 1, SegmentCount: 1, Nodes: []*zaris.NodeInfo{{ID: 1, Host: "127.0.0.1", Port: int32(addr.Port)}},
		Segments: []*zaris.SegmentInfo{{ID: 0, Owner: &owner}}}
	node := &churnNode{id: 1, view: func() *zaris.ClusterMap { return m }}
	cfg := &thrift.TConfiguration{}
	srv := thrift.NewTSimpleServer4(zaris.NewZarisKvProcessor(node), sock,
		thrift.NewTHeaderTransportFactoryConf(nil, cfg), thrift.NewTHeaderProtocolFactoryConf(cfg))
	go srv.Serve()
	b.Cleanup(func() { srv.Stop() })
	return addr.String()
}

// BenchmarkTypedClientDefaultStack is the whole client on its success path: the typed
// client, the default middleware stack, and the engine's pooled connection, binary over
// framed on loopback. Compare BenchmarkRawGeneratedClient.
func BenchmarkTypedClientDefaultStack(b *testing.B) {
	addr := loopbackNode(b)
	client, err := zarisclient.Dial(context.Background(), runtime.WithEnv(func(string) (string, bool) { return "", false }),
		runtime.WithSeeds(addr))
	require.NoError(b, err)
	defer client.Close()
	req := &zaris.GetRequest{Key: []byte("bench")}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := client.Get(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTypedClientPooled is BenchmarkTypedClientDefaultStack on pooled connections
// (WithPipelining(false)), the mode the bench's stack-overhead section compares with the raw
// generated client, with a context that cannot be cancelled and with one that can (an
// application's request context), for which the engine watches the context during the call.
func BenchmarkTypedClientPooled(b *testing.B) {
	addr := loopbackNode(b)
	client, err := zarisclient.Dial(context.Background(), runtime.WithEnv(func(string) (string, bool) { return "", false }),
		runtime.WithSeeds(addr), runtime.WithPipelining(false))
	require.NoError(b, err)
	defer client.Close()
	req := &zaris.GetRequest{Key: []byte("bench")}
	cancellable, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, bc := range []struct {
		name string
		ctx  context.Context
	}{{"background ctx", context.Background()}, {"cancellable ctx", cancellable}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := client.Get(bc.ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRawGeneratedClient is the generated Thrift client alone on one connection made
// by the engine's dialer: the floor for BenchmarkTypedClientDefaultStack.
func BenchmarkRawGeneratedClient(b *testing.B) {
	addr := loopbackNode(b)
	cfg, err := runtime.NewConfig(runtime.WithService(zarisclient.Service), runtime.WithEnv(func(string) (string, bool) { return "", false }), runtime.WithSeeds(addr))
	require.NoError(b, err)
	conn, err := runtime.DefaultDialer(cfg)(context.Background(), addr)
	require.NoError(b, err)
	defer conn.Close()
	kv := conn.Client().(zaris.ZarisKv)
	req := &zaris.GetRequest{Key: []byte("bench")}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := kv.Get(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}
