package runtime

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	goruntime "runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisserver"
)

func init() {
	// Handlers this short do not need the server's connectivity check, which costs up to
	// half the throughput; and a server must not wait forever for a stuck connection.
	thrift.ServerConnectivityCheckInterval = 0
	thrift.ServerStopTimeout = 250 * time.Millisecond
}

// testKV is a one-node ZarisKv: a map of keys, a cluster map naming itself, and a key
// ("slow") whose Get waits until release is closed.
type testKV struct {
	zarisserver.UnimplementedZarisKv
	mu      sync.Mutex
	data    map[string][]byte
	version int64
	cmap    *zaris.ClusterMap
	release chan struct{}
}

func newTestKV() *testKV {
	return &testKV{data: map[string][]byte{}, release: make(chan struct{})}
}

func (h *testKV) Get(_ context.Context, req *zaris.GetRequest) (*zaris.GetResponse, error) {
	if string(req.Key) == "slow" {
		<-h.release
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	v, ok := h.data[string(req.Key)]
	if !ok {
		return &zaris.GetResponse{Status: zaris.KvStatus_NotFound, MapEpoch: h.cmap.Epoch}, nil
	}
	return &zaris.GetResponse{Status: zaris.KvStatus_Ok, Value: v, Version: h.version, MapEpoch: h.cmap.Epoch}, nil
}

func (h *testKV) Put(_ context.Context, req *zaris.PutRequest) (*zaris.PutResponse, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.version++
	h.data[string(req.Key)] = req.Value
	return &zaris.PutResponse{Status: zaris.KvStatus_Ok, Version: h.version, MapEpoch: h.cmap.Epoch}, nil
}

func (h *testKV) Delete(_ context.Context, req *zaris.DeleteRequest) (*zaris.DeleteResponse, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.data, string(req.Key))
	return &zaris.DeleteResponse{Status: zaris.KvStatus_Ok, MapEpoch: h.cmap.Epoch}, nil
}

func (h *testKV) Increment(context.Context, *zaris.IncrementRequest) (*zaris.IncrementResponse, error) {
	return nil, thrift.NewTApplicationException(thrift.UNKNOWN_METHOD, "Increment is not served here")
}

func (h *testKV) GetClusterMap(context.Context) (*zaris.ClusterMap, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cmap, nil
}

// serverKind is what a test server's listener accepts.
type serverKind int

const (
	// headerServer accepts header, and framed or unframed binary and compact, on one port.
	headerServer serverKind = iota
	jsonFramedServer
	jsonBufferedServer
)

// testServer is a TSimpleServer over testKV on a loopback port.
type testServer struct {
	addr string
	kv   *testKV
	srv  *thrift.TSimpleServer
}

func startServer(t testing.TB, kind serverKind, tlsCfg *tls.Config) *testServer {
	t.Helper()
	cfg := &thrift.TConfiguration{MaxMessageSize: maxMessageSize, MaxFrameSize: maxMessageSize, MaxContainerSize: maxContainerSize}
	// A TServerSocket over a TLS listener rather than a TSSLServerSocket, whose Interrupt
	// and Accept race (v0.25.0).
	listen := func(a net.Addr) (net.Listener, error) {
		ln, err := net.Listen("tcp", a.String())
		if err != nil || tlsCfg == nil {
			return ln, err
		}
		return tls.NewListener(ln, tlsCfg), nil
	}
	sock := thrift.NewTServerSocketFromFactoryTimeout(listen, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}, 0)
	require.NoError(t, sock.Listen())
	addr := sock.Addr()
	var tf thrift.TTransportFactory
	var pf thrift.TProtocolFactory
	switch kind {
	case headerServer:
		tf, pf = thrift.NewTHeaderTransportFactoryConf(nil, cfg), thrift.NewTHeaderProtocolFactoryConf(cfg)
	case jsonFramedServer:
		tf, pf = thrift.NewTFramedTransportFactoryConf(thrift.NewTTransportFactory(), cfg), thrift.NewTJSONProtocolFactory()
	case jsonBufferedServer:
		tf, pf = thrift.NewTBufferedTransportFactory(8192), thrift.NewTJSONProtocolFactory()
	}
	kv := newTestKV()
	host, port, err := net.SplitHostPort(addr.String())
	require.NoError(t, err)
	p, _ := strconv.Atoi(port)
	owner := int32(1)
	kv.cmap = &zaris.ClusterMap{Epoch: 1, SegmentCount: 4, Nodes: []*zaris.NodeInfo{{ID: 1, Host: host, Port: int32(p)}}}
	for s := int32(0); s < 4; s++ {
		kv.cmap.Segments = append(kv.cmap.Segments, &zaris.SegmentInfo{ID: s, Owner: &owner, Replicas: []int32{1}})
	}
	srv := thrift.NewTSimpleServer4(zaris.NewZarisKvProcessor(kv), sock, tf, pf)
	go srv.Serve()
	ts := &testServer{addr: addr.String(), kv: kv, srv: srv}
	t.Cleanup(ts.stop)
	return ts
}

