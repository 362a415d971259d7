package runtime

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/runtime/clustermap"
)

// stallNode is a node of a two-node cluster whose map both serve from one pointer; its
// Gets wait on stall (when set) until the test ends, as a stopped process's would.
type stallNode struct {
	zaris.ZarisKv // nil: the operations not served here
	cmap          *atomic.Pointer[zaris.ClusterMap]
	stall         atomic.Bool
	arrived       chan struct{} // receives for every stalled Get
	release       chan struct{}
}

func (n *stallNode) Get(context.Context, *zaris.GetRequest) (*zaris.GetResponse, error) {
	if n.stall.Load() {
		n.arrived <- struct{}{}
		<-n.release
	}
	return &zaris.GetResponse{Status: zaris.KvStatus_NotFound, MapEpoch: n.cmap.Load().Epoch}, nil
}

func (n *stallNode) Put(context.Context, *zaris.PutRequest) (*zaris.PutResponse, error) {
	return &zaris.PutResponse{Status: zaris.KvStatus_Ok, MapEpoch: n.cmap.Load().Epoch}, nil
}

func (n *stallNode) GetClusterMap(context.Context) (*zaris.ClusterMap, error) {
	return n.cmap.Load(), nil
}

// ownedBy is a map of the nodes at addrs (ids 1, 2, ...) in which node owner owns all 4
// segments.
func ownedBy(epoch int64, owner int32, addrs ...string) *zaris.ClusterMap {
	m := &zaris.ClusterMap{Epoch: epoch, SegmentCount: 4}
	for i, a := range addrs {
		host, port, _ := net.SplitHostPort(a)
		p, _ := strconv.Atoi(port)
		m.Nodes = append(m.Nodes, &zaris.NodeInfo{ID: int32(i + 1), Host: host, Port: int32(p)})
	}
	for s := int32(0); s < 4; s++ {
		m.Segments = append(m.Segments, &zaris.SegmentInfo{ID: s, Owner: &owner, Replicas: []int32{1, 2}})
	}
	return m
}

// stallCluster starts two nodes, node 1 owning every segment, and dials them with a
// one-minute attempt timeout, pipelined or pooled.
// invokeOnStalled starts call on cl and returns once its request reached the stalled node
// n1; the call's error arrives on the channel returned.
func invokeOnStalled(t *testing.T, cl *Engine, n1 *stallNode, call *Call) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := cl.Invoke(context.Background(), call)
		done <- err
	}()
	select {
	case <-n1.arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the call never reached node 1")
	}
	return done
}

func stallCluster(t *testing.T, pipelined bool) (cl *Engine, n1, n2 *stallNode, addrs []string) {
	return stallClusterWith(t, pipelined)
}

// stallClusterWith is stallCluster with more options.
func stallClusterWith(t *testing.T, pipelined bool, opts ...Option) (cl *Engine, n1, n2 *stallNode, addrs []string) {
	cmap := &atomic.Pointer[zaris.ClusterMap]{}
	n1 = &stallNode{cmap: cmap, arrived: make(chan struct{}, 16), release: make(chan struct{})}
	n2 = &stallNode{cmap: cmap, arrived: make(chan struct{}, 16), release: make(chan struct{})}
	k1, k2 := StartKillableNode(t, n1), StartKillableNode(t, n2)
	t.Cleanup(func() { close(n1.release); close(n2.release) })
	addrs = []string{k1.Addr, k2.Addr}
	cmap.Store(ownedBy(1, 1, addrs...))
	if pipelined {
		cl = dialPipelined(t, k1.Addr, 1, append([]Option{WithAttemptTimeout(time.Minute), WithRefreshDebounce(time.Nanosecond)}, opts...)...)
	} else {
		var err error
		cl, err = Dial(context.Background(), append([]Option{WithService(testService), WithEnv(env(nil)), WithSeeds(k1.Addr), WithPipelining(false),
			WithAttemptTimeout(time.Minute), WithRefreshDebounce(time.Nanosecond)}, opts...)...)
		require.NoError(t, err)
		t.Cleanup(func() { cl.Close() })
	}
	return cl, n1, n2, addrs
}

