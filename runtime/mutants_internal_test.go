package runtime

// Tests that kill mutants make mutate found alive in runtime/ and that need the package's
// internals: each names the rule it protects.

import (
	"context"
	"errors"
	"net"
	"reflect"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/internal/thriftbuf"
)

// A map's node may listen on any port from 1 to 65535, the last included.
func TestRoutingTable_PortRangeIncludes65535(t *testing.T) {
	m := testMap(1, 4, 2)
	m.Nodes[1].Port = 65535
	tbl, err := NewRoutingTable(fromIDL(m))
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:65535", tbl.Nodes()[1].Addr)
	m.Nodes[1].Port = 65536
	_, err = NewRoutingTable(fromIDL(m))
	assert.ErrorContains(t, err, "port 65536")
}

// RoutingTable.Nodes lists the nodes by id, whatever their order in the map.
func TestRoutingTable_NodesAreOrderedByID(t *testing.T) {
	m := testMap(1, 8, 4)
	m.Nodes[0], m.Nodes[1], m.Nodes[2], m.Nodes[3] = m.Nodes[2], m.Nodes[3], m.Nodes[1], m.Nodes[0]
	tbl, err := NewRoutingTable(fromIDL(m))
	require.NoError(t, err)
	assert.Equal(t, []NodeAddr{{1, "127.0.0.1:7001"}, {2, "127.0.0.1:7002"}, {3, "127.0.0.1:7003"}, {4, "127.0.0.1:7004"}}, tbl.Nodes())
}

// arm keeps the watch on a context only while calls repeat it: the watch of a context
// that one call used ends with that call, so a connection does not keep a request's
// context registered (context.AfterFunc) until its next call.
func TestArm_WatchOfAContextUsedOnceEndsWithItsCall(t *testing.T) {
	cfg, err := NewConfig(WithService(testService), WithEnv(env(nil)), WithSeeds("127.0.0.1:1"))
	require.NoError(t, err)
	c, err := newThriftConn(&deadlineConn{}, cfg.Protocol, cfg.Transport, thriftConfig(cfg), nil, testService.NewClient)
	require.NoError(t, err)
	watching := func() bool {
		c.watchMu.Lock()
		defer c.watchMu.Unlock()
		return c.watchDone != nil
	}
	deadline := time.Now().Add(time.Minute)
	call := func(ctx context.Context) { require.True(t, c.arm(ctx, deadline, time.Now(), time.Second)()) }
	once, cancelOnce := context.WithCancel(context.Background())
	defer cancelOnce()
	call(once)
	assert.False(t, watching(), "a context used by one call")
	repeated, cancelRepeated := context.WithCancel(context.Background())
	defer cancelRepeated()
	call(repeated)
	call(repeated)
	assert.True(t, watching(), "a context repeated")
	call(once)
	assert.False(t, watching(), "the repeated context's watch ended with the next context's call")
}

// loopbackPair returns both ends of a TCP connection on loopback; both close when the test
// ends.
func loopbackPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = net.DialTimeout("tcp", ln.Addr().String(), 10*time.Second)
	require.NoError(t, err)
	select {
	case server = <-accepted:
	case <-time.After(10 * time.Second):
		t.Fatal("no connection accepted within 10s")
	}
	require.NotNil(t, server)
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// idleConnOK finds an open, quiet socket usable, and one whose peer sent bytes nobody
// asked for, or closed it, not.
func TestIdleConnOK_OpenAndQuietIsUsable(t *testing.T) {
	client, server := loopbackPair(t)
	assert.True(t, idleConnOK(client), "open and quiet")
	_, err := server.Write([]byte("x"))
	require.NoError(t, err)
	eventually(t, func() bool { return !idleConnOK(client) })

	client, server = loopbackPair(t)
	server.Close()
	eventually(t, func() bool { return !idleConnOK(client) })
}

