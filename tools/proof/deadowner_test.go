package proof

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisclient"
	"github.com/clustron/zaris-go/runtime"
	"github.com/clustron/zaris-go/runtime/clustermap"
	"github.com/clustron/zaris-go/tools/store"
)

// Rule B7 end to end: an owner that dies or is lost while callers use it costs them time,
// never an error. Every trial runs on a fresh in-process cluster (store defaults, 16
// segments) two clients with the default settings (5 s attempt timeout, 60 s deadline, 3
// attempts, 500 ms debounce, 5 s owner wait) side by side, each on keys of its own that the
// node the trial takes away owns: one with a single caller, one with 16 concurrent callers.
// Each caller does Put then Get on its key until the trial has seen every caller complete
// two pairs after the store failed the node over. Every call goes into one porcupine
// history per test, checked with the model of model_test.go; after each trial every key is
// read back and must hold its last acknowledged write (or a later one that got no answer).
// The tests assert no application error, the history and the read-back; they log what the
// calls cost (longest call, longest B7 wait) and assert no wall-clock time.

// b7Shapes are the clients of every trial: how many callers each runs.
var b7Shapes = []struct {
	name    string
	callers int
}{{"1 caller", 1}, {"16 callers", 16}}

// b7MaxPairs bounds the Put-then-Get pairs of one caller in one trial, far above what a
// trial needs.
const b7MaxPairs = 200_000

// b7Recorder records every call of a test's trials: the history, the last acknowledged
// write of every key, the errors the application saw, and what the calls cost per shape.
type b7Recorder struct {
	h      *history
	nextID atomic.Int64

	mu      sync.Mutex // protects everything below
	trials  int
	errs    []string
	written map[string]b7Written
	stats   map[string]*b7Stats
}

// b7Written is what a key may hold: the value of the last acknowledged Put, or of one of the
// Puts after it that got no answer.
type b7Written struct {
	acked string
	maybe []string
}

// b7Stats is what the calls of one shape cost across a test's trials.
type b7Stats struct {
	calls, errors            int
	waited, waits            int // calls that waited for a new owner (B7), and their waits
	longestCall, longestWait time.Duration
	deferred, requested      uint64 // the refreshers' Deferred and Requested counts
}

func newB7Recorder() *b7Recorder {
	r := &b7Recorder{h: newHistory(), written: map[string]b7Written{}, stats: map[string]*b7Stats{}}
	for _, s := range b7Shapes {
		r.stats[s.name] = &b7Stats{}
	}
	return r
}

// do runs one call of caller id (of the shape) through kv and records it.
func (r *b7Recorder) do(ctx context.Context, shape string, id int, kv *zarisclient.Client, in kvInput) (kvOutput, error) {
	slot := &callSlot{}
	call := r.h.now()
	out, err := execute(context.WithValue(ctx, slotKey{}, slot), kv, in)
	ret := r.h.now()
	if err != nil {
		out = kvOutput{out: outUnknown}
	}
	r.h.add(id, in, out, call, ret, lostAttempts(slot.call))

	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.stats[shape]
	s.calls++
	s.longestCall = max(s.longestCall, time.Duration(ret-call))
	if c := slot.call; c != nil && c.Stats.OwnerWaits > 0 {
		s.waited++
		s.waits += c.Stats.OwnerWaits
		s.longestWait = max(s.longestWait, c.Stats.OwnerWait)
	}
	if err != nil {
		s.errors++
		e := fmt.Sprintf("%s: %s %s: %v", shape, in.kind, in.key, err)
		if c := slot.call; c != nil {
			e += fmt.Sprintf(" [stats: %+v]", c.Stats)
		}
		r.errs = append(r.errs, e)
	}
	if in.kind == opPut {
		w := r.written[in.key]
		if out.out == outOk {
			w = b7Written{acked: in.value}
		} else {
			w.maybe = append(w.maybe, in.value)
		}
		r.written[in.key] = w
	}
	return out, err
}

// b7Callers are the callers of one client in one trial.
type b7Callers struct {
	shape string
	kv    *zarisclient.Client
	keys  []string
	pairs []atomic.Int64 // completed pairs per caller
	stop  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
}

