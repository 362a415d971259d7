package middleware_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	zt "github.com/clustron/zaris-go/internal/testsupport/zaristest"
	"github.com/clustron/zaris-go/middleware"
	mwt "github.com/clustron/zaris-go/middleware/middlewaretest"
	"github.com/clustron/zaris-go/runtime"
	"github.com/clustron/zaris-go/runtime/clustermap"
)

// TestRefreshOnMoved_Stats: each refresh the call asks for is counted, and counted as
// performed only when a fetch ran for it.
func TestRefreshOnMoved_Stats(t *testing.T) {
	tests := []struct {
		name          string
		result        clustermap.RefreshResult
		wantPerformed int
	}{
		{"performed", clustermap.RefreshResult{Performed: true}, 2},
		{"coalesced into a flight that completed", clustermap.RefreshResult{Performed: true, Coalesced: true}, 2},
		{"debounced", clustermap.RefreshResult{Debounced: true}, 0},
		{"wait expired", clustermap.RefreshResult{TimedOut: true}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStack(t, runtime.DefaultRetryPolicy, []mwt.Outcome{
				mwt.AnswerAt(zaris.KvStatus_Moved, 2), mwt.AnswerAt(zaris.KvStatus_OwnershipChanging, 3), mwt.Answer(zaris.KvStatus_Ok),
			})
			s.refresher.OnRefresh = func(context.Context, clustermap.Evidence) clustermap.RefreshResult { return tt.result }
			call := zt.PutCall("k", "v")
			_, err := s.do(call)
			require.NoError(t, err)
			assert.Equal(t, []int64{2, 3}, s.refresher.Requests(), "evidence is each answer's epoch")
			assert.Equal(t, 2, call.Stats.RefreshesRequested)
			assert.Equal(t, tt.wantPerformed, call.Stats.RefreshesPerformed)
		})
	}
}

// TestRefreshOnMoved_Observe (B1): an answer whose epoch is newer than the client's map is
// reported with Observe, without waiting for a refresh; answers at the map's epoch or older
// are not. A RefreshRetry outcome with a newer epoch is observed at once (the fetch runs
// during the backoff) and refreshed before the retry.
func TestRefreshOnMoved_Observe(t *testing.T) {
	tests := []struct {
		name         string
		script       []mwt.Outcome
		wantObserved []int64
		wantRequests []int64
	}{
		{"Ok with a newer epoch", []mwt.Outcome{mwt.AnswerAt(zaris.KvStatus_Ok, 4)}, []int64{4}, nil},
		{"NotFound with a newer epoch", []mwt.Outcome{mwt.AnswerAt(zaris.KvStatus_NotFound, 2)}, []int64{2}, nil},
		{"Ok at the map's epoch", []mwt.Outcome{mwt.AnswerAt(zaris.KvStatus_Ok, 1)}, nil, nil},
		{"Ok with an older epoch", []mwt.Outcome{mwt.AnswerAt(zaris.KvStatus_Ok, 0)}, nil, nil},
		{"Unavailable with a newer epoch, then Ok", []mwt.Outcome{mwt.AnswerAt(zaris.KvStatus_Unavailable, 6), mwt.AnswerAt(zaris.KvStatus_Ok, 6)}, []int64{6, 6}, nil},
		{"Moved with a newer epoch", []mwt.Outcome{mwt.AnswerAt(zaris.KvStatus_Moved, 8), mwt.AnswerAt(zaris.KvStatus_Ok, 8)}, []int64{8}, []int64{8}},
		{"Moved at the map's epoch", []mwt.Outcome{mwt.AnswerAt(zaris.KvStatus_Moved, 1), mwt.AnswerAt(zaris.KvStatus_Ok, 1)}, nil, []int64{1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStack(t, runtime.DefaultRetryPolicy, tt.script)
			call := zt.GetCall("k")
			_, err := s.do(call)
			require.NoError(t, err)
			assert.Equal(t, tt.wantObserved, s.refresher.Observed())
			assert.Equal(t, tt.wantRequests, s.refresher.Requests())
		})
	}
}

