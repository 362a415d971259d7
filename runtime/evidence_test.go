package runtime

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/runtime/clustermap"
)

// servedMaps makes node 1 answer GetClusterMap with the map next returns, counting calls.
func (mc *mockEngine) servedMaps(next func() *zaris.ClusterMap) *atomic.Int32 {
	calls := new(atomic.Int32)
	mc.node(1).EXPECT().GetClusterMap(gomock.Any()).AnyTimes().DoAndReturn(func(context.Context) (*zaris.ClusterMap, error) {
		calls.Add(1)
		return next(), nil
	})
	return calls
}

// TestB7_ADebouncedRefreshWithUnseenEvidenceIsDeferredNotDropped: inside the debounce
// window, a request whose evidence is newer than the start of the last completed fetch
// returns at once, and one fetch runs for all such requests when the window ends; a
// request whose evidence that fetch had already seen, or that carries no time, is a
// plain no-op (R6). Before B7 the deferred requests were dropped: no second fetch.
func TestB7_ADebouncedRefreshWithUnseenEvidenceIsDeferredNotDropped(t *testing.T) {
	mc := newMockEngine(t, testMap(1, 16, 1))
	var epoch atomic.Int64
	epoch.Store(1)
	calls := mc.servedMaps(func() *zaris.ClusterMap { return testMap(epoch.Load(), 16, 1) })
	r := mc.Refresher()
	mc.clock.Advance(time.Second)
	fetchedAt := mc.clock.Now()
	require.True(t, r.Refresh(context.Background(), clustermap.Evidence{}).Performed)

	mc.clock.Advance(100 * time.Millisecond)
	res := r.Refresh(context.Background(), clustermap.Evidence{At: fetchedAt.Add(50 * time.Millisecond)})
	assert.True(t, res.Debounced)
	assert.True(t, res.Deferred, "its evidence is newer than the fetch at 1s")
	assert.True(t, r.Refresh(context.Background(), clustermap.Evidence{At: mc.clock.Now()}).Deferred)
	res = r.Refresh(context.Background(), clustermap.Evidence{At: fetchedAt.Add(-time.Millisecond)})
	assert.True(t, res.Debounced)
	assert.False(t, res.Deferred, "the fetch at 1s started after this evidence")
	res = r.Refresh(context.Background(), clustermap.Evidence{At: fetchedAt})
	assert.True(t, res.Debounced)
	assert.False(t, res.Deferred, "the fetch at 1s started at the instant of this evidence: it saw it")
	res = r.Refresh(context.Background(), clustermap.Evidence{})
	assert.True(t, res.Debounced)
	assert.False(t, res.Deferred, "no time: R6 alone")
	assert.Equal(t, int32(1), calls.Load(), "nothing fetched inside the window")

	epoch.Store(2) // the store moves on meanwhile
	mc.clock.waitPending(t, 1)
	mc.clock.Advance(399 * time.Millisecond)
	assert.Equal(t, int32(1), calls.Load(), "R6: no fetch before the window ends")
	mc.clock.Advance(time.Millisecond)
	eventually(t, func() bool { return r.Stats().Performed == 2 })
	assert.Equal(t, int32(2), calls.Load(), "one fetch for both deferred requests")
	assert.Equal(t, int64(2), mc.Map().Epoch)

	mc.clock.Advance(time.Second)
	assert.Zero(t, mc.clock.Pending(), "nothing more is deferred")
	assert.Equal(t, int32(2), calls.Load())
	st := r.Stats()
	assert.Equal(t, uint64(6), st.Requested)
	assert.Equal(t, uint64(5), st.Debounced)
	assert.Equal(t, uint64(2), st.Deferred)
}

