package proof

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisclient"
	"github.com/clustron/zaris-go/runtime"
	"github.com/clustron/zaris-go/tools/store"
)

// The bounds of the clients in the network fault tests: short, so that a faulted call
// ends quickly, and far apart, so that each fault trips the bound it should.
const (
	faultAttemptTimeout = 300 * time.Millisecond
	faultRequestTimeout = 1500 * time.Millisecond
	faultBackoff        = 50 * time.Millisecond
	// faultSlack is how much later than its deadline a call may return. It is an upper
	// bound only, generous for a loaded machine running -race: the test asserts that a call
	// does not hang, never how long it takes.
	faultSlack = time.Second
)

// faultClient is a client whose connections to the store's nodes go through proxies.
type faultClient struct {
	engine *runtime.Engine
	kv     *zarisclient.Client
}

// dialThroughProxies dials a client at c whose dialer sends every connection for a node
// to that node's proxy, with the fault tests' bounds, maxAttempts 3 and captureCall.
func dialThroughProxies(t *testing.T, c *store.Cluster, proxies map[string]*faultProxy) *faultClient {
	t.Helper()
	opts := []runtime.Option{
		runtime.WithSeeds(c.Seeds()...),
		runtime.WithAttemptTimeout(faultAttemptTimeout),
		runtime.WithRequestTimeout(faultRequestTimeout),
		runtime.WithBackoff(faultBackoff),
		runtime.WithDefaultMaxAttempts(3),
		runtime.WithPoolSize(4),
		runtime.WithEnv(nil),
	}
	cfg, err := runtime.NewConfig(append(opts, runtime.WithService(zarisclient.Service))...)
	require.NoError(t, err)
	base := runtime.DefaultDialer(cfg)
	dialer := func(ctx context.Context, addr string) (runtime.Conn, error) {
		if p, ok := proxies[addr]; ok {
			addr = p.Addr()
		}
		return base(ctx, addr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := zarisclient.Dial(ctx, append(opts, runtime.WithDialer(dialer), runtime.WithCallMiddleware(captureCall))...)
	require.NoError(t, err)
	t.Cleanup(func() { kv.Close() })
	return &faultClient{engine: kv.Engine(), kv: kv}
}

// victim picks the node to fault: the last of the client's map, so that a map refresh,
// which asks the map's nodes in order and stops at the first answer, never reaches it and
// every connection and request the victim's proxy sees belongs to the call under test.
// It returns the node's address and a key the node owns.
func (fc *faultClient) victim(t *testing.T, prefix string) (addr string, key []byte) {
	t.Helper()
	m := fc.engine.Map()
	require.GreaterOrEqual(t, len(m.Nodes), 2)
	last := m.Nodes[len(m.Nodes)-1]
	addr = net.JoinHostPort(last.Host, strconv.Itoa(int(last.Port)))
	for i := range 10000 {
		k := []byte(fmt.Sprintf("%s-%d", prefix, i))
		r, err := fc.engine.Route(k)
		require.NoError(t, err)
		if r.Node == last.ID {
			require.Equal(t, addr, r.Addr)
			return addr, k
		}
	}
	t.Fatalf("no key owned by node %d", last.ID)
	return "", nil
}

// TestNetworkFaults_ClientKeepsItsBounds puts a proxy in front of every node of a real
// cluster and faults the one that owns the key under test: delayed, blackholed, dropped
// or reset connections. For every fault a call to that key
//
//   - returns no later than its deadline plus a generous slack: never hangs (R4, B5);
//   - either answers (a delay shorter than the attempt timeout) or returns a
//     *runtime.CallError naming the bound that tripped (maxAttempts or the deadline) and
//     unwrapping to the typed cause: ErrAttemptTimeout for a node that never answers,
//     ErrTransport or ErrNodeUnavailable for one whose connections are closed or reset
//     (R3, B4);
//   - sends no more requests, and opens no more connections, than maxAttempts (R4);
//
// and once the fault is lifted, calls through the same client succeed again, and closing
// the client leaves no connection open at the proxy (the pool recovers and holds no stuck
// connection).
func TestNetworkFaults_ClientKeepsItsBounds(t *testing.T) {
	c := store.StartCluster(t, store.ClusterConfig{Nodes: 3})
	proxies := map[string]*faultProxy{}
	for _, addr := range c.Seeds() {
		proxies[addr] = startFaultProxy(t, addr)
	}

	cases := []struct {
		name        string
		fault       fault
		delay       time.Duration
		maxAttempts int
		// wantAnswer: the call answers Ok despite the fault.
		wantAnswer bool
		// wantBounds are the bounds the call may end on; wantErrs the causes it may
		// unwrap to (any one of them): the last attempt may be cut short by the deadline.
		wantBounds []runtime.Bound
		wantErrs   []error
		// wantFirst is the cause of the first attempt, which ends long before the deadline.
		wantFirst error
	}{
		{
			name: "delay below the attempt timeout", fault: faultDelay, delay: 20 * time.Millisecond,
			maxAttempts: 3, wantAnswer: true,
		},
		{
			name: "delay past the attempt timeout", fault: faultDelay, delay: 2 * faultAttemptTimeout,
			maxAttempts: 3,
			wantBounds:  []runtime.Bound{runtime.BoundAttempts, runtime.BoundDeadline},
			wantErrs:    []error{runtime.ErrAttemptTimeout, context.DeadlineExceeded},
			wantFirst:   runtime.ErrAttemptTimeout,
		},
		{
			name: "blackhole", fault: faultBlackhole, maxAttempts: 3,
			wantBounds: []runtime.Bound{runtime.BoundAttempts, runtime.BoundDeadline},
			wantErrs:   []error{runtime.ErrAttemptTimeout, context.DeadlineExceeded},
			wantFirst:  runtime.ErrAttemptTimeout,
		},
		{
			// More attempts than fit in the request timeout: the deadline trips first.
			name: "blackhole past the deadline", fault: faultBlackhole, maxAttempts: 10,
			wantBounds: []runtime.Bound{runtime.BoundDeadline},
			wantErrs:   []error{runtime.ErrAttemptTimeout, context.DeadlineExceeded},
			wantFirst:  runtime.ErrAttemptTimeout,
		},
		{
			name: "drop", fault: faultDrop, maxAttempts: 3,
			wantBounds: []runtime.Bound{runtime.BoundAttempts, runtime.BoundDeadline},
			wantErrs:   []error{runtime.ErrTransport, runtime.ErrNodeUnavailable},
			wantFirst:  runtime.ErrTransport,
		},
		{
			name: "reset", fault: faultReset, maxAttempts: 3,
			wantBounds: []runtime.Bound{runtime.BoundAttempts, runtime.BoundDeadline},
			wantErrs:   []error{runtime.ErrTransport, runtime.ErrNodeUnavailable},
			wantFirst:  runtime.ErrTransport,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fc := dialThroughProxies(t, c, proxies)
			addr, key := fc.victim(t, tc.name)
			p := proxies[addr]
			require.NotNil(t, p, "no proxy for the victim %s", addr)
			t.Cleanup(func() { p.set(faultNone, 0) })

			// A healthy write first, so the pool holds a connection to the victim when the
			// fault starts, and a read has something to find.
			value := []byte("v-" + tc.name)
			put, err := fc.kv.Put(context.Background(), &zaris.PutRequest{Key: key, Value: value})
			require.NoError(t, err)
			require.Equal(t, zaris.KvStatus_Ok, put.Status)

			p.set(tc.fault, tc.delay)
			p.resetCounts()
			start := time.Now()
			resp, err := fc.kv.Get(context.Background(), &zaris.GetRequest{Key: key},
				runtime.WithMaxAttempts(tc.maxAttempts))
			elapsed := time.Since(start)
			require.LessOrEqual(t, elapsed, faultRequestTimeout+faultSlack,
				"the call returned %s after its start, past its deadline (%s) plus slack", elapsed, faultRequestTimeout)

			if tc.wantAnswer {
				require.NoError(t, err)
				require.Equal(t, zaris.KvStatus_Ok, resp.Status)
				require.Equal(t, value, resp.Value)
			} else {
				require.Error(t, err)
				var ce *runtime.CallError
				require.ErrorAs(t, err, &ce, "want a *runtime.CallError, got %T: %v", err, err)
				require.Contains(t, tc.wantBounds, ce.Bound, "bound: %v", err)
				require.True(t, isAny(err, tc.wantErrs), "want one of %v in the chain of: %v", tc.wantErrs, err)
				require.NotEmpty(t, ce.Attempts)
				require.LessOrEqual(t, len(ce.Attempts), tc.maxAttempts)
				require.ErrorIs(t, ce.Attempts[0].Err, tc.wantFirst, "first attempt: %v", err)
				for _, a := range ce.Attempts {
					require.Equal(t, addr, a.Addr, "an attempt went elsewhere: %v", err)
					require.True(t, isAny(a.Err, tc.wantErrs), "attempt %d: want one of %v: %v", a.N, tc.wantErrs, a.Err)
				}
				t.Logf("%s: %v", tc.name, err)
			}
			// The client never sends more than maxAttempts requests for the call, nor (the
			// victim is not asked for maps) opens more connections to the node.
			require.LessOrEqual(t, p.requestCount("Get"), tc.maxAttempts, "requests at the proxy")
			require.LessOrEqual(t, int(p.accepted.Load()), tc.maxAttempts, "connections at the proxy")

			// Lift the fault: the same client answers again at once.
			p.set(faultNone, 0)
			for i := range 5 {
				resp, err := fc.kv.Get(context.Background(), &zaris.GetRequest{Key: key})
				require.NoError(t, err, "call %d after the fault was lifted", i)
				require.Equal(t, zaris.KvStatus_Ok, resp.Status)
				require.Equal(t, value, resp.Value)
			}

			// No connection is stuck: closing the client closes every one at the proxy.
			fc.engine.Close()
			require.Eventually(t, func() bool { return p.open() == 0 }, 5*time.Second, 10*time.Millisecond,
				"connections still open at the proxy after Close")
		})
	}
}

// isAny reports whether err's chain holds one of targets.
func isAny(err error, targets []error) bool {
	for _, target := range targets {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// TestNetworkFaults_UnguardedWriteIsNotReplayed faults the owner of a counter key, at a
// store that keeps no outcomes and so advertises no dedup window (rule B8 does not apply),
// while an Increment (neither idempotent nor guarded) is in flight: the request is written
// and no reply comes back, because the node never answers (blackhole) or the connection is
// reset.
// The call returns an error that wraps runtime.ErrInDoubt within its bounds after one
// attempt, and the proxy saw the request at most once: the client never replays a write whose outcome it does not
// know (B2), whatever maxAttempts allows. Once the fault is lifted, the counter is
// readable and holds at most the one in-doubt increment.
func TestNetworkFaults_UnguardedWriteIsNotReplayed(t *testing.T) {
	c := store.StartCluster(t, store.ClusterConfig{Nodes: 3, Node: store.NodeConfig{DisableDedup: true}})
	proxies := map[string]*faultProxy{}
	for _, addr := range c.Seeds() {
		proxies[addr] = startFaultProxy(t, addr)
	}
	for _, f := range []fault{faultBlackhole, faultReset} {
		t.Run(f.String(), func(t *testing.T) {
			fc := dialThroughProxies(t, c, proxies)
			addr, key := fc.victim(t, "counter-"+f.String())
			p := proxies[addr]
			require.NotNil(t, p, "no proxy for the victim %s", addr)
			t.Cleanup(func() { p.set(faultNone, 0) })

			inc, err := fc.kv.Increment(context.Background(), &zaris.IncrementRequest{Key: key, Delta: 1})
			require.NoError(t, err)
			require.Equal(t, zaris.KvStatus_Ok, inc.Status)
			require.EqualValues(t, 1, inc.Value)

			p.set(f, 0)
			p.resetCounts()
			start := time.Now()
			_, err = fc.kv.Increment(context.Background(), &zaris.IncrementRequest{Key: key, Delta: 1})
			elapsed := time.Since(start)
			require.LessOrEqual(t, elapsed, faultRequestTimeout+faultSlack, "the call returned after %s", elapsed)
			require.ErrorIs(t, err, runtime.ErrInDoubt)
			var ce *runtime.CallError
			require.ErrorAs(t, err, &ce, "want a *runtime.CallError, got %T: %v", err, err)
			require.Len(t, ce.Attempts, 1, "an in-doubt write was replayed: %v", err)
			// At most once: a reset may come before the request is read, and the client,
			// having written it, still cannot know that.
			require.LessOrEqual(t, p.requestCount("Increment"), 1, "Increment requests at the proxy")
			t.Logf("%s: %v", f, err)

			p.set(faultNone, 0)
			got, err := fc.kv.Get(context.Background(), &zaris.GetRequest{Key: key})
			require.NoError(t, err)
			require.Equal(t, zaris.KvStatus_Ok, got.Status)
			require.Contains(t, []string{"1", "2"}, string(got.Value), "the counter after one in-doubt increment")

			fc.engine.Close()
			require.Eventually(t, func() bool { return p.open() == 0 }, 5*time.Second, 10*time.Millisecond,
				"connections still open at the proxy after Close")
		})
	}
}