// TestB6_AttemptToAStalledOwnerEndsWhenTheMapMovesIt: a Get in flight to a node that
// answers nothing ends as soon as the client installs a map naming another owner for its
// segment, long before its one-minute attempt timeout, as sent and ErrOwnerMoved; in both
// connection modes, for a call routed by its key and for a multi-key sub-request sent to
// a fixed owner (Call.Target). The next attempt goes to the new owner.
func TestB6_AttemptToAStalledOwnerEndsWhenTheMapMovesIt(t *testing.T) {
	for _, pipelined := range []bool{false, true} {
		for _, target := range []bool{false, true} {
			t.Run("pipelined="+strconv.FormatBool(pipelined)+"/target="+strconv.FormatBool(target), func(t *testing.T) {
				cl, n1, _, addrs := stallCluster(t, pipelined)
				if pipelined {
					// Another call in flight holds the node's pipelined connection open.
					warm(t, cl)
				}
				n1.stall.Store(true)
				call := getCall("k")
				if target {
					r, err := cl.Route(call.Key)
					require.NoError(t, err)
					call.Target = &r
				}
				done := invokeOnStalled(t, cl, n1, call)
				n1.cmap.Store(ownedBy(2, 2, addrs...))
				res := cl.Refresher().Refresh(context.Background(), clustermap.Evidence{Epoch: 2})
				require.NoError(t, res.Err)
				select {
				case err := <-done:
					require.ErrorIs(t, err, ErrOwnerMoved)
					assert.NotErrorIs(t, err, ErrAttemptTimeout)
					assert.True(t, call.Attempts[0].Sent, "the request was written")
					assert.Equal(t, int32(1), call.Attempts[0].Node)
				case <-time.After(10 * time.Second):
					t.Fatal("the attempt still waits on the stalled node")
				}

				next := getCall("k")
				resp, err := cl.Invoke(context.Background(), next)
				require.NoError(t, err)
				assert.Equal(t, zaris.KvStatus_NotFound, kvStatus(resp))
				assert.Equal(t, int32(2), next.Attempts[0].Node, "the retry goes to the new owner")
			})
		}
	}
}

// customConn is a connection of a custom Dialer: the built-in one's, wrapped.
type customConn struct{ Conn }

// TestB6_CustomDialerConnectionIsClosedWhenTheMapMovesItsCall: over a connection of a
// custom Dialer, a call in flight to a node the new map no longer names as its segment's
// owner ends too (Conn.Close is safe with a call in flight).
func TestB6_CustomDialerConnectionIsClosedWhenTheMapMovesItsCall(t *testing.T) {
	cfg, err := NewConfig(WithService(testService), WithEnv(env(nil)), WithSeeds("127.0.0.1:1"))
	require.NoError(t, err)
	base := DefaultDialer(cfg)
	dial := func(ctx context.Context, addr string) (Conn, error) {
		c, err := base(ctx, addr)
		if err != nil {
			return nil, err
		}
		return customConn{c}, nil
	}
	cl, n1, _, addrs := stallClusterWith(t, false, WithDialer(dial))
	n1.stall.Store(true)
	call := getCall("k")
	done := invokeOnStalled(t, cl, n1, call)
	require.NoError(t, cl.refresher.install(fromIDL(ownedBy(2, 2, addrs...))))
	select {
	case err := <-done:
		require.ErrorIs(t, err, ErrOwnerMoved)
		assert.True(t, call.Attempts[0].Sent)
	case <-time.After(10 * time.Second):
		t.Fatal("the attempt still waits on the stalled node")
	}
}