// The pool lends a connection used within the last 100 ms without peeking at its socket;
// one idle for 100 ms or more is peeked at first, and not lent if its node closed it.
func TestUsable_PeeksAfter100msIdle(t *testing.T) {
	client, server := loopbackPair(t)
	cfg, err := NewConfig(WithService(testService), WithEnv(env(nil)), WithSeeds("127.0.0.1:1"))
	require.NoError(t, err)
	c, err := newThriftConn(client, cfg.Protocol, cfg.Transport, thriftConfig(cfg), nil, testService.NewClient)
	require.NoError(t, err)
	server.Close()
	eventually(t, func() bool { return !idleConnOK(client) })
	used := time.Now()
	c.lastUsed = used
	assert.True(t, c.usable(used.Add(100*time.Millisecond-time.Nanosecond)), "used within 100 ms: no peek")
	assert.False(t, c.usable(used.Add(100*time.Millisecond)), "idle for 100 ms: the peek finds it closed")
}

// The built-in dialer bounds the TLS handshake by DialTimeout too, not only the TCP dial:
// a node that accepts and never answers the handshake fails the dial within DialTimeout,
// not when the caller gives up.
func TestSocketDialer_TLSHandshakeWithinDialTimeout(t *testing.T) {
	_, clientTLS := selfSignedTLS(t)
	addr := silentSeed(t, make(chan net.Conn, 1))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watchdog := time.AfterFunc(10*time.Second, cancel) // the caller gives up: the dial was not bound
	defer watchdog.Stop()
	_, err := socketDialer(Config{DialTimeout: 50 * time.Millisecond, TLS: clientTLS})(ctx, addr)
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.NoError(t, ctx.Err(), "the dial ended when the caller gave up, not at DialTimeout")
}

// A Config built by hand with DialTimeout 0 gives a dialer without a bound, as net.Dialer's
// zero Timeout does (NewConfig refuses a zero DialTimeout).
func TestSocketDialer_ZeroDialTimeoutIsNoBound(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	raw, err := socketDialer(Config{})(context.Background(), ln.Addr().String())
	require.NoError(t, err)
	raw.Close()
}

// A framed binary connection, the default, reads each reply frame whole into memory and
// carves the reply's binaries from it (thriftbuf.Frames); the other protocols and
// transports read through the protocol as it is, as does binary over the buffered
// transport, whose messages have no length to read ahead.
func TestNewThriftConn_FramedBinaryReadsFramesWhole(t *testing.T) {
	cfg, err := NewConfig(WithService(testService), WithEnv(env(nil)), WithSeeds("127.0.0.1:1"))
	require.NoError(t, err)
	for _, p := range []Protocol{ProtocolBinary, ProtocolCompact, ProtocolJSON, ProtocolHeader} {
		for _, tr := range []Transport{TransportFramed, TransportBuffered} {
			var client thrift.TClient
			_, err := newThriftConn(&deadlineConn{}, p, tr, thriftConfig(cfg), nil, func(c thrift.TClient) any { client = c; return c })
			require.NoError(t, err)
			// The protocol the client reads replies with (TStandardClient's iprot).
			iprot := reflect.ValueOf(client).Elem().FieldByName("iprot").Elem().Type()
			want := p == ProtocolBinary && tr == TransportFramed
			assert.Equal(t, want, iprot == reflect.TypeFor[*thriftbuf.Frames](), "%s over %s reads with %v", p, tr, iprot)
		}
	}
}

// A node that answers the map request with no map is a node without an answer
// (ErrNoResponse); a node whose map request fails is reported with its own error.
func TestFetchMap_NoMapIsNoResponse(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fetched error
		want    error
	}{{"no map", nil, ErrNoResponse}, {"failed", assert.AnError, assert.AnError}} {
		t.Run(tc.name, func(t *testing.T) {
			svc := *testService
			svc.FetchMap = func(context.Context, any) (*ClusterMap, error) { return nil, tc.fetched }
			dial := func(context.Context, string) (Conn, error) { return &fakeConn{}, nil }
			_, err := Dial(context.Background(), WithService(&svc), WithEnv(env(nil)), WithSeeds("127.0.0.1:1"), WithDialer(dial))
			require.ErrorIs(t, err, ErrNoSeeds)
			assert.ErrorIs(t, err, tc.want)
			if tc.fetched != nil {
				assert.NotErrorIs(t, err, ErrNoResponse)
			}
		})
	}
}

