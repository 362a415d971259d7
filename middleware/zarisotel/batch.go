package zarisotel

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/clustron/zaris-go/runtime"
)

// ItemBuckets are the bucket boundaries of the items-per-call histogram of multi-key calls.
var ItemBuckets = []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000}

// batchInstruments are the metrics of multi-key calls.
type batchInstruments struct {
	items   metric.Int64Histogram
	retried metric.Int64Counter
}

func newBatchInstruments(m metric.Meter) (batchInstruments, error) {
	var b batchInstruments
	var err1, err2 error
	b.items, err1 = m.Int64Histogram("zaris.client.batch.items", metric.WithUnit("{item}"),
		metric.WithDescription("Items per multi-key call, by operation."),
		metric.WithExplicitBucketBoundaries(ItemBuckets...))
	b.retried, err2 = m.Int64Counter("zaris.client.batch.items.retried", metric.WithUnit("{item}"),
		metric.WithDescription("Item retries of multi-key calls (an item sent in three rounds counts 2), by operation."))
	return b, errors.Join(err1, err2)
}

// record adds a multi-key call's items and items retried to the metrics and its span; a
// call without a batch records nothing here. A multi-key call's attempts are its
// sub-requests, so it adds nothing to zaris.client.retries.
func (b batchInstruments) record(ctx context.Context, span trace.Span, opAttr attribute.KeyValue, batch *runtime.Batch) {
	if batch == nil || batch.Items == nil {
		return
	}
	n := batch.Items.Len()
	b.items.Record(ctx, int64(n), metric.WithAttributes(opAttr))
	if r := batch.Stats.ItemsRetried; r > 0 {
		b.retried.Add(ctx, int64(r), metric.WithAttributes(opAttr))
	}
	if span.IsRecording() {
		span.SetAttributes(
			attribute.Int("zaris.batch.items", n),
			attribute.Int("zaris.batch.items_retried", batch.Stats.ItemsRetried),
			attribute.Int("zaris.batch.rounds", batch.Stats.Rounds),
			attribute.Int("zaris.batch.sub_requests", batch.Stats.SubRequests),
		)
	}
}
