package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisclient"
	"github.com/clustron/zaris-go/runtime"
	"github.com/clustron/zaris-go/runtime/clustermap"
	"github.com/clustron/zaris-go/tools/gen/zarispeer"
)

// Rule B7 against real processes: an owner dies right after the client refreshed its map,
// inside the 500 ms debounce window that then holds back every refresh its callers ask for
// (before B7 they gave up after 3 attempts in about 300 ms). In each of eleven trials, δ
// after a refresh (0, 50, ..., 500 ms), the owner of the keys that a client of one caller
// and a client of 16 callers write and read (Put, then Get of the same key) is killed with
// kill -9 (dials refused); the callers go on until each has done a few more pairs after the
// failover, and the node is restarted (empty, same id) before the next trial, so that every
// segment has a live replica again. Then the owner is stopped with SIGSTOP right after a
// refresh (connections accepted, nothing answers), under two clients of 16 callers: one
// with the default attempt timeout (5 s) and one with 1 s, whose attempts end with
// ErrAttemptTimeout before the failover and are bridged by B7's wait alone. Every call
// returns Ok to the application, every Get sees its Put, and every acknowledged write reads
// back after the failover.
func TestProcess_B7_OwnerDeadRightAfterARefreshCostsTheApplicationNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs zarisd processes")
	}
	c := startThreeNodes(t, "500ms")

	const trials = 11 // δ 0, 50, ..., 500 ms
	var met int       // calls of the kill trials that needed more than one attempt
	for trial := range trials {
		delta := time.Duration(trial) * 500 * time.Millisecond / (trials - 1)
		pm, err := c.admin.PeerMap(testCtx(t))
		require.NoError(t, err)
		victim, segs := busiestOwner(pm)
		require.NotEmpty(t, segs, "no node owns a segment")
		solo := startDeadOwnerCallers(t, fmt.Sprintf("t%d-solo", trial), c.seeds, 1, pm.SegmentCount, segs)
		crowd := startDeadOwnerCallers(t, fmt.Sprintf("t%d-crowd", trial), c.seeds, 16, pm.SegmentCount, segs)
		solo.waitPairs(t, "warming up", 3)
		crowd.waitPairs(t, "warming up", 3)
		solo.refresh(t)
		crowd.refresh(t)
		time.Sleep(delta)
		require.NoError(t, c.nodes[victim-1].cmd.Process.Kill()) // SIGKILL: dials refused, connections reset
		c.waitFailedOver(t, victim)
		solo.waitPairs(t, "after the failover", 3)
		crowd.waitPairs(t, "after the failover", 3)
		for _, g := range []*deadOwnerCallers{solo, crowd} {
			g.finish(t)
			t.Logf("trial %d, δ %v, kill -9 of node %d (%d segments): %s", trial, delta, victim, len(segs), g)
			assert.Empty(t, g.errs, "trial %d, δ %v, %s: errors returned to the application", trial, delta, g.name)
			met += g.retried
		}
		c.restartNode(t, victim)
	}
	assert.Positive(t, met, "no call of the kill trials met the dead owner")

	// The host that stops answering: SIGSTOP of the owner right after a refresh, with the
	// default attempt timeout (5 s: B6 ends the attempts once the new map is in) and with
	// one of 1 s, which ends them first, with ErrAttemptTimeout: the failover takes the
	// stopped node's etcd lease to run out (2 s), so only B7's wait bridges it.
	pm, err := c.admin.PeerMap(testCtx(t))
	require.NoError(t, err)
	victim, segs := busiestOwner(pm)
	crowd := startDeadOwnerCallers(t, "stop-crowd", c.seeds, 16, pm.SegmentCount, segs)
	short := startDeadOwnerCallers(t, "stop-crowd-1s", c.seeds, 16, pm.SegmentCount, segs, runtime.WithAttemptTimeout(time.Second))
	crowd.waitPairs(t, "warming up", 3)
	short.waitPairs(t, "warming up", 3)
	crowd.refresh(t)
	short.refresh(t)
	stopped := c.nodes[victim-1]
	require.NoError(t, stopped.cmd.Process.Signal(syscall.SIGSTOP))
	defer func() { _ = stopped.cmd.Process.Signal(syscall.SIGCONT) }()
	c.waitFailedOver(t, victim)
	crowd.waitPairs(t, "after the failover", 3)
	short.waitPairs(t, "after the failover", 3)
	for _, g := range []*deadOwnerCallers{crowd, short} {
		g.finish(t)
		t.Logf("SIGSTOP of node %d (%d segments): %s", victim, len(segs), g)
		assert.Empty(t, g.errs, "SIGSTOP, %s: errors returned to the application", g.name)
		assert.Positive(t, g.retried, "%s: no call met the stopped owner", g.name)
	}
	assert.Positive(t, short.ownerWaits, "%s: no call waited for the new owner", short.name)
}