// ZARIS_REQUEST_TIMEOUT takes whole seconds up to the longest time.Duration (9223372036 s)
// and any positive Go duration: "0s" is refused like "0" (no bound is "infinite").
func TestNewConfig_RequestTimeoutEnvBounds(t *testing.T) {
	cfg, err := NewConfig(WithSeeds("a:1"), WithEnv(env(map[string]string{EnvRequestTimeout: "9223372036"})))
	require.NoError(t, err)
	assert.Equal(t, 9223372036*time.Second, cfg.Retry.RequestTimeout)
	for _, v := range []string{"9223372037", "0s"} {
		_, err := NewConfig(WithSeeds("a:1"), WithEnv(env(map[string]string{EnvRequestTimeout: v})))
		ce, ok := errors.AsType[*ConfigError](err)
		require.True(t, ok, "%q: %v", v, err)
		assert.Equal(t, EnvRequestTimeout, ce.Var)
	}
}

// A seed's port may be any of 1..65535, the last included.
func TestNewConfig_SeedPort65535(t *testing.T) {
	cfg, err := NewConfig(WithSeeds("a:65535"), WithEnv(env(nil)))
	require.NoError(t, err)
	assert.Equal(t, []string{"a:65535"}, cfg.Seeds)
}

// One attempt per call (no retries) is a valid Retry.MaxAttempts.
func TestNewConfig_OneMaxAttempt(t *testing.T) {
	cfg, err := NewConfig(WithSeeds("a:1"), WithEnv(env(nil)), WithDefaultMaxAttempts(1))
	require.NoError(t, err)
	assert.Equal(t, 1, cfg.Retry.MaxAttempts)
	assert.False(t, cfg.Retry.Disabled)
}

// keyIn returns a key of segment seg among count.
func keyIn(t *testing.T, seg, count int32) string {
	t.Helper()
	for i := range 10000 {
		if k := "k" + strconv.Itoa(i); Segment([]byte(k), count) == seg {
			return k
		}
	}
	t.Fatalf("no key of segment %d/%d", seg, count)
	return ""
}

// ownedAs is ownedBy with segment s owned by owners[s], over len(owners) segments.
func ownedAs(epoch int64, addrs []string, owners ...int32) *zaris.ClusterMap {
	m := ownedBy(epoch, 1, addrs...)
	m.SegmentCount, m.Segments = int32(len(owners)), nil
	for s := range owners {
		m.Segments = append(m.Segments, &zaris.SegmentInfo{ID: int32(s), Owner: &owners[s], Replicas: []int32{1, 2}})
	}
	return m
}

// waitEnded returns the error of the call done reports, failing after 10 s.
func waitEnded(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the attempt still waits on the stalled node")
		return nil
	}
}

// B6 on a pooled connection is per segment: a map that moves the call's segment alone
// away ends the call, although its node still owns the other segments.
func TestB6_PooledCallEndsWhenItsSegmentAloneMoves(t *testing.T) {
	cl, n1, _, addrs := stallCluster(t, false)
	n1.stall.Store(true)
	call := getCall(keyIn(t, 1, 4)) // the segment two above it (3) stays with node 1
	done := invokeOnStalled(t, cl, n1, call)
	require.NoError(t, cl.refresher.install(fromIDL(ownedAs(2, addrs, 1, 2, 1, 1))))
	require.ErrorIs(t, waitEnded(t, done), ErrOwnerMoved)
}

// B6 for a multi-key sub-request (Call.Target) on a pooled connection is per node: a map
// that moves its segment away while its node keeps other segments lets it wait for its
// answer (the node answers each item from its own map).
func TestB6_PooledSubRequestWaitsWhileItsNodeOwnsASegment(t *testing.T) {
	cl, n1, _, addrs := stallCluster(t, false)
	n1.stall.Store(true)
	call := getCall(keyIn(t, 1, 4))
	r, err := cl.Route(call.Key)
	require.NoError(t, err)
	call.Target = &r
	done := invokeOnStalled(t, cl, n1, call)
	require.NoError(t, cl.refresher.install(fromIDL(ownedAs(2, addrs, 1, 2, 1, 1))))
	n1.stall.Store(false)
	select {
	case err := <-done:
		t.Fatalf("the sub-request ended although its node owns segments: %v", err)
	case n1.release <- struct{}{}:
	}
	require.NoError(t, waitEnded(t, done), "the node answered")
}

