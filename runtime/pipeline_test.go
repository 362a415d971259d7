package runtime

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"
	goruntime "runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarismock"
	"github.com/clustron/zaris-go/runtime/clustermap"
)

// dialPipelined dials the test server at addr in pipelined mode with conns connections.
// The bootstrap's map fetch has one attempt timeout, which some tests make a few
// milliseconds: on a loaded machine that may pass before the test's node is scheduled, so
// a dial is tried again, for up to 10 s, before the test fails. What follows the dial is
// what the tests are about.
func dialPipelined(t *testing.T, addr string, conns int, opts ...Option) *Engine {
	t.Helper()
	all := append([]Option{WithService(testService), WithEnv(env(nil)), WithSeeds(addr), WithPipelining(true), WithPipelineConns(conns), PipelineEveryCall()}, opts...)
	cl, err := Dial(context.Background(), all...)
	for until := time.Now().Add(10 * time.Second); err != nil && errors.Is(err, ErrAttemptTimeout) && time.Now().Before(until); {
		cl, err = Dial(context.Background(), all...)
	}
	require.NoError(t, err)
	require.NotNil(t, cl.pipes, "pipelined mode is on")
	t.Cleanup(func() { cl.Close() })
	return cl
}

// HoldPipelinedWrites holds the writes of every pipelined connection open to addr (there
// must be one), so that the requests queued on them stay queued, and returns how many are
// queued and the function that lets the writes go.
// Exported for the runtime_test package.
func HoldPipelinedWrites(c *Engine, addr string) (queued func() int, release func()) {
	conns := pipeConnsOf(c, addr)
	if len(conns) == 0 {
		panic("no pipelined connection open to " + addr)
	}
	for _, pc := range conns {
		pc.writeMu.Lock()
	}
	queued = func() int {
		n := 0
		for _, pc := range conns {
			n += pc.queued()
		}
		return n
	}
	return queued, sync.OnceFunc(func() {
		for _, pc := range conns {
			pc.writeMu.Unlock()
		}
	})
}

// TestPipelined_ACallAloneTakesAPooledConnection: a call with no other in flight to its
// node goes over a pooled connection; concurrent calls share a pipelined one.
func TestPipelined_ACallAloneTakesAPooledConnection(t *testing.T) {
	srv := startServer(t, headerServer, nil)
	cl, err := Dial(context.Background(), WithService(testService), WithEnv(env(nil)), WithSeeds(srv.addr), WithPipelining(true), WithPipelineConns(1))
	require.NoError(t, err)
	defer cl.Close()
	roundTrip(t, cl, "alone")
	assert.Empty(t, pipeConnsOf(cl, srv.addr), "no pipelined connection for calls one at a time")

	// A slow call holds the node busy, so the next calls are not alone.
	slow := make(chan error, 1)
	go func() {
		_, err := cl.Invoke(context.Background(), getCall("slow"))
		slow <- err
	}()
	g := (*cl.pipes.groups.Load())[srv.addr]
	require.Eventually(t, func() bool { return g.active.Load() == 1 }, 5*time.Second, time.Millisecond)
	for i := range 5 {
		_, err := cl.Invoke(context.Background(), getCall(strconv.Itoa(i)))
		require.NoError(t, err)
	}
	conns := pipeConnsOf(cl, srv.addr)
	require.Len(t, conns, 1)
	assert.Equal(t, uint64(5), conns[0].replies.Load(), "calls next to another rode the pipelined connection")
	close(srv.kv.release)
	require.NoError(t, <-slow)
}

// pipeConnsOf returns the open pipelined connections to addr.
func pipeConnsOf(cl *Engine, addr string) []*pipeConn {
	g := (*cl.pipes.groups.Load())[addr]
	if g == nil {
		return nil
	}
	var out []*pipeConn
	for i := range g.slots {
		if c := g.slots[i].conn.Load(); c != nil && !c.failed.Load() {
			out = append(out, c)
		}
	}
	return out
}

func (c *pipeConn) inFlight() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.inflight) - c.head
}

func (c *pipeConn) failure() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// TestPipelined_ProtocolTransportMatrix runs Dial and Invoke in pipelined mode over every
// protocol × transport the client speaks, and over TLS.
func TestPipelined_ProtocolTransportMatrix(t *testing.T) {
	serverTLS, clientTLS := selfSignedTLS(t)
	servers := map[string]*testServer{}
	server := func(name string, kind serverKind, tlsOn bool) *testServer {
		if s := servers[name]; s != nil {
			return s
		}
		if tlsOn {
			servers[name] = startServer(t, kind, serverTLS)
		} else {
			servers[name] = startServer(t, kind, nil)
		}
		return servers[name]
	}
	for _, p := range []Protocol{ProtocolBinary, ProtocolCompact, ProtocolJSON, ProtocolHeader} {
		for _, tr := range []Transport{TransportFramed, TransportBuffered} {
			for _, tlsOn := range []bool{false, true} {
				name := fmt.Sprintf("%s-%s", p, tr)
				kind, srvName := headerServer, "header"
				if p == ProtocolJSON {
					kind, srvName = jsonFramedServer, "json-framed"
					if tr == TransportBuffered {
						kind, srvName = jsonBufferedServer, "json-buffered"
					}
				}
				if tlsOn {
					name, srvName = name+"-tls", srvName+"-tls"
				}
				t.Run(name, func(t *testing.T) {
					srv := server(srvName, kind, tlsOn)
					opts := []Option{WithProtocol(p), WithTransport(tr)}
					if tlsOn {
						opts = append(opts, WithTLS(clientTLS))
					}
					cl := dialPipelined(t, srv.addr, 1, opts...)
					roundTrip(t, cl, name)
					// Many requests in one write, replies matched in order.
					var wg sync.WaitGroup
					for i := range 20 {
						wg.Go(func() {
							k := fmt.Sprintf("%s-%d", name, i)
							_, err := cl.Invoke(context.Background(), putCall(k, k))
							assert.NoError(t, err)
							resp, err := cl.Invoke(context.Background(), getCall(k))
							if assert.NoError(t, err) {
								assert.Equal(t, k, string(resp.(*zaris.GetResponse).Value))
							}
						})
					}
					waitGroupWithin(t, &wg, "the callers")
					assert.Len(t, pipeConnsOf(cl, srv.addr), 1, "one shared connection")
				})
			}
		}
	}
}

