package zarisotel_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisclient"
	zt "github.com/clustron/zaris-go/internal/testsupport/zaristest"
	"github.com/clustron/zaris-go/middleware"
	mwt "github.com/clustron/zaris-go/middleware/middlewaretest"
	"github.com/clustron/zaris-go/middleware/zarisotel"
	"github.com/clustron/zaris-go/runtime"
	"github.com/clustron/zaris-go/runtime/clustermap"
)

// fixture is the default stack over a scripted transport on a fake clock, instrumented
// into an in-memory span recorder and a manual metric reader.
type fixture struct {
	handler middleware.Handler
	spans   *tracetest.SpanRecorder
	reader  *sdkmetric.ManualReader
	tel     *zarisotel.Telemetry
}

func newFixture(t *testing.T, script []mwt.Outcome, opts ...zarisotel.Option) *fixture {
	t.Helper()
	f := &fixture{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(f.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(f.reader))
	t.Cleanup(func() {
		_ = tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	clock := mwt.NewClock()
	transport := mwt.Script(script...)
	transport.Clock = clock
	opts = append([]zarisotel.Option{
		zarisotel.WithTracerProvider(tp), zarisotel.WithMeterProvider(mp), zarisotel.WithClock(clock),
	}, opts...)
	tel, err := zarisotel.New(opts...)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, tel.Close()) })
	f.tel = tel
	cfg := runtime.Config{Retry: runtime.DefaultRetryPolicy, Clock: clock,
		CallMiddleware: []runtime.Middleware{tel.Middleware()}}
	f.handler = middleware.Default(transport.Invoke, mwt.NewRefresher(6), cfg)
	return f
}

// metrics collects the reader's metrics by name.
func (f *fixture) metrics(t *testing.T) map[string]metricdata.Aggregation {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, f.reader.Collect(context.Background(), &rm))
	out := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		assert.Equal(t, zarisotel.ScopeName, sm.Scope.Name)
		assert.Equal(t, runtime.Version, sm.Scope.Version)
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

// sums returns a counter's data points as attribute set (encoded) -> value.
func sums(t *testing.T, data metricdata.Aggregation) map[string]int64 {
	t.Helper()
	s, ok := data.(metricdata.Sum[int64])
	require.True(t, ok, "%T is not an int64 sum", data)
	assert.True(t, s.IsMonotonic)
	out := map[string]int64{}
	for _, dp := range s.DataPoints {
		out[dp.Attributes.Encoded(attribute.DefaultEncoder())] = dp.Value
	}
	return out
}

// attrs encodes kv as the keys of sums' result.
func attrs(kv ...attribute.KeyValue) string {
	s := attribute.NewSet(kv...)
	return s.Encoded(attribute.DefaultEncoder())
}

// eventAttrs returns an event's attributes as a map.
func eventAttrs(kvs []attribute.KeyValue) map[attribute.Key]attribute.Value {
	out := map[attribute.Key]attribute.Value{}
	for _, kv := range kvs {
		out[kv.Key] = kv.Value
	}
	return out
}

var (
	put = zarisotel.KeyOp.String("Put")
	get = zarisotel.KeyOp.String("Get")
)

