package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
)

// requireServes puts and reads back key through cl, which must be connected to key's owner.
func requireServes(t *testing.T, cl *rawClient, key []byte) {
	t.Helper()
	put, err := cl.Put(bg, &zaris.PutRequest{Key: key, Value: []byte("fine")})
	require.NoError(t, err)
	require.Equal(t, zaris.KvStatus_Ok, put.Status)
	get, err := cl.Get(bg, &zaris.GetRequest{Key: key})
	require.NoError(t, err)
	require.Equal(t, zaris.KvStatus_Ok, get.Status)
	require.Equal(t, []byte("fine"), get.Value)
}

// TestBadInput_InvalidKeyOrValueAnswersInvalidRequestAndKeepsServing sends each invalid
// key or value (empty key, key one byte over the limit, value one byte over the limit) to
// the segment's owner. The node answers InvalidRequest, stores nothing, and keeps serving
// both the connection that sent it and another client.
func TestBadInput_InvalidKeyOrValueAnswersInvalidRequestAndKeepsServing(t *testing.T) {
	c := StartCluster(t, fastCluster())
	owner, _, _ := roles(c, 0)
	addr := c.Addr(owner)
	bad, other := mustDial(t, addr), mustDial(t, addr)
	good := keyIn(0, 16, "good")
	bigKey := bytes.Repeat([]byte("k"), DefaultMaxKeySize+1)
	bigValue := bytes.Repeat([]byte("v"), DefaultMaxValueSize+1)
	valueKey := keyIn(0, 16, "big-value")

	tests := []struct {
		name string
		call func() (zaris.KvStatus, error)
	}{
		{"put empty key", func() (zaris.KvStatus, error) {
			r, err := bad.Put(bg, &zaris.PutRequest{Key: []byte{}, Value: []byte("v")})
			return r.GetStatus(), err
		}},
		{"get empty key", func() (zaris.KvStatus, error) {
			r, err := bad.Get(bg, &zaris.GetRequest{Key: nil})
			return r.GetStatus(), err
		}},
		{"put key over the limit", func() (zaris.KvStatus, error) {
			r, err := bad.Put(bg, &zaris.PutRequest{Key: bigKey, Value: []byte("v")})
			return r.GetStatus(), err
		}},
		{"delete key over the limit", func() (zaris.KvStatus, error) {
			r, err := bad.Delete(bg, &zaris.DeleteRequest{Key: bigKey})
			return r.GetStatus(), err
		}},
		{"put value over the limit", func() (zaris.KvStatus, error) {
			r, err := bad.Put(bg, &zaris.PutRequest{Key: valueKey, Value: bigValue})
			return r.GetStatus(), err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := tt.call()
			require.NoError(t, err)
			assert.Equal(t, zaris.KvStatus_InvalidRequest, st)
			requireServes(t, bad, good)
			requireServes(t, other, good)
		})
	}
	// Nothing of the refused writes was stored.
	get, err := other.Get(bg, &zaris.GetRequest{Key: valueKey})
	require.NoError(t, err)
	assert.Equal(t, zaris.KvStatus_NotFound, get.Status)
}

// slowConn is a net.Conn that writes one byte at a time with a pause before each. After
// holdAfter bytes it closes held and waits for release, so the test knows the node holds
// a half-received request.
type slowConn struct {
	net.Conn
	pause     time.Duration
	holdAfter int
	held      chan struct{}
	release   chan struct{}
	written   int
}

func (c *slowConn) Write(p []byte) (int, error) {
	for i := range p {
		if c.written == c.holdAfter {
			close(c.held)
			<-c.release
		}
		time.Sleep(c.pause)
		if _, err := c.Conn.Write(p[i : i+1]); err != nil {
			return i, err
		}
		c.written++
	}
	return len(p), nil
}

// TestBadInput_SlowAndIdleClientsDoNotHoldUpOthers opens, on one node, a client that sends
// its request a byte at a time (each pause shorter than the idle timeout) and stops halfway
// until the test lets it go on, and a client that connects and says nothing. While the
// slow request is half received and the idle connection is open, other clients are served;
// the slow client gets its answer in the end; the idle one is closed by the node after the
// idle timeout, and the node goes on serving.
func TestBadInput_SlowAndIdleClientsDoNotHoldUpOthers(t *testing.T) {
	cfg := fastCluster()
	cfg.Node.IdleTimeout = 2 * time.Second
	c := StartCluster(t, cfg)
	owner, _, _ := roles(c, 0)
	addr := c.Addr(owner)
	key := keyIn(0, 16, "slow")

	idle, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer idle.Close()

	raw, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	slow := &slowConn{Conn: raw, pause: time.Millisecond, holdAfter: 20,
		held: make(chan struct{}), release: make(chan struct{})}
	tcfg := &thrift.TConfiguration{SocketTimeout: 30 * time.Second}
	trans := thrift.NewTFramedTransportConf(thrift.NewTSocketFromConnConf(slow, tcfg), tcfg)
	defer trans.Close()
	slowClient := zaris.NewZarisKvClientFactory(trans, thrift.NewTBinaryProtocolFactoryConf(tcfg))
	type result struct {
		resp *zaris.PutResponse
		err  error
	}
	done := make(chan result, 1)
	go func() {
		r, err := slowClient.Put(bg, &zaris.PutRequest{Key: key, Value: []byte("slowly")})
		done <- result{r, err}
	}()
	<-slow.held

	// The slow request is half received and the idle connection is open: other clients
	// are served, on the same node and key.
	other := mustDial(t, addr)
	for range 5 {
		requireServes(t, other, keyIn(0, 16, "other"))
	}
	close(slow.release)
	r := <-done
	require.NoError(t, r.err, "a slow client that keeps sending is served")
	assert.Equal(t, zaris.KvStatus_Ok, r.resp.Status)
	get, err := other.Get(bg, &zaris.GetRequest{Key: key})
	require.NoError(t, err)
	assert.Equal(t, []byte("slowly"), get.Value)

	requireClosedByNode(t, idle)
	fresh := mustDial(t, addr)
	_, err = fresh.GetClusterMap(bg)
	require.NoError(t, err)
}