// busiestOwner returns the node of pm that owns the most segments, and those segments.
func busiestOwner(pm *zarispeer.PeerMap) (int32, []int32) {
	owned := map[int32][]int32{}
	for _, s := range pm.Segments {
		if s.Owner != nil {
			owned[*s.Owner] = append(owned[*s.Owner], s.ID)
		}
	}
	var best int32
	for id, segs := range owned {
		if len(segs) > len(owned[best]) || len(segs) == len(owned[best]) && id < best {
			best = id
		}
	}
	return best, owned[best]
}

// deadOwnerCallers is one client and its callers, each of which writes a new key of the
// given segments and reads it back, in a loop, until finish.
type deadOwnerCallers struct {
	name  string
	kv    *zarisclient.Client
	pairs []atomic.Int64 // Put-then-Get pairs each caller completed, answered or not
	stop  chan struct{}
	wg    sync.WaitGroup
	once  sync.Once

	mu          sync.Mutex // protects what follows
	acked       map[string]string
	errs        []string
	calls       int
	retried     int           // calls that took more than one attempt
	longest     time.Duration // the longest call, as the application saw it
	ownerWaits  int           // calls that waited for a map naming another owner (B7)
	longestWait time.Duration // the longest such wait of one call
	longestCall string        // what the longest call was
}

// startDeadOwnerCallers dials a client of seeds with the default configuration and opts, and
// starts n callers on keys of segs.
func startDeadOwnerCallers(t *testing.T, name string, seeds []string, n int, segCount int32, segs []int32, opts ...runtime.Option) *deadOwnerCallers {
	t.Helper()
	g := &deadOwnerCallers{name: name, pairs: make([]atomic.Int64, n), stop: make(chan struct{}), acked: map[string]string{}}
	record := func(next runtime.Handler) runtime.Handler {
		return func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
			resp, err := next(ctx, call)
			g.mu.Lock()
			defer g.mu.Unlock()
			g.calls++
			if len(call.Attempts) > 1 {
				g.retried++
			}
			if call.Stats.OwnerWaits > 0 {
				g.ownerWaits++
				g.longestWait = max(g.longestWait, call.Stats.OwnerWait)
			}
			return resp, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	kv, err := zarisclient.Dial(ctx, append([]runtime.Option{runtime.WithEnv(nil), runtime.WithSeeds(seeds...),
		runtime.WithCallMiddleware(record)}, opts...)...)
	require.NoError(t, err)
	g.kv = kv
	for w := range n {
		g.wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-g.stop:
					return
				default:
				}
				key := keyIn(segs[i%len(segs)], segCount, fmt.Sprintf("%s-%d-%d", name, w, i))
				g.pair(key, string(key)+"-value")
				g.pairs[w].Add(1)
			}
		})
	}
	t.Cleanup(g.close)
	return g
}

// pair writes key and reads it back, and records what the application saw.
func (g *deadOwnerCallers) pair(key []byte, value string) {
	start := time.Now()
	put, err := g.kv.Put(context.Background(), &zaris.PutRequest{Key: key, Value: []byte(value)})
	g.took("put", key, start)
	if err != nil || put.Status != zaris.KvStatus_Ok {
		g.fail("put %s: %v %v", key, put, err)
		return
	}
	g.mu.Lock()
	g.acked[string(key)] = value
	g.mu.Unlock()
	start = time.Now()
	get, err := g.kv.Get(context.Background(), &zaris.GetRequest{Key: key})
	g.took("get", key, start)
	if err != nil || get.Status != zaris.KvStatus_Ok || string(get.Value) != value {
		g.fail("get %s after its put: %v %v", key, get, err)
	}
}