// start starts one caller per key on kv, each doing Put then Get on its key, with a value
// never written before, until finish (at most b7MaxPairs pairs). When the test ends first
// (it failed), their calls are cancelled.
func (r *b7Recorder) start(t *testing.T, shape string, kv *zarisclient.Client, keys []string) *b7Callers {
	ctx, cancel := context.WithCancel(context.Background())
	cs := &b7Callers{shape: shape, kv: kv, keys: keys, pairs: make([]atomic.Int64, len(keys)), stop: make(chan struct{})}
	for i, key := range keys {
		id := int(r.nextID.Add(1))
		cs.wg.Add(1)
		go func() {
			defer cs.wg.Done()
			for n := range b7MaxPairs {
				select {
				case <-cs.stop:
					return
				default:
				}
				r.do(ctx, shape, id, kv, kvInput{kind: opPut, key: key, value: fmt.Sprintf("%d-%d", id, n)})
				r.do(ctx, shape, id, kv, kvInput{kind: opGet, key: key})
				cs.pairs[i].Add(1)
			}
		}()
	}
	t.Cleanup(func() {
		cancel()
		cs.finish()
	})
	return cs
}

// finish stops the callers and waits for them.
func (cs *b7Callers) finish() {
	cs.once.Do(func() { close(cs.stop) })
	cs.wg.Wait()
}

