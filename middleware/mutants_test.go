package middleware_test

// Tests that kill mutants make mutate found alive: each names the rule it protects.

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisclient"
	zt "github.com/clustron/zaris-go/internal/zaristest"
	"github.com/clustron/zaris-go/middleware"
	mwt "github.com/clustron/zaris-go/middleware/middlewaretest"
	"github.com/clustron/zaris-go/runtime"
)

// sleepCounter is a fake clock that counts every Sleep, zero-length ones included.
type sleepCounter struct {
	*mwt.Clock
	calls atomic.Int32
}

func (c *sleepCounter) Sleep(ctx context.Context, d time.Duration) error {
	c.calls.Add(1)
	return c.Clock.Sleep(ctx, d)
}

// R5: with no backoff (Backoff 0) a retry waits not at all: the layer takes no sleep.
func TestBackoff_R5_ZeroDelayTakesNoSleep(t *testing.T) {
	clock := &sleepCounter{Clock: mwt.NewClock()}
	next := func(context.Context, *runtime.Call) (runtime.Response, error) {
		return &mwt.Response{Status: runtime.Status(zaris.KvStatus_Ok)}, nil
	}
	h := middleware.Backoff(policy(func(p *runtime.RetryPolicy) { p.Backoff = 0 }), clock)(next)
	call := zt.GetCall("k")
	call.StartAttempt()
	call.StartAttempt()
	_, err := h(context.Background(), call)
	require.NoError(t, err)
	assert.Zero(t, clock.calls.Load())
}

// countingBudget is a retry budget that counts deposits and withdrawals and always grants.
type countingBudget struct{ deposits, withdrawals atomic.Int32 }

func (b *countingBudget) Deposit()       { b.deposits.Add(1) }
func (b *countingBudget) Withdraw() bool { b.withdrawals.Add(1); return true }

// B3 in a batch: the batch call deposits once; a sub-request of the first round takes no
// token, each one of a later round takes one.
func TestBatches_B3_OnlyRetryRoundsWithdraw(t *testing.T) {
	var calls atomic.Int32
	transport := func(_ context.Context, call *runtime.Call) (runtime.Response, error) {
		first := calls.Add(1) <= 2 // the first round: one sub-request per owner
		a := call.StartAttempt()
		a.Node, a.Sent, a.Answered, a.Status = call.Target.Node, true, true, runtime.Status(zaris.KvStatus_Ok)
		resp := &zaris.MultiGetResponse{Status: zaris.KvStatus_Ok}
		for range call.Request.(*zaris.MultiGetRequest).Items {
			st := zaris.KvStatus_Ok
			if first && call.Target.Node == 1 {
				st = zaris.KvStatus_Unavailable
			}
			resp.Results = append(resp.Results, &zaris.GetOutcome{Status: st})
		}
		return resp, nil
	}
	budget := &countingBudget{}
	batches := middleware.Batches(runtime.DefaultRetryPolicy, mwt.NewClock(), nil, ownerByLastByte{}, budget)
	client := zarisclient.New(batches(transport))
	// "a0" to node 1 ('0' % 3 == 0), "a1" to node 2.
	r, err := client.MultiGet(context.Background(), getsOf("a0", "a1"))
	require.NoError(t, err)
	require.NoError(t, r.Err(0))
	require.NoError(t, r.Err(1))
	assert.EqualValues(t, 1, budget.deposits.Load())
	assert.EqualValues(t, 1, budget.withdrawals.Load(), "one retried sub-request, none for the first round")
}

