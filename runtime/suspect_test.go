package runtime

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestB6_SilentOwnerIsSuspected: a node that owes a reply and has answered nothing for
// longer than its silence threshold (the 200 ms floor here: its replies were instant) is
// suspected on the next watch, 50 ms apart; each suspicion asks for a background map
// refresh under R6's debounce (one fetch per 500 ms), with the suspected node asked last.
// When the store has failed it over, the refresh installs the new map and the attempt
// waiting on the node ends (ErrOwnerMoved), with no other traffic. Time is a fake clock.
func TestB6_SilentOwnerIsSuspected(t *testing.T) {
	clock := newFakeClock()
	cl, n1, _, addrs := stallClusterWith(t, false, WithClock(clock), WithRefreshDebounce(DefaultRefreshDebounce))
	_, err := cl.Invoke(context.Background(), getCall("warm"))
	require.NoError(t, err)

	n1.stall.Store(true)
	call := getCall("k")
	done := invokeOnStalled(t, cl, n1, call)
	// step moves to the watcher's next tick once pending timers wait: the watcher's, and
	// from the first debounced suspicion on the deferred fetch's (B7).
	step := func(pending int) {
		t.Helper()
		clock.waitPending(t, pending) // the watcher has scanned and waits for its next tick
		clock.Advance(silenceFloor / 4)
	}
	for range 4 { // up to the floor: silent, not yet suspect
		step(1)
	}
	clock.waitPending(t, 1)
	assert.Zero(t, cl.Suspicions(), "200 ms of silence is not past the floor")
	assert.Zero(t, cl.Refresher().Stats().Performed)

	step(1) // 250 ms: suspected, one refresh; the store has not failed it over yet
	eventually(t, func() bool { return cl.Refresher().Stats().Performed == 1 })
	assert.Equal(t, uint64(1), cl.Suspicions())
	step(1)       // 300 ms: suspected again, debounced, and a fetch deferred to 750 ms (B7)
	for range 7 { // to 650 ms: suspected on every tick, the refreshes debounced
		step(2)
	}
	clock.waitPending(t, 2)
	assert.Equal(t, uint64(9), cl.Suspicions())
	assert.Equal(t, uint64(1), cl.Refresher().Stats().Performed, "R6: one fetch per 500 ms")
	assert.Equal(t, uint64(8), cl.Refresher().Stats().Debounced)
	assert.Equal(t, uint64(8), cl.Refresher().Stats().Deferred, "each suspicion is newer than the fetch at 250 ms")
	select {
	case err := <-done:
		t.Fatalf("the attempt ended before any map moved its segment: %v", err)
	default:
	}
	assert.Equal(t, []string{addrs[1], addrs[0]}, cl.health.last(addrs), "the silent node is asked last")

	n1.cmap.Store(ownedBy(2, 2, addrs...)) // the store fails node 1 over
	step(2)
	step(2) // 750 ms: the debounce window is over, the deferred fetch runs
	eventually(t, func() bool { return cl.Refresher().Stats().Performed == 2 })
	assert.Equal(t, uint64(2), cl.Refresher().Stats().Background, "no call started either fetch")
	select {
	case err := <-done:
		require.ErrorIs(t, err, ErrOwnerMoved)
	case <-time.After(10 * time.Second):
		t.Fatal("the attempt still waits on the stalled node")
	}
	assert.Equal(t, int64(2), cl.Map().Epoch)
}

// TestB6_SilenceThresholdFollowsReplyTimes: the threshold is 8 times a node's recent reply
// time, between the floor and the ceiling.
func TestB6_SilenceThresholdFollowsReplyTimes(t *testing.T) {
	clock := newFakeClock()
	h := newHealth(clock, 5*time.Second, func(string) {})
	defer h.close()
	n := h.node("a")
	assert.Equal(t, silenceFloor, h.threshold(n), "no reply yet")
	for _, tc := range []struct {
		reply time.Duration
		want  time.Duration
	}{
		{time.Millisecond, silenceFloor},
		{50 * time.Millisecond, 400 * time.Millisecond},
		{time.Second, silenceCeiling},
	} {
		n.recent.Store(0)
		h.begin(n)
		h.end(n, clock.Now(), tc.reply, true)
		assert.Equal(t, tc.want, h.threshold(n), "reply time %s", tc.reply)
	}
	short := newHealth(clock, 300*time.Millisecond, func(string) {})
	defer short.close()
	short.node("a").recent.Store(int64(time.Second))
	assert.Equal(t, 300*time.Millisecond, short.threshold(short.node("a")), "never past the attempt timeout")
}

// B6: a node's recent reply time moves an eighth of the way to each new reply time, and
// a request's end pays off the reply its begin made the node owe.
func TestB6_RecentReplyTimeIsAMovingAverage(t *testing.T) {
	clock := newFakeClock()
	h := newHealth(clock, 5*time.Second, func(string) {})
	defer h.close()
	n := h.node("a")
	for _, tc := range []struct{ reply, recent time.Duration }{
		{80 * time.Millisecond, 80 * time.Millisecond}, // the first reply sets it
		{160 * time.Millisecond, 90 * time.Millisecond},
		{10 * time.Millisecond, 80 * time.Millisecond},
	} {
		h.begin(n)
		assert.Equal(t, int64(1), n.owed.Load(), "owed while in flight")
		h.end(n, clock.Now(), tc.reply, true)
		assert.Equal(t, tc.recent, time.Duration(n.recent.Load()), "after a reply of %s", tc.reply)
		assert.Zero(t, n.owed.Load(), "paid off")
	}
}

// B6: only a node that owes replies can be silent, and only once its threshold has passed
// since it started owing; one that owes nothing is asked for the map in its place however
// long ago it last answered.
func TestB6_ANodeOwingNothingIsNotSilent(t *testing.T) {
	clock := newFakeClock()
	h := newHealth(clock, 5*time.Second, func(string) {})
	defer h.close()
	a := h.node("a")
	h.begin(a)
	h.end(a, clock.Now(), time.Millisecond, true)
	clock.Advance(time.Hour)
	assert.Equal(t, []string{"a", "b"}, h.last([]string{"a", "b"}), "a owes nothing")
	h.begin(a)
	clock.Advance(100 * time.Millisecond)
	assert.Equal(t, []string{"a", "b"}, h.last([]string{"a", "b"}), "a owes a reply since 100 ms, within its threshold")
	clock.Advance(time.Hour)
	assert.Equal(t, []string{"b", "a"}, h.last([]string{"a", "b"}), "a owes a reply and is silent")
}
