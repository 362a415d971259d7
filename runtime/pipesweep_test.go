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

	"github.com/clustron/zaris-go/gen/zaris"
)

// silentConn returns a pipelined connection to a node that reads every request and
// answers none.
func silentConn(t *testing.T) (*pipelines, *pipeConn) {
	addr := serveLoopback(t, func(c net.Conn) { _, _ = io.Copy(io.Discard, c) })
	return openPipeConn(t, addr)
}

// serveLoopback serves each connection to a loopback port with serve until the test ends,
// when it closes them, and returns the port's address.
func serveLoopback(t *testing.T, serve func(net.Conn)) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
			go serve(c)
		}
	}()
	return ln.Addr().String()
}

// openPipeConn opens a pipelined connection to addr with opts, closed when the test ends.
func openPipeConn(t *testing.T, addr string, opts ...Option) (*pipelines, *pipeConn) {
	cfg, err := NewConfig(append([]Option{WithService(testService), WithEnv(env(nil)), WithSeeds(addr)}, opts...)...)
	require.NoError(t, err)
	ps := newPipelines(cfg)
	raw, err := ps.dialSocket(context.Background(), addr)
	require.NoError(t, err)
	conn, err := newPipeConn(raw, ps)
	require.NoError(t, err)
	t.Cleanup(func() { conn.fail(errConnClosed); conn.wg.Wait() })
	return ps, conn
}

// getOnConn starts a Get of key over conn with the given deadline and returns its pcall and
// where its error arrives.
func getOnConn(ps *pipelines, conn *pipeConn, key string, deadline time.Time, callBound bool) (*pcall, <-chan error) {
	p := ps.getCall()
	p.conn, p.deadline, p.callBound = conn, deadline, callBound
	return p, invokeGet(p, key)
}

// invokeGet starts a Get of key on p, whose fields are set, and returns where its error
// arrives.
func invokeGet(p *pcall, key string) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := opGet.Invoke(context.Background(), p.kv, &zaris.GetRequest{Key: []byte(key)})
		done <- err
	}()
	return done
}

func (c *pipeConn) queued() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queue)
}

func (c *pipeConn) sweepRunning() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sweeping
}

// TestPipelineSweep_EndsAttemptsAtTheirDeadline: a sweep at a call's deadline, not before,
// ends its attempt and tells its caller. One still queued is dropped unwritten (not sent);
// one written is in doubt, and since no reply came on the connection after it was written,
// its attempt timeout fails the connection. A call's own deadline (callBound) does not.
func TestPipelineSweep_EndsAttemptsAtTheirDeadline(t *testing.T) {
	for _, callBound := range []bool{false, true} {
		t.Run(map[bool]string{false: "attempt timeout", true: "call deadline"}[callBound], func(t *testing.T) {
			ps, conn := silentConn(t)
			// Far ahead, so only the sweeps below, at an injected time, reach it.
			deadline := time.Now().Add(time.Hour)

			written, writtenErr := getOnConn(ps, conn, "written", deadline, callBound)
			eventually(t, func() bool { return conn.inFlight() == 1 })
			conn.writeMu.Lock() // the writer is busy: the next request stays queued
			unlock := sync.OnceFunc(conn.writeMu.Unlock)
			defer unlock()
			queued, queuedErr := getOnConn(ps, conn, "queued", deadline, callBound)
			eventually(t, func() bool { return conn.queued() == 1 })

			require.True(t, conn.sweep(deadline.Add(-time.Nanosecond)))
			assert.Equal(t, stWritten, written.state.Load(), "not yet at its deadline")
			assert.Equal(t, stQueued, queued.state.Load(), "not yet at its deadline")

			require.True(t, conn.sweep(deadline))
			for _, ended := range []<-chan error{writtenErr, queuedErr} {
				select {
				case err := <-ended:
					require.ErrorIs(t, err, context.DeadlineExceeded)
				case <-time.After(10 * time.Second): // a hang detector, not a timing assertion
					t.Fatal("the sweep did not tell the caller")
				}
			}
			assert.Equal(t, stSwept, written.state.Load())
			assert.Equal(t, stExpired, queued.state.Load())
			assert.True(t, written.wasSent, "a written request is in doubt")
			assert.False(t, queued.wasSent, "a queued request was never sent")
			for _, p := range []*pcall{written, queued} {
				assert.Equal(t, !callBound, p.timedOut, "the attempt timeout, not the call's deadline")
				assert.True(t, p.abandoned, "the connection may still hold it: never reused")
			}
			if callBound {
				assert.NoError(t, conn.failure())
			} else {
				assert.ErrorIs(t, conn.failure(), errNoReply)
			}
			unlock()
			if callBound {
				// The flush drops the expired request and counts it out; the written one
				// waits for a reply.
				eventually(t, func() bool { return conn.pending.Load() == 1 })
				assert.Equal(t, 0, conn.queued())
			}
		})
	}
}

