package middleware_test

import (
	"bytes"
	"context"
	"fmt"
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
	"github.com/clustron/zaris-go/runtime/clustermap"
)

// ownerByLastByte routes a key to node 1, 2 or 3 by its last byte.
type ownerByLastByte struct{}

var ownerAddrs = []string{"node1:7001", "node2:7002", "node3:7003"}

func (ownerByLastByte) Route(key []byte) (clustermap.Route, error) {
	n := int(key[len(key)-1] % 3)
	return clustermap.Route{Node: int32(n + 1), Addr: ownerAddrs[n]}, nil
}

// okTransport answers every MultiGet sub-request at once, each item Ok.
func okTransport(items int) middleware.Handler {
	outcomes := make([]*zaris.GetOutcome, items)
	for i := range outcomes {
		outcomes[i] = &zaris.GetOutcome{Status: zaris.KvStatus_Ok}
	}
	return func(_ context.Context, call *runtime.Call) (runtime.Response, error) {
		a := call.StartAttempt()
		a.Node, a.Sent, a.Answered, a.Status = call.Target.Node, true, true, runtime.Status(zaris.KvStatus_Ok)
		n := len(call.Request.(*zaris.MultiGetRequest).Items)
		return &zaris.MultiGetResponse{Status: zaris.KvStatus_Ok, Results: outcomes[:n]}, nil
	}
}

// multiGetOf returns a MultiGet of the n keys k0, k1, ...
func multiGetOf(n int) *zaris.MultiGetRequest {
	req := &zaris.MultiGetRequest{}
	for i := range n {
		req.Items = append(req.Items, &zaris.GetItem{Key: fmt.Appendf(nil, "k%d", i)})
	}
	return req
}

// The batch layer's work per item is bookkeeping in slices sized once per call: a batch of
// 300 items over 3 owners allocates about as many objects in it as one of 9 (the margin
// allows slices that grow with the batch; one object per item would exceed it).
func TestBatches_AllocatesPerOwnerNotPerItem(t *testing.T) {
	batches := middleware.Batches(runtime.DefaultRetryPolicy, mwt.NewClock(), nil, ownerByLastByte{}, nil)
	client := zarisclient.New(batches(okTransport(300)))
	allocs := func(req *zaris.MultiGetRequest) float64 {
		return testing.AllocsPerRun(20, func() {
			r, err := client.MultiGet(context.Background(), req)
			require.NoError(t, err)
			require.NoError(t, r.Err(len(req.Items)-1))
		})
	}
	small, big := allocs(multiGetOf(9)), allocs(multiGetOf(300))
	assert.Less(t, big, small+20, "objects for 300 items, against %v for 9", small)
}

