package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
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

// The counter workload of the rule B8 tests with processes: 16 callers, each making
// counterCalls Increments by one on random keys of 32, through one client.
const (
	counterCallers = 16
	counterCalls   = 400
	counterKeys    = 32
)

// Rule B8 against real processes: while 16 callers each make 400 Increments by one on 32
// keys through one client, the node owning the most of those keys is killed with kill -9
// while calls on its keys are in flight, so their replies are cut; it is restarted (empty,
// same id), catches up and is given its segments back (failback). Every call returns Ok,
// with no in-doubt error and no other error, and every counter ends at exactly the
// increments made on it: the calls whose reply the kill cut were replayed at the new owner,
// which answered them with the first outcome (the dead owner had replicated it before it
// could acknowledge) or applied them once (it had not).
func TestProcess_B8_CountersThroughKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs zarisd processes")
	}
	c := startThreeNodes(t, "500ms")
	g := startCounterCallers(t, c.seeds)
	require.EqualValues(t, DefaultDedupWindow.Milliseconds(), g.kv.Engine().Map().DedupWindowMs, "the map's dedup window")
	victim := g.busiestOwner(t, c)
	g.killDuringABurst(t, c, victim)
	c.restartNode(t, victim)
	g.failback(t, c, victim)
	g.finish(t)
	g.requireExact(t)
	t.Logf("kill -9 of node %d: %s", victim, g)
	require.Positive(t, g.replayed.Load(), "no call had a reply cut by the kill: the test proved nothing")
}

// Rule B8 against a stopped process: the same workload while the node owning the most of
// the keys is stopped with SIGSTOP (its kernel takes the requests, nothing answers) for
// 3 s or until it is failed over, whichever is later, and then resumed; the coordinator fails it over once its lease runs out, the
// calls waiting on it are ended by rule B6 as the client installs the new map and are
// replayed at the new owner. The resumed node catches up and is given its segments back.
// Every call returns Ok, with no in-doubt error and no other error, and every counter ends
// at exactly the increments made on it: neither the replays nor the requests the stopped
// node read after it resumed applied twice.
func TestProcess_B8_CountersThroughSIGSTOP(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs zarisd processes")
	}
	c := startThreeNodes(t, "500ms")
	g := startCounterCallers(t, c.seeds)
	require.EqualValues(t, DefaultDedupWindow.Milliseconds(), g.kv.Engine().Map().DedupWindowMs, "the map's dedup window")
	victim := g.busiestOwner(t, c)
	g.waitCalls(t, "warming up", counterCallers*counterCalls/5)
	g.waitBurst(t, victim)
	stopped := c.nodes[victim-1]
	require.NoError(t, stopped.cmd.Process.Signal(syscall.SIGSTOP))
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			_ = stopped.cmd.Process.Signal(syscall.SIGCONT)
		}
	})
	stoppedAt := time.Now()
	require.Less(t, g.done.Load(), int64(counterCallers*counterCalls), "the workload ended before the stop")
	c.waitFailedOver(t, victim)
	time.Sleep(time.Until(stoppedAt.Add(3 * time.Second)))
	require.NoError(t, stopped.cmd.Process.Signal(syscall.SIGCONT))
	resumed = true
	t.Logf("node %d stopped for %v", victim, time.Since(stoppedAt).Round(time.Millisecond))
	// It finds its lease gone, registers again and catches up as a replica.
	waitPeerMap(t, c.admin, "the resumed node did not catch up", func(pm *zarispeer.PeerMap) bool {
		for _, s := range pm.Segments {
			if slices.Contains(s.Replicas, victim) {
				return settledThree(pm)
			}
		}
		return false
	})
	g.failback(t, c, victim)
	g.finish(t)
	g.requireExact(t)
	t.Logf("SIGSTOP of node %d: %s", victim, g)
	require.Positive(t, g.replayed.Load(), "no call had an attempt ended on the stopped owner: the test proved nothing")
}