// joinedAfterTheFlightStarted starts a refresh with no evidence whose fetch blocks on maps,
// moves mc's clock 10 ms on, and starts a second refresh with evidence of that instant,
// which joins the flight: the churn was seen after the flight started. It returns what
// both refreshes will return.
func joinedAfterTheFlightStarted(t *testing.T, mc *mockEngine) (r *Refresher, maps chan *zaris.ClusterMap, calls *atomic.Int32, first, joined chan clustermap.RefreshResult) {
	maps, calls = mc.blockingMaps(1)
	r = mc.Refresher()
	mc.clock.Advance(time.Second)
	first, joined = make(chan clustermap.RefreshResult), make(chan clustermap.RefreshResult)
	go func() { first <- r.Refresh(context.Background(), clustermap.Evidence{}) }()
	eventually(t, func() bool { return calls.Load() == 1 })
	mc.clock.Advance(10 * time.Millisecond)
	go func() { joined <- r.Refresh(context.Background(), clustermap.Evidence{At: mc.clock.Now()}) }()
	eventually(t, func() bool { return r.Stats().Requested == 2 })
	return r, maps, calls, first, joined
}

// TestB7_EvidenceNewerThanTheFlightItJoinedGetsAFetchOfItsOwn: a request that joins a
// fetch which started before its evidence waits for that fetch, as R6 says, and a fetch
// of its own then runs at the end of that fetch's debounce window.
func TestB7_EvidenceNewerThanTheFlightItJoinedGetsAFetchOfItsOwn(t *testing.T) {
	mc := newMockEngine(t, testMap(1, 16, 1))
	r, maps, calls, first, joined := joinedAfterTheFlightStarted(t, mc)
	maps <- testMap(1, 16, 1)
	assert.True(t, (<-first).Performed)
	res := <-joined
	assert.True(t, res.Performed)
	assert.True(t, res.Coalesced)

	mc.clock.waitPending(t, 1)
	mc.clock.Advance(499 * time.Millisecond)
	assert.Equal(t, int32(1), calls.Load())
	mc.clock.Advance(time.Millisecond)
	eventually(t, func() bool { return calls.Load() == 2 })
	maps <- testMap(2, 16, 1)
	eventually(t, func() bool { return r.Stats().Performed == 2 })
	assert.Equal(t, int64(2), mc.Map().Epoch)
}

// With no debounce window, the fetch deferred for evidence newer than the flight it joined
// runs at once, at the instant of that evidence (the clock does not move), and satisfies
// it: one fetch more, then the deferral ends.
func TestB7_ADeferredFetchAtTheInstantOfItsEvidenceSatisfiesIt(t *testing.T) {
	mc := newMockEngine(t, testMap(1, 16, 1), WithRefreshDebounce(0))
	r, maps, calls, first, joined := joinedAfterTheFlightStarted(t, mc)
	maps <- testMap(1, 16, 1)
	require.True(t, (<-first).Performed)
	require.True(t, (<-joined).Coalesced)
	eventually(t, func() bool { return calls.Load() == 2 })
	maps <- testMap(2, 16, 1)
	eventually(t, func() bool { return !r.deferring.Load() })
	assert.Equal(t, int32(2), calls.Load(), "the deferred fetch started at the evidence's instant: no third")
	assert.Equal(t, int64(2), mc.Map().Epoch)
}

// A deferred fetch that fails ends the deferral: it is not retried window after window
// (the next request with unseen evidence defers again).
func TestB7_AFailedDeferredFetchEndsTheDeferral(t *testing.T) {
	mc := newMockEngine(t, testMap(1, 16, 1))
	var fail atomic.Bool
	calls := new(atomic.Int32)
	mc.node(1).EXPECT().GetClusterMap(gomock.Any()).AnyTimes().DoAndReturn(func(context.Context) (*zaris.ClusterMap, error) {
		calls.Add(1)
		if fail.Load() {
			return nil, assert.AnError
		}
		return testMap(1, 16, 1), nil
	})
	r := mc.Refresher()
	mc.clock.Advance(time.Second)
	require.True(t, r.Refresh(context.Background(), clustermap.Evidence{}).Performed)
	mc.clock.Advance(100 * time.Millisecond)
	require.True(t, r.Refresh(context.Background(), clustermap.Evidence{At: mc.clock.Now()}).Deferred)
	fail.Store(true)
	mc.clock.waitPending(t, 1)
	mc.clock.Advance(400 * time.Millisecond)
	eventually(t, func() bool { return calls.Load() == 2 })
	eventually(t, func() bool { return !r.deferring.Load() })
	mc.clock.Advance(2 * time.Second)
	assert.Zero(t, mc.clock.Pending(), "nothing deferred any more")
	assert.Equal(t, int32(2), calls.Load(), "the failed fetch is not retried")
}