var stopOnce sync.Map

func (s *testServer) stop() {
	if _, done := stopOnce.LoadOrStore(s, true); done {
		return
	}
	select {
	case <-s.kv.release:
	default:
		close(s.kv.release)
	}
	s.srv.Stop()
}

// selfSignedTLS returns a server config with a fresh self-signed certificate for
// 127.0.0.1 and a client config that trusts it.
func selfSignedTLS(t testing.TB) (server, client *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "zaris test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	server = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12}
	client = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return server, client
}

func putCall(key, value string) *Call {
	return NewCall(opPut, []byte(key), &zaris.PutRequest{Key: []byte(key), Value: []byte(value)}, false)
}

// roundTrip puts and gets a key through c and checks the value came back.
func roundTrip(t *testing.T, c *Engine, key string) {
	t.Helper()
	ctx := context.Background()
	resp, err := c.Invoke(ctx, putCall(key, "v-"+key))
	require.NoError(t, err)
	require.Equal(t, zaris.KvStatus_Ok, kvStatus(resp))
	call := getCall(key)
	resp, err = c.Invoke(ctx, call)
	require.NoError(t, err)
	require.Equal(t, zaris.KvStatus_Ok, kvStatus(resp))
	assert.Equal(t, "v-"+key, string(resp.(*zaris.GetResponse).Value))
	assert.Equal(t, int64(1), call.Attempts[0].AnswerEpoch)
	assert.Equal(t, int32(1), call.Attempts[0].Node)

	resp, err = c.Invoke(ctx, getCall("absent-"+key))
	require.NoError(t, err)
	assert.Equal(t, zaris.KvStatus_NotFound, kvStatus(resp), "NotFound is an answer, not an error")
}

// TestProtocolTransportMatrix runs Dial and Invoke over every protocol × transport the
// client speaks, and over TLS, against real Thrift servers on loopback.
func TestProtocolTransportMatrix(t *testing.T) {
	serverTLS, clientTLS := selfSignedTLS(t)
	servers := map[string]*testServer{
		"header":            startServer(t, headerServer, nil),
		"json-framed":       startServer(t, jsonFramedServer, nil),
		"json-buffered":     startServer(t, jsonBufferedServer, nil),
		"header-tls":        startServer(t, headerServer, serverTLS),
		"json-framed-tls":   startServer(t, jsonFramedServer, serverTLS),
		"json-buffered-tls": startServer(t, jsonBufferedServer, serverTLS),
	}
	type combo struct {
		p   Protocol
		tr  Transport
		tls bool
	}
	var combos []combo
	for _, p := range []Protocol{ProtocolBinary, ProtocolCompact, ProtocolJSON, ProtocolHeader} {
		for _, tr := range []Transport{TransportFramed, TransportBuffered} {
			combos = append(combos, combo{p, tr, false}, combo{p, tr, true})
		}
	}
	for _, c := range combos {
		name := fmt.Sprintf("%s-%s", c.p, c.tr)
		if c.tls {
			name += "-tls"
		}
		t.Run(name, func(t *testing.T) {
			server := "header"
			if c.p == ProtocolJSON {
				server = "json-" + string(c.tr)
			}
			if c.tls {
				server += "-tls"
			}
			srv := servers[server]
			opts := []Option{WithService(testService), WithEnv(env(nil)), WithSeeds(srv.addr), WithProtocol(c.p), WithTransport(c.tr)}
			if c.tls {
				opts = append(opts, WithTLS(clientTLS))
			}
			cl, err := Dial(context.Background(), opts...)
			require.NoError(t, err)
			defer cl.Close()
			roundTrip(t, cl, name)
		})
	}
}