// Batches: a batch none of whose items is valid sends nothing and runs no round; a batch
// with an invalid item and an answered one is answered (no BatchError).
func TestBatches_InvalidItemsCountAsAnswered(t *testing.T) {
	var sent atomic.Int32
	var last *runtime.Call
	record := func(next middleware.Handler) middleware.Handler {
		return func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
			last = call
			return next(ctx, call)
		}
	}
	transport := func(_ context.Context, call *runtime.Call) (runtime.Response, error) {
		sent.Add(1)
		a := call.StartAttempt()
		a.Sent, a.Answered, a.Status = true, true, runtime.Status(zaris.KvStatus_Ok)
		resp := &zaris.MultiGetResponse{Status: zaris.KvStatus_Ok}
		for range call.Request.(*zaris.MultiGetRequest).Items {
			resp.Results = append(resp.Results, &zaris.GetOutcome{Status: zaris.KvStatus_Ok})
		}
		return resp, nil
	}
	for _, router := range []middleware.BatchRouter{nil, ownerByLastByte{}} {
		batches := middleware.Batches(runtime.DefaultRetryPolicy, mwt.NewClock(), nil, router, nil)
		client := zarisclient.New(record(batches(transport)))

		sent.Store(0)
		_, err := client.MultiGet(context.Background(), &zaris.MultiGetRequest{Items: []*zaris.GetItem{nil}})
		require.NoError(t, err, "an invalid item is answered InvalidRequest")
		assert.Zero(t, sent.Load(), "nothing to send")
		assert.Zero(t, last.Batch.Stats.Rounds, "no round")

		r, err := client.MultiGet(context.Background(), &zaris.MultiGetRequest{Items: []*zaris.GetItem{nil, {Key: []byte("a1")}}})
		require.NoError(t, err)
		require.NoError(t, r.Err(1))
		assert.Equal(t, zaris.KvStatus_Ok, r.Response.Results[1].Status)
	}
}

// switchingRouter routes "x" to node 1 and "y" to node 2 until the map is refreshed, and
// both to node 1 after.
type switchingRouter struct{ refreshed *atomic.Bool }

func (r switchingRouter) Route(key []byte) (runtime.Route, error) {
	if string(key) == "y" && !r.refreshed.Load() {
		return runtime.Route{Node: 2, Addr: "node2:7002"}, nil
	}
	return runtime.Route{Node: 1, Addr: "node1:7001"}, nil
}

// Batches: only a sub-request of several items that failed on its connection is cut in
// halves later; an item that failed alone shares its next sub-request with the others of
// its owner.
func TestBatches_ItemThatFailedAloneIsNotBound(t *testing.T) {
	var refreshed atomic.Bool
	refresher := mwt.NewRefresher(1)
	refresher.OnRefresh = func(context.Context, runtime.Evidence) runtime.RefreshResult {
		refreshed.Store(true)
		return runtime.RefreshResult{Performed: true, Epoch: 2}
	}
	var mu sync.Mutex
	var sizes []int // per sub-request of the second round, its items
	transport := func(_ context.Context, call *runtime.Call) (runtime.Response, error) {
		a := call.StartAttempt()
		a.Node, a.Sent = call.Target.Node, true
		n := len(call.Request.(*zaris.MultiGetRequest).Items)
		if !refreshed.Load() {
			if call.Target.Node == 1 { // x fails on its connection
				a.Err, a.Class = runtime.ErrTransport, runtime.RefreshRetry
				return nil, a.Err
			}
			a.Answered, a.Status = true, runtime.Status(zaris.KvStatus_Moved) // y moves
			return &zaris.MultiGetResponse{Status: zaris.KvStatus_Ok, Results: []*zaris.GetOutcome{{Status: zaris.KvStatus_Moved}}}, nil
		}
		mu.Lock()
		sizes = append(sizes, n)
		mu.Unlock()
		a.Answered, a.Status = true, runtime.Status(zaris.KvStatus_Ok)
		resp := &zaris.MultiGetResponse{Status: zaris.KvStatus_Ok}
		for range n {
			resp.Results = append(resp.Results, &zaris.GetOutcome{Status: zaris.KvStatus_Ok})
		}
		return resp, nil
	}
	batches := middleware.Batches(runtime.DefaultRetryPolicy, mwt.NewClock(), refresher, switchingRouter{&refreshed}, nil)
	client := zarisclient.New(batches(transport))
	r, err := client.MultiGet(context.Background(), getsOf("x", "y"))
	require.NoError(t, err)
	require.NoError(t, r.Err(0))
	require.NoError(t, r.Err(1))
	assert.Equal(t, []int{2}, sizes, "x and y go together to their one owner")
}