func TestRetriedCall(t *testing.T) {
	moved := mwt.AnswerAt(zaris.KvStatus_Moved, 7)
	moved.Node, moved.Took = 2, time.Millisecond
	ok := mwt.AnswerAt(zaris.KvStatus_Ok, 7)
	ok.Took = 2 * time.Millisecond
	f := newFixture(t, []mwt.Outcome{moved, ok})

	resp, err := f.handler(context.Background(), zt.PutCall("user:42", "ada"))
	require.NoError(t, err)
	require.Equal(t, zaris.KvStatus_Ok, kvStatus(resp))

	// One client span with an event per attempt, and no error.
	ended := f.spans.Ended()
	require.Len(t, ended, 1)
	span := ended[0]
	assert.Equal(t, "ZarisKv/Put", span.Name())
	assert.Equal(t, trace.SpanKindClient, span.SpanKind())
	assert.Equal(t, codes.Unset, span.Status().Code)
	got := eventAttrs(span.Attributes())
	assert.Equal(t, "Put", got["rpc.method"].AsString())
	assert.Equal(t, "write", got["zaris.op.kind"].AsString())
	assert.Equal(t, int64(2), got[zarisotel.KeyAttempts].AsInt64())
	assert.Equal(t, "Ok", got[zarisotel.KeyStatus].AsString())
	assert.Equal(t, int64(1), got["zaris.refreshes.requested"].AsInt64())
	assert.Equal(t, 100.0, got["zaris.backoff_ms"].AsFloat64())
	assert.NotContains(t, got, zarisotel.KeyKey, "keys are recorded only WithKeys")

	events := span.Events()
	require.Len(t, events, 2)
	for _, e := range events {
		assert.Equal(t, zarisotel.AttemptEvent, e.Name)
	}
	first, second := eventAttrs(events[0].Attributes), eventAttrs(events[1].Attributes)
	assert.Equal(t, int64(1), first[zarisotel.KeyAttempt].AsInt64())
	assert.Equal(t, int64(2), first[zarisotel.KeyNode].AsInt64())
	assert.Equal(t, "node2:9090", first["server.address"].AsString())
	assert.Equal(t, "Moved", first[zarisotel.KeyStatus].AsString())
	assert.Equal(t, int64(0), first[zarisotel.KeyMapEpoch].AsInt64())
	assert.Equal(t, int64(7), first[zarisotel.KeyAnswerEpoch].AsInt64())
	assert.Equal(t, "refresh-retry", first[zarisotel.KeyClass].AsString())
	assert.Equal(t, 1.0, first["zaris.duration_ms"].AsFloat64())
	assert.Equal(t, int64(2), second[zarisotel.KeyAttempt].AsInt64())
	assert.Equal(t, "Ok", second[zarisotel.KeyStatus].AsString())
	assert.Equal(t, "answer", second[zarisotel.KeyClass].AsString())

	m := f.metrics(t)
	assert.Equal(t, map[string]int64{attrs(put, zarisotel.KeyOutcome.String("Ok")): 1}, sums(t, m["zaris.client.calls"]))
	assert.Equal(t, map[string]int64{
		attrs(put, zarisotel.KeyOutcome.String("Moved")): 1,
		attrs(put, zarisotel.KeyOutcome.String("Ok")):    1,
	}, sums(t, m["zaris.client.attempts"]))
	assert.Equal(t, map[string]int64{attrs(put, zarisotel.KeyStatus.String("Moved")): 1}, sums(t, m["zaris.client.retries"]))
	assert.Equal(t, map[string]int64{attrs(put): 1}, sums(t, m["zaris.client.map.refreshes.requested"]))
	assert.Equal(t, map[string]int64{attrs(put): 1}, sums(t, m["zaris.client.map.refreshes.performed"]))

	h, ok2 := m["zaris.client.call.duration"].(metricdata.Histogram[float64])
	require.True(t, ok2)
	require.Len(t, h.DataPoints, 1)
	dp := h.DataPoints[0]
	assert.Equal(t, uint64(1), dp.Count)
	assert.InDelta(t, 0.103, dp.Sum, 1e-9, "two attempts (1 ms + 2 ms) and 100 ms of backoff on the fake clock")
	assert.Equal(t, zarisotel.DurationBuckets, dp.Bounds)
}