func TestTLSRejectsAnUntrustedServer(t *testing.T) {
	serverTLS, _ := selfSignedTLS(t)
	srv := startServer(t, headerServer, serverTLS)
	_, err := Dial(context.Background(), WithService(testService), WithEnv(env(nil)), WithSeeds(srv.addr), WithTLS(&tls.Config{MinVersion: tls.VersionTLS12}))
	require.ErrorIs(t, err, ErrNoSeeds)
	assert.Contains(t, err.Error(), "tls")
}

// TestB5_AttemptTimeoutOverTheWire checks that the per-attempt timeout (rule B5) ends a call whose
// reply never comes, over every protocol (the JSON protocol retries reads past a socket
// timeout, so the client enforces the timeout itself), and that the connection is dropped.
func TestB5_AttemptTimeoutOverTheWire(t *testing.T) {
	for _, tc := range []struct {
		p    Protocol
		kind serverKind
	}{
		{ProtocolBinary, headerServer},
		{ProtocolCompact, headerServer},
		{ProtocolHeader, headerServer},
		{ProtocolJSON, jsonFramedServer},
	} {
		t.Run(string(tc.p), func(t *testing.T) {
			srv := startServer(t, tc.kind, nil)
			cl, err := Dial(context.Background(), WithService(testService), WithEnv(env(nil)), WithSeeds(srv.addr), WithProtocol(tc.p),
				WithAttemptTimeout(100*time.Millisecond))
			require.NoError(t, err)
			defer cl.Close()
			// With no caller deadline, and with a far one like the deadline layer's: the
			// protocols must not keep retrying the timed-out read until the caller's deadline.
			far, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for _, ctx := range []context.Context{context.Background(), far} {
				call := getCall("slow")
				_, err = cl.Invoke(ctx, call)
				require.ErrorIs(t, err, ErrAttemptTimeout)
				assert.NotErrorIs(t, err, context.DeadlineExceeded)
				assert.True(t, call.Attempts[0].Sent)
				assert.Less(t, call.Attempts[0].Duration, 5*time.Second)
				// The connection was dropped; the next call dials a fresh one and works.
				roundTrip(t, cl, "after-timeout")
			}

			// A caller's deadline earlier than the attempt timeout is the caller's.
			near, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
			defer cancel()
			_, err = cl.Invoke(near, getCall("slow"))
			require.ErrorIs(t, err, context.DeadlineExceeded)
			assert.NotErrorIs(t, err, ErrAttemptTimeout)
			assert.NotErrorIs(t, err, ErrTransport)

			// So is the call's own deadline (call.Deadline, set by the deadline layer
			// without a context deadline) when it comes before the attempt timeout.
			call := getCall("slow")
			call.Deadline = time.Now().Add(30 * time.Millisecond)
			_, err = cl.Invoke(context.Background(), call)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			assert.NotErrorIs(t, err, ErrAttemptTimeout, "the call's deadline ended it, not the attempt timeout")
		})
	}
}

func TestCallerCancelOverTheWire(t *testing.T) {
	srv := startServer(t, headerServer, nil)
	cl, err := Dial(context.Background(), WithService(testService), WithEnv(env(nil)), WithSeeds(srv.addr))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithCancel(context.Background())
	// Calls with the context before: the connection keeps its watch on it, which must
	// still abort the call.
	for range 3 {
		_, err = cl.Invoke(ctx, getCall("fast"))
		require.NoError(t, err)
	}
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err = cl.Invoke(ctx, getCall("slow"))
	require.ErrorIs(t, err, context.Canceled)
	assert.NotErrorIs(t, err, ErrTransport)
	assert.NotErrorIs(t, err, ErrAttemptTimeout)
}

