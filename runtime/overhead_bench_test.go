package runtime_test

import (
	"bytes"
	"context"
	"net"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisclient"
	"github.com/clustron/zaris-go/runtime"
)

// memSocket is an in-memory socket with a node behind it: a write is buffered, and a read
// with no reply pending runs the node's processor over what was written, so a call costs
// the client and the processor's CPU and no syscall or goroutine switch. Deadlines go to a
// real loopback socket, so setting one costs what it costs on a dialed connection.
type memSocket struct {
	in, out  bytes.Buffer
	proc     thrift.TProcessor
	srv      thrift.TProtocol
	deadline net.Conn
}

// memNode returns a dialer of memSockets served by node, binary over framed (the defaults).
func memNode(b testing.TB, node zaris.ZarisKv) (runtime.Dialer, runtime.Config) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(b, err)
	accepted := make(chan struct{})
	b.Cleanup(func() {
		l.Close()
		<-accepted
	})
	go func() {
		defer close(accepted)
		var conns []net.Conn
		for {
			c, err := l.Accept()
			if err != nil {
				for _, c := range conns {
					c.Close()
				}
				return
			}
			conns = append(conns, c)
		}
	}()
	cfg, err := runtime.NewConfig(runtime.WithService(zarisclient.Service), runtime.WithEnv(func(string) (string, bool) { return "", false }), runtime.WithSeeds("127.0.0.1:1"))
	require.NoError(b, err)
	proc := zaris.NewZarisKvProcessor(node)
	dial := func(ctx context.Context, _ string) (runtime.Conn, error) {
		d, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			return nil, err
		}
		s := &memSocket{proc: proc, deadline: d}
		tcfg := &thrift.TConfiguration{}
		s.srv = thrift.NewTBinaryProtocolConf(thrift.NewTFramedTransportConf(memServerSide{s}, tcfg), tcfg)
		return runtime.NewThriftConnOver(s, cfg)
	}
	return dial, cfg
}

func (s *memSocket) Read(p []byte) (int, error) {
	if s.out.Len() == 0 && s.in.Len() > 0 {
		if _, err := s.proc.Process(context.Background(), s.srv, s.srv); err != nil {
			return 0, err
		}
	}
	return s.out.Read(p)
}

func (s *memSocket) Write(p []byte) (int, error)        { return s.in.Write(p) }
func (s *memSocket) Close() error                       { return s.deadline.Close() }
func (s *memSocket) LocalAddr() net.Addr                { return s.deadline.LocalAddr() }
func (s *memSocket) RemoteAddr() net.Addr               { return s.deadline.RemoteAddr() }
func (s *memSocket) SetDeadline(t time.Time) error      { return s.deadline.SetDeadline(t) }
func (s *memSocket) SetReadDeadline(t time.Time) error  { return s.deadline.SetReadDeadline(t) }
func (s *memSocket) SetWriteDeadline(t time.Time) error { return s.deadline.SetWriteDeadline(t) }

// memServerSide is the node's end of a memSocket: it reads what the client wrote and
// writes the replies.
type memServerSide struct{ s *memSocket }

func (m memServerSide) Read(p []byte) (int, error)  { return m.s.in.Read(p) }
func (m memServerSide) Write(p []byte) (int, error) { return m.s.out.Write(p) }
func (memServerSide) Close() error                  { return nil }
func (memServerSide) Flush(context.Context) error   { return nil }
func (memServerSide) RemainingBytes() uint64        { return ^uint64(0) }
func (memServerSide) Open() error                   { return nil }
func (memServerSide) IsOpen() bool                  { return true }

// memClients returns the raw generated client on its own connection and the typed client
// through the default stack (with opts) on pooled connections, both over memSockets to one
// node.
func memClients(t testing.TB, opts ...runtime.Option) (zaris.ZarisKv, *zarisclient.Client) {
	owner := int32(1)
	m := &zaris.ClusterMap{Epoch: 1, SegmentCount: 1, Nodes: []*zaris.NodeInfo{{ID: 1, Host: "127.0.0.1", Port: 1}},
		Segments: []*zaris.SegmentInfo{{ID: 0, Owner: &owner}}}
	dial, cfg := memNode(t, &churnNode{id: 1, view: func() *zaris.ClusterMap { return m }})
	conn, err := dial(context.Background(), "")
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	client, err := zarisclient.Dial(context.Background(), append([]runtime.Option{runtime.WithEnv(func(string) (string, bool) { return "", false }),
		runtime.WithSeeds("127.0.0.1:1"), runtime.WithDialer(dial), runtime.WithPipelining(false),
		runtime.WithProtocol(cfg.Protocol), runtime.WithTransport(cfg.Transport)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { client.Close() })
	return conn.Client().(zaris.ZarisKv), client
}

// TestStackAddsOneAllocation checks that a pooled call through the typed client and the
// default stack allocates at most one object (its Call) more than the raw generated
// client's call (the operation's Codec makes it fewer than that), with a context that cannot end and with a cancellable one its calls repeat (the
// connection keeps its watch on it).
func TestStackAddsOneAllocation(t *testing.T) {
	if testing.Short() {
		t.Skip("counts allocations over many calls")
	}
	if raceDetector {
		t.Skip("the race detector drops pooled buffers at random; make test runs this without it")
	}
	raw, client := memClients(t)
	req := &zaris.GetRequest{Key: []byte("k")}
	rawAllocs := testing.AllocsPerRun(200, func() {
		if _, err := raw.Get(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	})
	cancellable, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, ctx := range []context.Context{context.Background(), cancellable} {
		typed := testing.AllocsPerRun(200, func() {
			if _, err := client.Get(ctx, req); err != nil {
				t.Fatal(err)
			}
		})
		assert.LessOrEqual(t, typed, rawAllocs+1, "allocations of a typed call (raw: %v)", rawAllocs)
	}
}

// BenchmarkStackOverhead compares, over in-memory sockets (see memSocket), the typed
// client through the default stack on pooled connections with the raw generated client:
// the difference between the two is the CPU and allocations the client adds to a call,
// without the noise of syscalls and scheduling that a loopback benchmark carries.
func BenchmarkStackOverhead(b *testing.B) {
	raw, client := memClients(b)
	req := &zaris.GetRequest{Key: []byte("bench")}
	cancellable, cancel := context.WithCancel(context.Background())
	defer cancel()

	b.Run("raw", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := raw.Get(context.Background(), req); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, bc := range []struct {
		name string
		ctx  context.Context
	}{{"typed, background ctx", context.Background()}, {"typed, cancellable ctx", cancellable}} {
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