func TestFailedCallRecordsTheTerminalError(t *testing.T) {
	f := newFixture(t, []mwt.Outcome{
		mwt.Fail(runtime.ErrNodeUnavailable, false),
		mwt.Answer(zaris.KvStatus_Unavailable),
		mwt.Answer(zaris.KvStatus_Unavailable),
	})
	_, err := f.handler(context.Background(), zt.GetCall("k"))
	require.Error(t, err)

	ended := f.spans.Ended()
	require.Len(t, ended, 1)
	span := ended[0]
	assert.Equal(t, codes.Error, span.Status().Code)
	assert.Equal(t, err.Error(), span.Status().Description)
	got := eventAttrs(span.Attributes())
	assert.Equal(t, "maxAttempts", got[zarisotel.KeyBound].AsString())
	assert.Equal(t, "Unavailable", got[zarisotel.KeyErrorType].AsString())

	events := span.Events()
	require.Len(t, events, 4, "three attempts and the recorded error")
	first := eventAttrs(events[0].Attributes)
	assert.Equal(t, "node_unavailable", first[zarisotel.KeyErrorType].AsString())
	assert.Equal(t, false, first[zarisotel.KeySent].AsBool())
	assert.NotContains(t, first, zarisotel.KeyNode, "no node was chosen")
	assert.Equal(t, "exception", events[3].Name)
	assert.Equal(t, err.Error(), eventAttrs(events[3].Attributes)["exception.message"].AsString())

	m := f.metrics(t)
	assert.Equal(t, map[string]int64{
		attrs(get, zarisotel.KeyOutcome.String("error"), zarisotel.KeyErrorType.String("Unavailable"), zarisotel.KeyBound.String("maxAttempts")): 1,
	}, sums(t, m["zaris.client.calls"]))
	assert.Equal(t, map[string]int64{
		attrs(get, zarisotel.KeyOutcome.String("error"), zarisotel.KeyErrorType.String("node_unavailable")): 1,
		attrs(get, zarisotel.KeyOutcome.String("Unavailable")):                                              2,
	}, sums(t, m["zaris.client.attempts"]))
	assert.Equal(t, map[string]int64{
		attrs(get, zarisotel.KeyStatus.String("node_unavailable")): 1,
		attrs(get, zarisotel.KeyStatus.String("Unavailable")):      1,
	}, sums(t, m["zaris.client.retries"]))
}

func TestAnswersAreNotErrors(t *testing.T) {
	f := newFixture(t, []mwt.Outcome{mwt.Answer(zaris.KvStatus_NotFound)}, zarisotel.WithKeys())
	resp, err := f.handler(context.Background(), zt.GetCall("user:43"))
	require.NoError(t, err)
	require.Equal(t, zaris.KvStatus_NotFound, kvStatus(resp))

	span := f.spans.Ended()[0]
	assert.Equal(t, codes.Unset, span.Status().Code)
	assert.Equal(t, "user:43", eventAttrs(span.Attributes())[zarisotel.KeyKey].AsString())
	m := f.metrics(t)
	assert.Equal(t, map[string]int64{attrs(get, zarisotel.KeyOutcome.String("NotFound")): 1}, sums(t, m["zaris.client.calls"]))
	assert.NotContains(t, m, "zaris.client.retries", "nothing was retried")
}

func TestSpanIsTheContextOfTheLayersBelow(t *testing.T) {
	f := newFixture(t, []mwt.Outcome{mwt.Answer(zaris.KvStatus_Ok)})
	var seen trace.SpanContext
	probe := func(next middleware.Handler) middleware.Handler {
		return func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
			seen = trace.SpanContextFromContext(ctx)
			return next(ctx, call)
		}
	}
	h := middleware.Chain(f.tel.Middleware(), probe)(f.handler)
	_, err := h(context.Background(), zt.GetCall("k"))
	require.NoError(t, err)
	require.Len(t, f.spans.Ended(), 2, "the outer span and the inner one")
	assert.Equal(t, f.spans.Ended()[1].SpanContext().SpanID(), seen.SpanID())
}

// refreshStats is a fixed StatsSource.
type refreshStats clustermap.RefreshStats

func (s refreshStats) Stats() clustermap.RefreshStats { return clustermap.RefreshStats(s) }