func TestApplicationExceptionOverTheWire(t *testing.T) {
	srv := startServer(t, headerServer, nil)
	cl, err := Dial(context.Background(), WithService(testService), WithEnv(env(nil)), WithSeeds(srv.addr))
	require.NoError(t, err)
	defer cl.Close()
	op := &Op{Name: "Increment", Kind: Write, Invoke: func(ctx context.Context, client any, req any) (Response, error) {
		kv := client.(zaris.ZarisKv)
		return kv.Increment(ctx, req.(*zaris.IncrementRequest))
	}}
	_, err = cl.Invoke(context.Background(), NewCall(op, []byte("n"), &zaris.IncrementRequest{Key: []byte("n"), Delta: 1}, false))
	var app thrift.TApplicationException
	require.ErrorAs(t, err, &app)
	assert.NotErrorIs(t, err, ErrTransport)
}

// proxy is a TCP proxy that a test can kill, resetting every connection through it.
type proxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func startProxy(t *testing.T, backend string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &proxy{ln: ln}
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", backend)
			if err != nil {
				in.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			go func() { io.Copy(out, in); out.Close() }()
			go func() { io.Copy(in, out); in.Close() }()
		}
	}()
	t.Cleanup(p.kill)
	return p
}

func (p *proxy) kill() {
	p.ln.Close()
	p.resetConns()
}

// resetConns resets every connection through the proxy; new ones are still accepted.
func (p *proxy) resetConns() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0) // reset, not a graceful close
		}
		c.Close()
	}
	p.conns = nil
}

// withIdleCheckAfter is an Option that sets Config.idleCheckAfter: negative checks a pooled
// connection at every lend.
func withIdleCheckAfter(d time.Duration) Option {
	return optionFunc(func(b *configBuilder) { b.cfg.idleCheckAfter = d })
}

// TestIdleConnectionClosedByTheNodeIsNotLent: a node that closed a pooled connection
// while it sat idle (its idle timeout, a restart) costs the next call nothing: the pool
// finds the connection closed before lending it, so the call is not failed after being
// written (which would make a non-idempotent write in doubt).
func TestIdleConnectionClosedByTheNodeIsNotLent(t *testing.T) {
	for _, tc := range []struct {
		name string
		tls  bool
	}{{"plain", false}, {"tls", true}} {
		t.Run(tc.name, func(t *testing.T) {
			serverTLS, clientTLS := selfSignedTLS(t)
			var srv *testServer
			opts := []Option{WithService(testService), WithEnv(env(nil)), withIdleCheckAfter(-1)}
			if tc.tls {
				srv = startServer(t, headerServer, serverTLS)
				opts = append(opts, WithTLS(clientTLS))
			} else {
				srv = startServer(t, headerServer, nil)
			}
			// TLS needs the certificate's address, so the proxy is for the plain case.
			if !tc.tls {
				px := startProxy(t, srv.addr)
				host, port, _ := net.SplitHostPort(px.ln.Addr().String())
				p, _ := strconv.Atoi(port)
				srv.kv.mu.Lock()
				srv.kv.cmap.Nodes[0] = &zaris.NodeInfo{ID: 1, Host: host, Port: int32(p)}
				srv.kv.mu.Unlock()
				cl, err := Dial(context.Background(), append(opts, WithSeeds(px.ln.Addr().String()))...)
				require.NoError(t, err)
				defer cl.Close()
				roundTrip(t, cl, "before")
				px.resetConns()
				eventually(t, func() bool { return !idleConnOK(firstIdle(t, cl).raw) })
				call := putCall("after", "v")
				_, err = cl.Invoke(context.Background(), call)
				require.NoError(t, err)
				return
			}
			cl, err := Dial(context.Background(), append(opts, WithSeeds(srv.addr))...)
			require.NoError(t, err)
			defer cl.Close()
			roundTrip(t, cl, "before")
			// The server closes everything: a TLS close_notify, then FIN.
			srv.stop()
			conn := firstIdle(t, cl)
			eventually(t, func() bool { return !idleConnOK(conn.raw) })
			_, err = cl.Invoke(context.Background(), putCall("after", "v"))
			require.ErrorIs(t, err, ErrNodeUnavailable, "the dead connection was not used; the redial failed")
			assert.NotErrorIs(t, err, ErrTransport)
		})
	}
}