// The control of the two tests above: the same kill -9 against nodes started with
// --dedup-window 0, which keep no outcomes and advertise no window, as a store without
// rule B8. Calls whose reply the kill cut end in doubt (runtime.ErrInDoubt), as rule B2
// says, and no other error reaches the application; no acknowledged increment is lost.
// It shows that the kill does cut replies, and that the tests above pass because of the
// window, not by luck.
func TestProcess_B8_CountersInDoubtThroughKill9WithoutADedupWindow(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs zarisd processes")
	}
	c := startThreeNodesWith(t, "500ms", []string{"--dedup-window", "0"})
	g := startCounterCallers(t, c.seeds)
	require.Zero(t, g.kv.Engine().Map().DedupWindowMs, "the map advertises a dedup window")
	victim := g.busiestOwner(t, c)
	g.killDuringABurst(t, c, victim)
	g.finish(t)
	t.Logf("kill -9 of node %d without a dedup window: %s", victim, g)
	g.mu.Lock()
	inDoubt := 0
	for _, err := range g.errs {
		if errors.Is(err, runtime.ErrInDoubt) {
			inDoubt++
		} else {
			t.Errorf("an error other than in doubt: %v", err)
		}
	}
	g.mu.Unlock()
	require.Positive(t, inDoubt, "no call in doubt without a window")
	for i, v := range g.values(t) {
		made, acked := g.made[i].Load(), g.acked[i].Load()
		assert.True(t, acked <= v && v <= made, "%s: %d, %d increments acknowledged of %d made", g.keys[i], v, acked, made)
	}
}

// counterWorkload is one client and the callers of the counter workload, with what they
// made and what they met.
type counterWorkload struct {
	kv       *zarisclient.Client
	keys     [][]byte
	made     []atomic.Int64 // per key: the Increments made on it
	acked    []atomic.Int64 // per key: the Increments that returned Ok
	inFlight []atomic.Int64 // per key: the Increments in flight
	done     atomic.Int64   // calls returned
	lost     atomic.Int64   // calls with an attempt sent and unanswered, whatever they returned
	replayed atomic.Int64   // those of them that returned Ok
	wg       sync.WaitGroup

	mu   sync.Mutex // protects errs
	errs []error
}