// TestRefreshOnMoved_NoRefreshWithoutRetry: the refresh comes before a retry, so a call
// that will not be retried never waits for one.
func TestRefreshOnMoved_NoRefreshWithoutRetry(t *testing.T) {
	s := newStack(t, runtime.DefaultRetryPolicy, []mwt.Outcome{mwt.Answer(zaris.KvStatus_Moved)})
	_, err := s.do(zt.GetCall("k", runtime.WithMaxAttempts(1)))
	require.Error(t, err)
	assert.Empty(t, s.refresher.Requests())
}

// TestRefreshOnMoved_ContextEnds: a caller whose context ends while it waits for the
// refresh gets its context's error and makes no further attempt.
func TestRefreshOnMoved_ContextEnds(t *testing.T) {
	s := newStack(t, runtime.DefaultRetryPolicy, []mwt.Outcome{mwt.Answer(zaris.KvStatus_Moved), mwt.Answer(zaris.KvStatus_Ok)})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.refresher.OnRefresh = func(context.Context, clustermap.Evidence) clustermap.RefreshResult {
		cancel()
		return clustermap.RefreshResult{TimedOut: true}
	}
	call := zt.GetCall("k")
	_, err := s.handler(ctx, call)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, 1, s.transport.Attempts())
	assert.Equal(t, 1, call.Stats.RefreshesRequested)
}

// unreachable is the error of an attempt whose dial to node 2 was refused (rule B7).
var unreachable = mwt.FailAt(fmt.Errorf("dial node2:9090: connection refused: %w", runtime.ErrNodeUnavailable), false, 2)

// TestB7_AnUnreachableOwnerIsAwaitedInsteadOfBackedOff: after an attempt that could not
// reach its node, the next attempt waits for a map that names another owner (from the
// failure's end, bounded by OwnerWait or the deadline, whichever comes first) instead of
// backing off, and asks for no other refresh; a reset on an open connection backs off and
// refreshes as before, with the failure's end as the evidence's time.
func TestB7_AnUnreachableOwnerIsAwaitedInsteadOfBackedOff(t *testing.T) {
	reset := mwt.FailAt(fmt.Errorf("node 2: %w: connection reset", runtime.ErrTransport), true, 2)
	for _, tc := range []struct {
		name      string
		first     mwt.Outcome
		timeout   time.Duration // the call's, 0: none
		wantUntil time.Duration // from the call's start, 0: no wait
	}{
		{"dial refused", unreachable, 0, 5*time.Second + 30*time.Millisecond},
		{"no reply within the attempt timeout", mwt.FailAt(fmt.Errorf("node 2: %w", runtime.ErrAttemptTimeout), true, 2), 0, 5*time.Second + 30*time.Millisecond},
		{"dial refused, the deadline first", unreachable, 2 * time.Second, 2 * time.Second},
		{"a reset backs off as before", reset, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first := tc.first
			first.Took = 30 * time.Millisecond
			s := newStack(t, runtime.DefaultRetryPolicy, []mwt.Outcome{first, mwt.Answer(zaris.KvStatus_Ok)})
			var opts []runtime.CallOption
			if tc.timeout > 0 {
				opts = append(opts, runtime.WithTimeout(tc.timeout))
			}
			call := zt.GetCall("k", opts...)
			_, err := s.do(call)
			require.NoError(t, err)
			failed := mwt.Epoch.Add(30 * time.Millisecond)
			assert.Equal(t, failed, call.Attempts[0].End, "the transport records when the outcome came back")
			if tc.wantUntil == 0 {
				assert.Empty(t, s.refresher.OwnerWaits())
				assert.Equal(t, []time.Duration{100 * time.Millisecond}, s.clock.Sleeps())
				assert.Equal(t, []time.Time{failed}, s.refresher.RequestTimes(), "the evidence is the failure's end")
				assert.Zero(t, call.Stats.OwnerWaits)
				return
			}
			assert.Empty(t, s.clock.Sleeps(), "no backoff")
			assert.Empty(t, s.refresher.Requests(), "no other refresh")
			require.Len(t, s.refresher.OwnerWaits(), 1)
			w := s.refresher.OwnerWaits()[0]
			assert.Equal(t, []byte("k"), w.Key)
			assert.Equal(t, int32(2), w.Gone)
			assert.Equal(t, mwt.Epoch.Add(tc.wantUntil), w.Until)
			assert.Equal(t, 1, call.Stats.OwnerWaits)
			assert.Equal(t, 1, call.Stats.RefreshesRequested)
			assert.Equal(t, 1, call.Stats.RefreshesPerformed)
		})
	}
}