// TestPipelined_ThousandCallersOnOneConnection checks that replies are matched to their
// requests in order when 1,000 callers share one connection.
func TestPipelined_ThousandCallersOnOneConnection(t *testing.T) {
	srv := startServer(t, headerServer, nil)
	cl := dialPipelined(t, srv.addr, 1)
	var wg sync.WaitGroup
	var bad atomic.Int64
	for i := range 1000 {
		wg.Go(func() {
			k := "k" + strconv.Itoa(i)
			if _, err := cl.Invoke(context.Background(), putCall(k, "v"+k)); err != nil {
				bad.Add(1)
				return
			}
			resp, err := cl.Invoke(context.Background(), getCall(k))
			if err != nil || string(resp.(*zaris.GetResponse).Value) != "v"+k {
				bad.Add(1)
			}
		})
	}
	waitGroupWithin(t, &wg, "the callers")
	assert.Zero(t, bad.Load(), "calls that failed or got another caller's reply")
	conns := pipeConnsOf(cl, srv.addr)
	require.Len(t, conns, 1)
	assert.Equal(t, uint64(2000), conns[0].replies.Load(), "every call rode the one connection")
}

// TestPipelined_CancelQueuedCallSendsNothing cancels a call while its request is still
// queued: the attempt is not sent and the request never reaches the node.
func TestPipelined_CancelQueuedCallSendsNothing(t *testing.T) {
	srv := startServer(t, headerServer, nil)
	cl := dialPipelined(t, srv.addr, 1)
	roundTrip(t, cl, "warm")
	conn := pipeConnsOf(cl, srv.addr)[0]

	conn.writeMu.Lock() // the writer is busy: the next request stays queued
	ctx, cancel := context.WithCancel(context.Background())
	call := putCall("queued", "x")
	done := make(chan error, 1)
	go func() {
		_, err := cl.Invoke(ctx, call)
		done <- err
	}()
	require.Eventually(t, func() bool { return conn.pending.Load() == 1 }, 5*time.Second, time.Millisecond)
	cancel()
	err := within(t, done, "the cancelled caller")
	conn.writeMu.Unlock()
	require.ErrorIs(t, err, context.Canceled)
	assert.False(t, call.Attempts[0].Sent, "a queued request was never sent")

	resp, err := cl.Invoke(context.Background(), getCall("queued"))
	require.NoError(t, err)
	assert.Equal(t, zaris.KvStatus_NotFound, kvStatus(resp), "the cancelled Put never reached the node")
	assert.Same(t, conn, pipeConnsOf(cl, srv.addr)[0], "the connection is still in use")
	assert.Eventually(t, func() bool { return conn.pending.Load() == 0 }, 5*time.Second, time.Millisecond)
}

// TestPipelined_CancelWrittenCallKeepsTheConnection cancels a call whose request was
// written: the attempt is in doubt (sent), its reply is read and dropped when it comes, and
// the connection carries the next call.
func TestPipelined_CancelWrittenCallKeepsTheConnection(t *testing.T) {
	srv := startServer(t, headerServer, nil)
	cl := dialPipelined(t, srv.addr, 1)
	roundTrip(t, cl, "warm")
	conn := pipeConnsOf(cl, srv.addr)[0]

	ctx, cancel := context.WithCancel(context.Background())
	call := getCall("slow")
	done := make(chan error, 1)
	go func() {
		_, err := cl.Invoke(ctx, call)
		done <- err
	}()
	require.Eventually(t, func() bool { return conn.inFlight() == 1 }, 5*time.Second, time.Millisecond)
	cancel()
	err := within(t, done, "the cancelled caller")
	require.ErrorIs(t, err, context.Canceled)
	assert.NotErrorIs(t, err, ErrTransport)
	assert.True(t, call.Attempts[0].Sent, "a written request may have reached the node")

	close(srv.kv.release) // the slow Get answers now; its reply is dropped
	roundTrip(t, cl, "after-cancel")
	assert.Same(t, conn, pipeConnsOf(cl, srv.addr)[0], "the connection is still in use")
	assert.NoError(t, conn.failure())
}

// TestPipelined_SilentConnectionIsClosed checks that a connection with no reply for a whole
// attempt timeout is closed: the call that timed out reports ErrAttemptTimeout, the other
// call in flight on it fails as a transport error, and the next call dials a new one.
func TestPipelined_SilentConnectionIsClosed(t *testing.T) {
	srv := startServer(t, headerServer, nil)
	cl := dialPipelined(t, srv.addr, 1, WithAttemptTimeout(300*time.Millisecond))
	roundTrip(t, cl, "warm")
	conn := pipeConnsOf(cl, srv.addr)[0]

	first, second := getCall("slow"), getCall("behind")
	errs := make(chan error, 2)
	go func() {
		_, err := cl.Invoke(context.Background(), first)
		errs <- err
	}()
	require.Eventually(t, func() bool { return conn.inFlight() == 1 }, 5*time.Second, time.Millisecond)
	go func() {
		_, err := cl.Invoke(context.Background(), second)
		errs <- err
	}()
	e1, e2 := within(t, errs, "the call that timed out"), within(t, errs, "the other call on the closed connection")
	for _, err := range []error{e1, e2} {
		require.Error(t, err)
		assert.True(t, errors.Is(err, ErrAttemptTimeout) || errors.Is(err, ErrTransport), "%v", err)
	}
	// Whichever timed out first closed the connection, which failed the other.
	assert.True(t, first.Attempts[0].Sent)
	assert.True(t, second.Attempts[0].Sent)
	assert.True(t, errors.Is(e1, ErrAttemptTimeout) || errors.Is(e2, ErrAttemptTimeout), "%v; %v", e1, e2)
	// A caller whose own bound fired first leaves before the sweep closes the connection.
	require.Eventually(t, func() bool { return errors.Is(conn.failure(), errNoReply) }, 10*time.Second, time.Millisecond,
		"the silent connection was not closed: %v", conn.failure())
	close(srv.kv.release)
	roundTrip(t, cl, "after-silence")
	assert.True(t, conn != pipeConnsOf(cl, srv.addr)[0], "the call after the silence opened a new connection")
}

