package runtime_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
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
	"github.com/clustron/zaris-go/gen/zariscodec"
	"github.com/clustron/zaris-go/internal/thriftbuf"
	"github.com/clustron/zaris-go/runtime"
)

// TestRequestTooLargeIsRefusedUnsent: a request larger than the client's message limit
// never leaves the client over a framed or header transport, pooled or pipelined: the call
// ends after one attempt, not sent, with an error matching ErrRequestTooLarge. An
// idempotent Put is not retried into the same refusal, and a non-idempotent Increment is
// not reported in doubt. A multi-key call whose sub-request is too large (an item alone
// can be: the batch layer keeps larger sub-requests from forming) gives its items that
// error. The buffered transport has no frame to check, and sends it.
func TestRequestTooLargeIsRefusedUnsent(t *testing.T) {
	huge := bytes.Repeat([]byte("x"), 17<<20)
	for _, p := range []runtime.Protocol{runtime.ProtocolBinary, runtime.ProtocolHeader} {
		for _, pipelined := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s pipelined %v", p, pipelined), func(t *testing.T) {
				kv, h := oneNodeClient(t, runtime.WithProtocol(p), runtime.WithPipelining(pipelined), runtime.PipelineEveryCall())

				_, err := kv.Increment(context.Background(), &zaris.IncrementRequest{Key: huge, Delta: 1})
				requireTooLarge(t, err)
				assert.NotErrorIs(t, err, runtime.ErrInDoubt)
				_, err = kv.Put(context.Background(), &zaris.PutRequest{Key: []byte("k"), Value: huge})
				requireTooLarge(t, err)
				assert.Zero(t, h.increments.Load(), "the node saw nothing")
				assert.Zero(t, kv.Engine().Refresher().Stats().Requested, "no refresh for a request that cannot fit")

				resp, err := kv.Get(context.Background(), &zaris.GetRequest{Key: []byte("k")})
				require.NoError(t, err, "the client goes on")
				assert.Equal(t, zaris.KvStatus_NotFound, resp.Status)
			})
		}
	}

	t.Run("buffered transport sends it", func(t *testing.T) {
		kv, _ := oneNodeClient(t, runtime.WithTransport(runtime.TransportBuffered), runtime.WithPipelining(false))
		_, err := kv.Put(context.Background(), &zaris.PutRequest{Key: []byte("k"), Value: huge})
		assert.NotErrorIs(t, err, runtime.ErrRequestTooLarge)
		var ce *runtime.CallError
		require.ErrorAs(t, err, &ce)
		assert.True(t, ce.Attempts[0].Sent, "no frame to check: the node got it (and refused Put)")
	})

	t.Run("MultiPut", func(t *testing.T) {
		kv, _ := oneNodeClient(t)
		items := []*zaris.PutItem{{Key: []byte("k"), Value: huge}}
		res, err := kv.MultiPut(context.Background(), &zaris.MultiPutRequest{Items: items})
		require.ErrorIs(t, err, runtime.ErrRequestTooLarge)
		for i := range items {
			requireTooLarge(t, res.Err(i))
		}
	})
}

// requireTooLarge checks err is a call's error after one attempt refused unsent as too large.
func requireTooLarge(t *testing.T, err error) {
	t.Helper()
	require.ErrorIs(t, err, runtime.ErrRequestTooLarge)
	var ce *runtime.CallError
	require.ErrorAs(t, err, &ce)
	require.Len(t, ce.Attempts, 1, "not retried")
	assert.False(t, ce.Attempts[0].Sent)
	assert.Equal(t, runtime.Fatal, ce.Attempts[0].Class)
}

// oneNodeClient dials a client with opts to a node of its own, an incrementNode; both are
// closed when the test ends.
func oneNodeClient(t *testing.T, opts ...runtime.Option) (*zarisclient.Client, *incrementNode) {
	t.Helper()
	h := &incrementNode{arrived: make(chan struct{}, 8), hold: make(chan struct{})}
	t.Cleanup(func() { close(h.hold) })
	node := runtime.StartKillableNode(t, h)
	h.cmap = runtime.OneNodeMap(node.Addr)
	opts = append([]runtime.Option{runtime.WithEnv(nil), runtime.WithSeeds(node.Addr), runtime.WithBackoff(time.Millisecond)}, opts...)
	kv, err := zarisclient.Dial(context.Background(), opts...)
	require.NoError(t, err)
	t.Cleanup(func() { kv.Close() })
	return kv, h
}