// noArgs is a call's arguments without their one field, the request.
type noArgs struct{}

func (noArgs) Write(ctx context.Context, p thrift.TProtocol) error { return p.WriteFieldStop(ctx) }
func (noArgs) Read(context.Context, thrift.TProtocol) error        { return nil }

// A call whose arguments lack the request (a field every generated client sets) is answered
// InvalidRequest, as a request without a key is, for every key-value operation.
func TestBadInput_CallWithoutItsRequestAnswersInvalidRequest(t *testing.T) {
	c := StartCluster(t, fastCluster())
	owner, _, _ := roles(c, 0)
	h := &kvHandler{n: c.Node(owner)}
	calls := []struct {
		method string
		result thrift.TStruct
		status func() zaris.KvStatus
	}{}
	add := func(method string, res thrift.TStruct, status func() zaris.KvStatus) {
		calls = append(calls, struct {
			method string
			result thrift.TStruct
			status func() zaris.KvStatus
		}{method, res, status})
	}
	get, put, del, inc := &zaris.ZarisKvGetResult{}, &zaris.ZarisKvPutResult{}, &zaris.ZarisKvDeleteResult{}, &zaris.ZarisKvIncrementResult{}
	mget, mput, mdel := &zaris.ZarisKvMultiGetResult{}, &zaris.ZarisKvMultiPutResult{}, &zaris.ZarisKvMultiDeleteResult{}
	add("Get", get, func() zaris.KvStatus { return get.GetSuccess().GetStatus() })
	add("Put", put, func() zaris.KvStatus { return put.GetSuccess().GetStatus() })
	add("Delete", del, func() zaris.KvStatus { return del.GetSuccess().GetStatus() })
	add("Increment", inc, func() zaris.KvStatus { return inc.GetSuccess().GetStatus() })
	add("MultiGet", mget, func() zaris.KvStatus { return mget.GetSuccess().GetStatus() })
	add("MultiPut", mput, func() zaris.KvStatus { return mput.GetSuccess().GetStatus() })
	add("MultiDelete", mdel, func() zaris.KvStatus { return mdel.GetSuccess().GetStatus() })
	proc := zaris.NewZarisKvProcessor(h)
	for _, c := range calls {
		t.Run(c.method, func(t *testing.T) {
			reply := serveFrames(t, proc, headerCall(t, framedBinaryID, c.method, noArgs{}))
			cfg := &thrift.TConfiguration{}
			p := thrift.NewTBinaryProtocolConf(thrift.NewTFramedTransportConf(pipeTransport{r: bytes.NewBuffer(reply)}, cfg), cfg)
			_, typ, _, err := p.ReadMessageBegin(bg)
			require.NoError(t, err)
			require.Equal(t, thrift.REPLY, typ)
			require.NoError(t, c.result.Read(bg, p))
			assert.Equal(t, zaris.KvStatus_InvalidRequest, c.status())
		})
	}
}

// lockedBuffer is a bytes.Buffer safe for a logger and a test to share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestBadInput_AFrameOverTheLimitIsLoggedWithItsPeer: a client that announces a frame over
// the data port's limit is refused before any of it is buffered and its connection closed,
// and the node logs that, with the client's address, the size it claimed and the limit: the
// client itself only sees a closed connection. The node goes on serving.
func TestBadInput_AFrameOverTheLimitIsLoggedWithItsPeer(t *testing.T) {
	var log lockedBuffer
	cfg := fastCluster()
	cfg.Nodes = 1
	cfg.ReplicationFactor = 1
	cfg.Logger = slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c := StartCluster(t, cfg)
	addr := c.Addr(c.Nodes()[0])

	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn.Close()
	// A framed binary request's first bytes: the frame's size, then a strict binary CALL.
	head := binary.BigEndian.AppendUint32(nil, 5<<20)
	head = append(head, 0x80, 0x01, 0x00, 0x01)
	_, err = conn.Write(head)
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err = conn.Read(make([]byte, 1))
	require.Error(t, err, "the node closes the connection")

	local := conn.LocalAddr().String()
	require.Eventually(t, func() bool { return strings.Contains(log.String(), local) }, 10*time.Second, time.Millisecond)
	line := log.String()
	assert.Contains(t, line, "refused a frame over the limit")
	assert.Contains(t, line, "remote="+local)
	assert.Contains(t, line, fmt.Sprintf("size=%d", 5<<20))
	assert.Contains(t, line, fmt.Sprintf("limit=%d", 4<<20))
	requireServes(t, mustDial(t, addr), keyIn(0, 16, "after"))
}
