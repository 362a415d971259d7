package zarisotel_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/clustron/zaris-go/gen/zaris"
	mwt "github.com/clustron/zaris-go/middleware/middlewaretest"
	"github.com/clustron/zaris-go/runtime"
)

// A multi-key call records its items and items retried once, at call level; its
// sub-requests are attempts, not retries.
func TestBatchCall(t *testing.T) {
	f := newFixture(t, nil)
	mw := f.tel.Middleware()
	h := mw(func(_ context.Context, call *runtime.Call) (runtime.Response, error) {
		call.Batch.Ran = true
		call.Batch.Stats = runtime.BatchStats{Rounds: 2, SubRequests: 4, ItemsRetried: 7}
		for range 4 {
			a := call.StartAttempt()
			a.Answered, a.Status = true, runtime.Status(zaris.KvStatus_Ok)
		}
		return &mwt.Response{Status: runtime.Status(zaris.KvStatus_Ok)}, nil
	})
	call := runtime.NewCall(&runtime.Op{Name: "MultiGet", Kind: runtime.Read, Idempotent: true}, nil, nil, false)
	call.Batch = &runtime.Batch{Items: mwt.Items(30)}
	_, err := h(context.Background(), call)
	require.NoError(t, err)

	op := attribute.String("zaris.op", "MultiGet")
	m := f.metrics(t)
	hist, ok := m["zaris.client.batch.items"].(metricdata.Histogram[int64])
	require.True(t, ok, "%T", m["zaris.client.batch.items"])
	require.Len(t, hist.DataPoints, 1)
	assert.Equal(t, uint64(1), hist.DataPoints[0].Count)
	assert.Equal(t, int64(30), hist.DataPoints[0].Sum)
	assert.Equal(t, map[string]int64{attrs(op): 7}, sums(t, m["zaris.client.batch.items.retried"]))
	_, retried := m["zaris.client.retries"]
	assert.False(t, retried, "sub-requests are not retries")

	ended := f.spans.Ended()
	require.Len(t, ended, 1)
	got := eventAttrs(ended[0].Attributes())
	assert.Equal(t, int64(30), got["zaris.batch.items"].AsInt64())
	assert.Equal(t, int64(7), got["zaris.batch.items_retried"].AsInt64())
	assert.Equal(t, int64(2), got["zaris.batch.rounds"].AsInt64())
}

// A multi-key call with no item retried adds no point, not even a zero, to
// zaris.client.batch.items.retried.
func TestBatchCallWithoutRetriesAddsNoRetriedPoint(t *testing.T) {
	f := newFixture(t, nil)
	h := f.tel.Middleware()(func(_ context.Context, call *runtime.Call) (runtime.Response, error) {
		call.Batch.Ran = true
		call.Batch.Stats = runtime.BatchStats{Rounds: 1, SubRequests: 1}
		a := call.StartAttempt()
		a.Answered, a.Status = true, runtime.Status(zaris.KvStatus_Ok)
		return &mwt.Response{Status: runtime.Status(zaris.KvStatus_Ok)}, nil
	})
	call := runtime.NewCall(&runtime.Op{Name: "MultiGet", Kind: runtime.Read, Idempotent: true}, nil, nil, false)
	call.Batch = &runtime.Batch{Items: mwt.Items(3)}
	_, err := h(context.Background(), call)
	require.NoError(t, err)
	m := f.metrics(t)
	require.Contains(t, m, "zaris.client.batch.items")
	assert.Nil(t, m["zaris.client.batch.items.retried"], "zaris.client.batch.items.retried has a point")
}