// An owner wait whose caller has already gone ends at once, and starts no fetch: the next
// refresh leads a fetch of its own.
func TestB7_AwaitOwnerOfACallerGoneStartsNoFetch(t *testing.T) {
	mc := newMockEngine(t, testMap(1, 16, 1))
	maps, calls := mc.blockingMaps(1)
	r := mc.Refresher()
	mc.clock.Advance(time.Second) // past the bootstrap's debounce window
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	res := r.AwaitOwner(gone, []byte("k"), 1, time.Time{})
	assert.True(t, res.TimedOut)
	assert.False(t, res.Performed)

	next := make(chan clustermap.RefreshResult)
	go func() { next <- r.Refresh(context.Background(), clustermap.Evidence{}) }()
	eventually(t, func() bool { return calls.Load() == 1 })
	maps <- testMap(2, 16, 1)
	got := <-next
	assert.True(t, got.Performed)
	assert.False(t, got.Coalesced, "no fetch of the gone caller's to join")
	assert.Equal(t, int32(1), calls.Load())
}

// A caller's wait on the refresher's clock (sleep) runs d out unless its bound comes first:
// a bound exactly d away lets d run out. With nothing left to wait it reports whether the
// caller and the refresher are still there; so does timer.
func TestRefresher_SleepAndTimerBounds(t *testing.T) {
	mc := newMockEngine(t, testMap(1, 16, 1))
	r := mc.Refresher()
	ctx := context.Background()
	wait := func(d time.Duration, until time.Time, advance time.Duration) bool {
		done := make(chan bool)
		go func() { done <- r.sleep(ctx, d, until) }()
		mc.clock.waitPending(t, 1)
		mc.clock.Advance(advance)
		return <-done
	}
	now := mc.clock.Now()
	assert.True(t, wait(100*time.Millisecond, now.Add(100*time.Millisecond), 100*time.Millisecond), "a bound exactly d away")
	now = mc.clock.Now()
	assert.False(t, wait(100*time.Millisecond, now.Add(50*time.Millisecond), 50*time.Millisecond), "a bound before d")
	assert.True(t, r.sleep(ctx, 0, time.Time{}))
	gone, cancel := context.WithCancel(ctx)
	cancel()
	assert.False(t, r.sleep(gone, 0, time.Time{}), "the caller has gone")
	assert.True(t, r.timer(0))

	require.NoError(t, mc.Close())
	for range 20 { // a timer of 0 would race the closing: every try must see it
		assert.False(t, r.sleep(ctx, 0, time.Time{}), "the refresher has closed")
		assert.False(t, r.timer(0), "the refresher has closed")
	}
}

// keyOwnedBy returns a key whose segment node owns in testMap(_, 16, 2).
func keyOwnedBy(t *testing.T, mc *mockEngine, node int) []byte {
	t.Helper()
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		if mc.ownerOf(t, k) == node {
			return []byte(k)
		}
	}
	t.Fatal("no key for node")
	return nil
}

// movedTo is testMap(epoch, 16, 2) with key's segment owned by node.
func movedTo(epoch int64, key []byte, node int32) *zaris.ClusterMap {
	m := testMap(epoch, 16, 2)
	seg := clustermap.SegmentOf(key, 16)
	m.Segments[seg].Owner = &node
	return m
}

// servingOwnerOfKey is an engine on testMap(1, 16, 2) whose node 1 answers GetClusterMap
// with the map in served, testMap(1, 16, 2) until the test stores another, counting the
// fetches in calls; key is a key node 1 owns.
func servingOwnerOfKey(t *testing.T) (mc *mockEngine, key []byte, served *atomic.Pointer[zaris.ClusterMap], calls *atomic.Int32) {
	mc = newMockEngine(t, testMap(1, 16, 2))
	key = keyOwnedBy(t, mc, 1)
	served = new(atomic.Pointer[zaris.ClusterMap])
	served.Store(testMap(1, 16, 2))
	return mc, key, served, mc.servedMaps(served.Load)
}