func TestRefresherCounters(t *testing.T) {
	stats := refreshStats{Requested: 10, Performed: 3, Failed: 1, Coalesced: 4, Debounced: 2, Background: 2}
	f := newFixture(t, []mwt.Outcome{mwt.Answer(zaris.KvStatus_Ok)})
	require.NoError(t, f.tel.ObserveRefresher(stats))
	require.Error(t, f.tel.ObserveRefresher(stats), "one refresher per Telemetry")
	m := f.metrics(t)
	assert.Equal(t, map[string]int64{attrs(): 10}, sums(t, m["zaris.client.map.refresher.requests"]))
	assert.Equal(t, map[string]int64{
		attrs(zarisotel.KeyResult.String("ok")):     3,
		attrs(zarisotel.KeyResult.String("failed")): 1,
	}, sums(t, m["zaris.client.map.refresher.fetches"]))
	assert.Equal(t, map[string]int64{
		attrs(zarisotel.KeyReason.String("coalesced")): 4,
		attrs(zarisotel.KeyReason.String("debounced")): 2,
	}, sums(t, m["zaris.client.map.refresher.absorbed"]))
	assert.Equal(t, map[string]int64{attrs(): 2}, sums(t, m["zaris.client.map.refresher.background"]))

	require.NoError(t, f.tel.Close())
	assert.NotContains(t, f.metrics(t), "zaris.client.map.refresher.requests", "Close stops observing")
}

func TestErrorKind(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{runtime.ErrNodeUnavailable, "node_unavailable"},
		{&runtime.CallError{Err: runtime.ErrAttemptTimeout}, "attempt_timeout"},
		{&runtime.CallError{Err: &runtime.NodeError{Kind: runtime.ErrRequestTooLarge}}, "request_too_large"},
		{&runtime.CallError{Err: runtime.NewStatusError(zarisclient.Statuses, runtime.Status(zaris.KvStatus_Moved))}, "Moved"},
		{runtime.NewStatusError(zarisclient.Statuses, 99), "other"},
		{context.Canceled, "canceled"},
		{fmt.Errorf("%w: %w", runtime.ErrInDoubt, runtime.ErrTransport), "in_doubt"}, // the first kind listed wins
		{fmt.Errorf("%w: %w", runtime.ErrClosed, context.DeadlineExceeded), "closed"},
		{assert.AnError, "other"},
	} {
		assert.Equal(t, tc.want, zarisotel.ErrorKind(tc.err), "%v", tc.err)
	}
}

// WithClock(nil) measures on the system clock, as no WithClock does.
func TestNilClockIsTheSystemClock(t *testing.T) {
	f := newFixture(t, []mwt.Outcome{mwt.Answer(zaris.KvStatus_Ok)}, zarisotel.WithClock(nil))
	_, err := f.handler(context.Background(), zt.GetCall("k"))
	require.NoError(t, err)
	assert.Len(t, f.spans.Ended(), 1)
}

// The span is named by the operation's own service: a client generated from another IDL
// is not reported as ZarisKv, and an operation of no declared service has no rpc.service.
func TestSpanNamesTheOperationsService(t *testing.T) {
	for _, tc := range []struct{ service, span string }{
		{"Profiles", "Profiles/Put"},
		{"", "Put"},
	} {
		f := newFixture(t, []mwt.Outcome{mwt.Answer(zaris.KvStatus_Ok)})
		op := *zt.OpPut
		op.Service = tc.service
		call := runtime.NewCall(&op, []byte("k"), &zaris.PutRequest{Key: []byte("k")}, false)
		_, err := f.handler(context.Background(), call)
		require.NoError(t, err)
		ended := f.spans.Ended()
		require.Len(t, ended, 1)
		assert.Equal(t, tc.span, ended[0].Name())
		got := eventAttrs(ended[0].Attributes())
		if tc.service == "" {
			assert.NotContains(t, got, attribute.Key("rpc.service"))
		} else {
			assert.Equal(t, tc.service, got["rpc.service"].AsString())
		}
	}
}

// A counter gets a series only from calls that did what it counts: a call that asked for
// no map refresh adds no point, not even a zero, to the refresh counters.
func TestCallWithoutRefreshesAddsNoRefreshPoints(t *testing.T) {
	f := newFixture(t, []mwt.Outcome{mwt.Answer(zaris.KvStatus_Ok)})
	_, err := f.handler(context.Background(), zt.GetCall("k"))
	require.NoError(t, err)
	m := f.metrics(t)
	require.Contains(t, m, "zaris.client.calls")
	assert.Nil(t, m["zaris.client.map.refreshes.requested"], "zaris.client.map.refreshes.requested has a point")
	assert.Nil(t, m["zaris.client.map.refreshes.performed"], "zaris.client.map.refreshes.performed has a point")
}