// firstIdle peeks at the idle connection of the cluster's only pool, leaving it there.
func firstIdle(t *testing.T, cl *Engine) *thriftConn {
	t.Helper()
	for _, p := range *cl.pools.Load() {
		select {
		case c := <-p.idle:
			p.idle <- c
			return c.Conn.(*thriftConn)
		default:
		}
	}
	t.Fatal("no idle connection")
	return nil
}

// TestNodeDeathIsClassifiedByType kills a node under a pooled connection: the call on
// the dead connection is ErrTransport (a TTransportException by type, whatever the OS
// said, JSON included), and the next one, which cannot dial, is ErrNodeUnavailable.
func TestNodeDeathIsClassifiedByType(t *testing.T) {
	for _, tc := range []struct {
		p    Protocol
		kind serverKind
	}{
		{ProtocolBinary, headerServer},
		{ProtocolJSON, jsonFramedServer},
	} {
		t.Run(string(tc.p), func(t *testing.T) {
			srv := startServer(t, tc.kind, nil)
			px := startProxy(t, srv.addr)
			// The map names the proxy, so every connection goes through it.
			host, port, _ := net.SplitHostPort(px.ln.Addr().String())
			p, _ := strconv.Atoi(port)
			srv.kv.mu.Lock()
			srv.kv.cmap.Nodes[0] = &zaris.NodeInfo{ID: 1, Host: host, Port: int32(p)}
			srv.kv.mu.Unlock()
			// Lend the dead connection without checking it first, whatever the test's pace.
			cl, err := Dial(context.Background(), WithService(testService), WithEnv(env(nil)), WithSeeds(px.ln.Addr().String()), WithProtocol(tc.p),
				withIdleCheckAfter(time.Hour))
			require.NoError(t, err)
			defer cl.Close()
			roundTrip(t, cl, "before")

			px.kill()
			call := getCall("before")
			_, err = cl.Invoke(context.Background(), call)
			require.ErrorIs(t, err, ErrTransport)
			var te thrift.TTransportException
			assert.ErrorAs(t, err, &te)
			assert.True(t, call.Attempts[0].Sent)

			call = getCall("before")
			_, err = cl.Invoke(context.Background(), call)
			require.ErrorIs(t, err, ErrNodeUnavailable)
			assert.False(t, call.Attempts[0].Sent)
		})
	}
}

// openSockets returns the sockets this process has open, by inode.
func openSockets(t *testing.T) map[string]bool {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	socks := map[string]bool{}
	for _, e := range entries {
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.HasPrefix(target, "socket:") {
			socks[target] = true
		}
	}
	return socks
}

// newSockets counts the sockets in now that were not in before.
func newSockets(before, now map[string]bool) int {
	n := 0
	for s := range now {
		if !before[s] {
			n++
		}
	}
	return n
}

// clientGoroutines counts goroutines running code of the client (its refresher, pools,
// pipelined connections or singleflight) rather than of the test server or the testing
// package.
func clientGoroutines() int {
	buf := make([]byte, 1<<20)
	buf = buf[:goruntime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "singleflight") || strings.Contains(g, "runtime.(*Refresher)") ||
			strings.Contains(g, "runtime.(*Engine)") || strings.Contains(g, "runtime.(*pool)") ||
			strings.Contains(g, "runtime.(*pipeConn)") {
			n++
		}
	}
	return n
}