// b7WaitPairs waits until every caller of every cs has completed n more pairs than when it
// was called, or ctx ends.
func b7WaitPairs(ctx context.Context, n int64, cs ...*b7Callers) error {
	type caller struct {
		cs     *b7Callers
		i      int
		target int64
	}
	var all []caller
	for _, c := range cs {
		for i := range c.pairs {
			all = append(all, caller{c, i, c.pairs[i].Load() + n})
		}
	}
	for _, c := range all {
		for c.cs.pairs[c.i].Load() < c.target {
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s: caller %d (key %s) completed %d pairs, waiting for %d: %w",
					c.cs.shape, c.i, c.cs.keys[c.i], c.cs.pairs[c.i].Load(), c.target, ctx.Err())
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	return nil
}

// b7Trial is one trial: a fresh cluster and one client per shape.
type b7Trial struct {
	t       *testing.T
	r       *b7Recorder
	ctx     context.Context
	c       *store.Cluster
	clients []*zarisclient.Client // by shape, as b7Shapes
	callers []*b7Callers
}

// newTrial starts a cluster and dials one client per shape with opts after the defaults.
func (r *b7Recorder) newTrial(t *testing.T, opts ...runtime.Option) *b7Trial {
	tr := &b7Trial{t: t, r: r, ctx: testCtx(t)}
	tr.c = store.StartCluster(t, store.ClusterConfig{Nodes: 3, Segments: segments})
	for range b7Shapes {
		tr.clients = append(tr.clients, dialB7(t, tr.c, opts...))
	}
	r.mu.Lock()
	r.trials++
	r.mu.Unlock()
	return tr
}

// dialB7 dials a client at c with the default settings (the environment ignored), plus
// captureCall, and opts.
func dialB7(t *testing.T, c *store.Cluster, opts ...runtime.Option) *zarisclient.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	base := []runtime.Option{runtime.WithSeeds(c.Seeds()...), runtime.WithEnv(nil), runtime.WithCallMiddleware(captureCall)}
	kv, err := zarisclient.Dial(ctx, append(base, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { kv.Close() })
	return kv
}

// startCallers starts every shape's callers, on keys named after the trial whose segments
// pass owned, and waits until each caller has completed a pair: every client holds
// connections to the owners when the churn comes.
func (tr *b7Trial) startCallers(owned func(seg int32) bool) {
	t := tr.t
	t.Helper()
	for i, s := range b7Shapes {
		keys := b7Keys(t, fmt.Sprintf("%s-%d", t.Name(), i), s.callers, owned)
		tr.callers = append(tr.callers, tr.r.start(t, s.name, tr.clients[i], keys))
	}
	require.NoError(t, b7WaitPairs(tr.ctx, 1, tr.callers...))
}

// b7Keys returns n keys named after prefix whose segments pass owned.
func b7Keys(t *testing.T, prefix string, n int, owned func(seg int32) bool) []string {
	t.Helper()
	var keys []string
	for i := 0; len(keys) < n && i < 100_000; i++ {
		k := fmt.Sprintf("%s/%d", prefix, i)
		if owned(clustermap.SegmentOf([]byte(k), segments)) {
			keys = append(keys, k)
		}
	}
	require.Len(t, keys, n, "keys for %s", prefix)
	return keys
}

// ownedBy says whether a segment is owned by node id in c's current map.
func ownedBy(c *store.Cluster, id int32) func(seg int32) bool {
	m := c.Map()
	return func(seg int32) bool { return m.Segments[seg].Owner != nil && *m.Segments[seg].Owner == id }
}

// refresh makes every client fetch the map now (no debounce window holds it back).
func (tr *b7Trial) refresh() {
	for _, kv := range tr.clients {
		r := kv.Engine().Refresher()
		require.Eventually(tr.t, func() bool { return r.Refresh(tr.ctx, clustermap.Evidence{}).Performed }, 5*time.Second,
			10*time.Millisecond, "no map refresh ran")
	}
}

// kill kills node id and waits until the store failed it over.
func (tr *b7Trial) kill(id int32) {
	tr.t.Helper()
	require.NoError(tr.t, tr.c.Kill(id))
	require.NoError(tr.t, tr.c.Coordinator().WaitNode(tr.ctx, id, false))
}

// end waits until every caller completed two pairs since the churn (so one that started
// after it), stops them, waits for the cluster to settle, reads every key back through its
// client and requires it to hold what was written, and adds up the refreshers' counters.
func (tr *b7Trial) end() {
	t := tr.t
	t.Helper()
	require.NoError(t, b7WaitPairs(tr.ctx, 2, tr.callers...))
	for _, cs := range tr.callers {
		cs.finish()
	}
	require.NoError(t, tr.c.WaitSettled(tr.ctx))
	for _, cs := range tr.callers {
		for _, key := range cs.keys {
			out, err := tr.r.do(tr.ctx, cs.shape, int(tr.r.nextID.Add(1)), cs.kv, kvInput{kind: opGet, key: key})
			if !assert.NoError(t, err, "reading %s back", key) {
				continue
			}
			tr.r.mu.Lock()
			w := tr.r.written[key]
			tr.r.mu.Unlock()
			assert.Equal(t, outOk, out.out, "%s: no value read back", key)
			assert.Contains(t, append([]string{w.acked}, w.maybe...), out.value,
				"%s: read back %q, not the last acknowledged write %q (nor a later unanswered one %v)", key, out.value, w.acked, w.maybe)
		}
	}
	tr.r.mu.Lock()
	defer tr.r.mu.Unlock()
	for i, s := range b7Shapes {
		st := tr.clients[i].Engine().Refresher().Stats()
		tr.r.stats[s.name].deferred += st.Deferred
		tr.r.stats[s.name].requested += st.Requested
	}
}

// finish logs what the test's calls cost and the first errors the application saw, and
// requires the history to be linearizable. It returns the number of errors and the stats
// by shape.
func (r *b7Recorder) finish(t *testing.T) (int, map[string]*b7Stats) {
	t.Helper()
	r.mu.Lock()
	t.Logf("%d trials", r.trials)
	for _, s := range b7Shapes {
		st := r.stats[s.name]
		t.Logf("%s: %d calls, %d errors; %d calls waited for a new owner (%d waits), longest wait %s; longest call %s; "+
			"refreshes requested %d, deferred %d",
			s.name, st.calls, st.errors, st.waited, st.waits, st.longestWait.Round(time.Millisecond),
			st.longestCall.Round(time.Millisecond), st.requested, st.deferred)
	}
	for i, e := range r.errs {
		if i == 10 {
			t.Logf("... and %d more errors", len(r.errs)-i)
			break
		}
		t.Logf("error: %s", e)
	}
	errs := len(r.errs)
	stats := r.stats
	r.mu.Unlock()
	ops := r.h.finish()
	require.Equal(t, porcupine.Ok, check(t, ops, porcupine.Ok), "the history is not linearizable")
	return errs, stats
}

// b7Deltas are the delays from a client's map refresh to the kill of an owner that
// TestB7_KillAfterRefresh sweeps: 0 to 500 ms (the debounce window) in steps of 25 ms.
func b7Deltas() []time.Duration {
	var ds []time.Duration
	for d := time.Duration(0); d <= runtime.DefaultRefreshDebounce; d += 25 * time.Millisecond {
		ds = append(ds, d)
	}
	return ds
}

// runKillAfterRefresh runs one trial per delta, the clients dialled with opts: each client
// refreshes its map, and delta later the owner of every caller's key is killed.
func runKillAfterRefresh(t *testing.T, r *b7Recorder, deltas []time.Duration, opts ...runtime.Option) {
	for i, delta := range deltas {
		t.Run(fmt.Sprintf("delta %s", delta), func(t *testing.T) {
			tr := r.newTrial(t, opts...)
			victim := int32(1 + i%3)
			tr.startCallers(ownedBy(tr.c, victim))
			tr.refresh()
			time.Sleep(delta) // the delay under test
			tr.kill(victim)
			tr.end()
		})
	}
}

// TestB7_KillAfterRefresh: an owner killed δ after the clients' last map refresh, δ swept
// over the whole debounce window (0 to 500 ms, 21 trials), costs the callers on its keys no
// error. Before rule B7 a kill within about 175 ms of a refresh failed calls: the refresh
// asked for after the first failure fell inside the window and was dropped, and every
// attempt went to the dead owner's old epoch ("gave up after 3 of 3 attempts in 302ms").
// Now that refresh is deferred to the window's end, and an attempt that follows a refused
// dial waits for a map naming the new owner instead of backing off; the test requires that
// some call did so wait (call.Stats.OwnerWaits), so that it exercises the rule.
func TestB7_KillAfterRefresh(t *testing.T) {
	r := newB7Recorder()
	runKillAfterRefresh(t, r, b7Deltas())
	errs, stats := r.finish(t)
	assert.Zero(t, errs, "the application saw errors")
	for _, s := range b7Shapes {
		assert.Positive(t, stats[s.name].waited, "%s: no call waited for a new owner: the sweep did not exercise B7", s.name)
	}
}

// TestB7_KillAfterRefreshBitesWithoutOwnerWait: the kill of TestB7_KillAfterRefresh at δ = 0,
// with B7's wait switched off (RetryPolicy.OwnerWait 0), fails calls, as the store's
// failover was not the problem: every attempt goes to the dead owner within about 300 ms of
// backoff, while the map that names the new owner is fetched only at the end of the
// debounce window, 500 ms after the refresh. So the scenario catches a client without the
// rule; the history stays linearizable (a failed call is possibly applied).
func TestB7_KillAfterRefreshBitesWithoutOwnerWait(t *testing.T) {
	p := runtime.DefaultRetryPolicy
	p.OwnerWait = 0
	r := newB7Recorder()
	runKillAfterRefresh(t, r, []time.Duration{0}, runtime.WithRetryPolicy(p))
	errs, _ := r.finish(t)
	assert.Positive(t, errs, "no call failed without B7's wait: the scenario does not bite")
}

// TestB7_LostHost: the owner of the callers' keys stands still (Cluster.Stall, as SIGSTOP or
// a host cut off would): it neither answers nor refuses, its connections stay open and its
// port accepts, so the client sees no reset, and the store fails it over only once its probe
// goes unanswered and its etcd lease is gone (about 3 s with the store's defaults), within
// the client's 5 s attempt timeout. The calls ride it out with no error (B6 ends the attempts
// held by the silent node once a map names the new owner; B7 makes an attempt that could not
// reach it wait for that map). Two trials: the host never comes back, and it comes back
// (the stall ends) while the callers run, is admitted again and must serve nothing stale.
func TestB7_LostHost(t *testing.T) {
	r := newB7Recorder()
	for _, tc := range []struct {
		name  string
		stall time.Duration
		back  bool
	}{
		{"lost for good", time.Minute, false},
		{"back after two lease TTLs", 2 * store.DefaultLeaseTTL, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := r.newTrial(t)
			victim := *tr.c.Map().Segments[0].Owner
			tr.startCallers(ownedBy(tr.c, victim))
			require.NoError(t, tr.c.Stall(victim, tc.stall))
			require.NoError(t, tr.c.Coordinator().WaitNode(tr.ctx, victim, false))
			if tc.back {
				require.NoError(t, b7WaitPairs(tr.ctx, 2, tr.callers...))
				require.NoError(t, tr.c.Coordinator().WaitNode(tr.ctx, victim, true))
			}
			tr.end()
		})
	}
	errs, _ := r.finish(t)
	assert.Zero(t, errs, "the application saw errors")
}