// badServer speaks framed binary and misbehaves on some keys: "wrong-seq" is answered with
// another seqid, "truncated" with half a reply before the connection closes, "oversized"
// with a frame header over the message size limit, and "extra" properly and then with a
// reply to a request never sent. Other keys answer NotFound.
type badServer struct {
	addr     string
	requests atomic.Int64
}

func startBadServer(t *testing.T) *badServer {
	s := &badServer{}
	s.addr = serveLoopback(t, s.serve)
	return s
}

func (s *badServer) serve(c net.Conn) {
	defer c.Close()
	cfg := &thrift.TConfiguration{}
	trans := thrift.NewTFramedTransportConf(thrift.NewTSocketFromConnConf(c, cfg), cfg)
	proto := thrift.NewTBinaryProtocolConf(trans, cfg)
	ctx := context.Background()
	reply := func(seq int32) {
		res := zaris.ZarisKvGetResult{Success: &zaris.GetResponse{Status: zaris.KvStatus_NotFound, MapEpoch: 1}}
		_ = proto.WriteMessageBegin(ctx, "Get", thrift.REPLY, seq)
		_ = res.Write(ctx, proto)
		_ = proto.WriteMessageEnd(ctx)
		_ = proto.Flush(ctx)
	}
	for {
		_, _, seq, err := proto.ReadMessageBegin(ctx)
		if err != nil {
			return
		}
		var args zaris.ZarisKvGetArgs
		if args.Read(ctx, proto) != nil || proto.ReadMessageEnd(ctx) != nil {
			return
		}
		s.requests.Add(1)
		switch string(args.Req.Key) {
		case "wrong-seq":
			reply(seq + 1000)
		case "truncated":
			var b [4]byte
			binary.BigEndian.PutUint32(b[:], 100)
			_, _ = c.Write(append(b[:], 0x80, 0x01, 0x00))
			return
		case "oversized":
			var b [4]byte
			binary.BigEndian.PutUint32(b[:], maxMessageSize+1) // a frame over the limit
			_, _ = c.Write(b[:])
		case "extra":
			reply(seq)
			reply(99999)
		default:
			reply(seq)
		}
	}
}

// getOn sends a Get of key on conn and returns the response, the error and whether the
// request was sent.
func getOn(ps *pipelines, conn *pipeConn, key string) (Response, error, bool) {
	p := ps.getCall()
	defer ps.putCall(p)
	p.conn, p.deadline = conn, time.Now().Add(10*time.Second)
	resp, err := opGet.Invoke(context.Background(), p.kv, &zaris.GetRequest{Key: []byte(key)})
	return resp, err, p.wasSent
}

// TestPipelined_BadReplyFailsThatConnectionOnly checks that a reply with a wrong seqid, a
// reply to a request never sent, a truncated reply and one larger than the message size
// limit each fail their connection with a clear error, while another connection to the
// same node and a connection to another node keep working.
func TestPipelined_BadReplyFailsThatConnectionOnly(t *testing.T) {
	bad := startBadServer(t)
	good := startServer(t, headerServer, nil)
	cfg, err := NewConfig(WithService(testService), WithEnv(env(nil)), WithSeeds(good.addr), WithPipelining(true))
	require.NoError(t, err)
	ps := newPipelines(cfg)
	open := func(addr string) *pipeConn {
		raw, err := ps.dialSocket(context.Background(), addr)
		require.NoError(t, err)
		c, err := newPipeConn(raw, ps)
		require.NoError(t, err)
		t.Cleanup(func() { c.fail(errConnClosed); c.wg.Wait() })
		return c
	}
	other, otherNode := open(bad.addr), open(good.addr)
	for _, tc := range []struct {
		key  string
		want string // in the connection's error
	}{
		{"wrong-seq", "out of order"},
		{"extra", "never sent"},
		{"truncated", "EOF"},
		{"oversized", "frame size"},
	} {
		t.Run(tc.key, func(t *testing.T) {
			conn := open(bad.addr)
			resp, err, sent := getOn(ps, conn, tc.key)
			if tc.key == "extra" {
				require.NoError(t, err, "the reply to the request sent is good")
				assert.Equal(t, zaris.KvStatus_NotFound, kvStatus(resp))
				require.Eventually(t, func() bool { return conn.failed.Load() }, 5*time.Second, time.Millisecond)
			} else {
				require.Error(t, err)
				assert.True(t, sent, "the request was written")
				assert.True(t, isThriftError(err), "a transport or protocol error: %v", err)
			}
			assert.ErrorContains(t, conn.failure(), tc.want)
			_, err, sent = getOn(ps, conn, "after")
			require.Error(t, err, "the failed connection takes no more calls")
			assert.False(t, sent)

			for _, c := range []*pipeConn{other, otherNode} {
				resp, err, _ := getOn(ps, c, "fine")
				require.NoError(t, err)
				assert.Equal(t, zaris.KvStatus_NotFound, kvStatus(resp))
				assert.False(t, c.failed.Load())
			}
		})
	}
}

