package middleware_test

import (
	"bytes"
	"context"
	"errors"
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
	"github.com/clustron/zaris-go/runtime/batch"
	"github.com/clustron/zaris-go/runtime/clustermap"
)

// orphanRouter routes like ownerByLastByte, except that a key starting with "orphan" has
// no owner (a *runtime.PartitionError of map epoch 1) until the map has been refreshed
// ownerAfter times; ownerAfter < 0 never gives it one.
type orphanRouter struct {
	refreshes  *atomic.Int32
	ownerAfter int32
}

func (r orphanRouter) Route(key []byte) (clustermap.Route, error) {
	if bytes.HasPrefix(key, []byte("orphan")) && (r.ownerAfter < 0 || r.refreshes.Load() < r.ownerAfter) {
		return clustermap.Route{Node: clustermap.NoNode}, &runtime.PartitionError{Segment: 7, Epoch: 1}
	}
	return ownerByLastByte{}.Route(key)
}

// orphanBatch is a MultiGet client whose batch layer routes with an orphanRouter and whose
// transport answers every item Ok; sent counts the keys sent.
type orphanBatch struct {
	client    *zarisclient.Client
	clock     *mwt.Clock
	refresher *mwt.Refresher
	refreshes atomic.Int32
	sent      atomic.Int32
	last      *runtime.Call
}

func newOrphanBatch(ownerAfter int32) *orphanBatch {
	b := &orphanBatch{clock: mwt.NewClock(), refresher: mwt.NewRefresher(1)}
	b.refresher.OnRefresh = func(context.Context, clustermap.Evidence) clustermap.RefreshResult {
		b.refreshes.Add(1)
		return clustermap.RefreshResult{Performed: true, Epoch: 1}
	}
	transport := func(_ context.Context, call *runtime.Call) (runtime.Response, error) {
		a := call.StartAttempt()
		a.Node, a.Addr, a.Sent, a.Answered, a.Status = call.Target.Node, call.Target.Addr, true, true, runtime.Status(zaris.KvStatus_Ok)
		resp := &zaris.MultiGetResponse{Status: zaris.KvStatus_Ok}
		for range call.Request.(*zaris.MultiGetRequest).Items {
			b.sent.Add(1)
			resp.Results = append(resp.Results, &zaris.GetOutcome{Status: zaris.KvStatus_Ok})
		}
		return resp, nil
	}
	router := orphanRouter{refreshes: &b.refreshes, ownerAfter: ownerAfter}
	batches := middleware.Batches(runtime.DefaultRetryPolicy, b.clock, b.refresher, router, nil)
	record := func(next middleware.Handler) middleware.Handler {
		return func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
			b.last = call
			return next(ctx, call)
		}
	}
	b.client = zarisclient.New(record(batches(transport)))
	return b
}

func getsOf(keys ...string) *zaris.MultiGetRequest {
	req := &zaris.MultiGetRequest{}
	for _, k := range keys {
		req.Items = append(req.Items, &zaris.GetItem{Key: []byte(k)})
	}
	return req
}

// R3 for a batch item: an item whose segment has no owner in the map is not sent; its
// attempt is a partition-unavailable failure that calls for a refresh, after which the item
// is split again by the refreshed map and sent to its new owner.
func TestBatches_OwnerlessItemIsRetriedAfterARefresh(t *testing.T) {
	b := newOrphanBatch(1)
	r, err := b.client.MultiGet(context.Background(), getsOf("ok-0", "orphan-1", "ok-2"))
	require.NoError(t, err)
	for i := range 3 {
		require.NoError(t, r.Err(i), "item %d", i)
		assert.Equal(t, zaris.KvStatus_Ok, r.Response.Results[i].Status, "item %d", i)
	}
	assert.EqualValues(t, 3, b.sent.Load(), "the ownerless item is sent once it has an owner, the others once")
	assert.EqualValues(t, 1, b.refreshes.Load(), "one refresh before the second round (R3)")
	assert.Equal(t, 1, b.last.Stats.RefreshesRequested, "counted on the batch call")
	assert.Equal(t, 1, b.last.Stats.RefreshesPerformed)
	assert.Equal(t, []time.Duration{100 * time.Millisecond}, b.clock.Sleeps(), "one backoff before the second round (R5)")
	h := b.last.Batch.Attempts[1]
	require.Len(t, h, 2)
	assert.Equal(t, clustermap.NoNode, h[0].Node)
	assert.False(t, h[0].Sent)
	assert.Equal(t, runtime.RefreshRetry, h[0].Class)
	assert.EqualValues(t, 1, h[0].MapEpoch, "the epoch of the map that had no owner")
	assert.ErrorIs(t, h[0].Err, runtime.ErrPartitionUnavailable)
	assert.Equal(t, runtime.Status(zaris.KvStatus_Ok), h[1].Status)
	assert.Len(t, b.last.Batch.Attempts[0], 1)
	assert.Equal(t, 2, b.last.Batch.Stats.Rounds)
}

// R3, R4 and B4 for a batch item: an item that never gets an owner is retried like a
// single key (a refresh and a backoff before each retry, attempts capped at 3) and ends
// with its own *runtime.CallError that unwraps to runtime.ErrPartitionUnavailable; the
// other items are answered.
func TestBatches_OwnerlessItemEndsWithPartitionUnavailable(t *testing.T) {
	b := newOrphanBatch(-1)
	r, err := b.client.MultiGet(context.Background(), getsOf("ok-0", "orphan-1"))
	require.NoError(t, err, "one item was answered")
	require.NoError(t, r.Err(0))
	err = r.Err(1)
	require.ErrorIs(t, err, runtime.ErrPartitionUnavailable)
	ce, ok := errors.AsType[*runtime.CallError](err)
	require.True(t, ok, "%T: %v", err, err)
	assert.Equal(t, runtime.BoundAttempts, ce.Bound)
	assert.Len(t, ce.Attempts, 3)
	for _, a := range ce.Attempts {
		assert.False(t, a.Sent)
		assert.ErrorIs(t, a.Err, runtime.ErrPartitionUnavailable)
	}
	assert.EqualValues(t, 1, b.sent.Load(), "only the routed item is sent")
	assert.EqualValues(t, 2, b.refreshes.Load(), "a refresh before each retry (R3)")
	assert.Equal(t, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond}, b.clock.Sleeps(), "R5")
}

// A batch of ownerless items only gets no answer: its error is a *batch.Error whose
// every item error unwraps to runtime.ErrPartitionUnavailable, none nil.
func TestBatches_OnlyOwnerlessItemsIsABatchError(t *testing.T) {
	b := newOrphanBatch(-1)
	r, err := b.client.MultiGet(context.Background(), getsOf("orphan-0", "orphan-1"))
	be, ok := errors.AsType[*batch.Error](err)
	require.True(t, ok, "%T: %v", err, err)
	require.Len(t, be.Errs, 2)
	for i, e := range be.Errs {
		assert.ErrorIs(t, e, runtime.ErrPartitionUnavailable, "item %d", i)
		assert.ErrorIs(t, r.Err(i), runtime.ErrPartitionUnavailable, "item %d", i)
	}
	assert.Zero(t, b.sent.Load())
}
