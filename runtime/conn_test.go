package runtime

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// deadlineConn is a socket that records the deadlines set on it; its reads find the
// connection closed.
type deadlineConn struct {
	net.Conn
	mu  sync.Mutex
	set []time.Time
}

func (c *deadlineConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.set = append(c.set, t)
	return nil
}

// last returns the deadline set last.
func (c *deadlineConn) last() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.set[len(c.set)-1]
}
func (c *deadlineConn) Read([]byte) (int, error)    { return 0, io.EOF }
func (c *deadlineConn) Write(p []byte) (int, error) { return len(p), nil }
func (c *deadlineConn) Close() error                { return nil }

// TestArmMovesTheSocketDeadlineOnlyWhenItMust checks that arm leaves the socket's deadline
// where it is while it is no earlier than the call's and at most late after it, and
// otherwise sets it to the call's deadline plus late.
func TestArmMovesTheSocketDeadlineOnlyWhenItMust(t *testing.T) {
	raw := &deadlineConn{}
	c := &thriftConn{raw: raw}
	t0 := time.Now()
	late := 10 * time.Millisecond
	ctx := context.Background()

	c.arm(ctx, t0.Add(time.Second), t0, late)
	require.Equal(t, []time.Time{t0.Add(time.Second + late)}, raw.set, "the first call sets it, late past its deadline")
	c.arm(ctx, t0.Add(time.Second+late), t0.Add(late), late)
	c.arm(ctx, t0.Add(time.Second), t0, late)
	assert.Len(t, raw.set, 1, "deadlines up to late before the socket's keep it")

	c.arm(ctx, t0.Add(time.Second+late+1), t0.Add(late+1), late)
	require.Len(t, raw.set, 2, "a later deadline moves it")
	assert.Equal(t, t0.Add(time.Second+2*late+1), raw.set[1])

	c.arm(ctx, t0.Add(500*time.Millisecond), t0, late)
	require.Len(t, raw.set, 3, "a deadline more than late before the socket's moves it back")
	assert.Equal(t, t0.Add(500*time.Millisecond+late), raw.set[2])

	c.arm(ctx, t0.Add(500*time.Millisecond+late/2), t0, 0)
	require.Len(t, raw.set, 4, "with no lateness allowed, any other deadline moves it")
	assert.Equal(t, t0.Add(500*time.Millisecond+late/2), raw.set[3])
}

// TestCallSocketKeepsTheCallDeadlineExactly checks that an attempt bound by its call's
// deadline, or by its context's, puts exactly that deadline on the socket, and one bound by
// the attempt timeout puts it at most lateAttemptTimeout later.
func TestCallSocketKeepsTheCallDeadlineExactly(t *testing.T) {
	cfg, err := NewConfig(WithService(testService), WithEnv(env(nil)), WithSeeds("127.0.0.1:1"))
	require.NoError(t, err)
	late := lateAttemptTimeout(cfg.AttemptTimeout)
	require.Positive(t, late)
	now := time.Now()
	deadline := now.Add(time.Second)
	ctxDeadline, cancel := context.WithDeadline(context.Background(), now.Add(500*time.Millisecond))
	defer cancel()
	for _, tc := range []struct {
		name      string
		ctx       context.Context
		callBound bool
		want      time.Time
	}{
		{"attempt timeout", context.Background(), false, deadline.Add(late)},
		{"call deadline", context.Background(), true, deadline},
		{"context deadline", ctxDeadline, false, now.Add(500 * time.Millisecond)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := &deadlineConn{}
			sc, err := newThriftConn(raw, cfg.Protocol, cfg.Transport, thriftConfig(cfg), nil, testService.NewClient)
			require.NoError(t, err)
			_, o := callSocket(tc.ctx, sc, getCall("k"), deadline, tc.callBound, now, late)
			require.Error(t, o.err, "the socket reads EOF")
			require.Len(t, raw.set, 1)
			assert.True(t, tc.want.Equal(raw.set[0]), "deadline %v, want %v", raw.set[0], tc.want)
		})
	}
}

// TestArmKeepsTheWatchOfARepeatedContext checks that calls on one connection with the
// context of the call before them reuse its watch and allocate nothing, and that a kept
// watch still aborts a call in flight when its context ends, but not a later call with
// another context.
func TestArmKeepsTheWatchOfARepeatedContext(t *testing.T) {
	cfg, err := NewConfig(WithService(testService), WithEnv(env(nil)), WithSeeds("127.0.0.1:1"))
	require.NoError(t, err)
	raw := &deadlineConn{}
	c, err := newThriftConn(raw, cfg.Protocol, cfg.Transport, thriftConfig(cfg), nil, testService.NewClient)
	require.NoError(t, err)
	deadline := time.Now().Add(time.Minute)
	call := func(ctx context.Context) bool {
		stop := c.arm(ctx, deadline, time.Now(), time.Second)
		return stop()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.True(t, call(ctx))
	require.True(t, call(ctx))
	assert.Zero(t, testing.AllocsPerRun(100, func() { call(ctx) }), "a repeated context's calls reuse its watch")

	// The kept watch aborts a call in flight when its context ends.
	stop := c.arm(ctx, deadline, time.Now(), time.Second)
	cancel()
	require.Eventually(t, func() bool { return raw.last().Equal(aLongTimeAgo) }, 10*time.Second, time.Millisecond)
	assert.False(t, stop(), "the call was aborted")

	// On a fresh connection, a kept watch whose context ends between calls leaves the
	// next call, with another context, alone.
	raw = &deadlineConn{}
	c, err = newThriftConn(raw, cfg.Protocol, cfg.Transport, thriftConfig(cfg), nil, testService.NewClient)
	require.NoError(t, err)
	ctx, cancel = context.WithCancel(context.Background())
	require.True(t, call(ctx))
	require.True(t, call(ctx))
	other, cancelOther := context.WithCancel(context.Background())
	defer cancelOther()
	stop = c.arm(other, deadline, time.Now(), time.Second)
	cancel()
	c.abort() // as the ended watch would, had it fired late
	assert.True(t, stop(), "a call with a live context is not aborted")
	assert.False(t, raw.last().Equal(aLongTimeAgo))

	// A call with a context that ended while its kept watch had nothing to abort is
	// aborted at once.
	require.True(t, call(other))
	require.True(t, call(other))
	cancelOther()
	stop = c.arm(other, deadline, time.Now(), time.Second)
	assert.True(t, raw.last().Equal(aLongTimeAgo))
	assert.False(t, stop())
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