// KillableNode is a one-node Zaris server on loopback whose connections a test can cut at
// once, as a killed process's would be; it keeps listening, so a replayed request would
// reach it again. Exported for the runtime_test package.
type KillableNode struct {
	Addr string

	ln    net.Listener
	proc  thrift.TProcessor
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// StartKillableNode serves h on a loopback port until the test ends.
func StartKillableNode(t testing.TB, h zaris.ZarisKv) *KillableNode {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	n := &KillableNode{Addr: ln.Addr().String(), ln: ln, proc: zaris.NewZarisKvProcessor(h), conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() { ln.Close(); n.DropConns() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.mu.Lock()
			n.conns[c] = struct{}{}
			n.mu.Unlock()
			go n.serve(c)
		}
	}()
	return n
}

func (n *KillableNode) serve(c net.Conn) {
	defer c.Close()
	cfg := &thrift.TConfiguration{}
	trans, err := thrift.NewTHeaderTransportFactoryConf(nil, cfg).GetTransport(thrift.NewTSocketFromConnConf(c, cfg))
	if err != nil {
		return
	}
	proto := thrift.NewTHeaderProtocolFactoryConf(cfg).GetProtocol(trans)
	for {
		if ok, err := n.proc.Process(context.Background(), proto, proto); !ok || err != nil {
			var te thrift.TTransportException
			if !ok || errors.As(err, &te) {
				return
			}
		}
	}
}

// DropConns closes every open connection at once.
func (n *KillableNode) DropConns() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for c := range n.conns {
		c.Close()
	}
	clear(n.conns)
}

// OneNodeMap is a cluster map of one node at addr that owns every segment.
func OneNodeMap(addr string) *zaris.ClusterMap {
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	owner := int32(1)
	m := &zaris.ClusterMap{Epoch: 1, SegmentCount: 4, Nodes: []*zaris.NodeInfo{{ID: 1, Host: host, Port: int32(p)}}}
	for s := int32(0); s < 4; s++ {
		m.Segments = append(m.Segments, &zaris.SegmentInfo{ID: s, Owner: &owner, Replicas: []int32{1}})
	}
	return m
}

// TestPipelined_CloseLeavesNoGoroutineOrSocket: after concurrent pipelined calls, and a
// node that left the map with a call in flight, Close leaves no socket open and no
// goroutine running client code.
func TestPipelined_CloseLeavesNoGoroutineOrSocket(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1)) // finalizers would hide a leaked socket
	srv := startServer(t, headerServer, nil)
	g0, socks0 := goruntime.NumGoroutine(), openSockets(t)
	cl := dialPipelined(t, srv.addr, 2)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			for j := range 20 {
				_, err := cl.Invoke(context.Background(), putCall(fmt.Sprintf("k%d-%d", i, j), "v"))
				assert.NoError(t, err)
			}
		})
	}
	waitGroupWithin(t, &wg, "the callers")
	require.NotEmpty(t, pipeConnsOf(cl, srv.addr))
	// A call in flight when its node leaves the map keeps its connection open until Close.
	go cl.Invoke(context.Background(), getCall("slow"))
	require.Eventually(t, func() bool {
		for _, c := range pipeConnsOf(cl, srv.addr) {
			if c.inFlight() > 0 {
				return true
			}
		}
		return false
	}, 5*time.Second, time.Millisecond)
	empty, err := newRoutingTable(&clustermap.Map{Epoch: 2, SegmentCount: 4, Segments: []*clustermap.Segment{{ID: 0}, {ID: 1}, {ID: 2}, {ID: 3}}})
	require.NoError(t, err)
	cl.pipes.retire(empty)
	require.NotEmpty(t, cl.pipes.retired)
	require.NoError(t, cl.Close())
	close(srv.kv.release) // the node's side of the slow call ends too
	eventually(t, func() bool {
		return newSockets(socks0, openSockets(t)) == 0 && clientGoroutines() == 0 && goruntime.NumGoroutine() <= g0
	})
}

// TestPipelineConfig: the mode is on by default, ZARIS_PIPELINE turns it off or on, an
// option beats it, a value that does not parse and a connection count under 1 are errors.
func TestPipelineConfig(t *testing.T) {
	cfg, err := NewConfig(WithSeeds("a:1"), WithEnv(env(nil)))
	require.NoError(t, err)
	assert.True(t, cfg.Pipelining)
	assert.Equal(t, DefaultPipelineConns, cfg.PipelineConns)

	cfg, err = NewConfig(WithSeeds("a:1"), WithEnv(env(map[string]string{envPipeline: "false"})))
	require.NoError(t, err)
	assert.False(t, cfg.Pipelining)

	cfg, err = NewConfig(WithSeeds("a:1"), WithEnv(env(map[string]string{envPipeline: "true"})))
	require.NoError(t, err)
	assert.True(t, cfg.Pipelining)

	cfg, err = NewConfig(WithSeeds("a:1"), WithEnv(env(map[string]string{envPipeline: "1"})), WithPipelining(false), WithPipelineConns(4))
	require.NoError(t, err)
	assert.False(t, cfg.Pipelining)
	assert.Equal(t, 4, cfg.PipelineConns)

	_, err = NewConfig(WithSeeds("a:1"), WithEnv(env(map[string]string{envPipeline: "maybe"})))
	var ce *ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, envPipeline, ce.Var)

	_, err = NewConfig(WithSeeds("a:1"), WithEnv(env(nil)), WithPipelineConns(0))
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "PipelineConns", ce.Field)
}

