package zarisotel

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/clustron/zaris-go/middleware"
	"github.com/clustron/zaris-go/runtime"
	"github.com/clustron/zaris-go/runtime/clock"
	"github.com/clustron/zaris-go/runtime/clustermap"
)

// ScopeName is the instrumentation scope of the tracer and the meter.
const ScopeName = "github.com/clustron/zaris-go/middleware/zarisotel"

// The attribute keys this package records.
const (
	// KeyOp is the operation's name, for example "Put".
	KeyOp = attribute.Key("zaris.op")
	// KeyOutcome is a call's or an attempt's outcome: the answer's status ("Ok",
	// "NotFound", "Moved", ...) or "error".
	KeyOutcome = attribute.Key("zaris.outcome")
	// KeyStatus is the status an attempt was answered with, or, on the retries counter,
	// the outcome that was retried: a status or an error kind.
	KeyStatus = attribute.Key("zaris.status")
	// KeyErrorType is the kind of a failure: an error kind (ErrorKind) such as
	// "node_unavailable", or the status that a call gave up on, such as "Moved".
	KeyErrorType = attribute.Key("error.type")
	// KeyBound is what stopped a call without an answer: maxAttempts, deadline,
	// retry budget or none.
	KeyBound = attribute.Key("zaris.bound")
	// KeyAttempt is an attempt's number, from 1.
	KeyAttempt = attribute.Key("zaris.attempt")
	// KeyAttempts is how many attempts a call made.
	KeyAttempts = attribute.Key("zaris.attempts")
	// KeyNode is the id of the node an attempt was routed to.
	KeyNode = attribute.Key("zaris.node")
	// KeyMapEpoch is the epoch of the client's map an attempt was routed with.
	KeyMapEpoch = attribute.Key("zaris.map_epoch")
	// KeyAnswerEpoch is the answering node's map epoch.
	KeyAnswerEpoch = attribute.Key("zaris.answer_epoch")
	// KeyClass is how the client judged an attempt: answer, retry, refresh-retry, fatal.
	KeyClass = attribute.Key("zaris.class")
	// KeySent reports whether a failed attempt's request may have reached the node.
	KeySent = attribute.Key("zaris.sent")
	// KeyKey is the routing key, recorded only with WithKeys.
	KeyKey = attribute.Key("zaris.key")
	// KeyResult is a map fetch's result on the refresher's fetches counter: ok or failed.
	KeyResult = attribute.Key("zaris.result")
	// KeyReason is why a refresh request fetched nothing of its own: coalesced or debounced.
	KeyReason = attribute.Key("zaris.reason")
)

// AttemptEvent is the name of the span event recorded for each attempt.
const AttemptEvent = "zaris.attempt"

// StatsSource is what ObserveRefresher observes; *runtime.Refresher
// (kv.Engine().Refresher()) is one.
type StatsSource interface {
	Stats() clustermap.RefreshStats
}

// Option configures New.
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	tp    trace.TracerProvider
	mp    metric.MeterProvider
	clock clock.Clock
	keys  bool
}

// WithTracerProvider sets where spans go (default otel.GetTracerProvider(), at New).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(c *config) { c.tp = tp })
}

// WithMeterProvider sets where metrics go (default otel.GetMeterProvider(), at New).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) { c.mp = mp })
}

// WithClock measures call durations on clk instead of clock.System; give it the
// clock the stack runs on (runtime.Config.Clock) when that is not the system's. Nil means
// clock.System.
func WithClock(clk clock.Clock) Option {
	clk = cmp.Or(clk, clock.System)
	return optionFunc(func(c *config) { c.clock = clk })
}

// WithKeys records each call's routing key on its span as zaris.key. Off by default: keys
// may be personal data, and they are never metric attributes.
func WithKeys() Option {
	return optionFunc(func(c *config) { c.keys = true })
}

// Telemetry holds the tracer and the metric instruments; its Middleware records into them.
// Build one per client with New; it is safe for concurrent use.
type Telemetry struct {
	cfg    config
	tracer trace.Tracer

	calls         metric.Int64Counter
	attempts      metric.Int64Counter
	retries       metric.Int64Counter
	refreshesReq  metric.Int64Counter
	refreshesPerf metric.Int64Counter
	duration      metric.Float64Histogram
	meter         metric.Meter
	registration  metric.Registration
	batch         batchInstruments
}