// stallClusterUnclosed is stallCluster pooled, for a test that closes the engine itself:
// one whose install may panic with a lock held, which a Close at cleanup would wait for.
func stallClusterUnclosed(t *testing.T) (cl *Engine, n1 *stallNode, addrs []string) {
	cmap := &atomic.Pointer[zaris.ClusterMap]{}
	n1 = &stallNode{cmap: cmap, arrived: make(chan struct{}, 16), release: make(chan struct{})}
	n2 := &stallNode{cmap: cmap, arrived: make(chan struct{}, 16), release: make(chan struct{})}
	k1, k2 := StartKillableNode(t, n1), StartKillableNode(t, n2)
	t.Cleanup(func() { close(n1.release); close(n2.release) })
	addrs = []string{k1.Addr, k2.Addr}
	cmap.Store(ownedBy(1, 1, addrs...))
	cl, err := Dial(context.Background(), WithService(testService), WithEnv(env(nil)), WithSeeds(k1.Addr), WithPipelining(false),
		WithAttemptTimeout(time.Minute), WithRefreshDebounce(time.Nanosecond))
	require.NoError(t, err)
	return cl, n1, addrs
}

// installNoPanic installs m on cl's refresher and fails the test, within 10 s, if the
// install panics or does not return.
func installNoPanic(t *testing.T, cl *Engine, m *zaris.ClusterMap) {
	t.Helper()
	done := make(chan any, 1)
	go func() {
		defer func() { done <- recover() }()
		assert.NoError(t, cl.refresher.install(fromIDL(m)))
	}()
	select {
	case p := <-done:
		if p != nil {
			t.Fatalf("the install panicked: %v", p)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the install did not return")
	}
}

// B6 with a map of fewer segments: a pooled call on a segment the map no longer has ends.
func TestB6_PooledCallOnASegmentTheMapDropsEnds(t *testing.T) {
	cl, n1, addrs := stallClusterUnclosed(t)
	n1.stall.Store(true)
	done := invokeOnStalled(t, cl, n1, getCall(keyIn(t, 1, 4)))
	installNoPanic(t, cl, ownedAs(2, addrs, 1))
	defer cl.Close()
	require.ErrorIs(t, waitEnded(t, done), ErrOwnerMoved)
}

// A map without any node the client has a pool for retires them all and installs.
func TestInstall_MapWithoutAnyPooledNode(t *testing.T) {
	cl, _, addrs := stallClusterUnclosed(t)
	_, err := cl.Invoke(context.Background(), getCall("warm")) // node 1's pool
	require.NoError(t, err)
	m := ownedBy(2, 2, addrs...)
	m.Nodes = m.Nodes[1:]
	installNoPanic(t, cl, m)
	defer cl.Close()
	assert.Equal(t, int64(2), cl.router.Epoch())
}

// B6 for a stalled pipelined writer: a map that gives a node no segment fails its busy
// connections whose writer is held (a caller blocked writing does not see the install's
// signal), and leaves the idle ones and those whose writer is free alone.
func TestB6_UnownedNodesBlockedPipeIsFailed(t *testing.T) {
	cl, _, _, addrs := stallCluster(t, true)
	warm(t, cl)
	conn := pipeConnsOf(cl, addrs[0])[0]
	unowned, err := NewRoutingTable(fromIDL(ownedBy(2, 2, addrs...)))
	require.NoError(t, err)

	cl.endUnownedPipes(unowned)
	assert.False(t, conn.failed.Load(), "no call on it")
	conn.pending.Add(1) // a call on it
	defer conn.pending.Add(-1)
	cl.endUnownedPipes(unowned)
	assert.False(t, conn.failed.Load(), "its writer is free: the caller waits on the signal")
	conn.writeMu.Lock()
	cl.endUnownedPipes(unowned)
	conn.writeMu.Unlock()
	assert.True(t, conn.failed.Load(), "its writer is held")
}

// A pipelined connection's dial that the attempt's deadline cut short is an attempt that
// found no connection in time (errNoConnInTime); a dial that failed on its own, or because
// the caller left, keeps its own error.
func TestPipeDial_CutByTheAttemptDeadlineSaysSo(t *testing.T) {
	cfg, err := NewConfig(WithService(testService), WithEnv(env(nil)), WithSeeds("127.0.0.1:1"))
	require.NoError(t, err)
	ps := newPipelines(cfg)
	refused := errors.New("connection refused")
	dialInto := func(ctx context.Context, deadline time.Time, dialErr error) error {
		ps.dialSocket = func(ctx context.Context, _ string) (net.Conn, error) {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			return nil, dialErr
		}
		g := &pipeGroup{ps: ps, addr: "127.0.0.1:1", slots: make([]pipeSlot, 1)}
		g.slots[0].mu.Lock()
		defer g.slots[0].mu.Unlock()
		_, err := g.dialInto(ctx, &g.slots[0], deadline)
		return err
	}
	later, earlier := time.Now().Add(time.Hour), time.Now().Add(-time.Second)
	assert.Equal(t, refused, dialInto(context.Background(), later, refused), "refused in time")
	assert.Equal(t, errNoConnInTime, dialInto(context.Background(), earlier, refused), "the attempt's deadline passed")
	left, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, dialInto(left, later, refused), context.Canceled, "the caller left")
}