// TestPipelined_StalledWriteEndsWithTheAttempt: a node that stops reading (its socket
// buffers full) cannot hold the caller whose goroutine is writing the batch for more than
// an attempt timeout; the connection fails and the request is in doubt.
func TestPipelined_StalledWriteEndsWithTheAttempt(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	accepted := make(chan net.Conn, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			accepted <- c // never read from
		}
	}()
	ps, conn := openPipeConn(t, ln.Addr().String(), WithAttemptTimeout(100*time.Millisecond))
	peer := within(t, accepted, "the accepted connection")
	t.Cleanup(func() { peer.Close() })

	// Far more than the loopback socket buffers hold, within the message size limit.
	big := make([]byte, maxMessageSize/2)
	p := ps.getCall()
	p.conn, p.deadline = conn, time.Now().Add(time.Hour) // only the stalled write can end it
	done := make(chan error, 1)
	go func() {
		var err error
		for range 4 { // until a write stalls
			if _, err = opPut.Invoke(context.Background(), p.kv, &zaris.PutRequest{Key: []byte("k"), Value: big}); err != nil {
				break
			}
		}
		done <- err
	}()
	select {
	case err := <-done:
		require.Error(t, err)
		assert.True(t, isThriftError(err), "a transport error: %v", err)
		assert.True(t, p.wasSent, "part of the request may have been written")
		assert.True(t, conn.failed.Load())
	case <-time.After(20 * time.Second): // a hang detector, not a timing assertion
		t.Fatal("the call is still writing to a node that does not read, long past its deadline")
	}
}

// TestPipelined_FailedDialFallsBackToAnOpenConnection: when every open connection is busy
// and dialing one more fails, the call goes on an open connection instead of failing.
func TestPipelined_FailedDialFallsBackToAnOpenConnection(t *testing.T) {
	srv := startServer(t, headerServer, nil)
	cl := dialPipelined(t, srv.addr, 2)
	roundTrip(t, cl, "warm")
	conn := pipeConnsOf(cl, srv.addr)[0]

	slow := slowCalls(t, cl, conn, spreadAt) // the open connection is as busy as it gets alone
	dialed := 0
	cl.pipes.dialSocket = func(context.Context, string) (net.Conn, error) {
		dialed++
		return nil, errors.New("dial refused")
	}
	put := make(chan error, 1)
	go func() {
		_, err := cl.Invoke(context.Background(), putCall("k", "v"))
		put <- err
	}()
	// The Put queues behind the slow Gets on the open connection, or has already failed.
	require.Eventually(t, func() bool { return conn.pending.Load() == spreadAt+1 || len(put) == 1 }, 5*time.Second, time.Millisecond)
	close(srv.kv.release)
	require.NoError(t, <-put)
	for range spreadAt {
		require.NoError(t, <-slow)
	}
	assert.Equal(t, 1, dialed, "it tried to open a second connection")
	assert.Equal(t, []*pipeConn{conn}, pipeConnsOf(cl, srv.addr))
}

// slowCalls starts n Gets of the slow key (answered when srv.kv.release closes) and waits
// until conn carries them all; their errors arrive on the channel returned.
func slowCalls(t *testing.T, cl *Engine, conn *pipeConn, n int32) <-chan error {
	t.Helper()
	errs := make(chan error, n)
	for range n {
		go func() {
			_, err := cl.Invoke(context.Background(), getCall("slow"))
			errs <- err
		}()
		require.Eventually(t, func() bool { return conn.pending.Load() >= 1 }, 5*time.Second, time.Millisecond)
	}
	require.Eventually(t, func() bool { return conn.pending.Load() == n }, 5*time.Second, time.Millisecond,
		"the slow calls share the connection")
	return errs
}

// TestPipelined_CallsShareAConnectionUntilItCarriesSpreadAt: calls to a node share the one
// connection open while it carries fewer than spreadAt calls (their writes and replies then
// carry more calls each); at spreadAt the next call opens another.
func TestPipelined_CallsShareAConnectionUntilItCarriesSpreadAt(t *testing.T) {
	srv := startServer(t, headerServer, nil)
	cl := dialPipelined(t, srv.addr, 2)
	roundTrip(t, cl, "warm")
	conn := pipeConnsOf(cl, srv.addr)[0]

	slow := slowCalls(t, cl, conn, spreadAt)
	require.Len(t, pipeConnsOf(cl, srv.addr), 1, "fewer than spreadAt calls open no other connection")
	roundTrip(t, cl, "one more")
	conns := pipeConnsOf(cl, srv.addr)
	require.Len(t, conns, 2, "a call finding spreadAt on the open connection opens another")
	close(srv.kv.release)
	for range spreadAt {
		require.NoError(t, <-slow)
	}
}

// TestPipelined_ApplicationExceptionKeepsTheConnection: an exception the node answers with
// is an answer on the wire, not a failure of the connection: the error keeps its type, is
// not ErrTransport, and the pipelined connection carries the next call. (A pooled
// connection is closed after any error.)
func TestPipelined_ApplicationExceptionKeepsTheConnection(t *testing.T) {
	srv := startServer(t, headerServer, nil)
	cl := dialPipelined(t, srv.addr, 1)
	roundTrip(t, cl, "warm")
	conn := pipeConnsOf(cl, srv.addr)[0]

	opIncrement := &Op{Name: "Increment", Kind: Write, RoutingField: "key",
		Invoke: func(ctx context.Context, client any, req any) (Response, error) {
			kv := client.(zaris.ZarisKv)
			return kv.Increment(ctx, req.(*zaris.IncrementRequest))
		}}
	call := NewCall(opIncrement, []byte("n"), &zaris.IncrementRequest{Key: []byte("n"), Delta: 1}, false)
	_, err := cl.Invoke(context.Background(), call)
	var appErr thrift.TApplicationException
	require.ErrorAs(t, err, &appErr)
	assert.NotErrorIs(t, err, ErrTransport)
	assert.True(t, call.Attempts[0].Sent)

	roundTrip(t, cl, "after-exception")
	assert.Equal(t, []*pipeConn{conn}, pipeConnsOf(cl, srv.addr), "the same connection")
	assert.NoError(t, conn.failure())
}

