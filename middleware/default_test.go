package middleware_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisclient"
	zt "github.com/clustron/zaris-go/internal/testsupport/zaristest"
	"github.com/clustron/zaris-go/middleware"
	mwt "github.com/clustron/zaris-go/middleware/middlewaretest"
	"github.com/clustron/zaris-go/runtime"
	"github.com/clustron/zaris-go/runtime/clock"
	"github.com/clustron/zaris-go/runtime/clustermap"
)

// TestDefault_Order pins the default order: call-level middleware, Deadline, Batches,
// Retry{Budget, Backoff, RefreshOnMoved, Classify, attempt-level middleware}, transport.
// Each layer leaves a mark in one trace: the user layers directly, the built-ins through
// what they touch (the clock, the refresher, a classifier, the budget's refusal, a
// multi-key call's sub-requests).
func TestDefault_Order(t *testing.T) {
	var trace []string
	mark := func(s string) { trace = append(trace, s) }

	clock := mwt.NewClock()
	clock.OnSleep = func(_ context.Context, d time.Duration) { mark("backoff " + d.String()) }
	refresher := mwt.NewRefresher(1)
	refresher.OnRefresh = func(context.Context, clustermap.Evidence) clustermap.RefreshResult {
		mark("refresh")
		return clustermap.RefreshResult{Performed: true}
	}
	tr := mwt.Script(mwt.Answer(zaris.KvStatus_Moved), mwt.Answer(zaris.KvStatus_Ok))
	transport := func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
		if call.Parent != nil {
			mark(fmt.Sprintf("transport sub-request of %d items (deadline set: %v)", len(call.Request.(*zaris.MultiGetRequest).Items), !call.Deadline.IsZero()))
			return &zaris.MultiGetResponse{Status: zaris.KvStatus_Ok, Results: []*zaris.GetOutcome{
				{Status: zaris.KvStatus_Ok}, {Status: zaris.KvStatus_NotFound},
			}}, nil
		}
		mark(fmt.Sprintf("transport %d (deadline set: %v)", call.Current().N, !call.Deadline.IsZero()))
		return tr.Invoke(ctx, call)
	}
	classify := func(o middleware.Outcome) (runtime.Class, bool) {
		mark("classify")
		return runtime.Unclassified, false
	}
	layer := func(name string) middleware.Middleware {
		return func(next middleware.Handler) middleware.Handler {
			return func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
				switch {
				case call.Parent != nil:
					mark(name + "> sub-request")
				case call.Batch != nil:
					mark(name + "> batch")
				default:
					mark(name + ">")
				}
				resp, err := next(ctx, call)
				mark(fmt.Sprintf("<%s (attempts %d, deadline set: %v)", name, len(call.Attempts), !call.Deadline.IsZero()))
				return resp, err
			}
		}
	}
	cfg, err := runtime.NewConfig(runtime.WithEnv(nil), runtime.WithSeeds("127.0.0.1:1"), runtime.WithClock(clock),
		runtime.WithCallMiddleware(layer("call1"), layer("call2")),
		runtime.WithAttemptMiddleware(layer("attempt1")),
		runtime.WithAttemptMiddleware(layer("attempt2")),
		runtime.WithClassifiers(append([]middleware.Classifier{classify}, middleware.DefaultClassifiers...)...),
	)
	require.NoError(t, err)
	h := middleware.Default(transport, refresher, cfg)
	resp, err := h(context.Background(), zt.PutCall("k", "v"))
	require.NoError(t, err)
	assert.Equal(t, zaris.KvStatus_Ok, kvStatus(resp))
	assert.Equal(t, []string{
		"call1>", "call2>", // call-level, outermost first, before Deadline
		"attempt1>", "attempt2>", "transport 1 (deadline set: true)", // Deadline ran before Retry
		"<attempt2 (attempts 1, deadline set: true)", "<attempt1 (attempts 1, deadline set: true)",
		"classify",      // Classify is above the attempt-level middleware
		"backoff 100ms", // Backoff before RefreshOnMoved,
		"refresh",       // which is before the attempt
		"attempt1>", "attempt2>", "transport 2 (deadline set: true)",
		"<attempt2 (attempts 2, deadline set: true)", "<attempt1 (attempts 2, deadline set: true)",
		"classify",
		"<call2 (attempts 2, deadline set: true)", "<call1 (attempts 2, deadline set: true)", // once per call, after the retries
	}, trace)

	// A multi-key call: call-level middleware sees the batch once, with the deadline
	// Deadline set (so Batches is below Deadline); the attempt-level middleware and
	// Classify see its sub-request (so Batches is above Retry).
	trace = nil
	res, err := zarisclient.New(h).MultiGet(context.Background(), &zaris.MultiGetRequest{Items: []*zaris.GetItem{{Key: []byte("a")}, {Key: []byte("b")}}})
	require.NoError(t, err)
	assert.Equal(t, zaris.KvStatus_NotFound, res.Response.Results[1].Status)
	assert.Equal(t, []string{
		"call1> batch", "call2> batch",
		"attempt1> sub-request", "attempt2> sub-request", "transport sub-request of 2 items (deadline set: true)",
		"<attempt2 (attempts 1, deadline set: true)", "<attempt1 (attempts 1, deadline set: true)",
		"classify",
		"<call2 (attempts 1, deadline set: true)", "<call1 (attempts 1, deadline set: true)",
	}, trace)
}