// A pipelined request is encoded through thriftbuf.Frames on a framed binary connection,
// the default, and through the protocol as it is on every other.
func TestPipelinedCall_FramedBinaryEncodesThroughFrames(t *testing.T) {
	for _, p := range []Protocol{ProtocolBinary, ProtocolCompact, ProtocolJSON, ProtocolHeader} {
		for _, tr := range []Transport{TransportFramed, TransportBuffered} {
			cfg, err := NewConfig(WithService(testService), WithEnv(env(nil)), WithSeeds("127.0.0.1:1"), WithProtocol(p), WithTransport(tr))
			require.NoError(t, err)
			_, frames := newPipelines(cfg).getCall().out.(*thriftbuf.Frames)
			assert.Equal(t, p == ProtocolBinary && tr == TransportFramed, frames, "%s over %s", p, tr)
		}
	}
}

// A retired pipelined connection closes once it carries no request, and not before: at
// once when idle (closeIdle), else when its last request is released.
func TestPipeConn_RetiredClosesWhenItsLastRequestEnds(t *testing.T) {
	cfg, err := NewConfig(WithService(testService), WithEnv(env(nil)), WithSeeds("127.0.0.1:1"))
	require.NoError(t, err)
	ps := newPipelines(cfg)
	open := func() *pipeConn {
		client, _ := loopbackPair(t)
		c, err := newPipeConn(client, ps)
		require.NoError(t, err)
		t.Cleanup(func() { c.fail(errConnClosed); c.wg.Wait() })
		return c
	}

	idle := open()
	idle.closeIdle()
	assert.True(t, idle.failed.Load(), "idle: closed at once")

	busy := open()
	busy.pending.Add(2) // two requests on it
	busy.closeIdle()
	assert.False(t, busy.failed.Load(), "two requests on it")
	busy.release()
	assert.False(t, busy.failed.Load(), "one request on it")
	busy.release()
	assert.True(t, busy.failed.Load(), "its last request ended")
	assert.Equal(t, errConnClosed, busy.err)
}

// A refresher's fetch gets RefreshWait, but never less than DialTimeout plus
// AttemptTimeout (a connection to dial, then one attempt), and DefaultRefreshWait when
// the Config (built by hand) gives neither.
func TestNewRefresher_FetchTimeout(t *testing.T) {
	for _, tc := range []struct {
		name                string
		wait, dial, attempt time.Duration
		want                time.Duration
	}{
		{"at least a dial and an attempt", 0, time.Second, 5 * time.Second, 6 * time.Second},
		{"a longer wait", 10 * time.Second, time.Second, 5 * time.Second, 10 * time.Second},
		{"nothing set", 0, 0, 0, DefaultRefreshWait},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRefresher(Config{RefreshWait: tc.wait, DialTimeout: tc.dial, AttemptTimeout: tc.attempt}, &Router{}, nil)
			defer r.Close()
			assert.Equal(t, tc.want, r.fetchTimeout)
		})
	}
}