// TestPipelined_NeedsTheBuiltInDialer: with WithDialer every call goes through the given
// dialer's pooled connections, pipelining on or not; with the built-in dialer, pipelining
// off leaves the pool alone too.
func TestPipelined_NeedsTheBuiltInDialer(t *testing.T) {
	ctrl := gomock.NewController(t)
	kv := zarismock.NewMockZarisKv(ctrl)
	kv.EXPECT().GetClusterMap(gomock.Any()).Return(testMap(1, 4, 1), nil)
	kv.EXPECT().Get(gomock.Any(), gomock.Any()).Return(&zaris.GetResponse{Status: zaris.KvStatus_NotFound, MapEpoch: 1}, nil)
	d := &fakeDialer{kv: func(string) zaris.ZarisKv { return kv }}
	cl, err := Dial(context.Background(), WithService(testService), WithEnv(env(nil)), WithSeeds("10.0.0.1:7000"), WithPipelining(true), WithDialer(d.dial))
	require.NoError(t, err)
	defer cl.Close()
	assert.True(t, cl.Config().Pipelining)
	assert.Nil(t, cl.pipes, "no pipelined connections with a custom dialer")
	before := d.dials.Load()
	_, err = cl.Invoke(context.Background(), getCall("k"))
	require.NoError(t, err)
	assert.Greater(t, d.dials.Load(), before, "the call took a connection of the dialer")

	srv := startServer(t, headerServer, nil)
	off, err := Dial(context.Background(), WithService(testService), WithEnv(env(nil)), WithSeeds(srv.addr), WithPipelining(false))
	require.NoError(t, err)
	defer off.Close()
	assert.Nil(t, off.pipes)
	roundTrip(t, off, "pooled")
}

// TestPipelined_ExpiredInTheQueueIsNotWritten: a request whose deadline passed while it
// was queued is dropped by the flush, not written: its attempt is not sent, the node never
// sees it, and the connection stays in use.
func TestPipelined_ExpiredInTheQueueIsNotWritten(t *testing.T) {
	srv := startServer(t, headerServer, nil)
	cl := dialPipelined(t, srv.addr, 1)
	roundTrip(t, cl, "warm")
	conn := pipeConnsOf(cl, srv.addr)[0]

	p := cl.pipes.getCall()
	p.conn, p.deadline = conn, time.Now().Add(-time.Millisecond)
	p.method, p.seq = "Put", conn.seq.Add(1)
	require.NoError(t, p.encode(context.Background(), &zaris.ZarisKvPutArgs{Req: &zaris.PutRequest{Key: []byte("late"), Value: []byte("x")}}))
	p.state.Store(stQueued)
	conn.writeMu.Lock() // the writer is busy: the request stays queued
	require.NoError(t, conn.enqueue(p))
	conn.writeMu.Unlock() // the writer goroutine flushes it now
	eventually(t, func() bool { return conn.pending.Load() == 0 })
	assert.Equal(t, stExpired, p.state.Load(), "dropped, not written")
	assert.NoError(t, conn.failure())

	resp, err := cl.Invoke(context.Background(), getCall("late"))
	require.NoError(t, err)
	assert.Equal(t, zaris.KvStatus_NotFound, kvStatus(resp), "the node never saw the Put")
	assert.Equal(t, []*pipeConn{conn}, pipeConnsOf(cl, srv.addr), "the same connection")
}

// TestInvokeAfterTheCallerLeftSendsNothing: an attempt whose context ended before it
// started, or while it waited for a connection, is not sent, in either connection mode:
// the error is the context's, Attempt.Sent is false, and the node never sees the request.
func TestInvokeAfterTheCallerLeftSendsNothing(t *testing.T) {
	for _, mode := range []string{"pooled", "pipelined"} {
		for _, when := range []string{"before the attempt", "while dialing"} {
			t.Run(mode+" "+when, func(t *testing.T) {
				srv := startServer(t, headerServer, nil)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				var cl *Engine
				if mode == "pipelined" {
					cl = dialPipelined(t, srv.addr, 1)
					if when == "while dialing" {
						dial := cl.pipes.dialSocket
						cl.pipes.dialSocket = func(dctx context.Context, addr string) (net.Conn, error) {
							c, err := dial(dctx, addr)
							cancel() // the caller leaves while its connection is being opened
							return c, err
						}
					}
				} else {
					cfg, err := NewConfig(WithService(testService), WithEnv(env(nil)), WithSeeds(srv.addr))
					require.NoError(t, err)
					dial := DefaultDialer(cfg)
					cl, err = Dial(context.Background(), WithService(testService), WithEnv(env(nil)), WithSeeds(srv.addr), WithPipelining(false),
						WithDialer(func(dctx context.Context, addr string) (Conn, error) {
							c, err := dial(dctx, addr)
							if dctx.Value(leaveKey{}) != nil {
								cancel()
							}
							return c, err
						}))
					require.NoError(t, err)
					t.Cleanup(func() { cl.Close() })
				}
				if when == "before the attempt" {
					roundTrip(t, cl, "warm") // a connection is open and idle
					cancel()
				}
				call := putCall("late", "x")
				_, err := cl.Invoke(context.WithValue(ctx, leaveKey{}, true), call)
				require.ErrorIs(t, err, context.Canceled)
				assert.False(t, call.Attempts[0].Sent)
				resp, err := cl.Invoke(context.Background(), getCall("late"))
				require.NoError(t, err)
				assert.Equal(t, zaris.KvStatus_NotFound, kvStatus(resp), "the node never saw the Put")
			})
		}
	}
}

type leaveKey struct{}

// gatedConn is a connection whose writes after the first wait for gate to close.
type gatedConn struct {
	net.Conn
	writes atomic.Int32
	gate   chan struct{}
}

func (g *gatedConn) Write(b []byte) (int, error) {
	if g.writes.Add(1) > 1 {
		<-g.gate
	}
	return g.Conn.Write(b)
}