// startCounterCallers dials a client of seeds, with the default configuration, and starts
// the callers.
func startCounterCallers(t *testing.T, seeds []string) *counterWorkload {
	t.Helper()
	g := &counterWorkload{made: make([]atomic.Int64, counterKeys), acked: make([]atomic.Int64, counterKeys),
		inFlight: make([]atomic.Int64, counterKeys)}
	for i := range counterKeys {
		g.keys = append(g.keys, []byte(fmt.Sprintf("counter-%d", i)))
	}
	// It sees each call's attempts once the call is over.
	count := func(next runtime.Handler) runtime.Handler {
		return func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
			resp, err := next(ctx, call)
			if lostAttempts(call) > 0 {
				g.lost.Add(1)
				if err == nil {
					g.replayed.Add(1)
				}
			}
			return resp, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	kv, err := zarisclient.Dial(ctx, runtime.WithEnv(nil), runtime.WithSeeds(seeds...), runtime.WithCallMiddleware(count))
	require.NoError(t, err)
	g.kv = kv
	t.Cleanup(func() { g.wg.Wait(); kv.Close() })
	for w := range counterCallers {
		rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
		g.wg.Go(func() {
			for range counterCalls {
				g.increment(rng.IntN(counterKeys))
			}
		})
	}
	return g
}

// increment makes one Increment by one of key k and records what the application saw.
func (g *counterWorkload) increment(k int) {
	g.inFlight[k].Add(1)
	resp, err := g.kv.Increment(context.Background(), &zaris.IncrementRequest{Key: g.keys[k], Delta: 1})
	g.inFlight[k].Add(-1)
	g.made[k].Add(1)
	if err == nil && resp.Status != zaris.KvStatus_Ok {
		err = fmt.Errorf("status %s", resp.Status)
	}
	if err == nil {
		g.acked[k].Add(1)
	} else {
		g.mu.Lock()
		g.errs = append(g.errs, fmt.Errorf("increment of %s: %w", g.keys[k], err))
		g.mu.Unlock()
	}
	g.done.Add(1)
}

// lostAttempts counts the attempts of call that may have reached a node and got no reply.
func lostAttempts(call *runtime.Call) int {
	n := 0
	for _, a := range call.Attempts {
		if a.Sent && !a.Answered {
			n++
		}
	}
	return n
}

// busiestOwner returns the node that owns the most of the workload's keys in the
// coordinator's map.
func (g *counterWorkload) busiestOwner(t *testing.T, c *threeNodes) int32 {
	t.Helper()
	pm, err := c.admin.PeerMap(testCtx(t))
	require.NoError(t, err)
	owned := map[int32]int{}
	var best int32
	for _, k := range g.keys {
		id := g.owner(pm, k)
		owned[id]++
		if owned[id] > owned[best] || owned[id] == owned[best] && id < best {
			best = id
		}
	}
	require.NotZero(t, best, "no node owns a key")
	return best
}

// owner returns the owner of key in pm, or 0.
func (g *counterWorkload) owner(pm *zarispeer.PeerMap, key []byte) int32 {
	seg := clustermap.SegmentOf(key, pm.SegmentCount)
	for _, s := range pm.Segments {
		if s.ID == seg && s.Owner != nil {
			return *s.Owner
		}
	}
	return 0
}

// waitCalls waits until n calls returned in all.
func (g *counterWorkload) waitCalls(t *testing.T, what string, n int64) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second) // a call's request timeout is 60 s
	for g.done.Load() < n {
		if time.Now().After(deadline) {
			require.Failf(t, "the callers made no progress", "%s: %d calls returned, waiting for %d; %s", what, g.done.Load(), n, g)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitBurst waits until at least a quarter of the callers are in calls on keys that node
// victim owns (as the client's map says), so that stopping it now cuts replies.
func (g *counterWorkload) waitBurst(t *testing.T, victim int32) {
	t.Helper()
	m := g.kv.Engine().Map()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int64
		for i, k := range g.keys {
			if s := m.Segments[clustermap.SegmentOf(k, m.SegmentCount)]; s.Owner != nil && *s.Owner == victim {
				n += g.inFlight[i].Load()
			}
		}
		if n >= counterCallers/4 {
			return
		}
		if time.Now().After(deadline) {
			require.Failf(t, "no burst of calls on the victim's keys", "node %d; %s", victim, g)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// killDuringABurst waits until a fifth of the calls returned and a burst of calls on keys
// of node victim is in flight, kills it with kill -9 and waits until it is failed over.
func (g *counterWorkload) killDuringABurst(t *testing.T, c *threeNodes, victim int32) {
	t.Helper()
	g.waitCalls(t, "warming up", counterCallers*counterCalls/5)
	g.waitBurst(t, victim)
	require.NoError(t, c.nodes[victim-1].cmd.Process.Kill()) // SIGKILL: connections reset, dials refused
	require.Less(t, g.done.Load(), int64(counterCallers*counterCalls), "the workload ended before the kill")
	c.waitFailedOver(t, victim)
}

// failback gives node id its segments back, once it caught up, and logs how many calls were
// still to come then.
func (g *counterWorkload) failback(t *testing.T, c *threeNodes, id int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err := c.admin.Failback(ctx, id)
	require.NoError(t, err, "failback of node %d", id)
	t.Logf("failback of node %d done with %d calls still to come", id, int64(counterCallers*counterCalls)-g.done.Load())
}

// finish waits for the callers, with a generous bound.
func (g *counterWorkload) finish(t *testing.T) {
	t.Helper()
	done := make(chan struct{})
	go func() { g.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Minute):
		require.Failf(t, "the callers did not finish", "%s", g)
	}
}

// requireExact requires that every call returned Ok and that every counter holds exactly
// the increments made on it.
func (g *counterWorkload) requireExact(t *testing.T) {
	t.Helper()
	g.mu.Lock()
	require.NoError(t, errors.Join(g.errs...), "calls that did not return Ok")
	g.mu.Unlock()
	for i, v := range g.values(t) {
		assert.Equal(t, g.made[i].Load(), v, "%s: the increments made on it", g.keys[i])
	}
}

// values reads every counter through the client.
func (g *counterWorkload) values(t *testing.T) []int64 {
	t.Helper()
	out := make([]int64, len(g.keys))
	for i, k := range g.keys {
		got, err := g.kv.Get(testCtx(t), &zaris.GetRequest{Key: k})
		require.NoError(t, err, "get %s", k)
		require.Equal(t, zaris.KvStatus_Ok, got.Status, "get %s", k)
		out[i], err = strconv.ParseInt(string(got.Value), 10, 64)
		require.NoError(t, err, "get %s", k)
	}
	return out
}

// String sums the workload up for the test's log.
func (g *counterWorkload) String() string {
	g.mu.Lock()
	errs := len(g.errs)
	g.mu.Unlock()
	return fmt.Sprintf("%d calls by %d callers on %d keys, %d errors; %d calls had an attempt sent without a reply, %d of them replayed to Ok",
		g.done.Load(), counterCallers, counterKeys, errs, g.lost.Load(), g.replayed.Load())
}