// BenchmarkBatches100 is the batch layer's own work for a MultiGet of 100 keys over 3
// owners, with a transport that answers every sub-request at once.
func BenchmarkBatches100(b *testing.B) {
	batches := middleware.Batches(runtime.DefaultRetryPolicy, mwt.NewClock(), nil, ownerByLastByte{}, nil)
	client := zarisclient.New(batches(okTransport(100)))
	req := multiGetOf(100)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := client.MultiGet(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
}

// Items a sub-request answered alike share one record of their first attempt, with their
// own status; an item retried gets a history of its own, and the items that shared its
// first record keep theirs.
func TestBatches_ItemsAnsweredAlikeShareTheirFirstAttempt(t *testing.T) {
	var calls atomic.Int32
	transport := func(_ context.Context, call *runtime.Call) (runtime.Response, error) {
		first := calls.Add(1) <= 2 // the first round: one sub-request per owner
		a := call.StartAttempt()
		a.Node, a.Addr, a.Sent, a.Answered, a.Status = call.Target.Node, call.Target.Addr, true, true, runtime.Status(zaris.KvStatus_Ok)
		resp := &zaris.MultiGetResponse{Status: zaris.KvStatus_Ok}
		for _, it := range call.Request.(*zaris.MultiGetRequest).Items {
			st := zaris.KvStatus_Ok
			switch {
			case bytes.HasPrefix(it.Key, []byte("absent")):
				st = zaris.KvStatus_NotFound
			case bytes.HasPrefix(it.Key, []byte("moving")) && first:
				st = zaris.KvStatus_Migrating
			}
			resp.Results = append(resp.Results, &zaris.GetOutcome{Status: st})
		}
		return resp, nil
	}
	batches := middleware.Batches(runtime.DefaultRetryPolicy, mwt.NewClock(), nil, ownerByLastByte{}, nil)
	var last *runtime.Call
	record := func(next middleware.Handler) middleware.Handler {
		return func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
			last = call
			return next(ctx, call)
		}
	}
	client := zarisclient.New(record(batches(transport)))
	// Keys ending in 0 go to node 1 ('0' % 3 == 0); in 1, to node 2.
	keys := []string{"ok-0", "absent-0", "ok-a0", "absent-a0", "moving-0", "moving-a0", "ok-1"}
	req := &zaris.MultiGetRequest{}
	for _, k := range keys {
		req.Items = append(req.Items, &zaris.GetItem{Key: []byte(k)})
	}
	r, err := client.MultiGet(context.Background(), req)
	require.NoError(t, err)
	for i := range keys {
		require.NoError(t, r.Err(i), keys[i])
	}
	h := last.Batch.Attempts
	want := []zaris.KvStatus{zaris.KvStatus_Ok, zaris.KvStatus_NotFound, zaris.KvStatus_Ok, zaris.KvStatus_NotFound,
		zaris.KvStatus_Migrating, zaris.KvStatus_Migrating, zaris.KvStatus_Ok}
	for i, st := range want {
		require.NotEmpty(t, h[i], keys[i])
		assert.Equal(t, runtime.Status(st), h[i][0].Status, keys[i])
		assert.Equal(t, 1, h[i][0].N, keys[i])
	}
	assert.Same(t, &h[0][0], &h[2][0], "ok items of node 1 share their record")
	assert.Same(t, &h[1][0], &h[3][0], "absent items of node 1 share their record")
	assert.NotSame(t, &h[0][0], &h[6][0], "ok items of different nodes do not")
	for _, i := range []int{4, 5} {
		require.Len(t, h[i], 2, keys[i])
		assert.Equal(t, runtime.Status(zaris.KvStatus_Ok), h[i][1].Status)
		assert.Equal(t, 2, h[i][1].N)
	}
	assert.NotSame(t, &h[4][1], &h[5][1], "retried items have histories of their own")
	assert.Equal(t, runtime.Status(zaris.KvStatus_Migrating), h[5][0].Status, "the first record is untouched by the retries")
}