// TestPipelined_CallBehindARequestInFlightLeavesTheWriteToTheWriter checks that a call
// finding a request written and unanswered on its connection queues its request for the
// writer goroutine instead of writing it itself: callers woken by the replies on their way
// then share one write, and a caller is never held by a network write of its own.
func TestPipelined_CallBehindARequestInFlightLeavesTheWriteToTheWriter(t *testing.T) {
	srv := startServer(t, headerServer, nil)
	cfg, err := NewConfig(WithService(testService), WithEnv(env(nil)), WithSeeds(srv.addr))
	require.NoError(t, err)
	ps := newPipelines(cfg)
	raw, err := ps.dialSocket(context.Background(), srv.addr)
	require.NoError(t, err)
	gated := &gatedConn{Conn: raw, gate: make(chan struct{})}
	conn, err := newPipeConn(gated, ps)
	require.NoError(t, err)
	t.Cleanup(func() { conn.fail(errConnClosed); conn.wg.Wait() })

	go getOn(ps, conn, "slow") // written at once (the connection is idle); its reply waits
	require.Eventually(t, func() bool { return conn.inFlight() == 1 }, 5*time.Second, time.Millisecond)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan bool, 1)
	go func() {
		p := ps.getCall()
		p.conn, p.deadline = conn, time.Now().Add(time.Hour)
		_, err := opGet.Invoke(ctx, p.kv, &zaris.GetRequest{Key: []byte("behind")})
		done <- errors.Is(err, context.Canceled)
	}()
	require.Eventually(t, func() bool { return gated.writes.Load() == 2 }, 5*time.Second, time.Millisecond)
	cancel() // its write is held at the gate
	select {
	case canceled := <-done:
		assert.True(t, canceled, "the call ends with its context")
	case <-time.After(10 * time.Second): // a hang detector, not a timing assertion
		t.Fatal("the caller is held by its own write: it wrote its request itself")
	}
	close(gated.gate)
	close(srv.kv.release)
}

// putOnConn starts a Put of value over conn on ctx, with a deadline an hour away, and
// returns its pcall and where its error arrives.
func putOnConn(ctx context.Context, ps *pipelines, conn *pipeConn, value []byte) (*pcall, <-chan error) {
	p := ps.getCall()
	p.conn, p.deadline = conn, time.Now().Add(time.Hour)
	done := make(chan error, 1)
	go func() {
		_, err := opPut.Invoke(ctx, p.kv, &zaris.PutRequest{Key: []byte("k"), Value: value})
		done <- err
	}()
	return p, done
}

// TestPipelined_CallerLeavingAsItsConnectionFailsWhileQueued: a caller that leaves at the
// very moment its connection fails, its request still queued (the failure has taken it
// off the queue and not yet told it), reports the attempt not sent: the request was never
// written.
func TestPipelined_CallerLeavingAsItsConnectionFailsWhileQueued(t *testing.T) {
	ps, conn := silentConn(t)
	conn.writeMu.Lock() // the writer is busy: the request stays queued
	defer conn.writeMu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, ended := putOnConn(ctx, ps, conn, []byte("v"))
	eventually(t, func() bool { return conn.queued() == 1 })

	conn.failTelling(errConnClosed, func(claimed *pcall, err error, sent bool) {
		if claimed == p {
			cancel() // the caller leaves now
			// Until it has given up on its request (it may wait for the failure to be told).
			eventually(t, func() bool { return p.state.Load() == stAbandoned })
		}
		claimed.deliver(err, sent)
	})
	select {
	case err := <-ended:
		require.Error(t, err)
	case <-time.After(10 * time.Second): // a hang detector, not a timing assertion
		t.Fatal("the caller did not return")
	}
	assert.False(t, p.wasSent, "the request was still queued: it was never written")
	assert.Zero(t, conn.pending.Load())
}

// TestPipelined_SeqidWrapsAround: a connection's seqids wrap from int32 max to int32 min,
// with requests in flight across the wrap, over every protocol and transport; each reply
// still matches its request and the connection stays open.
func TestPipelined_SeqidWrapsAround(t *testing.T) {
	servers := map[serverKind]*testServer{}
	for _, kind := range []serverKind{headerServer, jsonFramedServer, jsonBufferedServer} {
		servers[kind] = startServer(t, kind, nil)
	}
	for _, p := range []Protocol{ProtocolBinary, ProtocolCompact, ProtocolJSON, ProtocolHeader} {
		for _, tr := range []Transport{TransportFramed, TransportBuffered} {
			t.Run(fmt.Sprintf("%s-%s", p, tr), func(t *testing.T) {
				kind := headerServer
				if p == ProtocolJSON {
					kind = map[Transport]serverKind{TransportFramed: jsonFramedServer, TransportBuffered: jsonBufferedServer}[tr]
				}
				srv := servers[kind]
				ps, conn := openPipeConn(t, srv.addr, WithProtocol(p), WithTransport(tr))
				conn.seq.Store(math.MaxInt32 - 2)
				const n = 6
				var wg sync.WaitGroup
				for i := range n {
					wg.Go(func() {
						k := fmt.Sprintf("wrap-%s-%s-%d", p, tr, i)
						p := ps.getCall()
						defer ps.putCall(p)
						p.conn, p.deadline = conn, time.Now().Add(time.Minute)
						_, err := opPut.Invoke(context.Background(), p.kv, &zaris.PutRequest{Key: []byte(k), Value: []byte(k)})
						assert.NoError(t, err)
						resp, err, _ := getOn(ps, conn, k)
						if assert.NoError(t, err) {
							assert.Equal(t, k, string(resp.(*zaris.GetResponse).Value), "the reply of another request")
						}
					})
				}
				waitGroupWithin(t, &wg, "the callers")
				assert.Equal(t, int32(math.MinInt32+2*n-3), conn.seq.Load(), "the seqids wrapped")
				assert.Equal(t, uint64(2*n), conn.replies.Load())
				assert.NoError(t, conn.failure())
			})
		}
	}
}

