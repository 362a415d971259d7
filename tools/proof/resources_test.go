package proof

import (
	"context"
	"fmt"
	"os"
	goruntime "runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisclient"
	"github.com/clustron/zaris-go/runtime"
	"github.com/clustron/zaris-go/tools/store"
)

// connTracker wraps a runtime.Dialer and counts the client's live connections: opened by
// a dial that succeeded, not yet closed. It keeps the highest count it saw.
type connTracker struct {
	dial  runtime.Dialer
	live  atomic.Int64
	peak  atomic.Int64
	dials atomic.Int64
}

func (tr *connTracker) dialer(ctx context.Context, addr string) (runtime.Conn, error) {
	conn, err := tr.dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	tr.dials.Add(1)
	n := tr.live.Add(1)
	for {
		p := tr.peak.Load()
		if n <= p || tr.peak.CompareAndSwap(p, n) {
			break
		}
	}
	return &trackedConn{Conn: conn, tr: tr}, nil
}

// trackedConn is a connection counted by a connTracker until its first Close.
type trackedConn struct {
	runtime.Conn
	tr   *connTracker
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() { c.tr.live.Add(-1) })
	return c.Conn.Close()
}

// openSockets returns the sockets this process has open (the targets of /proc/self/fd
// that are "socket:[inode]").
func openSockets(t *testing.T) map[string]bool {
	t.Helper()
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

// newSockets lists the sockets in now that were not in before.
func newSockets(before, now map[string]bool) []string {
	var out []string
	for s := range now {
		if !before[s] {
			out = append(out, s)
		}
	}
	return out
}

// clientGoroutines lists the stacks of goroutines running code of the client runtime (its
// refresher, pools, cluster or singleflight).
func clientGoroutines() []string {
	buf := make([]byte, 4<<20)
	buf = buf[:goruntime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "singleflight") || strings.Contains(g, "zaris-go/runtime.") ||
			strings.Contains(g, "zaris-go/middleware.") {
			out = append(out, g)
		}
	}
	return out
}

// TestResources_PoolsStayBoundedThroughFiftyKillsAndRestarts runs a client with a pool of
// 4 connections per node and 8 workers calling without pause against a 3-node cluster
// while a node is killed and restarted 50 times in turn. The client must never hold more
// than nodes × pool size connections, however many of them die and are dialed again. Then
// engine.Close() must leave no goroutine of the client and none of its sockets, and
// closing the cluster must bring the process's sockets and goroutines back to where they
// were before the test.
func TestResources_PoolsStayBoundedThroughFiftyKillsAndRestarts(t *testing.T) {
	const (
		poolSize = 4
		cycles   = 50
	)
	opts := []runtime.Option{runtime.WithPoolSize(poolSize)}
	var tr *connTracker
	withTracker := func(cfg runtime.Config) []runtime.Option {
		tr = &connTracker{dial: runtime.DefaultDialer(cfg)}
		return []runtime.Option{runtime.WithDialer(tr.dialer)}
	}
	churnNodes(t, cycles, opts, withTracker, func(cycle int) {
		require.LessOrEqual(t, tr.live.Load(), int64(churnNodeCount*poolSize), "cycle %d: live connections", cycle)
	}, func() {
		t.Logf("dials %d, peak live connections %d", tr.dials.Load(), tr.peak.Load())
		assert.LessOrEqual(t, tr.peak.Load(), int64(churnNodeCount*poolSize), "the pools are bounded")
		assert.Greater(t, tr.dials.Load(), int64(churnNodeCount*poolSize), "killed connections were dialed again")
		assert.Zero(t, tr.live.Load(), "connections left open by Close")
	})
}

// TestResources_PipelinedConnectionsThroughKillsAndRestarts is the same churn with
// pipelined connections (the default, which needs the built-in dialer) and callers that
// leave early too: Close must leave no goroutine of the client and none of its sockets,
// and closing the cluster must bring the process back to where it was.
func TestResources_PipelinedConnectionsThroughKillsAndRestarts(t *testing.T) {
	opts := []runtime.Option{runtime.WithPipelining(true), runtime.WithPipelineConns(2)}
	churnNodes(t, 20, opts, nil, nil, nil)
}

// churnNodeCount is the cluster size of churnNodes.
const churnNodeCount = 3