// TestB7_ABatchItemRefusedByAnUnreachableOwnerIsNotOutOfRounds: the multi-key form of a
// migration followed by the new owner's death. An item meets Moved, then a reset, then a
// refused dial; that round never left and B7 waits after it (Uncounted), so it does not use
// up the item's third attempt, and the item is answered in a fourth round. With B7 off the
// item ends on maxAttempts after three rounds.
func TestB7_ABatchItemRefusedByAnUnreachableOwnerIsNotOutOfRounds(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ownerWait bool
	}{{"B7 on", true}, {"B7 off", false}} {
		t.Run(tc.name, func(t *testing.T) {
			clock := mwt.NewClock()
			var n atomic.Int32
			transport := func(_ context.Context, call *runtime.Call) (runtime.Response, error) {
				a := call.Current()
				a.Node, a.End = 2, clock.Now()
				switch n.Add(1) {
				case 1:
					a.Sent, a.Answered, a.Status = true, true, runtime.Status(zaris.KvStatus_Moved)
					return &zaris.MultiGetResponse{Status: zaris.KvStatus_Moved}, nil
				case 2:
					a.Sent = true
					return nil, fmt.Errorf("node 2: %w: EOF", runtime.ErrTransport)
				case 3:
					return nil, fmt.Errorf("dial node2: connection refused: %w", runtime.ErrNodeUnavailable)
				}
				a.Sent, a.Answered, a.Status = true, true, runtime.Status(zaris.KvStatus_Ok)
				return &zaris.MultiGetResponse{Status: zaris.KvStatus_Ok, Results: []*zaris.GetOutcome{{Status: zaris.KvStatus_Ok}}}, nil
			}
			p := runtime.DefaultRetryPolicy
			if !tc.ownerWait {
				p.OwnerWait = 0
			}
			refresher := mwt.NewRefresher(1)
			var call *runtime.Call
			last := func(next runtime.Handler) runtime.Handler {
				return func(ctx context.Context, c *runtime.Call) (runtime.Response, error) {
					call = c
					return next(ctx, c)
				}
			}
			h := middleware.Default(transport, refresher, runtime.Config{Retry: p, Clock: clock, CallMiddleware: []runtime.Middleware{last}})
			res, err := zarisclient.New(h).MultiGet(context.Background(), multiGetOf(1))
			if !tc.ownerWait {
				require.Error(t, err)
				var ce *runtime.CallError
				require.ErrorAs(t, res.Err(0), &ce)
				assert.Equal(t, runtime.BoundAttempts, ce.Bound)
				assert.Equal(t, 3, call.Batch.Stats.Rounds)
				assert.Empty(t, refresher.OwnerWaits())
				return
			}
			require.NoError(t, err)
			require.NoError(t, res.Err(0))
			assert.Equal(t, zaris.KvStatus_Ok, res.Response.Results[0].Status)
			assert.Equal(t, 4, call.Batch.Stats.Rounds)
			assert.Len(t, refresher.OwnerWaits(), 1, "one wait, after the refused round")
			assert.Equal(t, 1, call.Stats.OwnerWaits)
		})
	}
}

// countingBudget is a retry budget that counts deposits and withdrawals and always grants.
type countingBudget struct{ deposits, withdrawals atomic.Int32 }

func (b *countingBudget) Deposit()       { b.deposits.Add(1) }
func (b *countingBudget) Withdraw() bool { b.withdrawals.Add(1); return true }