// stallConn is a connection to a node that reads nothing: every write blocks until the
// connection is closed.
type stallConn struct {
	net.Conn
	writing chan struct{} // closed when the first write starts
	once    sync.Once
	closed  chan struct{}
	close   sync.Once
}

func (s *stallConn) Write([]byte) (int, error) {
	s.once.Do(func() { close(s.writing) })
	<-s.closed
	return 0, net.ErrClosed
}

func (s *stallConn) Close() error {
	s.close.Do(func() { close(s.closed) })
	return s.Conn.Close()
}

// TestPipelined_CallerLeavesWhileALargeRequestIsWritten: on an idle connection, a request
// larger than the socket's buffer is written by the writer goroutine, not by its caller, so
// that a caller whose node reads nothing leaves with its context, not at the write timeout
// (an attempt timeout). The request may be partly written: in doubt.
func TestPipelined_CallerLeavesWhileALargeRequestIsWritten(t *testing.T) {
	srv := startServer(t, headerServer, nil)
	cfg, err := NewConfig(WithService(testService), WithEnv(env(nil)), WithSeeds(srv.addr), WithAttemptTimeout(time.Hour))
	require.NoError(t, err)
	ps := newPipelines(cfg)
	raw, err := ps.dialSocket(context.Background(), srv.addr)
	require.NoError(t, err)
	stall := &stallConn{Conn: raw, writing: make(chan struct{}), closed: make(chan struct{})}
	conn, err := newPipeConn(stall, ps)
	require.NoError(t, err)
	t.Cleanup(func() { conn.fail(errConnClosed); conn.wg.Wait() })

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, done := putOnConn(ctx, ps, conn, make([]byte, 4*bufferSize))
	<-stall.writing
	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
		assert.True(t, p.wasSent, "the request may be partly written: in doubt")
	case <-time.After(10 * time.Second): // a hang detector, not a timing assertion
		t.Fatal("the caller is held by the write of its own request")
	}
}

// TestPipelined_CallerWaitingOnAnotherCallsDialLeaves: a call that finds every slot of its
// node being dialed by other calls waits for one of those dials, but leaves when its own
// context ends or its own deadline passes, as a call waiting for a pooled connection does,
// not when the other call's dial ends. Nothing is sent.
func TestPipelined_CallerWaitingOnAnotherCallsDialLeaves(t *testing.T) {
	for _, leave := range []string{"context", "call deadline"} {
		t.Run(leave, func(t *testing.T) {
			srv := startServer(t, headerServer, nil)
			cl := dialPipelined(t, srv.addr, 1, WithAttemptTimeout(time.Hour))
			dialing, gate := make(chan struct{}), make(chan struct{})
			defer close(gate)
			dialStarted := sync.OnceFunc(func() { close(dialing) })
			cl.pipes.dialSocket = func(ctx context.Context, addr string) (net.Conn, error) {
				dialStarted()
				select { // a node slow to accept
				case <-gate:
				case <-ctx.Done():
				}
				return nil, errors.New("dial abandoned")
			}
			go cl.Invoke(context.Background(), getCall("first")) // dials, and holds the slot
			<-dialing

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			call := putCall("second", "x")
			if leave == "call deadline" {
				call.Deadline = time.Now().Add(20 * time.Millisecond) // not carried by ctx
			}
			done := make(chan error, 1)
			go func() {
				_, err := cl.Invoke(ctx, call)
				done <- err
			}()
			if leave == "context" {
				g := (*cl.pipes.groups.Load())[srv.addr]
				eventually(t, func() bool { return g.active.Load() == 2 }) // the second call looks for a connection
				cancel()
			}
			select {
			case err := <-done:
				if leave == "context" {
					require.ErrorIs(t, err, context.Canceled)
				} else {
					require.ErrorIs(t, err, ErrNodeUnavailable, "no connection within its deadline")
				}
				assert.False(t, call.Attempts[0].Sent)
			case <-time.After(10 * time.Second): // a hang detector, not a timing assertion
				t.Fatal("the call waits for another call's dial past its own end")
			}
		})
	}
}

// TestPipelined_ReplyOverTheFrameLimitFailsTheConnectionAtOnce: a node whose reply starts
// with a frame size over the limit (or, unframed, with bytes that are no message) fails the
// connection at once, over every protocol and transport, not after an attempt timeout of
// silence.
func TestPipelined_ReplyOverTheFrameLimitFailsTheConnectionAtOnce(t *testing.T) {
	addr := serveLoopback(t, func(c net.Conn) {
		if _, err := c.Read(make([]byte, 1)); err == nil { // a request arrives
			// Two frame headers over the limit, and then nothing.
			_, _ = c.Write([]byte{0x7f, 0xff, 0xff, 0x00, 0x0f, 0xff, 0x80, 0x01})
		}
	})
	for _, p := range []Protocol{ProtocolBinary, ProtocolCompact, ProtocolJSON, ProtocolHeader} {
		for _, tr := range []Transport{TransportFramed, TransportBuffered} {
			t.Run(fmt.Sprintf("%s-%s", p, tr), func(t *testing.T) {
				ps, conn := openPipeConn(t, addr, WithProtocol(p), WithTransport(tr), WithAttemptTimeout(time.Hour))
				done := make(chan error, 1)
				go func() {
					_, err, _ := getOn(ps, conn, "k")
					done <- err
				}()
				select {
				case err := <-done:
					assert.True(t, isThriftError(err), "a transport or protocol error: %v", err)
					assert.Error(t, conn.failure())
				case <-time.After(10 * time.Second): // a hang detector, not a timing assertion
					t.Fatal("the reader waits for more of a reply it cannot read")
				}
			})
		}
	}
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