// A refresh asks for a map at least as new as its evidence only when the evidence is
// newer than the current map (B1); otherwise for any map (minEpoch 0), which the first
// node to answer gives.
func TestRefresh_MinEpochOnlyForNewerEvidence(t *testing.T) {
	var mins []int64
	fetch := func(_ context.Context, minEpoch int64) (*ClusterMap, error) {
		mins = append(mins, minEpoch)
		return fromIDL(testMap(5, 4, 1)), nil
	}
	router := &Router{}
	r := NewRefresher(Config{Clock: newFakeClock(), RefreshWait: time.Hour, DialTimeout: time.Second, AttemptTimeout: time.Second}, router, fetch)
	defer r.Close()
	require.NoError(t, r.Refresh(context.Background(), Evidence{Epoch: 5}).Err)
	require.Equal(t, int64(5), router.Epoch())
	require.NoError(t, r.Refresh(context.Background(), Evidence{Epoch: 5}).Err, "evidence of the current map")
	require.NoError(t, r.Refresh(context.Background(), Evidence{Epoch: 7}).Err, "evidence of a newer map")
	assert.Equal(t, []int64{5, 0, 7}, mins)
}

// A pooled connection's socket may end an attempt up to 1/64 of the attempt timeout late,
// never more than 10 ms late.
func TestLateAttemptTimeout_OneSixtyFourthAtMost10ms(t *testing.T) {
	assert.Equal(t, time.Millisecond, lateAttemptTimeout(64*time.Millisecond))
	assert.Equal(t, 5*time.Millisecond, lateAttemptTimeout(320*time.Millisecond))
	assert.Equal(t, 10*time.Millisecond, lateAttemptTimeout(5*time.Second))
}

// A status table indexes the values 0..63 it holds in a dense slice sized by the largest
// of them, and looks any other value up by search: a large value (Thrift enums are i32)
// does not size the index.
func TestStatusTable_DenseIndexSpansTheSmallValues(t *testing.T) {
	for _, tc := range []struct {
		values []int64
		dense  int
	}{
		{[]int64{0, 64, 1 << 20}, 1},
		{[]int64{3, 0, 63, -1}, 64},
		{[]int64{64, 1000}, 0},
	} {
		var statuses []StatusInfo
		for _, v := range tc.values {
			statuses = append(statuses, StatusInfo{Name: "S" + strconv.FormatInt(v, 10), Value: v, Class: Answer})
		}
		table := NewStatusTable("E", nil, statuses)
		assert.Len(t, table.dense, tc.dense, "%v", tc.values)
		for _, v := range tc.values {
			assert.Equal(t, "S"+strconv.FormatInt(v, 10), table.Name(v))
		}
		assert.Equal(t, "E(5)", table.Name(5))
	}
}

// B6: a node's recent reply time moves an eighth of the way to each new reply time, and
// a request's end pays off the reply its begin made the node owe.
func TestB6_RecentReplyTimeIsAMovingAverage(t *testing.T) {
	clock := newFakeClock()
	h := newHealth(clock, 5*time.Second, func(string) {})
	defer h.close()
	n := h.node("a")
	for _, tc := range []struct{ reply, recent time.Duration }{
		{80 * time.Millisecond, 80 * time.Millisecond}, // the first reply sets it
		{160 * time.Millisecond, 90 * time.Millisecond},
		{10 * time.Millisecond, 80 * time.Millisecond},
	} {
		h.begin(n)
		assert.Equal(t, int64(1), n.owed.Load(), "owed while in flight")
		h.end(n, clock.Now(), tc.reply, true)
		assert.Equal(t, tc.recent, time.Duration(n.recent.Load()), "after a reply of %s", tc.reply)
		assert.Zero(t, n.owed.Load(), "paid off")
	}
}

// B6: only a node that owes replies can be silent, and only once its threshold has passed
// since it started owing; one that owes nothing is asked for the map in its place however
// long ago it last answered.
func TestB6_ANodeOwingNothingIsNotSilent(t *testing.T) {
	clock := newFakeClock()
	h := newHealth(clock, 5*time.Second, func(string) {})
	defer h.close()
	a := h.node("a")
	h.begin(a)
	h.end(a, clock.Now(), time.Millisecond, true)
	clock.Advance(time.Hour)
	assert.Equal(t, []string{"a", "b"}, h.last([]string{"a", "b"}), "a owes nothing")
	h.begin(a)
	clock.Advance(100 * time.Millisecond)
	assert.Equal(t, []string{"a", "b"}, h.last([]string{"a", "b"}), "a owes a reply since 100 ms, within its threshold")
	clock.Advance(time.Hour)
	assert.Equal(t, []string{"b", "a"}, h.last([]string{"a", "b"}), "a owes a reply and is silent")
}