// halvingTransport answers a MultiGet sub-request of at most two items Ok and fails a
// larger one on its connection (a reply over the node's limit); an item whose key starts
// with "m" is answered Moved until moved reports true. sizes records each sub-request's
// items.
func halvingTransport(moved func() bool, sizes *[]int, mu *sync.Mutex) middleware.Handler {
	return func(_ context.Context, call *runtime.Call) (runtime.Response, error) {
		items := call.Request.(*zaris.MultiGetRequest).Items
		mu.Lock()
		*sizes = append(*sizes, len(items))
		mu.Unlock()
		a := call.StartAttempt()
		a.Node, a.Addr, a.Sent = call.Target.Node, call.Target.Addr, true
		if len(items) > 2 {
			a.Err, a.Class = runtime.ErrTransport, runtime.Retry
			return nil, a.Err
		}
		a.Answered, a.Status = true, runtime.Status(zaris.KvStatus_Ok)
		resp := &zaris.MultiGetResponse{Status: zaris.KvStatus_Ok}
		for _, it := range items {
			st := zaris.KvStatus_Ok
			if it.Key[0] == 'm' && !moved() {
				st = zaris.KvStatus_Moved
			}
			resp.Results = append(resp.Results, &zaris.GetOutcome{Status: st, Value: it.Key})
		}
		return resp, nil
	}
}

// noSizes hides whether a batch's items know their sizes.
type noSizes struct{ runtime.BatchItems }

// Batches: items that do not know their sizes are halved after a failure on their
// connection all the same ([5], then [3] [2], then [2] [1]).
func TestBatches_HalvesItemsWithoutSizes(t *testing.T) {
	var mu sync.Mutex
	var sizes []int
	hide := func(next middleware.Handler) middleware.Handler {
		return func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
			call.Batch.Items = noSizes{call.Batch.Items}
			return next(ctx, call)
		}
	}
	batches := middleware.Batches(runtime.DefaultRetryPolicy, mwt.NewClock(), nil, ownerByLastByte{}, nil)
	client := zarisclient.New(hide(batches(halvingTransport(func() bool { return true }, &sizes, &mu))))
	r, err := client.MultiGet(context.Background(), getsOf("a0", "b0", "c0", "d0", "e0"))
	require.NoError(t, err)
	for i := range 5 {
		require.NoError(t, r.Err(i))
	}
	assert.ElementsMatch(t, []int{5, 3, 2, 2, 1}, sizes)
}

// movingRouter routes like ownerByLastByte, except that a key starting with "m" goes to
// node 1 once moved reports true.
type movingRouter struct{ moved func() bool }

func (r movingRouter) Route(key []byte) (runtime.Route, error) {
	if key[0] == 'm' && r.moved() {
		return runtime.Route{Node: 1, Addr: ownerAddrs[0]}, nil
	}
	return ownerByLastByte{}.Route(key)
}

// Batches: an item without a bound that joins items bounded after a failed sub-request
// does not lift their bound: a0 and b0, bound to 2 after [a0 b0 c0] failed, go without
// m1, which moved to their owner.
func TestBatches_UnboundItemKeepsTheOthersBound(t *testing.T) {
	var refreshed atomic.Bool
	refresher := mwt.NewRefresher(1)
	refresher.OnRefresh = func(context.Context, runtime.Evidence) runtime.RefreshResult {
		refreshed.Store(true)
		return runtime.RefreshResult{Performed: true, Epoch: 2}
	}
	var mu sync.Mutex
	var sizes []int
	batches := middleware.Batches(runtime.DefaultRetryPolicy, mwt.NewClock(), refresher, movingRouter{refreshed.Load}, nil)
	client := zarisclient.New(batches(halvingTransport(refreshed.Load, &sizes, &mu)))
	r, err := client.MultiGet(context.Background(), getsOf("a0", "b0", "m1", "c0"))
	require.NoError(t, err)
	for i := range 4 {
		require.NoError(t, r.Err(i))
	}
	assert.ElementsMatch(t, []int{3, 1, 2, 2}, sizes, "[a0 b0 c0] [m1], then [a0 b0] [m1 c0]")
}