// churnNodes runs 8 workers calling without pause (Puts and Gets, every third call with a
// context that ends within a few milliseconds) through a client dialed with opts (and
// extra(cfg)'s options, if extra is set) against a 3-node cluster while a node is killed
// and restarted cycles times in turn, calling check after each cycle. Then it calls done,
// closes the client and checks that it leaves no goroutine of the client, and that closing
// the cluster brings the process's sockets and goroutines back to where they were.
func churnNodes(t *testing.T, cycles int, opts []runtime.Option, extra func(runtime.Config) []runtime.Option, check func(cycle int), done func()) {
	const workers = 8
	// No garbage collection: its finalizers would close leaked sockets and hide a leak.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	ignore := goleak.IgnoreCurrent()
	socks0 := openSockets(t)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := store.NewCluster(ctx, store.ClusterConfig{Nodes: churnNodeCount, Segments: segments, FailureTimeout: time.Second})
	require.NoError(t, err)
	clusterClosed := false
	defer func() {
		if !clusterClosed {
			c.Close()
		}
	}()

	opts = append([]runtime.Option{
		runtime.WithSeeds(c.Seeds()...),
		runtime.WithAttemptTimeout(time.Second), runtime.WithRequestTimeout(3 * time.Second),
		runtime.WithBackoff(10 * time.Millisecond),
	}, opts...)
	if extra != nil {
		cfg, err := runtime.NewConfig(append(opts, runtime.WithService(zarisclient.Service))...)
		require.NoError(t, err)
		opts = append(opts, extra(cfg)...)
	}
	kv, err := zarisclient.Dial(ctx, opts...)
	require.NoError(t, err)
	closed := false
	defer func() {
		if !closed {
			kv.Close()
		}
	}()

	var (
		stop     = make(chan struct{})
		wg       sync.WaitGroup
		ok, errs atomic.Int64
	)
	for w := range workers {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := []byte(fmt.Sprintf("r%d-%d", w, i%16))
				cctx, ccancel := ctx, context.CancelFunc(func() {})
				if i%3 == 2 {
					cctx, ccancel = context.WithTimeout(ctx, time.Duration(1+i%5)*time.Millisecond)
				}
				var err error
				if i%2 == 0 {
					_, err = kv.Put(cctx, &zaris.PutRequest{Key: key, Value: []byte("v")})
				} else {
					_, err = kv.Get(cctx, &zaris.GetRequest{Key: key})
				}
				ccancel()
				if err != nil {
					errs.Add(1)
				} else {
					ok.Add(1)
				}
			}
		})
	}
	waitCalls := func(n int64) {
		t.Helper()
		start := ok.Load()
		for ok.Load() < start+n {
			require.NoError(t, ctx.Err(), "the workload made no progress")
			time.Sleep(time.Millisecond)
		}
	}
	waitCalls(100)
	for i := range cycles {
		id := int32(i%churnNodeCount) + 1
		require.NoError(t, c.Kill(id), "cycle %d: kill node %d", i, id)
		require.NoError(t, c.Restart(ctx, id), "cycle %d: restart node %d", i, id)
		waitCalls(10)
		if check != nil {
			check(i)
		}
	}
	// The cluster still serves this client after the churn.
	require.NoError(t, c.WaitSettled(ctx))
	waitCalls(100)
	close(stop)
	wg.Wait()
	t.Logf("calls ok %d, failed %d", ok.Load(), errs.Load())

	// Close the client: no socket it opened, no goroutine of it.
	require.NoError(t, kv.Close())
	closed = true
	if done != nil {
		done()
	}
	eventually(t, func() bool { return len(clientGoroutines()) == 0 }, func() string {
		return strings.Join(clientGoroutines(), "\n\n")
	})
	// The cluster's own sockets may have changed with the restarts, so the client's are
	// checked after the cluster is closed too: then every socket since the start is gone.
	require.NoError(t, c.Close())
	clusterClosed = true
	eventually(t, func() bool { return len(newSockets(socks0, openSockets(t))) == 0 }, func() string {
		return fmt.Sprintf("sockets still open: %v", newSockets(socks0, openSockets(t)))
	})
	goleak.VerifyNone(t, ignore)
}

// eventually polls cond until it holds, failing the test with what() after 10 s.
func eventually(t *testing.T, cond func() bool, what func() string) {
	t.Helper()
	for range 1000 {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("condition not reached: %s", what())
}