// TestPipelineSweep_RunsWhileACallerWaits: the sweep goroutine starts with the
// first call queued on a connection and ends once no caller waits on it.
func TestPipelineSweep_RunsWhileACallerWaits(t *testing.T) {
	srv := startServer(t, headerServer, nil)
	cl := dialPipelined(t, srv.addr, 1)
	roundTrip(t, cl, "warm")
	conn := pipeConnsOf(cl, srv.addr)[0]
	eventually(t, func() bool { return !conn.sweepRunning() })

	slow := make(chan error, 1)
	go func() {
		_, err := cl.Invoke(context.Background(), getCall("slow"))
		slow <- err
	}()
	eventually(t, func() bool { return conn.inFlight() == 1 })
	assert.True(t, conn.sweepRunning())
	close(srv.kv.release)
	require.NoError(t, <-slow)
	eventually(t, func() bool { return !conn.sweepRunning() })
}

// TestPipelineSweep_EndsWhenNoCallerWaits: the sweep runs for the callers waiting on a
// connection, not for the requests it carries: once the only caller left on its context,
// its request still in flight on a node that never answers, the sweep goroutine ends.
func TestPipelineSweep_EndsWhenNoCallerWaits(t *testing.T) {
	ps, conn := silentConn(t)
	ctx, cancel := context.WithCancel(context.Background())
	p := ps.getCall()
	p.conn, p.deadline = conn, time.Now().Add(time.Hour)
	left := make(chan error, 1)
	go func() {
		_, err := opGet.Invoke(ctx, p.kv, &zaris.GetRequest{Key: []byte("k")})
		left <- err
	}()
	eventually(t, func() bool { return conn.inFlight() == 1 && conn.sweepRunning() })
	cancel()
	require.ErrorIs(t, <-left, context.Canceled)
	eventually(t, func() bool { return !conn.sweepRunning() })
	assert.Equal(t, int32(1), conn.pending.Load(), "the request is still in flight")
	assert.NoError(t, conn.failure())
}

// TestPipelineSweep_SilenceIsCountedFromTheWrite: an attempt that spent part of its timeout
// before its request was written (dialing, queued) ends at its deadline, but the connection
// is closed only once it has given no reply for a whole attempt timeout since the write:
// the sweep goes on watching for that, with no caller waiting, and a reply meanwhile keeps
// the connection open.
func TestPipelineSweep_SilenceIsCountedFromTheWrite(t *testing.T) {
	const timeout = time.Hour
	for _, replied := range []bool{false, true} {
		t.Run(map[bool]string{false: "no reply", true: "a late reply"}[replied], func(t *testing.T) {
			srv := startServer(t, headerServer, nil)
			ps, conn := openPipeConn(t, srv.addr, WithAttemptTimeout(timeout))
			// Half its attempt timeout is gone: only the sweeps below, at injected times, reach it.
			before := time.Now()
			deadline := before.Add(timeout / 2)
			p, ended := getOnConn(ps, conn, "slow", deadline, false) // answered when release closes
			eventually(t, func() bool { return conn.inFlight() == 1 })
			after := time.Now() // the request was written between before and after

			require.True(t, conn.sweep(deadline))
			require.ErrorIs(t, within(t, ended, "the swept caller"), context.DeadlineExceeded)
			assert.True(t, p.timedOut)
			assert.NoError(t, conn.failure(), "silent for half an attempt timeout only")
			eventually(t, func() bool { return conn.waiting.Load() == 0 })
			if replied {
				close(srv.kv.release)
				eventually(t, func() bool { return conn.pending.Load() == 0 })
				assert.False(t, conn.sweep(after.Add(timeout)), "nothing left to watch: the sweep ends")
				assert.NoError(t, conn.failure())
				return
			}
			assert.True(t, conn.sweep(before.Add(timeout-time.Nanosecond)), "the sweep watches the silence out")
			assert.NoError(t, conn.failure())
			conn.sweep(after.Add(timeout))
			assert.ErrorIs(t, conn.failure(), errNoReply, "no reply for a whole attempt timeout since the write")
			close(srv.kv.release)
		})
	}
}