// TestRequestOverTheMapsLimitIsRefusedUnsent: a node whose map says it takes requests of at
// most maxMessageBytes (1 MiB here) gets no byte of a larger one: a Put of 2 MiB, pooled or
// pipelined, ends after one attempt, not sent, with an error matching ErrRequestTooLarge
// that names the request's size and the limit, and the proxy in front of the node counts
// nothing sent between the map fetch and the next call. Before the map carried the limit,
// the client sent it (up to its own 16 MiB), three times, as churn when the node closed
// the connection. A request within the limit goes through.
func TestRequestOverTheMapsLimitIsRefusedUnsent(t *testing.T) {
	for _, tc := range []struct {
		name      string
		protocol  runtime.Protocol
		pipelined bool
	}{
		{"binary pooled", runtime.ProtocolBinary, false},
		{"binary pipelined", runtime.ProtocolBinary, true},
		{"compact pooled", runtime.ProtocolCompact, false},
		{"compact pipelined", runtime.ProtocolCompact, true},
		{"header pipelined", runtime.ProtocolHeader, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &incrementNode{arrived: make(chan struct{}, 8), hold: make(chan struct{})}
			t.Cleanup(func() { close(h.hold) })
			node := runtime.StartKillableNode(t, h)
			proxy := startCountingProxy(t, node.Addr)
			h.cmap = runtime.OneNodeMap(proxy.addr)
			h.cmap.MaxMessageBytes = thrift.Int64Ptr(1 << 20)
			kv, err := zarisclient.Dial(context.Background(), runtime.WithEnv(nil), runtime.WithSeeds(proxy.addr),
				runtime.WithProtocol(tc.protocol), runtime.WithPipelining(tc.pipelined), runtime.PipelineEveryCall())
			require.NoError(t, err)
			t.Cleanup(func() { kv.Close() })
			require.Equal(t, int64(1<<20), kv.Engine().Map().MaxMessageBytes)
			_, err = kv.Get(context.Background(), &zaris.GetRequest{Key: []byte("k")}) // the data connection is open
			require.NoError(t, err)

			before := proxy.sent.Load()
			_, err = kv.Put(context.Background(), &zaris.PutRequest{Key: []byte("k"), Value: bytes.Repeat([]byte("x"), 2<<20)})
			requireTooLarge(t, err)
			assert.Contains(t, err.Error(), "over the peer's limit of 1048576 bytes")
			assert.Regexp(t, `a message of 2097\d\d\d bytes`, err.Error(), "the request's size (2 MiB and its framing)")
			assert.Zero(t, proxy.sent.Load()-before, "no byte of it went on the wire")

			_, err = kv.Put(context.Background(), &zaris.PutRequest{Key: []byte("k"), Value: bytes.Repeat([]byte("x"), 512<<10)})
			var ce *runtime.CallError
			if errors.As(err, &ce) {
				assert.True(t, ce.Attempts[0].Sent, "within the limit, the request is sent")
			}
			assert.Greater(t, proxy.sent.Load()-before, int64(512<<10))
		})
	}
}

// countingProxy forwards TCP connections to a node and counts the bytes clients send.
type countingProxy struct {
	addr string
	sent atomic.Int64
}

// countingWriter adds the bytes written through it to n before it writes them, so a
// request the node may have answered is always counted already.
type countingWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c countingWriter) Write(b []byte) (int, error) {
	c.n.Add(int64(len(b)))
	return c.w.Write(b)
}

// startCountingProxy listens on loopback and forwards every connection to target, until
// the test ends.
func startCountingProxy(t *testing.T, target string) *countingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &countingProxy{addr: ln.Addr().String()}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, up)
			mu.Unlock()
			wg.Go(func() {
				io.Copy(countingWriter{up, &p.sent}, c)
				up.Close()
			})
			wg.Go(func() {
				io.Copy(c, up)
				c.Close()
			})
		}
	})
	return p
}

// A framed binary request whose frame is exactly the client's frame limit (16 MiB) is
// sent, pooled or pipelined; one byte more is refused unsent.
func TestRequestOfExactlyTheFrameLimitIsSent(t *testing.T) {
	const frameLimit = 16 << 20
	frame := func(req *zaris.PutRequest) int { // the framed message's size, its 4-byte length aside
		b := thriftbuf.AppendMessageBegin(nil, "Put", thrift.CALL, 1)
		return len(zariscodec.AppendZarisKvPutArgs(b, &zaris.ZarisKvPutArgs{Req: req}))
	}
	exactly := &zaris.PutRequest{Key: []byte("k")}
	exactly.Value = make([]byte, frameLimit-frame(exactly))
	require.Equal(t, frameLimit, frame(exactly))
	over := &zaris.PutRequest{Key: []byte("k"), Value: make([]byte, len(exactly.Value)+1)}
	for _, pipelined := range []bool{false, true} {
		t.Run(fmt.Sprintf("pipelined %v", pipelined), func(t *testing.T) {
			kv, _ := oneNodeClient(t, runtime.WithPipelining(pipelined), runtime.PipelineEveryCall())
			_, err := kv.Put(context.Background(), exactly, runtime.WithMaxAttempts(1))
			assert.NotErrorIs(t, err, runtime.ErrRequestTooLarge, "a frame of exactly the limit")
			var ce *runtime.CallError
			if errors.As(err, &ce) {
				assert.True(t, ce.Attempts[0].Sent, "a frame of exactly the limit is sent")
			}
			_, err = kv.Put(context.Background(), over)
			requireTooLarge(t, err)
		})
	}
}