// DurationBuckets are the call duration histogram's bucket boundaries, in seconds: from
// half a millisecond (a call answered at once on a local network) to a minute (the
// default whole-call deadline).
var DurationBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// New creates the tracer and the metric instruments (named in the package documentation)
// from the configured providers. It fails only if the meter provider refuses an
// instrument or the refresher callback.
func New(opts ...Option) (*Telemetry, error) {
	c := config{clock: clock.System}
	for _, o := range opts {
		o.apply(&c)
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	t := &Telemetry{cfg: c}
	t.tracer = c.tp.Tracer(ScopeName, trace.WithInstrumentationVersion(runtime.Version))
	m := c.mp.Meter(ScopeName, metric.WithInstrumentationVersion(runtime.Version))

	var err, e error
	t.calls, e = m.Int64Counter("zaris.client.calls", metric.WithUnit("{call}"),
		metric.WithDescription("Calls made, by operation and outcome (the answer's status, or error)."))
	err = errors.Join(err, e)
	t.attempts, e = m.Int64Counter("zaris.client.attempts", metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts made, by operation and outcome (a status, or error with error.type)."))
	err = errors.Join(err, e)
	t.retries, e = m.Int64Counter("zaris.client.retries", metric.WithUnit("{retry}"),
		metric.WithDescription("Attempts followed by another attempt of the same call, by the retried status or error kind."))
	err = errors.Join(err, e)
	t.refreshesReq, e = m.Int64Counter("zaris.client.map.refreshes.requested", metric.WithUnit("{refresh}"),
		metric.WithDescription("Cluster map refreshes that calls asked for."))
	err = errors.Join(err, e)
	t.refreshesPerf, e = m.Int64Counter("zaris.client.map.refreshes.performed", metric.WithUnit("{refresh}"),
		metric.WithDescription("Cluster map refreshes that calls asked for and that fetched a map (not coalesced away or debounced)."))
	err = errors.Join(err, e)
	t.duration, e = m.Float64Histogram("zaris.client.call.duration", metric.WithUnit("s"),
		metric.WithDescription("Whole-call duration, all attempts and backoff included, by operation and outcome."),
		metric.WithExplicitBucketBoundaries(DurationBuckets...))
	err = errors.Join(err, e)
	t.batch, e = newBatchInstruments(m)
	err = errors.Join(err, e)
	t.meter = m
	if err != nil {
		return nil, fmt.Errorf("zarisotel: %w", err)
	}
	return t, nil
}

// ObserveRefresher reports r's counters, the client's shared map refresher
// (kv.Engine().Refresher()), as the zaris.client.map.refresher.* counters, until Close.
// Call it once, after the client is made; a second call is an error.
func (t *Telemetry) ObserveRefresher(r StatsSource) error {
	if t.registration != nil {
		return errors.New("zarisotel: already observing a refresher")
	}
	m := t.meter
	requests, err1 := m.Int64ObservableCounter("zaris.client.map.refresher.requests", metric.WithUnit("{request}"),
		metric.WithDescription("Refresh requests the client's shared map refresher received."))
	fetches, err2 := m.Int64ObservableCounter("zaris.client.map.refresher.fetches", metric.WithUnit("{fetch}"),
		metric.WithDescription("Map fetches the shared refresher ran, by result (ok, failed)."))
	absorbed, err3 := m.Int64ObservableCounter("zaris.client.map.refresher.absorbed", metric.WithUnit("{request}"),
		metric.WithDescription("Refresh requests that ran no fetch of their own, by reason (coalesced, debounced)."))
	background, err4 := m.Int64ObservableCounter("zaris.client.map.refresher.background", metric.WithUnit("{fetch}"),
		metric.WithDescription("Map fetches among fetches that no caller's request started (an answer's newer epoch, a silent node, a deferred or owner wait's later fetch)."))
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return err
	}
	var (
		ok        = metric.WithAttributes(KeyResult.String("ok"))
		failed    = metric.WithAttributes(KeyResult.String("failed"))
		coalesced = metric.WithAttributes(KeyReason.String("coalesced"))
		debounced = metric.WithAttributes(KeyReason.String("debounced"))
	)
	reg, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := r.Stats()
		o.ObserveInt64(requests, int64(s.Requested))
		o.ObserveInt64(fetches, int64(s.Performed), ok)
		o.ObserveInt64(fetches, int64(s.Failed), failed)
		o.ObserveInt64(absorbed, int64(s.Coalesced), coalesced)
		o.ObserveInt64(absorbed, int64(s.Debounced), debounced)
		o.ObserveInt64(background, int64(s.Background))
		return nil
	}, requests, fetches, absorbed, background)
	if err != nil {
		return err
	}
	t.registration = reg
	return nil
}

// Close stops observing the refresher given to ObserveRefresher. The middleware goes on
// recording calls.
func (t *Telemetry) Close() error {
	if t.registration == nil {
		return nil
	}
	return t.registration.Unregister()
}