// Batches: an item larger than BatchMaxBytes that comes first goes alone, in a sub-request
// of its own, and no sub-request goes without items.
func TestBatches_LargeFirstItemGoesAlone(t *testing.T) {
	var mu sync.Mutex
	var sizes []int
	batches := middleware.Batches(runtime.DefaultRetryPolicy, mwt.NewClock(), nil, ownerByLastByte{}, nil)
	client := zarisclient.New(batches(halvingTransport(func() bool { return true }, &sizes, &mu)))
	big := strings.Repeat("a", middleware.BatchMaxBytes) + "0"
	r, err := client.MultiGet(context.Background(), getsOf(big, "b0"))
	require.NoError(t, err)
	require.NoError(t, r.Err(0))
	require.NoError(t, r.Err(1))
	assert.ElementsMatch(t, []int{1, 1}, sizes)
}

// Batches: items whose sizes add up to exactly BatchMaxBytes share one sub-request ("at
// most" BatchMaxBytes); one byte more and they go apart.
func TestBatches_ItemsOfExactlyBatchMaxBytesGoTogether(t *testing.T) {
	for _, extra := range []int{0, 1} {
		var mu sync.Mutex
		var sizes []int
		batches := middleware.Batches(runtime.DefaultRetryPolicy, mwt.NewClock(), nil, ownerByLastByte{}, nil)
		client := zarisclient.New(batches(halvingTransport(func() bool { return true }, &sizes, &mu)))
		// A MultiGet item's size is 16 bytes and its key.
		half := middleware.BatchMaxBytes/2 - 16
		a := strings.Repeat("a", half-1) + "0"
		b := strings.Repeat("b", half-1+extra) + "0"
		_, err := client.MultiGet(context.Background(), getsOf(a, b))
		require.NoError(t, err)
		if extra == 0 {
			assert.Equal(t, []int{2}, sizes)
		} else {
			assert.ElementsMatch(t, []int{1, 1}, sizes)
		}
	}
}

// Batches: a chunk of items with different bounds holds at most as many items as the
// smallest bound. m1 and mm1 failed in a sub-request of two (bound 1), a0, b0 and c0 in
// one of three (bound 2); once all are one owner's, m1 and mm1 go alone.
func TestBatches_SmallestBoundWins(t *testing.T) {
	var refreshed atomic.Bool
	refresher := mwt.NewRefresher(1)
	refresher.OnRefresh = func(context.Context, runtime.Evidence) runtime.RefreshResult {
		refreshed.Store(true)
		return runtime.RefreshResult{Performed: true, Epoch: 2}
	}
	var mu sync.Mutex
	var sizes []int
	ok := halvingTransport(func() bool { return true }, &sizes, &mu)
	transport := func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
		if call.Target.Node == 2 && !refreshed.Load() { // node 2 fails whatever it is sent
			mu.Lock()
			sizes = append(sizes, len(call.Request.(*zaris.MultiGetRequest).Items))
			mu.Unlock()
			a := call.StartAttempt()
			a.Node, a.Sent, a.Err, a.Class = 2, true, runtime.ErrTransport, runtime.RefreshRetry
			return nil, a.Err
		}
		return ok(ctx, call)
	}
	batches := middleware.Batches(runtime.DefaultRetryPolicy, mwt.NewClock(), refresher, movingRouter{refreshed.Load}, nil)
	client := zarisclient.New(batches(transport))
	r, err := client.MultiGet(context.Background(), getsOf("m1", "a0", "b0", "c0", "mm1"))
	require.NoError(t, err)
	for i := range 5 {
		require.NoError(t, r.Err(i))
	}
	assert.ElementsMatch(t, []int{3, 2, 1, 2, 1, 1}, sizes, "[a0 b0 c0] [m1 mm1], then [m1] [a0 b0] [c0] [mm1]")
}