// An attempt that finds its segment's owner moved before sending is retried at once
// (ErrOwnerMoved), unless the caller's context has ended: then it ends with the context's
// error, and no retry follows.
func TestOwnerMovedUnsent_AnEndedContextEndsTheCall(t *testing.T) {
	cl, _, _ := stallClusterUnclosed(t)
	defer cl.Close()
	call := getCall("k")
	r, err := cl.Route(call.Key)
	require.NoError(t, err)
	require.ErrorIs(t, cl.ownerMovedUnsent(context.Background(), call, r), ErrOwnerMoved)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = cl.ownerMovedUnsent(ctx, call, r)
	require.ErrorIs(t, err, context.Canceled)
	assert.NotErrorIs(t, err, ErrOwnerMoved)
}

// A node's pool that a map retired is forgotten at the next install once its connections
// are closed: a map that keeps changing keeps no pool of every node that ever left.
func TestInstall_ForgetsARetiredPoolWithNoConnectionOpen(t *testing.T) {
	cl, _, addrs := stallClusterUnclosed(t)
	defer cl.Close()
	_, err := cl.Invoke(context.Background(), getCall("warm")) // node 1's pool, its connection idle
	require.NoError(t, err)
	retired := func() int {
		cl.poolMu.Lock()
		defer cl.poolMu.Unlock()
		return len(cl.retired)
	}
	without1 := func(epoch int64) *zaris.ClusterMap {
		m := ownedBy(epoch, 2, addrs...)
		m.Nodes = m.Nodes[1:]
		return m
	}
	installNoPanic(t, cl, without1(2))
	require.Equal(t, 1, retired(), "node 1's pool is retired, its idle connection closed")
	installNoPanic(t, cl, without1(3))
	assert.Equal(t, 0, retired(), "the next install forgets it")
}

// A caller that finds every free slot being dialed waits for that dial to end (within its
// deadline) rather than looking again at once; a slot whose dial has not yet begun, or has
// just ended, sends it to look again.
func TestPipeGroup_WaitDialWaitsForTheDialInProgress(t *testing.T) {
	g := &pipeGroup{slots: make([]pipeSlot, 1)}
	far := time.Now().Add(time.Hour)
	require.NoError(t, g.waitDial(context.Background(), far), "no dial runs: look again")

	dialing := make(chan struct{})
	g.slots[0].dialed.Store(&dialing)
	done := make(chan error, 1)
	go func() { done <- g.waitDial(context.Background(), far) }()
	select {
	case err := <-done:
		t.Fatalf("waitDial returned (%v) while the dial still ran", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(dialing)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("waitDial still waits after the dial ended")
	}
}

// B6 for a pipelined call on a connection failed because a newer map gives its node no
// segment (its writer was held, so the install's signal might not reach its callers): the
// call ends with ErrOwnerMoved, as the signal would end it, not as a transport failure that
// a backoff and a refresh follow.
func TestB6_CallOnAnUnownedNodesFailedPipeEndsWithOwnerMoved(t *testing.T) {
	cl, n1, _, addrs := stallCluster(t, true)
	warm(t, cl)
	n1.stall.Store(true)
	call := getCall("k")
	done := invokeOnStalled(t, cl, n1, call)
	unowned, err := NewRoutingTable(fromIDL(ownedBy(2, 2, addrs...)))
	require.NoError(t, err)
	conns := pipeConnsOf(cl, addrs[0])
	for _, pc := range conns {
		pc.writeMu.Lock()
	}
	cl.endUnownedPipes(unowned)
	for _, pc := range conns {
		pc.writeMu.Unlock()
	}
	err = waitEnded(t, done)
	require.ErrorIs(t, err, ErrOwnerMoved)
	assert.NotErrorIs(t, err, ErrTransport)
	assert.True(t, call.Attempts[0].Sent)
}