// Middleware returns the call-level middleware that records each call's span and metrics.
// Install it with runtime.WithCallMiddleware, in front of the retry layer: there it
// sees each call once, with its final outcome and every attempt. The span is the context's
// current span for the layers below, so attempt-level middleware can add to it.
func (t *Telemetry) Middleware() middleware.Middleware {
	return func(next middleware.Handler) middleware.Handler {
		return func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
			service, op, kind := "", "unknown", "unknown"
			if call.Op != nil {
				service, op, kind = call.Op.Service, call.Op.Name, call.Op.Kind.String()
			}
			spanName := op
			startAttrs := []attribute.KeyValue{
				attribute.String("rpc.system", "apache_thrift"),
				attribute.String("rpc.method", op),
				attribute.String("zaris.op.kind", kind),
			}
			if service != "" {
				spanName = service + "/" + op
				startAttrs = append(startAttrs, attribute.String("rpc.service", service))
			}
			if t.cfg.keys {
				startAttrs = append(startAttrs, KeyKey.String(string(call.Key)))
			}
			ctx, span := t.tracer.Start(ctx, spanName,
				trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(startAttrs...))
			start := t.cfg.clock.Now()

			resp, err := next(ctx, call)

			elapsed := t.cfg.clock.Now().Sub(start)
			t.record(ctx, span, op, call, resp, err, elapsed)
			span.End()
			return resp, err
		}
	}
}

// record adds the call's outcome to the metrics (recordCall, recordAttempts, the batch's
// and the refreshes' counters) and, when the span is recording, to its span (recordSpan).
func (t *Telemetry) record(ctx context.Context, span trace.Span, op string, call *runtime.Call, resp runtime.Response, err error, elapsed time.Duration) {
	opAttr := KeyOp.String(op)
	t.recordCall(ctx, opAttr, call, resp, err, elapsed)
	t.recordAttempts(ctx, opAttr, call)
	t.batch.record(ctx, span, opAttr, call.Batch)
	if r := call.Stats.RefreshesRequested; r > 0 {
		t.refreshesReq.Add(ctx, int64(r), metric.WithAttributes(opAttr))
	}
	if r := call.Stats.RefreshesPerformed; r > 0 {
		t.refreshesPerf.Add(ctx, int64(r), metric.WithAttributes(opAttr))
	}
	if span.IsRecording() {
		recordSpan(span, call, resp, err)
	}
}

// recordCall counts the call and records its duration, by operation (opAttr) and outcome:
// the answer's status, or error with the error's kind and, for a *runtime.CallError, the
// bound that ended it.
func (t *Telemetry) recordCall(ctx context.Context, opAttr attribute.KeyValue, call *runtime.Call, resp runtime.Response, err error, elapsed time.Duration) {
	callAttrs := []attribute.KeyValue{opAttr}
	switch {
	case err != nil:
		callAttrs = append(callAttrs, KeyOutcome.String("error"), KeyErrorType.String(ErrorKind(err)))
		if ce, ok := errors.AsType[*runtime.CallError](err); ok {
			callAttrs = append(callAttrs, KeyBound.String(ce.Bound.String()))
		}
	case resp != nil:
		callAttrs = append(callAttrs, KeyOutcome.String(respStatusName(call, resp)))
	}
	callSet := metric.WithAttributeSet(attribute.NewSet(callAttrs...))
	t.calls.Add(ctx, 1, callSet)
	t.duration.Record(ctx, elapsed.Seconds(), callSet)
}

// recordAttempts counts each of the call's attempts by operation (opAttr) and outcome (its
// status, or error with the error's kind), and each but the last of a single-key call as a
// retry of its status or error kind.
func (t *Telemetry) recordAttempts(ctx context.Context, opAttr attribute.KeyValue, call *runtime.Call) {
	n := len(call.Attempts)
	for i := range call.Attempts {
		a := &call.Attempts[i]
		outcome := attemptOutcome(statusesOf(call), a)
		if a.Answered {
			t.attempts.Add(ctx, 1, metric.WithAttributes(opAttr, KeyOutcome.String(outcome)))
		} else {
			t.attempts.Add(ctx, 1, metric.WithAttributes(opAttr, KeyOutcome.String("error"), KeyErrorType.String(outcome)))
		}
		if i < n-1 && call.Batch == nil {
			t.retries.Add(ctx, 1, metric.WithAttributes(opAttr, KeyStatus.String(outcome)))
		}
	}
}