// B4 for a batch: the batch call's attempts are its sub-requests, one entry each, numbered
// from 1 in the order they ended, and Stats.SubRequests counts them.
func TestBatches_B4_OneAttemptPerSubRequest(t *testing.T) {
	var calls atomic.Int32
	transport := func(_ context.Context, call *runtime.Call) (runtime.Response, error) {
		first := calls.Add(1) <= 2
		a := call.StartAttempt()
		a.Node, a.Sent, a.Answered, a.Status = call.Target.Node, true, true, runtime.Status(zaris.KvStatus_Ok)
		resp := &zaris.MultiGetResponse{Status: zaris.KvStatus_Ok}
		for range call.Request.(*zaris.MultiGetRequest).Items {
			st := zaris.KvStatus_Ok
			if first && call.Target.Node == 1 {
				st = zaris.KvStatus_Unavailable
			}
			resp.Results = append(resp.Results, &zaris.GetOutcome{Status: st})
		}
		return resp, nil
	}
	var last *runtime.Call
	record := func(next middleware.Handler) middleware.Handler {
		return func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
			last = call
			return next(ctx, call)
		}
	}
	batches := middleware.Batches(runtime.DefaultRetryPolicy, mwt.NewClock(), nil, ownerByLastByte{}, nil)
	_, err := zarisclient.New(record(batches(transport))).MultiGet(context.Background(), getsOf("a0", "a1"))
	require.NoError(t, err)
	assert.Equal(t, 3, last.Batch.Stats.SubRequests, "two in the first round, one in the second")
	require.Len(t, last.Attempts, 3)
	for k, a := range last.Attempts {
		assert.Equal(t, k+1, a.N)
	}
}

// R5 in a batch: with no backoff (Backoff 0) a retry round waits not at all: no sleep.
func TestBatches_R5_ZeroDelayTakesNoSleep(t *testing.T) {
	var calls atomic.Int32
	transport := func(_ context.Context, call *runtime.Call) (runtime.Response, error) {
		st := zaris.KvStatus_Ok
		if calls.Add(1) == 1 {
			st = zaris.KvStatus_Unavailable
		}
		a := call.StartAttempt()
		a.Node, a.Sent, a.Answered, a.Status = call.Target.Node, true, true, runtime.Status(st)
		return &zaris.MultiGetResponse{Status: zaris.KvStatus_Ok, Results: []*zaris.GetOutcome{{Status: st}}}, nil
	}
	clock := &sleepCounter{Clock: mwt.NewClock()}
	p := policy(func(p *runtime.RetryPolicy) { p.Backoff = 0 })
	batches := middleware.Batches(p, clock, nil, ownerByLastByte{}, nil)
	r, err := zarisclient.New(batches(transport)).MultiGet(context.Background(), getsOf("a0"))
	require.NoError(t, err)
	require.NoError(t, r.Err(0))
	assert.EqualValues(t, 2, calls.Load(), "retried once")
	assert.Zero(t, clock.calls.Load())
}

// B3: the error of a policy whose MaxBanked is out of range names the range.
func TestNewRetryBudget_B3_ErrorNamesMaxBankedRange(t *testing.T) {
	_, err := middleware.NewRetryBudget(middleware.BudgetPolicy{MaxBanked: -1}, mwt.NewClock())
	assert.ErrorContains(t, err, "[0, 9223372036854776)")
}

// B2: an idempotent operation (Get) sent without a reply is not in doubt: it is retried.
func TestClassify_B2_IdempotentSentWithoutReplyIsRetried(t *testing.T) {
	s := newStack(t, runtime.DefaultRetryPolicy, []mwt.Outcome{
		mwt.Fail(runtime.ErrTransport, true), mwt.Answer(zaris.KvStatus_Ok),
	})
	call := zt.GetCall("k")
	resp, err := s.do(call)
	require.NoError(t, err)
	assert.Equal(t, zaris.KvStatus_Ok, kvStatus(resp))
	assert.Len(t, call.Attempts, 2)
}

// B2 and R3: a non-idempotent write sent that failed with an error that is not retried
// (fatal) is returned as that error, not as in doubt: in doubt is for a replay refused.
func TestClassify_B2_FatalFailureIsNotInDoubt(t *testing.T) {
	bug := errors.New("a bug")
	s := newStack(t, runtime.DefaultRetryPolicy, []mwt.Outcome{mwt.Fail(bug, true)})
	_, err := s.do(zt.IncrementCall("k", 1))
	require.ErrorIs(t, err, bug)
	assert.NotErrorIs(t, err, runtime.ErrInDoubt)
}

