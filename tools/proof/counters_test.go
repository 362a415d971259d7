package proof

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
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

// counterRun is a workload of callers that each make a fixed number of Increment calls by
// one on random keys of a set, counting per key the calls made and recording each in a
// history; every call must return Ok.
type counterRun struct {
	keys    []string
	h       *history
	made    []atomic.Int64 // per key: the calls made on it
	replays atomic.Int64   // calls that sent an attempt without a reply and succeeded anyway
	wg      sync.WaitGroup

	mu   sync.Mutex // protects errs
	errs []error
}

// startCounters starts callers goroutines on kv, each making perCaller increments on keys
// prefix-0 to prefix-(keys-1).
func startCounters(kv *zarisclient.Client, prefix string, callers, perCaller, keys int) *counterRun {
	r := &counterRun{h: newHistory(), made: make([]atomic.Int64, keys)}
	for i := range keys {
		r.keys = append(r.keys, fmt.Sprintf("%s-%d", prefix, i))
	}
	for id := range callers {
		r.wg.Add(1)
		go r.caller(kv, id, perCaller, rand.New(rand.NewPCG(uint64(id), uint64(time.Now().UnixNano()))))
	}
	return r
}

func (r *counterRun) caller(kv *zarisclient.Client, id, n int, rng *rand.Rand) {
	defer r.wg.Done()
	for range n {
		k := rng.IntN(len(r.keys))
		slot := &callSlot{}
		ctx := context.WithValue(context.Background(), slotKey{}, slot)
		call := r.h.now()
		resp, err := kv.Increment(ctx, &zaris.IncrementRequest{Key: []byte(r.keys[k]), Delta: 1})
		ret := r.h.now()
		r.made[k].Add(1)
		if err == nil && resp.Status != zaris.KvStatus_Ok {
			err = fmt.Errorf("status %s", resp.Status)
		}
		if err != nil {
			r.mu.Lock()
			r.errs = append(r.errs, fmt.Errorf("increment of %s: %w", r.keys[k], err))
			r.mu.Unlock()
			r.h.add(id, kvInput{kind: opIncrement, key: r.keys[k], delta: 1}, kvOutput{out: outUnknown}, call, ret, 1)
			continue
		}
		if lostAttempts(slot.call) > 0 {
			r.replays.Add(1)
		}
		// Strict: an answered call is one application of its increment, replays or not, so
		// a replay applied twice makes the sums inconsistent.
		r.h.add(id, kvInput{kind: opIncrement, key: r.keys[k], delta: 1}, kvOutput{out: outOk, sum: resp.Value, version: resp.Version}, call, ret, 0)
	}
}

// finish waits for the callers and checks the run: no call failed, every counter holds
// exactly the increments made on it, and the history is linearizable.
func (r *counterRun) finish(t *testing.T, kv *zarisclient.Client) {
	t.Helper()
	r.wg.Wait()
	require.NoError(t, errors.Join(r.errs...), "calls that did not return Ok")
	for i, k := range r.keys {
		got, err := kv.Get(context.Background(), &zaris.GetRequest{Key: []byte(k)})
		require.NoError(t, err)
		require.Equal(t, zaris.KvStatus_Ok, got.Status, k)
		n, err := strconv.ParseInt(string(got.Value), 10, 64)
		require.NoError(t, err)
		assert.Equal(t, r.made[i].Load(), n, "%s: the increments made on it", k)
	}
	require.Equal(t, porcupine.Ok, check(t, r.h.finish(), porcupine.Ok), "the history is not linearizable")
}