// TestCloseLeavesNoGoroutineOrSocket runs concurrent calls (so the pool opens several
// connections) and a background refresh, closes the client, and checks that no socket
// opened since Dial is still open (the server's side closes when the client's does) and
// that the goroutine count is back where it was, with none running client code.
func TestCloseLeavesNoGoroutineOrSocket(t *testing.T) {
	// No garbage collection: its finalizers would close leaked sockets and hide the leak.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	srv := startServer(t, headerServer, nil)
	g0, socks0 := goruntime.NumGoroutine(), openSockets(t)

	cl, err := Dial(context.Background(), WithService(testService), WithEnv(env(nil)), WithSeeds(srv.addr), WithPoolSize(4))
	require.NoError(t, err)
	var wg sync.WaitGroup
	var fails atomic.Int32
	for i := range 16 {
		wg.Go(func() {
			for j := range 20 {
				if _, err := cl.Invoke(context.Background(), putCall(fmt.Sprintf("k%d-%d", i, j), "v")); err != nil {
					fails.Add(1)
				}
			}
		})
	}
	wg.Wait()
	assert.Zero(t, fails.Load())
	open := newSockets(socks0, openSockets(t))
	assert.GreaterOrEqual(t, open, 2, "connections were open")
	// At most 4 pooled connections, both ends in this process (plus the bootstrap's, if
	// the server has not closed its end yet).
	assert.LessOrEqual(t, open, 2*4+2, "the pool is bounded")
	// An observed newer epoch starts a background fetch; Close must wait for it too.
	cl.Refresher().Observe(99)
	require.NoError(t, cl.Close())
	_, err = cl.Invoke(context.Background(), getCall("k"))
	assert.ErrorIs(t, err, ErrClosed)

	eventually(t, func() bool {
		return newSockets(socks0, openSockets(t)) == 0 && clientGoroutines() == 0 && goruntime.NumGoroutine() <= g0
	})
}