// TestB6_QueuedRequestEndsUnsent: a pipelined request still queued behind a write that
// does not go through when the map moves its segment away ends not sent, so any operation
// may be retried.
func TestB6_QueuedRequestEndsUnsent(t *testing.T) {
	cl, _, _, addrs := stallCluster(t, true)
	warm(t, cl)
	conn := pipeConnsOf(cl, addrs[0])[0]
	conn.writeMu.Lock() // the writer is busy: the next request stays queued
	unlock := sync.OnceFunc(conn.writeMu.Unlock)
	defer unlock()
	call := putCall("queued", "x")
	done := make(chan error, 1)
	go func() {
		_, err := cl.Invoke(context.Background(), call)
		done <- err
	}()
	require.Eventually(t, func() bool { return conn.pending.Load() == 1 }, 10*time.Second, time.Millisecond)
	require.NoError(t, cl.refresher.install(fromIDL(ownedBy(2, 2, addrs...))))
	var got error
	select {
	case got = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the queued call still waits")
	}
	unlock()
	// The held write is a write blocked on the node: the install fails that connection
	// (the node owns nothing now), or the caller saw the signal first.
	require.True(t, errors.Is(got, ErrOwnerMoved) || errors.Is(got, ErrTransport), "%v", got)
	assert.False(t, call.Attempts[0].Sent, "a queued request was never sent")
}

// TestB6_SameOwnerKeepsWaiting: a newer map that leaves the segment with its node does
// not end the attempt.
func TestB6_SameOwnerKeepsWaiting(t *testing.T) {
	for _, pipelined := range []bool{false, true} {
		t.Run("pipelined="+strconv.FormatBool(pipelined), func(t *testing.T) {
			cl, n1, _, addrs := stallCluster(t, pipelined)
			if pipelined {
				warm(t, cl)
			}
			n1.stall.Store(true)
			call := getCall("k")
			done := invokeOnStalled(t, cl, n1, call)
			require.NoError(t, cl.refresher.install(fromIDL(ownedBy(2, 1, addrs...))))
			require.Equal(t, int64(2), cl.router.Epoch())
			n1.stall.Store(false)
			select {
			case err := <-done:
				t.Fatalf("the attempt ended although its node still owns the segment: %v", err)
			case n1.release <- struct{}{}:
			}
			select {
			case err := <-done:
				require.NoError(t, err, "the node answered; the map change did not end the attempt")
			case <-time.After(10 * time.Second):
				t.Fatal("no answer")
			}
			assert.True(t, call.Attempts[0].Answered)
		})
	}
}

// warm makes one Get through cl, which opens its pipelined connection to node 1.
func warm(t *testing.T, cl *Engine) {
	t.Helper()
	_, err := cl.Invoke(context.Background(), getCall("warm"))
	require.NoError(t, err)
}