// TestB8_CountersUnderChurn: 16 callers each make 2,000 Increments by one on 32 keys while
// the store migrates segments, takes a joining node, loses a killed owner, fails back,
// drains a node and stalls an owner past its lease: every call returns Ok, with no
// in-doubt error, every counter ends at exactly the increments made on it, and the history
// is linearizable. Some calls had an attempt that was sent without a reply, and were
// replayed (rule B8).
func TestB8_CountersUnderChurn(t *testing.T) {
	c := store.StartCluster(t, store.ClusterConfig{Nodes: 3, Segments: segments, FailureTimeout: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	kv := newClient(t, c.Seeds())
	r := startCounters(kv, "counter", 16, 2000, 32)
	const between = 1500 // calls completed between two churn steps
	churn := []func() error{
		migrate(c, ctx, "counter-3", "counter-4"),
		join(c, ctx),
		kill(c, ctx, 2),
		restart(c, ctx, 2),
		failback(c, ctx, 2),
		leave(c, ctx, 1),
		stall(c, ctx, "counter-5", 3*time.Second),
	}
	for i, step := range churn {
		require.NoError(t, r.h.waitCalls(ctx, between), "before churn step %d", i+1)
		require.NoError(t, step(), "churn step %d", i+1)
	}
	require.Less(t, r.h.n.Load(), int64(16*2000), "the churn ended after the workload: it proved nothing")
	r.finish(t, kv)
	require.Positive(t, r.replays.Load(), "no call was replayed: the churn never cut a reply")
	t.Logf("%d calls, %d replayed after a lost reply, 0 errors", r.h.n.Load(), r.replays.Load())
}

// TestB8_CountersInDoubtWithoutAWindow: the same workload and two kills of owners against a
// store that keeps no outcomes (and advertises no window): some calls end in doubt, as
// rule B2 says. It shows that the churn above does cut replies, and that the client relies
// on the window, not on luck.
func TestB8_CountersInDoubtWithoutAWindow(t *testing.T) {
	c := store.StartCluster(t, store.ClusterConfig{Nodes: 3, Segments: segments, FailureTimeout: time.Second,
		Node: store.NodeConfig{DisableDedup: true}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kv := newClient(t, c.Seeds())
	r := startCounters(kv, "counter", 16, 1000, 32)
	for _, step := range []func() error{kill(c, ctx, 2), restart(c, ctx, 2), kill(c, ctx, 3)} {
		require.NoError(t, r.h.waitCalls(ctx, 1000))
		require.NoError(t, step())
	}
	require.Less(t, r.h.n.Load(), int64(16*1000), "the kills came after the workload")
	r.wg.Wait()
	inDoubt := 0
	for _, err := range r.errs {
		if errors.Is(err, runtime.ErrInDoubt) {
			inDoubt++
		} else {
			t.Errorf("an error other than in doubt: %v", err)
		}
	}
	require.Positive(t, inDoubt, "no call in doubt without a window")
	t.Logf("%d calls in doubt", inDoubt)
}

// TestB8_LostRepliesApplyOnce: a proxy in front of every node loses every second
// Increment's reply (closing the connection instead of forwarding it) or, in another run,
// closes the connection right after forwarding every second Increment request. Every call
// returns Ok and every counter ends at exactly the increments made on it: each lost reply
// was replayed and answered with the first outcome.
func TestB8_LostRepliesApplyOnce(t *testing.T) {
	c := store.StartCluster(t, store.ClusterConfig{Nodes: 3, Segments: segments, FailureTimeout: time.Second})
	proxies := map[string]*faultProxy{}
	for _, addr := range c.Seeds() {
		proxies[addr] = startFaultProxy(t, addr)
	}
	for _, f := range []fault{faultLoseEveryOtherReply, faultCloseAfterEveryOtherRequest} {
		t.Run(f.String(), func(t *testing.T) {
			fc := dialThroughProxies(t, c, proxies)
			for _, p := range proxies {
				p.set(f, 0)
			}
			t.Cleanup(func() {
				for _, p := range proxies {
					p.set(faultNone, 0)
				}
			})
			r := startCounters(fc.kv, f.String(), 1, 100, 8)
			r.wg.Wait()
			for _, p := range proxies {
				p.set(faultNone, 0)
			}
			r.finish(t, fc.kv)
			// One caller: a call whose reply is lost is replayed as the next Increment, so
			// nearly every call after the first loses one.
			require.GreaterOrEqual(t, r.replays.Load(), int64(50), "calls that lost a reply")
			t.Logf("%s: %d calls, %d replayed, 0 errors", f, r.h.n.Load(), r.replays.Load())
		})
	}
}

// TestB8_FirstOutcomeOutlivesItsOwner: an Increment is applied at the owner and its reply
// never reaches the client (a proxy swallows it); then ownership moves before the client
// hears anything: the owner is killed (failover to its replica), or the segment migrates to
// another node. The replay, at the new owner, is answered with the first outcome: the value
// and the version the owner's write made, and the counter holds one increment.
func TestB8_FirstOutcomeOutlivesItsOwner(t *testing.T) {
	for _, move := range []string{"kill", "migration"} {
		t.Run(move, func(t *testing.T) {
			c := store.StartCluster(t, store.ClusterConfig{Nodes: 3, Segments: segments, FailureTimeout: time.Second})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			proxies := map[string]*faultProxy{}
			for _, addr := range c.Seeds() {
				proxies[addr] = startFaultProxy(t, addr)
			}
			fc := dialThroughProxies(t, c, proxies)
			addr, key := fc.victim(t, "first-outcome")
			owner := c.Map().Segments[clustermap.SegmentOf(key, segments)]
			p := proxies[addr]
			p.set(faultSwallowReplies, 0)
			type result struct {
				resp *zaris.IncrementResponse
				err  error
			}
			done := make(chan result, 1)
			go func() {
				resp, err := fc.kv.Increment(context.Background(), &zaris.IncrementRequest{Key: key, Delta: 1})
				done <- result{resp, err}
			}()
			require.Eventually(t, func() bool { return p.requestCount("Increment") == 1 }, 10*time.Second, time.Millisecond)
			direct := newClient(t, c.Seeds())
			require.Eventually(t, func() bool { // the owner applied it (a read at the owner, not through the proxy)
				got, err := direct.Get(ctx, &zaris.GetRequest{Key: key})
				return err == nil && got.Status == zaris.KvStatus_Ok && string(got.Value) == "1"
			}, 10*time.Second, time.Millisecond)
			switch move {
			case "kill":
				require.NoError(t, kill(c, ctx, *owner.Owner)())
			case "migration":
				to, err := otherNode(c, owner.ID)
				require.NoError(t, err)
				require.NoError(t, c.MigrateSegment(ctx, owner.ID, to))
				p.set(faultDrop, 0) // the client's connection to the old owner ends unanswered
			}
			var r result
			select {
			case r = <-done:
			case <-time.After(30 * time.Second): // a hang detector, not a timing assertion
				t.Fatal("the Increment did not return")
			}
			p.set(faultNone, 0)
			require.NoError(t, r.err)
			got, err := direct.Get(ctx, &zaris.GetRequest{Key: key})
			require.NoError(t, err)
			assert.Equal(t, "1", string(got.Value), "applied once")
			assert.EqualValues(t, 1, r.resp.Value, "the first outcome's value")
			assert.Equal(t, got.Version, r.resp.Version, "the first outcome's version")
			assert.NotEqual(t, *owner.Owner, *c.Map().Segments[owner.ID].Owner, "the segment has a new owner")
		})
	}
}

// TestB8_CountersUnderPeerFaults: the counters workload on a cluster whose peer traffic is
// delayed, duplicated (a copy landing late, after newer frames), dropped or held past the
// owner's timeout (replication, segment copies, map pushes), through a migration, a kill, a
// restart and a failback: every call Ok, every counter exact, the history linearizable.
// Outcomes ride the same frames as the writes they record, so no fault separates them.
func TestB8_CountersUnderPeerFaults(t *testing.T) {
	c, pp := startProxiedCluster(t, 3, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kv := newClient(t, c.Seeds())
	pp.setAll(chaos(uint64(time.Now().UnixNano())))
	r := startCounters(kv, "counter", 16, 400, 32)
	for i, step := range []func() error{
		migrate(c, ctx, "counter-3", "counter-4"), kill(c, ctx, 3), restart(c, ctx, 3), failback(c, ctx, 3),
	} {
		require.NoError(t, r.h.waitCalls(ctx, 700), "before churn step %d", i+1)
		require.NoError(t, step(), "churn step %d", i+1)
	}
	require.Less(t, r.h.n.Load(), int64(16*400), "the churn ended after the workload")
	r.wg.Wait()
	pp.setAll(nil)
	r.finish(t, kv)
	require.Positive(t, pp.faults("Replicate"), "no Replicate was faulted")
	t.Logf("%d calls, %d replayed, %d Replicate frames faulted, 0 errors", r.h.n.Load(), r.replays.Load(), pp.faults("Replicate"))
}