// TestB7_PastTheBoundTheCallGoesOnAsBefore: a wait that runs out (the store never moved the
// owner) is followed by the refresh R3 asks for. The refused attempt before it never left,
// and B7 waited after it, so it did not count (Uncounted); the attempts after it, past
// OwnerWait from the first failure, back off by R5 and refresh, and the call ends on its
// attempt cap (R4): three counted attempts and the uncounted one.
func TestB7_PastTheBoundTheCallGoesOnAsBefore(t *testing.T) {
	s := newStack(t, runtime.DefaultRetryPolicy, []mwt.Outcome{unreachable})
	s.refresher.OnAwaitOwner = func(_ context.Context, w mwt.OwnerWait) clustermap.RefreshResult {
		s.clock.Advance(w.Until.Sub(s.clock.Now())) // nothing moves the owner
		return clustermap.RefreshResult{TimedOut: true, Epoch: 1}
	}
	call := zt.GetCall("k")
	_, err := s.do(call)
	var ce *runtime.CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, runtime.BoundAttempts, ce.Bound)
	assert.Len(t, ce.Attempts, 4)
	assert.Contains(t, err.Error(), "gave up after 3 of 3 attempts and 1 not counted (refused by an unreachable owner, rule B7)")
	assert.Len(t, s.refresher.OwnerWaits(), 1, "one wait: the second failure is past the bound of the first")
	assert.Equal(t, []time.Duration{200 * time.Millisecond, 300 * time.Millisecond}, s.clock.Sleeps(), "R5's backoffs before attempts 3 and 4")
	assert.Len(t, s.refresher.Requests(), 3, "after the wait ran out, and before attempts 3 and 4")
	assert.Equal(t, 1, call.Stats.OwnerWaits)
	assert.Equal(t, 5*time.Second, call.Stats.OwnerWait)
	assert.Equal(t, 4, call.Stats.RefreshesRequested)
}

// TestB7_ARefusedAttemptAfterOthersDoesNotEndTheCall is the scenario of a migration
// followed by the death of the new owner: attempt 1 meets Moved, attempt 2 a reset at the
// new owner, attempt 3 its refused dial. That attempt never left and B7 waits after it,
// so it does not use up the last attempt: the call goes on to the owner the wait found (with
// maxAttempts 2 as with 3). A single-attempt call (maxAttempts 1) is not stretched so.
func TestB7_ARefusedAttemptAfterOthersDoesNotEndTheCall(t *testing.T) {
	reset := mwt.FailAt(fmt.Errorf("node 2: %w: EOF", runtime.ErrTransport), true, 2)
	script := []mwt.Outcome{mwt.AnswerAt(zaris.KvStatus_Moved, 2), reset, unreachable, mwt.Answer(zaris.KvStatus_Ok)}
	s := newStack(t, runtime.DefaultRetryPolicy, script)
	call := zt.GetCall("k")
	resp, err := s.do(call)
	require.NoError(t, err)
	assert.Equal(t, zaris.KvStatus_Ok, kvStatus(resp))
	assert.Len(t, call.Attempts, 4)
	assert.Len(t, s.refresher.OwnerWaits(), 1)
	assert.Equal(t, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond}, s.clock.Sleeps(), "no backoff after the refused dial")

	single := newStack(t, runtime.DefaultRetryPolicy, []mwt.Outcome{unreachable})
	_, err = single.do(zt.GetCall("k", runtime.WithMaxAttempts(1)))
	require.ErrorIs(t, err, runtime.ErrNodeUnavailable)
	assert.Equal(t, 1, single.transport.Attempts())
	assert.Empty(t, single.refresher.OwnerWaits())

	// Two attempts allowed: the refused first one is not counted, so Moved and Ok follow.
	two := newStack(t, runtime.DefaultRetryPolicy, []mwt.Outcome{unreachable, mwt.AnswerAt(zaris.KvStatus_Moved, 2), mwt.Answer(zaris.KvStatus_Ok)})
	resp, err = two.do(zt.GetCall("k", runtime.WithMaxAttempts(2)))
	require.NoError(t, err)
	assert.Equal(t, zaris.KvStatus_Ok, kvStatus(resp))
	assert.Equal(t, 3, two.transport.Attempts())
}

