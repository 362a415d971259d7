package middleware_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zarisclient"
	"github.com/clustron/zaris-go/middleware"
	mwt "github.com/clustron/zaris-go/middleware/middlewaretest"
	"github.com/clustron/zaris-go/runtime"
)

// batchOver is a MultiGet client whose batch layer sends every sub-request to next.
func batchOver(next middleware.Handler) *zarisclient.Client {
	batches := middleware.Batches(runtime.DefaultRetryPolicy, mwt.NewClock(), mwt.NewRefresher(1), ownerByLastByte{}, nil)
	return zarisclient.New(batches(next))
}

// A sub-request that the layers below end before its first attempt (its deadline passed,
// its context ended) ends its items the same way: with the bound and the cause, not with
// a call error nested in the item's own.
func TestBatches_ASubRequestStoppedBeforeItsAttemptStopsItsItems(t *testing.T) {
	stopped := func(context.Context, *runtime.Call) (runtime.Response, error) {
		return nil, &runtime.CallError{Op: "MultiGet", Bound: runtime.BoundDeadline, Err: context.DeadlineExceeded}
	}
	res, err := batchOver(stopped).MultiGet(context.Background(), getsOf("a"))
	require.Error(t, err)
	ce, ok := errors.AsType[*runtime.CallError](res.Err(0))
	require.True(t, ok, "%T: %v", res.Err(0), res.Err(0))
	assert.Equal(t, runtime.BoundDeadline, ce.Bound)
	assert.Empty(t, ce.Attempts)
	assert.ErrorIs(t, ce, context.DeadlineExceeded)
	_, nested := errors.AsType[*runtime.CallError](ce.Err)
	assert.False(t, nested, "the item's error nests the sub-request's: %v", ce)
}

// A sub-request that ended with neither an attempt, a reply nor an error still ends its
// items with an error: none of them looks answered.
func TestBatches_ASubRequestWithNoOutcomeFailsItsItems(t *testing.T) {
	nothing := func(context.Context, *runtime.Call) (runtime.Response, error) { return nil, nil }
	res, err := batchOver(nothing).MultiGet(context.Background(), getsOf("a"))
	require.Error(t, err)
	assert.ErrorContains(t, res.Err(0), "neither a response nor an error")
}

// An attempt that failed without an error of its own ends its items with the error the
// sub-request returned.
func TestBatches_AFailedAttemptWithoutItsOwnErrorTakesTheSubRequests(t *testing.T) {
	boom := errors.New("boom")
	failed := func(_ context.Context, call *runtime.Call) (runtime.Response, error) {
		call.StartAttempt().Class = runtime.Fatal
		return nil, boom
	}
	res, err := batchOver(failed).MultiGet(context.Background(), getsOf("a"))
	require.Error(t, err)
	assert.ErrorIs(t, res.Err(0), boom)
}