// TestB7_KillAfterMigration: a segment migrates (MigrateSegment) while the callers use its
// keys, and its new owner is killed 100 ms after the move completed, when the clients have
// only just learnt of it (from Moved answers) or not yet: no error. Two trials: the new owner
// held no copy before (the old owner drops its copy), and it was the replica (the old owner
// becomes the replica and takes the segment back at the failover).
func TestB7_KillAfterMigration(t *testing.T) {
	r := newB7Recorder()
	for _, toReplica := range []bool{false, true} {
		t.Run(fmt.Sprintf("to the replica %v", toReplica), func(t *testing.T) {
			tr := r.newTrial(t)
			const seg = 5
			s := tr.c.Map().Segments[seg]
			to := int32(-1)
			for _, id := range tr.c.Nodes() {
				if id != *s.Owner && slices.Contains(s.Replicas, id) == toReplica {
					to = id
				}
			}
			require.NotEqual(t, int32(-1), to, "no node to move segment %d to (owner %d, replicas %v)", seg, *s.Owner, s.Replicas)
			tr.startCallers(func(sg int32) bool { return sg == seg })
			require.NoError(t, tr.c.MigrateSegment(tr.ctx, seg, to))
			time.Sleep(100 * time.Millisecond) // the delay under test
			tr.kill(to)
			tr.end()
		})
	}
	errs, _ := r.finish(t)
	assert.Zero(t, errs, "the application saw errors")
}