// TestB7_OffWithAZeroOwnerWait: RetryPolicy.OwnerWait zero leaves an unreachable owner to
// R5 and R3: a backoff and a refresh before each retry.
func TestB7_OffWithAZeroOwnerWait(t *testing.T) {
	s := newStack(t, policy(func(p *runtime.RetryPolicy) { p.OwnerWait = 0 }), []mwt.Outcome{unreachable})
	_, err := s.do(zt.GetCall("k"))
	require.Error(t, err)
	assert.Empty(t, s.refresher.OwnerWaits())
	assert.Equal(t, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond}, s.clock.Sleeps())
	assert.Len(t, s.refresher.Requests(), 2)
}

// TestB7_TheWaitEndsWithTheCallersContext: a caller that gives up during the wait gets its
// context's error, and no attempt follows.
func TestB7_TheWaitEndsWithTheCallersContext(t *testing.T) {
	s := newStack(t, runtime.DefaultRetryPolicy, []mwt.Outcome{unreachable})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.refresher.OnAwaitOwner = func(ctx context.Context, _ mwt.OwnerWait) clustermap.RefreshResult {
		cancel()
		<-ctx.Done()
		return clustermap.RefreshResult{TimedOut: true, Epoch: 1}
	}
	call := zt.GetCall("k")
	_, err := s.handler(ctx, call)
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, 1, s.transport.Attempts())
	assert.Empty(t, s.refresher.Requests())
}

// TestB7_AWaitThatReachesTheDeadlineEndsTheCall: when the owner is not moved before the
// call's deadline, the wait ends there and the call ends on its deadline, with no attempt
// made after it.
func TestB7_AWaitThatReachesTheDeadlineEndsTheCall(t *testing.T) {
	s := newStack(t, runtime.DefaultRetryPolicy, []mwt.Outcome{unreachable})
	s.refresher.OnAwaitOwner = func(_ context.Context, w mwt.OwnerWait) clustermap.RefreshResult {
		s.clock.Advance(w.Until.Sub(s.clock.Now()))
		return clustermap.RefreshResult{TimedOut: true, Epoch: 1}
	}
	call := zt.GetCall("k", runtime.WithTimeout(time.Second))
	_, err := s.do(call)
	var ce *runtime.CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, runtime.BoundDeadline, ce.Bound)
	assert.Equal(t, 1, s.transport.Attempts(), "no attempt after the deadline")
	assert.Equal(t, mwt.Epoch.Add(time.Second), s.refresher.OwnerWaits()[0].Until)
	assert.ErrorIs(t, err, runtime.ErrNodeUnavailable, "the last attempt's cause")
}

// R2 and R6: the refresh before a retry waits at most the time left before the call's
// deadline, read on the clock the layer was given.
func TestRefreshOnMoved_R6_WaitIsBoundByTheDeadlineOnItsClock(t *testing.T) {
	clock := mwt.NewClock()
	refresher := mwt.NewRefresher(1)
	var left time.Duration
	refresher.OnRefresh = func(ctx context.Context, _ clustermap.Evidence) clustermap.RefreshResult {
		d, ok := ctx.Deadline()
		require.True(t, ok, "the wait is bounded")
		left = time.Until(d)
		return clustermap.RefreshResult{Performed: true, Epoch: 1}
	}
	next := func(context.Context, *runtime.Call) (runtime.Response, error) {
		return &mwt.Response{Status: runtime.Status(zaris.KvStatus_Ok)}, nil
	}
	h := middleware.RefreshOnMoved(refresher, runtime.DefaultRetryPolicy, clock)(next)
	call := zt.GetCall("k")
	call.StartAttempt().Class = runtime.RefreshRetry
	call.StartAttempt()
	call.Deadline = clock.Now().Add(time.Hour)
	_, err := h(context.Background(), call)
	require.NoError(t, err)
	assert.InDelta(t, float64(time.Hour), float64(left), float64(time.Minute))

	// A context that ends later does not lift the bound.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Hour)
	defer cancel()
	_, err = h(ctx, call)
	require.NoError(t, err)
	assert.InDelta(t, float64(time.Hour), float64(left), float64(time.Minute))
}