// TestDefault_BudgetIsOutermostAttemptLayer: with a retry budget, a refused retry neither
// backs off, refreshes, nor reaches the attempt-level middleware.
func TestDefault_BudgetIsOutermostAttemptLayer(t *testing.T) {
	b, err := middleware.NewTokenBudget(middleware.BudgetPolicy{}, nil)
	require.NoError(t, err)
	attempts := 0
	counter := func(next middleware.Handler) middleware.Handler {
		return func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
			attempts++
			return next(ctx, call)
		}
	}
	s := newStack(t, runtime.DefaultRetryPolicy, []mwt.Outcome{mwt.Answer(zaris.KvStatus_Moved)},
		withBudget(b), withAttemptMW(counter))
	_, err = s.do(zt.GetCall("k"))
	require.Error(t, err)
	assert.Equal(t, 1, attempts)
	assert.Empty(t, s.clock.Sleeps())
	assert.Empty(t, s.refresher.Requests())
}

// The runtime's refresher plugs into the default stack.
var _ middleware.MapRefresher = (*runtime.Refresher)(nil)

// TestDefault_Concurrent runs one stack from many goroutines (for the race detector).
func TestDefault_Concurrent(t *testing.T) {
	b, err := middleware.NewTokenBudget(middleware.DefaultBudgetPolicy, nil)
	require.NoError(t, err)
	s := newStack(t, runtime.DefaultRetryPolicy, []mwt.Outcome{
		mwt.AnswerAt(zaris.KvStatus_Moved, 2), mwt.AnswerAt(zaris.KvStatus_Ok, 3),
	}, withBudget(b))
	done := make(chan error)
	for range 16 {
		go func() {
			var err error
			for range 50 {
				if _, e := s.do(zt.GetCall("k")); e != nil && err == nil {
					err = e
				}
			}
			done <- err
		}()
	}
	for range 16 {
		assert.NoError(t, <-done)
	}
}

// countingClock counts its readings of the time.
type countingClock struct {
	clock.Clock
	nows int
}

func (c *countingClock) Now() time.Time { c.nows++; return c.Clock.Now() }

// TestDefault_ReadsTheClockOnceForACallAnsweredAtOnce: the stack reads the clock once for a
// call its first attempt answers, in the deadline layer, whose reading the retry layer takes
// as the call's start (the transport reads it for the attempt itself).
func TestDefault_ReadsTheClockOnceForACallAnsweredAtOnce(t *testing.T) {
	clock := &countingClock{Clock: mwt.NewClock()}
	h := middleware.Default(noopTransport(), mwt.NewRefresher(1), runtime.Config{Retry: runtime.DefaultRetryPolicy, Clock: clock})
	call := zt.PutCall("user:42", "Ada")
	_, err := h(context.Background(), call)
	require.NoError(t, err)
	assert.Equal(t, 1, clock.nows)
	assert.Equal(t, mwt.Epoch, call.Start)
}

// TestRetry_ElapsedCountsFromTheCallsStart: a call's CallError counts its time from
// call.Start, the deadline layer's reading, when the layers between it and the retry layer
// took time.
func TestRetry_ElapsedCountsFromTheCallsStart(t *testing.T) {
	clock := mwt.NewClock()
	slow := func(next runtime.Handler) runtime.Handler {
		return func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
			clock.Advance(time.Second)
			return next(ctx, call)
		}
	}
	fail := func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
		call.Current().Class = runtime.Fatal
		return nil, runtime.ErrTransport
	}
	h := runtime.Chain(middleware.Deadline(runtime.DefaultRetryPolicy, clock), slow,
		middleware.Retry(runtime.DefaultRetryPolicy, clock))(fail)
	_, err := h(context.Background(), zt.GetCall("k"))
	callErr, ok := errors.AsType[*runtime.CallError](err)
	require.True(t, ok, "%v", err)
	assert.Equal(t, time.Second, callErr.Elapsed)
}