// TestB7_AwaitOwnerWaitsForAMapThatMovesTheOwner: after an attempt could not reach node 1,
// the wait takes the first fetch the debounce window allows; while the map it brings still
// names node 1 for the key it waits for the next window's fetch, and returns as soon as a
// map names another owner. One fetch per window, never a storm.
func TestB7_AwaitOwnerWaitsForAMapThatMovesTheOwner(t *testing.T) {
	mc, key, served, calls := servingOwnerOfKey(t)
	r := mc.Refresher()
	mc.clock.Advance(time.Second)
	require.True(t, r.Refresh(context.Background(), clustermap.Evidence{}).Performed) // fetch 1 at 1s
	mc.clock.Advance(100 * time.Millisecond)
	failed := mc.clock.Now() // the dial to node 1 is refused

	out := make(chan clustermap.RefreshResult)
	go func() { out <- r.AwaitOwner(context.Background(), key, 1, failed.Add(5*time.Second)) }()
	mc.clock.waitPending(t, 1)
	assert.Equal(t, int32(1), calls.Load(), "R6: nothing fetched before the window of the fetch at 1s ends")
	mc.clock.Advance(400 * time.Millisecond) // 1.5s: fetch 2, the store has not failed node 1 over yet
	eventually(t, func() bool { return calls.Load() == 2 })
	mc.clock.waitPending(t, 1)
	served.Store(movedTo(2, key, 2)) // the failover
	mc.clock.Advance(499 * time.Millisecond)
	assert.Equal(t, int32(2), calls.Load(), "the next fetch waits for the next window")
	select {
	case res := <-out:
		t.Fatalf("returned while the map still names node 1: %+v", res)
	default:
	}
	mc.clock.Advance(time.Millisecond) // 2s: fetch 3 brings the failover
	res := <-out
	assert.True(t, res.Performed)
	assert.False(t, res.TimedOut)
	assert.Equal(t, int64(2), res.Epoch)
	assert.Equal(t, 2, mc.ownerOf(t, string(key)))
	assert.Equal(t, int32(3), calls.Load())

	// A map that already names another owner needs no wait.
	res = r.AwaitOwner(context.Background(), key, 1, time.Time{})
	assert.False(t, res.Performed)
	assert.False(t, res.TimedOut)
	assert.Equal(t, int32(3), calls.Load())
}

// TestB7_AwaitOwnerEndsAtItsBound: a store that never moves the owner costs a fetch per
// window until the bound, then the wait ends with TimedOut; a cancelled context and a
// closed refresher end it too.
func TestB7_AwaitOwnerEndsAtItsBound(t *testing.T) {
	mc := newMockEngine(t, testMap(1, 16, 2))
	key := keyOwnedBy(t, mc, 1)
	calls := mc.servedMaps(func() *zaris.ClusterMap { return testMap(1, 16, 2) })
	r := mc.Refresher()
	mc.clock.Advance(time.Second)
	start := mc.clock.Now()

	out := make(chan clustermap.RefreshResult)
	go func() { out <- r.AwaitOwner(context.Background(), key, 1, start.Add(1200*time.Millisecond)) }()
	eventually(t, func() bool { return calls.Load() == 1 }) // at once: no window is open
	for want := int32(2); want <= 3; want++ {
		mc.clock.waitPending(t, 1)
		mc.clock.Advance(500 * time.Millisecond)
		eventually(t, func() bool { return calls.Load() == want })
	}
	mc.clock.waitPending(t, 1)
	mc.clock.Advance(200 * time.Millisecond) // 1.2s: the bound
	res := <-out
	assert.True(t, res.TimedOut)
	assert.False(t, res.Performed)
	assert.Equal(t, int32(3), calls.Load(), "one fetch per window: at 0, 500 and 1000 ms")

	ctx, cancel := context.WithCancel(context.Background())
	go func() { out <- r.AwaitOwner(ctx, key, 1, time.Time{}) }()
	mc.clock.waitPending(t, 1)
	cancel()
	assert.True(t, (<-out).TimedOut)

	go func() { out <- r.AwaitOwner(context.Background(), key, 1, time.Time{}) }()
	mc.clock.waitPending(t, 1)
	r.Close()
	assert.ErrorIs(t, (<-out).Err, ErrClosed)
}