// recordSpan adds one event per attempt to the call's span, and its end attributes: the
// attempts, refreshes and backoff, and the answer's status or the error (recorded, with
// the span's status set to Error).
func recordSpan(span trace.Span, call *runtime.Call, resp runtime.Response, err error) {
	for i := range call.Attempts {
		span.AddEvent(AttemptEvent, trace.WithAttributes(attemptAttrs(statusesOf(call), &call.Attempts[i])...))
	}
	endAttrs := []attribute.KeyValue{
		KeyAttempts.Int(len(call.Attempts)),
		attribute.Int("zaris.refreshes.requested", call.Stats.RefreshesRequested),
		attribute.Int("zaris.refreshes.performed", call.Stats.RefreshesPerformed),
		attribute.Float64("zaris.backoff_ms", float64(call.Stats.Backoff)/float64(time.Millisecond)),
	}
	switch {
	case err != nil:
		endAttrs = append(endAttrs, KeyErrorType.String(ErrorKind(err)))
		if ce, ok := errors.AsType[*runtime.CallError](err); ok {
			endAttrs = append(endAttrs, KeyBound.String(ce.Bound.String()))
		}
		span.SetAttributes(endAttrs...)
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	case resp != nil:
		endAttrs = append(endAttrs, KeyStatus.String(respStatusName(call, resp)))
		span.SetAttributes(endAttrs...)
	}
}

// attemptOutcome is an attempt's status, or its error's kind.
func attemptOutcome(statuses *runtime.StatusTable, a *runtime.Attempt) string {
	if a.Answered {
		return statusName(statuses, a.Status)
	}
	return ErrorKind(a.Err)
}

// attemptAttrs are the attributes of an attempt's span event.
func attemptAttrs(statuses *runtime.StatusTable, a *runtime.Attempt) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, 10)
	attrs = append(attrs, KeyAttempt.Int(a.N))
	if a.Node != clustermap.NoNode {
		attrs = append(attrs, KeyNode.Int(int(a.Node)))
	}
	if a.Addr != "" {
		attrs = append(attrs, attribute.String("server.address", a.Addr))
	}
	attrs = append(attrs, KeyMapEpoch.Int64(a.MapEpoch))
	switch {
	case a.Answered:
		attrs = append(attrs, KeyStatus.String(statusName(statuses, a.Status)), KeyAnswerEpoch.Int64(a.AnswerEpoch))
	case a.Err != nil:
		attrs = append(attrs, KeyErrorType.String(ErrorKind(a.Err)),
			attribute.String("exception.message", a.Err.Error()), KeySent.Bool(a.Sent))
	}
	attrs = append(attrs, KeyClass.String(a.Class.String()),
		attribute.Float64("zaris.duration_ms", float64(a.Duration)/float64(time.Millisecond)))
	return attrs
}

// ErrorKind names the kind of err for the error.type attribute, from the runtime's
// sentinel errors (found with errors.Is): in_doubt, attempt_timeout, node_unavailable,
// partition_unavailable, transport, request_too_large, retry_budget_exhausted, closed,
// no_response, canceled, deadline_exceeded; the status a call gave up on (a
// *runtime.StatusError) by its name, for example "Moved"; and "other" for anything else.
// The set is small and fixed, so it is safe as a metric attribute.
func ErrorKind(err error) string {
	if err == nil {
		return ""
	}
	for _, k := range errorKinds {
		if errors.Is(err, k.err) {
			return k.kind
		}
	}
	if se, ok := errors.AsType[*runtime.StatusError](err); ok {
		if se.Name == "" || strings.Contains(se.Name, "(") {
			return "other" // a value the status table does not hold
		}
		return se.Name
	}
	return "other"
}

// errorKinds are the sentinels ErrorKind names, first match wins: an in-doubt error may
// also wrap the transport failure that left it in doubt.
var errorKinds = []struct {
	err  error
	kind string
}{
	{runtime.ErrInDoubt, "in_doubt"},
	{runtime.ErrAttemptTimeout, "attempt_timeout"},
	{runtime.ErrNodeUnavailable, "node_unavailable"},
	{runtime.ErrPartitionUnavailable, "partition_unavailable"},
	{runtime.ErrTransport, "transport"},
	{runtime.ErrRequestTooLarge, "request_too_large"},
	{runtime.ErrRetryBudgetExhausted, "retry_budget_exhausted"},
	{runtime.ErrClosed, "closed"},
	{runtime.ErrNoResponse, "no_response"},
	{context.Canceled, "canceled"},
	{context.DeadlineExceeded, "deadline_exceeded"},
}

// statusesOf returns the status table of call's operation, or nil.
func statusesOf(call *runtime.Call) *runtime.StatusTable {
	if call.Op == nil {
		return nil
	}
	return call.Op.Statuses
}

// respStatusName is the name of resp's status, bounded as statusName's.
func respStatusName(call *runtime.Call, resp runtime.Response) string {
	if call.Op == nil || call.Op.Status == nil {
		return "other"
	}
	return statusName(call.Op.Statuses, call.Op.Status(resp))
}

// statusName is a status's name in statuses, bounded to the IDL's values.
func statusName(statuses *runtime.StatusTable, s runtime.Status) string {
	if statuses.Class(int64(s)) == runtime.Fatal {
		return "other" // not in the table
	}
	return statuses.Name(int64(s))
}