// keyIn returns a key of segment seg among count.
func keyIn(t *testing.T, seg, count int32) string {
	t.Helper()
	for i := range 10000 {
		if k := "k" + strconv.Itoa(i); clustermap.SegmentOf([]byte(k), count) == seg {
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

// B6 for a stalled pipelined writer: a map that gives a node no segment fails its busy
// connections whose writer is held (a caller blocked writing does not see the install's
// telling), and leaves the idle ones and those whose writer is free alone.
func TestB6_UnownedNodesBlockedPipeIsFailed(t *testing.T) {
	cl, _, _, addrs := stallCluster(t, true)
	warm(t, cl)
	conn := pipeConnsOf(cl, addrs[0])[0]
	unowned, err := newRoutingTable(fromIDL(ownedBy(2, 2, addrs...)))
	require.NoError(t, err)

	cl.endUnownedPipes(unowned)
	assert.False(t, conn.failed.Load(), "no call on it")
	conn.pending.Add(1) // a call on it
	defer conn.pending.Add(-1)
	cl.endUnownedPipes(unowned)
	assert.False(t, conn.failed.Load(), "its writer is free: the caller waits to be told")
	conn.writeMu.Lock()
	cl.endUnownedPipes(unowned)
	conn.writeMu.Unlock()
	assert.True(t, conn.failed.Load(), "its writer is held")
}

// B6 for a stalled pipelined writer to a node that leaves the map: the install fails its
// busy connection whose writer is held, although it retires the node's group.
func TestB6_BlockedPipeOfANodeThatLeftIsFailed(t *testing.T) {
	cl, _, _, addrs := stallCluster(t, true)
	warm(t, cl)
	conn := pipeConnsOf(cl, addrs[0])[0]
	conn.pending.Add(1) // a call on it
	defer conn.pending.Add(-1)
	conn.writeMu.Lock() // held by a write the node does not take in
	gone := ownedBy(2, 2, addrs...)
	gone.Nodes = gone.Nodes[1:] // node 1 leaves the map
	require.NoError(t, cl.refresher.install(fromIDL(gone)))
	conn.writeMu.Unlock()
	assert.True(t, conn.failed.Load(), "its writer is held")
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
	unowned, err := newRoutingTable(fromIDL(ownedBy(2, 2, addrs...)))
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

// TestB6_InFlightRecord: a pooled connection's record is idle until a call starts on it; an
// install ends the call only when it moves the call away from the node (its segment to
// another owner or out of the map, or, for a sub-request, every segment), and the call's
// finish then reports the end and leaves the record idle.
func TestB6_InFlightRecord(t *testing.T) {
	cur := &routingTable{count: 2, addr: []string{"a:1", "b:1"}}
	var f inFlight
	assert.False(t, f.endIfMoved(cur, "c:1"), "idle: no call to end")
	assert.False(t, f.finish())

	f.start(watching(watchSegment, 0))
	assert.False(t, f.endIfMoved(cur, "a:1"), "the segment's owner is still a:1")
	assert.True(t, f.endIfMoved(cur, "b:1"), "segment 0 is a:1's now")
	assert.False(t, f.endIfMoved(cur, "b:1"), "ended once")
	assert.True(t, f.finish(), "the call learns the install ended it")
	assert.False(t, f.finish(), "idle again")

	f.start(watching(watchSegment, 2))
	assert.True(t, f.endIfMoved(cur, "a:1"), "the map has no segment 2")
	f.finish()

	f.start(watchFor(&Call{Target: &clustermap.Route{}}, clustermap.Route{Segment: 1}))
	assert.False(t, f.endIfMoved(cur, "b:1"), "a sub-request's node still owns a segment")
	assert.True(t, f.endIfMoved(cur, "c:1"), "the map gives c:1 no segment")
	assert.True(t, f.finish())

	assert.Equal(t, watching(watchSegment, 1), watchFor(&Call{}, clustermap.Route{Segment: 1}))
	assert.Equal(t, int32(7), watching(watchSegment, 7).segment())
	assert.Equal(t, watchSegment, watching(watchSegment, 7).kind())
}

// TestB6_PipelinedInstallEndsMovedCallsWherever: an install ends each pipelined call whose
// segment it moves away from the connection's node, wherever the connection holds it:
// queued (not sent), taken by a flush but not yet written (not sent) or written by it (in
// doubt), in flight or being read (in doubt). A call whose segment stays, or that already
// has its outcome, is left alone.
func TestB6_PipelinedInstallEndsMovedCallsWherever(t *testing.T) {
	cur := &routingTable{count: 2, addr: []string{"b:1", "a:1"}} // segment 0 moved to b:1
	call := func(state int32, seg int32) *pcall {
		p := &pcall{done: make(chan struct{}, 1), owner: ownerWatch{s: watching(watchSegment, seg)}}
		p.state.Store(state)
		return p
	}
	queued, takenQueued, takenWritten := call(stQueued, 0), call(stQueued, 0), call(stWritten, 0)
	written, reading, answered := call(stWritten, 0), call(stReading, 0), call(stDone, 0)
	stays := []*pcall{call(stQueued, 1), call(stWritten, 1)}
	c := &pipeConn{
		queue:    []*pcall{queued, stays[0]},
		taken:    []*pcall{takenQueued, takenWritten},
		inflight: []*pcall{answered, written, stays[1]},
		head:     1, // answered is behind the head: its reply was read
	}
	c.reading.Store(reading)
	c.readingWatch = reading.owner.s // the reader copies it when it claims the call

	c.endMoved(cur, "a:1")

	for name, tc := range map[string]struct {
		p     *pcall
		state int32
		sent  bool
	}{
		"queued":             {queued, stExpired, false},
		"taken, not written": {takenQueued, stExpired, false},
		"taken, written":     {takenWritten, stSwept, true},
		"in flight":          {written, stSwept, true},
		"its reply read":     {reading, stSwept, true},
	} {
		assert.Equal(t, tc.state, tc.p.state.Load(), name)
		assert.Equal(t, errOwnerMoved, tc.p.err, name)
		assert.Equal(t, tc.sent, tc.p.sent, name)
		assert.Len(t, tc.p.done, 1, "%s: its caller is told", name)
	}
	assert.Nil(t, c.reading.Load(), "the reader drops the reply it reads")
	assert.Equal(t, stDone, answered.state.Load())
	assert.Empty(t, answered.done)
	for _, p := range stays {
		assert.Empty(t, p.done, "its segment's owner is still a:1")
	}
	assert.Equal(t, []int32{stQueued, stWritten}, []int32{stays[0].state.Load(), stays[1].state.Load()})
}

// TestB6_PipelinedCallQueuedAfterTheInstallEnds: a map installed after a pipelined call
// checked its route but before the connection held it ends the call all the same, when it
// checks the map once more, queued: with ErrOwnerMoved, and nothing was read by the node
// as an answer.
func TestB6_PipelinedCallQueuedAfterTheInstallEnds(t *testing.T) {
	ps, conn := silentConn(t)
	e := &Engine{}
	e.router.Install(&routingTable{epoch: 1, count: 1, addr: []string{"a:1"}})
	w, ok := e.startOwnerWatch(&Call{}, clustermap.Route{Segment: 0, Addr: "a:1", Epoch: 1})
	require.True(t, ok)
	e.router.Install(&routingTable{epoch: 2, count: 1, addr: []string{"b:1"}}) // its install found no call

	conn.writeMu.Lock() // the writer is busy: the request stays queued
	defer conn.writeMu.Unlock()
	p := ps.getCall()
	p.conn, p.deadline, p.owner = conn, time.Now().Add(time.Hour), w
	done := invokeGet(p, "k")
	select {
	case err := <-done:
		require.ErrorIs(t, err, errOwnerMoved)
	case <-time.After(10 * time.Second): // a hang detector, not a timing assertion
		t.Fatal("the call waits on a node the map no longer names")
	}
	assert.True(t, p.ownerMoved)
	assert.False(t, p.wasSent, "still queued: never sent")
}

// TestB6_PipelinedCallOnARetiredConnectionEnds: a node that leaves the map keeps its
// connection open while a call on it is counted in; a call that got onto that connection
// before the node left and was sent once it came back (so its own check found it the
// owner) is ended by the next install that moves its segment away, although the node's
// group was retired.
func TestB6_PipelinedCallOnARetiredConnectionEnds(t *testing.T) {
	cl, n1, _, addrs := stallCluster(t, true)
	warm(t, cl)
	conn := pipeConnsOf(cl, addrs[0])[0]
	n1.stall.Store(true)
	holder := invokeOnStalled(t, cl, n1, getCall("k")) // owes a reply: counted in
	waitWriterIdle(t, conn)

	gone := ownedBy(2, 2, addrs...)
	gone.Nodes = gone.Nodes[1:] // node 1 leaves the map
	require.NoError(t, cl.refresher.install(fromIDL(gone)))
	require.ErrorIs(t, <-holder, ErrOwnerMoved)
	require.Empty(t, pipeConnsOf(cl, addrs[0]), "node 1's group is retired")
	require.False(t, conn.failed.Load(), "its connection stays open while a request is counted in")
	require.NoError(t, cl.refresher.install(fromIDL(ownedBy(3, 1, addrs...)))) // node 1 is back as the owner

	seg := clustermap.SegmentOf([]byte("late"), 4)
	p := cl.pipes.getCall()
	p.conn, p.deadline = conn, time.Now().Add(time.Minute)
	p.owner = ownerWatch{c: cl, s: watching(watchSegment, seg), r: clustermap.Route{Segment: seg, Node: 1, Addr: addrs[0], Epoch: 3}}
	done := invokeGet(p, "late")
	require.Eventually(t, func() bool { return conn.inFlight() == 2 }, 10*time.Second, time.Millisecond)
	require.NoError(t, cl.refresher.install(fromIDL(ownedBy(4, 2, addrs...))))
	select {
	case err := <-done:
		require.ErrorIs(t, err, errOwnerMoved)
		assert.True(t, p.wasSent, "written to node 1: in doubt")
	case <-time.After(10 * time.Second): // a hang detector, not a timing assertion
		t.Fatal("the map moved the call's segment to node 2, yet it still waits on node 1")
	}
}

// TestB6_WalkDecidesTheReadCallByItsWatchAsClaimed: the call whose reply the reader reads
// may be delivered, and reused by another attempt with another watch, while the install
// walks the connection; the walk decides by the watch the reader copied when it claimed
// the call, and never reads the call's own.
func TestB6_WalkDecidesTheReadCallByItsWatchAsClaimed(t *testing.T) {
	cur := &routingTable{count: 2, addr: []string{"b:1", "a:1"}} // segment 0 moved to b:1
	p := &pcall{done: make(chan struct{}, 1), owner: ownerWatch{s: watching(watchSegment, 0)}}
	p.state.Store(stReading)
	c := &pipeConn{}
	c.reading.Store(p)
	c.readingWatch = watching(watchSegment, 1) // claimed for segment 1, which stays

	c.endMoved(cur, "a:1")
	assert.Equal(t, stReading, p.state.Load())
	assert.Same(t, p, c.reading.Load())
	assert.Empty(t, p.done)

	c.readingWatch = watching(watchSegment, 0)
	c.endMoved(cur, "a:1")
	assert.Equal(t, stSwept, p.state.Load())
	assert.Nil(t, c.reading.Load())
	assert.Len(t, p.done, 1)
}

// TestB6_SilentNodeThatLeftHasItsConnectionFailed: a call in flight to a node that answers
// nothing is ended by an install in which the node leaves the map; its caller leaves, but
// the connection still owes the reply, so it stays open, retired. As for an attempt the
// sweep ends at its deadline, the connection's silence is watched from the call's write:
// once the node has answered nothing for an attempt timeout, the connection fails, and
// with it the last of the node's goroutines and its socket.
func TestB6_SilentNodeThatLeftHasItsConnectionFailed(t *testing.T) {
	cl, n1, _, addrs := stallCluster(t, true)
	warm(t, cl)
	conn := pipeConnsOf(cl, addrs[0])[0]
	n1.stall.Store(true)
	holder := invokeOnStalled(t, cl, n1, getCall("k"))
	waitWriterIdle(t, conn)
	gone := ownedBy(2, 2, addrs...)
	gone.Nodes = gone.Nodes[1:] // node 1 leaves the map
	require.NoError(t, cl.refresher.install(fromIDL(gone)))
	require.ErrorIs(t, <-holder, ErrOwnerMoved)
	require.False(t, conn.failed.Load(), "it owes a reply")

	now := time.Now()
	conn.sweep(now.Add(time.Second))
	assert.False(t, conn.failed.Load(), "silent for less than the attempt timeout (a minute)")
	conn.sweep(now.Add(2 * time.Minute))
	assert.True(t, conn.failed.Load(), "silent for an attempt timeout since the write")
	assert.Zero(t, conn.pending.Load())
}

// waitWriterIdle waits until no write is under way on conn: an install that gives its node
// no segment fails a connection whose writer is held, taking it for one blocked on the
// node (endUnownedPipes), even when the writer is only finishing a flush.
func waitWriterIdle(t *testing.T, conn *pipeConn) {
	t.Helper()
	require.Eventually(t, func() bool {
		if !conn.writeMu.TryLock() {
			return false
		}
		conn.writeMu.Unlock()
		return true
	}, 10*time.Second, time.Millisecond)
}

// TestB6_NoGroupForANodeTheMapLost: once an install drops a node from the map, a call
// routed to it under the older map gets no group, and no connection, for it: the group is
// made only if the map current under the group lock names the node.
func TestB6_NoGroupForANodeTheMapLost(t *testing.T) {
	cl, _, _, addrs := stallCluster(t, true)
	gone := ownedBy(2, 1, addrs...)
	gone.Nodes = gone.Nodes[:1] // node 2 leaves the map
	require.NoError(t, cl.refresher.install(fromIDL(gone)))
	_, err := cl.pipes.group(addrs[1], &cl.router)
	require.ErrorIs(t, err, errPoolClosed)
	assert.NotContains(t, *cl.pipes.groups.Load(), addrs[1])
}