// BenchmarkInvoke measures Engine.Invoke (route, pooled connection, per-attempt timeout,
// generated client) over loopback, binary over framed; compare BenchmarkRawClient.
func BenchmarkInvoke(b *testing.B) {
	srv := startServer(b, headerServer, nil)
	cl, err := Dial(context.Background(), WithService(testService), WithEnv(env(nil)), WithSeeds(srv.addr))
	require.NoError(b, err)
	defer cl.Close()
	req := &zaris.GetRequest{Key: []byte("bench")}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := cl.Invoke(ctx, NewCall(opGet, req.Key, req, false)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRawClient measures the generated client alone on one connection made by the
// same dialer: the floor BenchmarkInvoke is compared with.
func BenchmarkRawClient(b *testing.B) {
	srv := startServer(b, headerServer, nil)
	cfg, err := NewConfig(WithService(testService), WithEnv(env(nil)), WithSeeds(srv.addr))
	require.NoError(b, err)
	conn, err := DefaultDialer(cfg)(context.Background(), srv.addr)
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

// BenchmarkInvokeUnderDeadline is BenchmarkInvoke with a context carrying a deadline and a
// cancel, as the middleware's deadline layer gives every call.
func BenchmarkInvokeUnderDeadline(b *testing.B) {
	srv := startServer(b, headerServer, nil)
	cl, err := Dial(context.Background(), WithService(testService), WithEnv(env(nil)), WithSeeds(srv.addr))
	require.NoError(b, err)
	defer cl.Close()
	req := &zaris.GetRequest{Key: []byte("bench")}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := cl.Invoke(ctx, NewCall(opGet, req.Key, req, false)); err != nil {
			b.Fatal(err)
		}
	}
}

// silentSeed listens on loopback, accepts connections and never answers; each connection
// it accepts goes to accepted. The connections close when the test ends.
func silentSeed(t *testing.T, accepted chan<- net.Conn) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			accepted <- c
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// closedByPeer reports whether the peer of c closed its end: a read of c ends with EOF.
func closedByPeer(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := io.Copy(io.Discard, c)
	return err == nil // io.Copy reports EOF as no error
}

// TestDialOverASilentSeedSaysWhyItStopped: a seed that accepts the connection and never
// answers ends the bootstrap when Dial's context ends (cancelled, or past its deadline),
// with an error matching the context's error (as when the dial itself is cut short), or
// when the attempt timeout passes, with an error matching ErrAttemptTimeout; all match
// ErrNoSeeds, and the connection to the seed is closed.
func TestDialOverASilentSeedSaysWhyItStopped(t *testing.T) {
	for _, pipelining := range []bool{true, false} {
		t.Run(fmt.Sprintf("pipelining %v", pipelining), func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			accepted := make(chan net.Conn, 1)
			go func() {
				c := <-accepted
				cancel() // the caller gives up once the seed holds the connection
				accepted <- c
			}()
			_, err := Dial(ctx, WithService(testService), WithEnv(env(nil)), WithSeeds(silentSeed(t, accepted)), WithPipelining(pipelining))
			require.ErrorIs(t, err, ErrNoSeeds)
			require.ErrorIs(t, err, context.Canceled)
			assert.NotErrorIs(t, err, ErrAttemptTimeout)
			assert.True(t, closedByPeer(acceptedConn(t, accepted)), "the failed Dial closed its connection")

			// 200 ms: time enough for the dial to reach the seed on a loaded machine (a dial
			// the attempt timeout cuts is TestDialWhoseSeedDialRunsPastTheAttemptTimeout...).
			accepted = make(chan net.Conn, 1)
			_, err = Dial(context.Background(), WithService(testService), WithEnv(env(nil)), WithSeeds(silentSeed(t, accepted)), WithPipelining(pipelining),
				WithAttemptTimeout(200*time.Millisecond))
			require.ErrorIs(t, err, ErrNoSeeds)
			require.ErrorIs(t, err, ErrAttemptTimeout)
			assert.NotErrorIs(t, err, context.DeadlineExceeded, "the caller's context did not end")
			assert.True(t, closedByPeer(acceptedConn(t, accepted)), "the failed Dial closed its connection")

			// The caller's deadline, before the attempt timeout, is the caller's. It passes
			// once the seed holds the connection: a deadline on the clock could pass before
			// the dial on a loaded machine, and the seed would accept nothing.
			accepted = make(chan net.Conn, 1)
			short := pastOnAccept(accepted)
			_, err = Dial(short, WithService(testService), WithEnv(env(nil)), WithSeeds(silentSeed(t, accepted)), WithPipelining(pipelining))
			require.ErrorIs(t, err, ErrNoSeeds)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			assert.NotErrorIs(t, err, ErrAttemptTimeout)
			assert.True(t, closedByPeer(acceptedConn(t, accepted)), "the failed Dial closed its connection")
		})
	}
}

// acceptedConn returns the connection a silent seed accepted, failing after 10 s.
func acceptedConn(t *testing.T, accepted <-chan net.Conn) net.Conn {
	t.Helper()
	select {
	case c := <-accepted:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("the seed accepted no connection")
		return nil
	}
}

// deadlineContext is a context with a deadline 4 s away (before the default attempt
// timeout) that passes (Err is
// context.DeadlineExceeded) when done is closed.
type deadlineContext struct {
	context.Context
	deadline time.Time
	done     chan struct{}
}

func (c *deadlineContext) Deadline() (time.Time, bool) { return c.deadline, true }
func (c *deadlineContext) Done() <-chan struct{}       { return c.done }
func (c *deadlineContext) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// pastOnAccept returns a deadlineContext whose deadline passes once a silent seed has
// accepted a connection on accepted, which it hands back.
func pastOnAccept(accepted chan net.Conn) context.Context {
	ctx := &deadlineContext{Context: context.Background(), deadline: time.Now().Add(4 * time.Second), done: make(chan struct{})}
	go func() {
		c := <-accepted
		close(ctx.done)
		accepted <- c
	}()
	return ctx
}

// A seed whose dial runs past the attempt timeout fails the bootstrap with
// ErrAttemptTimeout, and nothing in the error says the caller's deadline passed: the
// dial's own deadline error stays out of the chain.
func TestDialWhoseSeedDialRunsPastTheAttemptTimeoutIsNotTheCallersDeadline(t *testing.T) {
	stuck := func(ctx context.Context, addr string) (Conn, error) {
		<-ctx.Done()
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: ctx.Err()}
	}
	_, err := Dial(context.Background(), WithService(testService), WithEnv(env(nil)), WithSeeds("127.0.0.1:7001"),
		WithDialer(stuck), WithPipelining(false), WithAttemptTimeout(20*time.Millisecond))
	require.ErrorIs(t, err, ErrNoSeeds)
	require.ErrorIs(t, err, ErrAttemptTimeout)
	assert.NotErrorIs(t, err, context.DeadlineExceeded, "the caller's context did not end")
	assert.ErrorContains(t, err, "no map within 20ms")
}