func (g *deadOwnerCallers) took(op string, key []byte, start time.Time) {
	d := time.Since(start)
	g.mu.Lock()
	defer g.mu.Unlock()
	if d > g.longest {
		g.longest = d
		g.longestCall = fmt.Sprintf("%s %s", op, key)
	}
}

func (g *deadOwnerCallers) fail(format string, args ...any) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.errs = append(g.errs, fmt.Sprintf(format, args...))
}

// refresh refreshes the client's map by hand, as an application may, and requires that it
// fetched one, so that the debounce window runs from now.
func (g *deadOwnerCallers) refresh(t *testing.T) {
	t.Helper()
	var res clustermap.RefreshResult
	for range 40 { // a fetch completed within the debounce window (500 ms) holds this one back
		res = g.kv.Engine().Refresher().Refresh(context.Background(), clustermap.Evidence{})
		if res.Performed {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	require.Fail(t, "the refresh fetched no map", "%s: %+v", g.name, res)
}

// waitPairs waits until every caller completed n more pairs than when it was called.
func (g *deadOwnerCallers) waitPairs(t *testing.T, what string, n int64) {
	t.Helper()
	base := make([]int64, len(g.pairs))
	for i := range g.pairs {
		base[i] = g.pairs[i].Load()
	}
	deadline := time.Now().Add(60 * time.Second) // a call's request timeout is 60 s
	for i := range g.pairs {
		for g.pairs[i].Load() < base[i]+n {
			if time.Now().After(deadline) {
				require.Failf(t, "callers made no progress", "%s, %s: caller %d did %d pairs, %d before; %s",
					what, g.name, i, g.pairs[i].Load(), base[i], g)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// finish stops the callers and requires every acknowledged write to read back, with 16
// readers, then closes the client.
func (g *deadOwnerCallers) finish(t *testing.T) {
	t.Helper()
	defer g.close()
	g.stopCallers()
	g.mu.Lock()
	keys := make([]string, 0, len(g.acked))
	for k := range g.acked {
		keys = append(keys, k)
	}
	g.mu.Unlock()
	require.NotEmpty(t, keys, "%s: no write was acknowledged", g.name)
	var (
		mu   sync.Mutex
		lost []string
		wg   sync.WaitGroup
	)
	for r := range 16 {
		wg.Go(func() {
			for i := r; i < len(keys); i += 16 {
				get, err := g.kv.Get(context.Background(), &zaris.GetRequest{Key: []byte(keys[i])})
				if err != nil || get.Status != zaris.KvStatus_Ok || string(get.Value) != g.acked[keys[i]] {
					mu.Lock()
					lost = append(lost, fmt.Sprintf("%s: %v %v", keys[i], get, err))
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	slices.Sort(lost)
	require.Empty(t, lost, "%s: acknowledged writes that do not read back, of %d", g.name, len(keys))
}

// stopCallers stops the callers and waits for them; it is idempotent.
func (g *deadOwnerCallers) stopCallers() {
	g.once.Do(func() { close(g.stop) })
	g.wg.Wait()
}

// close stops the callers and closes the client; it is idempotent.
func (g *deadOwnerCallers) close() {
	g.stopCallers()
	g.kv.Close()
}

// String sums the callers up for the test's log.
func (g *deadOwnerCallers) String() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var done int64
	for i := range g.pairs {
		done += g.pairs[i].Load()
	}
	errs := fmt.Sprintf("%d errors", len(g.errs))
	if len(g.errs) > 0 {
		errs += " (the first: " + strings.Join(g.errs[:min(len(g.errs), 3)], "; ") + ")"
	}
	return fmt.Sprintf("%s: %d callers, %d pairs, %s; %d calls with the read-back, %d retried, %d waited for a new owner (longest wait %v); longest call %v (%s)",
		g.name, len(g.pairs), done, errs, g.calls, g.retried, g.ownerWaits, g.longestWait.Round(time.Millisecond),
		g.longest.Round(time.Millisecond), g.longestCall)
}