// TestB7_WaitersShareTheFetches: sixteen callers waiting on the same dead owner ride one
// fetch, and all of them go on when it brings the map that moves it (R6).
func TestB7_WaitersShareTheFetches(t *testing.T) {
	mc := newMockEngine(t, testMap(1, 16, 2))
	key := keyOwnedBy(t, mc, 1)
	maps, calls := mc.blockingMaps(1)
	r := mc.Refresher()
	mc.clock.Advance(time.Second)

	const n = 16
	results := make([]clustermap.RefreshResult, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { results[i] = r.AwaitOwner(context.Background(), key, 1, time.Time{}) })
	}
	eventually(t, func() bool { return r.Stats().Requested == n && calls.Load() == 1 })
	maps <- movedTo(2, key, 2)
	wg.Wait()
	assert.Equal(t, int32(1), calls.Load(), "one fetch for sixteen waiters")
	st := r.Stats()
	assert.Equal(t, uint64(n), st.OwnerWaits)
	assert.Equal(t, st.Requested, st.Debounced+st.Coalesced+st.OwnerWaits, "the waits led no fetch as requests do")
	for _, res := range results {
		assert.False(t, res.TimedOut)
		assert.Equal(t, int64(2), res.Epoch)
	}
}

// TestRefreshStats_BackgroundCountsTheFetchesNoCallStarted: a fetch that a call of Refresh
// or AwaitOwner starts when it is made is not Background; a fetch that Observe starts (B1),
// one deferred to the end of the debounce window (B7) and an owner wait's fetches after its
// first are. So Performed - Background never exceeds the calls of Refresh and AwaitOwner.
func TestRefreshStats_BackgroundCountsTheFetchesNoCallStarted(t *testing.T) {
	mc, key, served, calls := servingOwnerOfKey(t)
	r := mc.Refresher()
	mc.clock.Advance(time.Second)

	require.True(t, r.Refresh(context.Background(), clustermap.Evidence{}).Performed) // fetch 1 at 1s, the call's own
	assert.Zero(t, r.Stats().Background)

	mc.clock.Advance(100 * time.Millisecond)
	served.Store(testMap(2, 16, 2))
	r.Observe(2) // fetch 2 at 1.1s, in the background (B1)
	eventually(t, func() bool { return r.Stats().Performed == 2 })
	assert.Equal(t, uint64(1), r.Stats().Background)

	mc.clock.Advance(100 * time.Millisecond)
	require.True(t, r.Refresh(context.Background(), clustermap.Evidence{At: mc.clock.Now()}).Deferred)
	mc.clock.waitPending(t, 1)
	mc.clock.Advance(400 * time.Millisecond) // 1.6s: the deferred fetch 3 (B7)
	eventually(t, func() bool { return r.Stats().Performed == 3 })
	assert.Equal(t, uint64(2), r.Stats().Background)

	out := make(chan clustermap.RefreshResult)
	go func() { out <- r.AwaitOwner(context.Background(), key, 1, time.Time{}) }()
	mc.clock.waitPending(t, 1)
	mc.clock.Advance(500 * time.Millisecond) // 2.1s: the wait's first fetch, 4, still names node 1
	eventually(t, func() bool { return r.Stats().Performed == 4 && calls.Load() == 4 })
	assert.Equal(t, uint64(2), r.Stats().Background, "the wait's first fetch is its own")
	mc.clock.waitPending(t, 1)
	served.Store(movedTo(3, key, 2))
	mc.clock.Advance(500 * time.Millisecond) // 2.6s: fetch 5, in the background, moves the owner
	res := <-out
	assert.True(t, res.Performed)
	st := r.Stats()
	assert.Equal(t, uint64(5), st.Performed)
	assert.Equal(t, uint64(3), st.Background)
	assert.LessOrEqual(t, st.Performed-st.Background, uint64(3), "two calls of Refresh and one of AwaitOwner")
}