// TestB7_FailbackTargetDies: a node killed, failed over and restarted gets its segments back
// (Failback) while the callers use keys of those segments, and dies (Kill) during the
// handoff: no error, and Failback reports the failure. Two trials: the handoffs held at their
// midpoint (Cluster.HoldChurn: the returning node named owner, the segment marked
// transitioning, every node told) when the node dies; and the node killed as soon as the map
// names it owner of one of its segments, the other handoffs still to come.
func TestB7_FailbackTargetDies(t *testing.T) {
	r := newB7Recorder()
	for _, held := range []bool{true, false} {
		t.Run(fmt.Sprintf("held %v", held), func(t *testing.T) {
			tr := r.newTrial(t)
			const x = 2
			preferred := ownedBy(tr.c, x)
			tr.kill(x)
			require.NoError(t, tr.c.WaitSettled(tr.ctx))
			require.NoError(t, tr.c.Restart(tr.ctx, x))
			require.NoError(t, tr.c.WaitSettled(tr.ctx))
			tr.startCallers(preferred)

			release := func() {}
			if held {
				release = tr.c.HoldChurn()
			}
			defer release()
			done := make(chan error, 1)
			go func() { done <- tr.c.Failback(tr.ctx, x) }()
			require.NoError(t, tr.c.WaitFor(tr.ctx, func(m *zaris.ClusterMap) bool {
				for _, s := range m.Segments {
					if s.Owner != nil && *s.Owner == x && (s.Transitioning || !held) {
						return true
					}
				}
				return false
			}))
			back, owns := 0, ownedBy(tr.c, x)
			for seg := range int32(segments) {
				if preferred(seg) && owns(seg) {
					back++
				}
			}
			tr.kill(x)
			release()
			err := <-done
			t.Logf("the node owned %d of its segments again when it died; Failback: %v", back, err)
			require.False(t, errors.Is(err, context.DeadlineExceeded), "Failback did not return: %v", err)
			if held {
				require.Error(t, err, "Failback reported success for a node that died")
			}
			tr.end()
		})
	}
	errs, _ := r.finish(t)
	assert.Zero(t, errs, "the application saw errors")
}
