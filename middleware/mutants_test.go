package middleware_test

// Tests that kill mutants make mutate found alive: each names the rule it protects.

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisclient"
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
		return &mwt.Response{Status: zaris.KvStatus_Ok}, nil
	}
	h := middleware.Backoff(policy(func(p *runtime.RetryPolicy) { p.Backoff = 0 }), clock)(next)
	call := mwt.GetCall("k")
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
		a.Node, a.Sent, a.Answered, a.Status = call.Target.Node, true, true, zaris.KvStatus_Ok
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
		a.Sent, a.Answered, a.Status = true, true, zaris.KvStatus_Ok
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
	refresher.OnRefresh = func(context.Context, int64) runtime.RefreshResult {
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
			a.Answered, a.Status = true, zaris.KvStatus_Moved // y moves
			return &zaris.MultiGetResponse{Status: zaris.KvStatus_Ok, Results: []*zaris.GetOutcome{{Status: zaris.KvStatus_Moved}}}, nil
		}
		mu.Lock()
		sizes = append(sizes, n)
		mu.Unlock()
		a.Answered, a.Status = true, zaris.KvStatus_Ok
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
