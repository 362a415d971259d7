package runtime

// Tests that kill mutants make mutate found alive in runtime/ and that need the package's
// internals: each names the rule it protects.

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	c, err := newThriftConn(&deadlineConn{}, cfg.Protocol, cfg.Transport, thriftConfig(cfg), testService.NewClient)
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
	c, err := newThriftConn(client, cfg.Protocol, cfg.Transport, thriftConfig(cfg), testService.NewClient)
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