// The fake clock behind the R4-R6 tests: a timer of zero fires at once, as a real one does.
func TestClock_ZeroTimerFiresAtOnce(t *testing.T) {
	timer := mwt.NewClock().NewTimer(0)
	select {
	case <-timer.C():
	default:
		t.Fatal("a timer of zero has not fired")
	}
}

// The scripted transport records each attempt's operation, which the tests of R1 to R9
// read back.
func TestTransport_SeesTheOperation(t *testing.T) {
	s := newStack(t, runtime.DefaultRetryPolicy, []mwt.Outcome{mwt.Answer(zaris.KvStatus_Ok)})
	_, err := s.do(zt.GetCall("k"))
	require.NoError(t, err)
	require.Len(t, s.transport.Seen(), 1)
	assert.Equal(t, "Get", s.transport.Seen()[0].Op)
}

// R2 and R6: the refresh before a retry waits at most the time left before the call's
// deadline, read on the clock the layer was given.
func TestRefreshOnMoved_R6_WaitIsBoundByTheDeadlineOnItsClock(t *testing.T) {
	clock := mwt.NewClock()
	refresher := mwt.NewRefresher(1)
	var left time.Duration
	refresher.OnRefresh = func(ctx context.Context, _ runtime.Evidence) runtime.RefreshResult {
		d, ok := ctx.Deadline()
		require.True(t, ok, "the wait is bounded")
		left = time.Until(d)
		return runtime.RefreshResult{Performed: true, Epoch: 1}
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

// R4: when the deadline passes with attempts left, the call ends with BoundDeadline, not
// BoundAttempts.
func TestRetry_R4_DeadlineBeforeTheLastAttemptIsTheDeadlineBound(t *testing.T) {
	slow := mwt.Outcome{Status: runtime.Status(zaris.KvStatus_Unavailable), Node: 1, Took: 30 * time.Second}
	s := newStack(t, policy(func(p *runtime.RetryPolicy) { p.Backoff = 0 }), repeat(slow, 3))
	call := zt.GetCall("k", runtime.WithTimeout(time.Minute))
	_, err := s.do(call)
	ce, ok := errors.AsType[*runtime.CallError](err)
	require.True(t, ok, "%T: %v", err, err)
	assert.Equal(t, runtime.BoundDeadline, ce.Bound)
	assert.Len(t, call.Attempts, 2, "the deadline passed after two attempts of 30 s")
}

// B4: the CallError carries each attempt with its own error. A layer that fails an attempt
// without recording why gets the loop's error recorded on it; an attempt that recorded its
// error keeps it, whatever the layers above returned.
func TestRetry_B4_FailedAttemptRecordsItsError(t *testing.T) {
	recorded := errors.New("recorded by the attempt")
	for _, tc := range []struct {
		name                       string
		attemptErr, returned, want error
	}{
		{"not recorded", nil, assert.AnError, assert.AnError},
		{"recorded", recorded, assert.AnError, recorded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next := func(_ context.Context, call *runtime.Call) (runtime.Response, error) {
				call.Last().Err = tc.attemptErr
				return nil, tc.returned
			}
			call := zt.GetCall("k")
			_, err := middleware.Retry(runtime.DefaultRetryPolicy, mwt.NewClock())(next)(context.Background(), call)
			ce, ok := errors.AsType[*runtime.CallError](err)
			require.True(t, ok, "%T: %v", err, err)
			require.Len(t, ce.Attempts, 1, "an unclassified error is fatal")
			assert.Equal(t, tc.want, ce.Attempts[0].Err)
		})
	}
}

// B4: a StopError names its bound when it has no reason, and its reason when it has one,
// which it unwraps to.
func TestStopError_NamesItsBoundOrItsReason(t *testing.T) {
	assert.Equal(t, "zaris: call stopped by its deadline bound", (&middleware.StopError{Bound: runtime.BoundDeadline}).Error())
	stop := &middleware.StopError{Bound: runtime.BoundBudget, Err: runtime.ErrRetryBudgetExhausted}
	assert.Equal(t, "zaris: call stopped: "+runtime.ErrRetryBudgetExhausted.Error(), stop.Error())
	assert.ErrorIs(t, stop, runtime.ErrRetryBudgetExhausted)
}