// node1UnavailableInTheFirstRound returns a MultiGet transport for a batch of two owners
// (ownerByLastByte): it answers every item Ok, except the items of node 1's sub-request in
// the first round (its first two sub-requests, one per owner), which it answers Unavailable.
func node1UnavailableInTheFirstRound() middleware.Handler {
	var calls atomic.Int32
	return func(_ context.Context, call *runtime.Call) (runtime.Response, error) {
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
}

// B3 in a batch: the batch call deposits once; a sub-request of the first round takes no
// token, each one of a later round takes one.
func TestBatches_B3_OnlyRetryRoundsWithdraw(t *testing.T) {
	budget := &countingBudget{}
	batches := middleware.Batches(runtime.DefaultRetryPolicy, mwt.NewClock(), nil, ownerByLastByte{}, budget)
	client := zarisclient.New(batches(node1UnavailableInTheFirstRound()))
	// "a0" to node 1 ('0' % 3 == 0), "a1" to node 2.
	r, err := client.MultiGet(context.Background(), getsOf("a0", "a1"))
	require.NoError(t, err)
	require.NoError(t, r.Err(0))
	require.NoError(t, r.Err(1))
	assert.EqualValues(t, 1, budget.deposits.Load())
	assert.EqualValues(t, 1, budget.withdrawals.Load(), "one retried sub-request, none for the first round")
}

// Batches: a batch none of whose items is valid sends nothing and runs no round; a batch
// with an invalid item and an answered one is answered (no batch.Error).
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

// B4 for a batch: the batch call's attempts are its sub-requests, one entry each, numbered
// from 1 in the order they ended, and Stats.SubRequests counts them.
func TestBatches_B4_OneAttemptPerSubRequest(t *testing.T) {
	transport := node1UnavailableInTheFirstRound()
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

// TestB7_TheRefreshAfterAWaitThatRanOutCarriesTheFailuresEnd: when B7's wait for a new
// owner runs out, the refresh R3 asks for carries the end of the attempt that could not
// reach its node as its evidence's time, for a multi-key call's item as for a single call,
// so that a refresh the debounce holds back is deferred, not dropped.
func TestB7_TheRefreshAfterAWaitThatRanOutCarriesTheFailuresEnd(t *testing.T) {
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprintf("batch=%v", batch), func(t *testing.T) {
			clock := mwt.NewClock()
			var n atomic.Int32
			transport := func(_ context.Context, call *runtime.Call) (runtime.Response, error) {
				a := call.Current()
				clock.Advance(30 * time.Millisecond)
				a.Node, a.End = 2, clock.Now()
				if n.Add(1) == 1 {
					return nil, fmt.Errorf("dial node2: connection refused: %w", runtime.ErrNodeUnavailable)
				}
				a.Sent, a.Answered, a.Status = true, true, runtime.Status(zaris.KvStatus_Ok)
				if batch {
					return &zaris.MultiGetResponse{Status: zaris.KvStatus_Ok, Results: []*zaris.GetOutcome{{Status: zaris.KvStatus_Ok}}}, nil
				}
				return &zaris.GetResponse{Status: zaris.KvStatus_Ok}, nil
			}
			refresher := mwt.NewRefresher(1)
			refresher.OnAwaitOwner = func(_ context.Context, w mwt.OwnerWait) clustermap.RefreshResult {
				clock.Advance(w.Until.Sub(clock.Now())) // nothing moves the owner
				return clustermap.RefreshResult{TimedOut: true, Epoch: 1}
			}
			h := middleware.Default(transport, refresher, runtime.Config{Retry: runtime.DefaultRetryPolicy, Clock: clock})
			client := zarisclient.New(h)
			if batch {
				res, err := client.MultiGet(context.Background(), multiGetOf(1))
				require.NoError(t, err)
				require.NoError(t, res.Err(0))
			} else {
				_, err := client.Get(context.Background(), &zaris.GetRequest{Key: []byte("k0")})
				require.NoError(t, err)
			}
			require.Len(t, refresher.OwnerWaits(), 1)
			assert.Equal(t, []time.Time{mwt.Epoch.Add(30 * time.Millisecond)}, refresher.RequestTimes(), "the evidence is the failure's end")
		})
	}
}

// Batches, B7: every item whose owner could not be reached waits for a new owner before
// the next round, each for its own key (the waits share the fetches), not only the first.
func TestB7_EveryUnreachableItemWaitsForItsOwner(t *testing.T) {
	clock := mwt.NewClock()
	var n atomic.Int32
	transport := func(_ context.Context, call *runtime.Call) (runtime.Response, error) {
		a := call.Current()
		a.Node, a.End = 2, clock.Now()
		if n.Add(1) == 1 {
			return nil, fmt.Errorf("dial node2: connection refused: %w", runtime.ErrNodeUnavailable)
		}
		a.Sent, a.Answered, a.Status = true, true, runtime.Status(zaris.KvStatus_Ok)
		resp := &zaris.MultiGetResponse{Status: zaris.KvStatus_Ok}
		for range call.Request.(*zaris.MultiGetRequest).Items {
			resp.Results = append(resp.Results, &zaris.GetOutcome{Status: zaris.KvStatus_Ok})
		}
		return resp, nil
	}
	refresher := mwt.NewRefresher(1)
	h := middleware.Default(transport, refresher, runtime.Config{Retry: runtime.DefaultRetryPolicy, Clock: clock})
	res, err := zarisclient.New(h).MultiGet(context.Background(), multiGetOf(2))
	require.NoError(t, err)
	require.NoError(t, res.Err(0))
	require.NoError(t, res.Err(1))
	var keys []string
	for _, w := range refresher.OwnerWaits() {
		keys = append(keys, string(w.Key))
	}
	assert.ElementsMatch(t, []string{"k0", "k1"}, keys)
}
