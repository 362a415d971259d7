package middleware_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	zt "github.com/clustron/zaris-go/internal/testsupport/zaristest"
	"github.com/clustron/zaris-go/middleware"
	mwt "github.com/clustron/zaris-go/middleware/middlewaretest"
	"github.com/clustron/zaris-go/runtime"
)

// TestDeadline: the call's deadline is the earliest of the context's deadline and now plus
// the call's timeout (or the request timeout; zero is no bound). It is set on the call only:
// the context passed on is the caller's, so a call costs no timer.
func TestDeadline(t *testing.T) {
	type seen struct {
		deadline    time.Time
		ctxDeadline time.Time
		hasCtx      bool
	}
	tests := []struct {
		name        string
		timeout     time.Duration // policy's RequestTimeout
		callTimeout time.Duration
		ctxTimeout  time.Duration // 0: no context deadline
		want        time.Duration // 0: no deadline
		wantCtx     time.Duration // the context passed on: the caller's, unchanged (0: none)
	}{
		{"request timeout", 60 * time.Second, 0, 0, 60 * time.Second, 0},
		{"call timeout wins over the request timeout", 60 * time.Second, 2 * time.Second, 0, 2 * time.Second, 0},
		{"call timeout above the request timeout", 1 * time.Second, 5 * time.Second, 0, 5 * time.Second, 0},
		{"infinite", 0, 0, 0, 0, 0},
		{"infinite with a call timeout", 0, 3 * time.Second, 0, 3 * time.Second, 0},
		{"earlier context deadline", 60 * time.Second, 0, 10 * time.Second, 10 * time.Second, 10 * time.Second},
		{"later context deadline", 5 * time.Second, 0, time.Hour, 5 * time.Second, time.Hour},
		{"infinite with a context deadline", 0, 0, 10 * time.Second, 10 * time.Second, 10 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := mwt.NewClock()
			var got seen
			next := func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
				got.deadline = call.Deadline
				got.ctxDeadline, got.hasCtx = ctx.Deadline()
				return &mwt.Response{Status: runtime.Status(zaris.KvStatus_Ok)}, nil
			}
			p := policy(func(p *runtime.RetryPolicy) { p.RequestTimeout = tt.timeout })
			h := middleware.Deadline(p, clock)(next)
			ctx := context.Background()
			if tt.ctxTimeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.ctxTimeout)
				defer cancel()
			}
			call := zt.GetCall("k")
			if tt.callTimeout > 0 {
				call = zt.GetCall("k", runtime.WithTimeout(tt.callTimeout))
			}
			start := time.Now()
			_, err := h(ctx, call)
			require.NoError(t, err)
			if tt.want == 0 {
				assert.True(t, got.deadline.IsZero())
			} else {
				assert.WithinDuration(t, mwt.Epoch.Add(tt.want), got.deadline, time.Second, "on the injected clock")
			}
			if tt.wantCtx == 0 {
				assert.False(t, got.hasCtx)
			} else {
				require.True(t, got.hasCtx)
				assert.WithinDuration(t, start.Add(tt.wantCtx), got.ctxDeadline, time.Second, "on the wall clock")
			}
		})
	}
}

// TestDeadline_KeepsEarlierCallDeadline: a deadline already set on the call is never moved
// later.
func TestDeadline_KeepsEarlierCallDeadline(t *testing.T) {
	clock := mwt.NewClock()
	call := zt.GetCall("k")
	call.Deadline = clock.Now().Add(time.Second)
	next := func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
		return &mwt.Response{Status: runtime.Status(zaris.KvStatus_Ok)}, nil
	}
	_, err := middleware.Deadline(runtime.DefaultRetryPolicy, clock)(next)(context.Background(), call)
	require.NoError(t, err)
	assert.Equal(t, mwt.Epoch.Add(time.Second), call.Deadline)
}

// TestDeadline_StopsRetriesAtTheDeadline: the layers below stop at call.Deadline without a
// context deadline: an attempt that outlives it (it moves the injected clock past it) ends
// the call with the deadline bound instead of a retry.
func TestDeadline_StopsRetriesAtTheDeadline(t *testing.T) {
	clock := mwt.NewClock()
	var ctxHadDeadline bool
	slow := func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
		_, ctxHadDeadline = ctx.Deadline()
		a := call.Current()
		a.Answered, a.Status = true, runtime.Status(zaris.KvStatus_Unavailable)
		clock.Advance(30 * time.Second)
		return &mwt.Response{Status: runtime.Status(zaris.KvStatus_Unavailable)}, nil
	}
	p := policy(func(p *runtime.RetryPolicy) { p.RequestTimeout = 20 * time.Second; p.MaxAttempts = 5 })
	h := middleware.Default(slow, mwt.NewRefresher(1), runtime.Config{Retry: p, Clock: clock})
	_, err := h(context.Background(), zt.GetCall("k"))
	var ce *runtime.CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, runtime.BoundDeadline, ce.Bound)
	assert.Len(t, ce.Attempts, 1)
	assert.False(t, ctxHadDeadline, "the deadline travels on the call, not on a derived context")
}

// TestDeadline_NonPositiveCallTimeoutLeavesNoTime: WithTimeout(d) with d <= 0, like
// context.WithTimeout, leaves the call no time: it ends with the deadline bound before any
// attempt, instead of falling back to the request timeout.
func TestDeadline_NonPositiveCallTimeoutLeavesNoTime(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		t.Run(d.String(), func(t *testing.T) {
			clock := mwt.NewClock()
			attempts := 0
			invoke := func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
				attempts++
				return &mwt.Response{Status: runtime.Status(zaris.KvStatus_Ok)}, nil
			}
			h := middleware.Default(invoke, mwt.NewRefresher(1), runtime.Config{Retry: runtime.DefaultRetryPolicy, Clock: clock})
			call := zt.GetCall("k", runtime.WithTimeout(d))
			_, err := h(context.Background(), call)
			var ce *runtime.CallError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, runtime.BoundDeadline, ce.Bound)
			assert.Zero(t, attempts, "no attempt is made")
			assert.Equal(t, mwt.Epoch, call.Deadline)
		})
	}
}

// TestDeadline_SystemClockTakesTheContextDeadlineAsItIs: on the system clock, a context
// deadline earlier than the call's timeout becomes the call's deadline to the nanosecond,
// so the transport can tell that the context's own end covers it.
func TestDeadline_SystemClockTakesTheContextDeadlineAsItIs(t *testing.T) {
	for _, end := range []time.Time{
		time.Now().Add(time.Second),                               // with a monotonic reading
		time.Now().Add(time.Second).Round(0).Add(time.Nanosecond), // wall clock only
	} {
		ctx, cancel := context.WithDeadline(context.Background(), end)
		defer cancel()
		var got time.Time
		h := middleware.Deadline(runtime.RetryPolicy{RequestTimeout: time.Minute}, nil)(
			func(_ context.Context, call *runtime.Call) (runtime.Response, error) {
				got = call.Deadline
				return nil, nil
			})
		_, err := h(ctx, zt.GetCall("k"))
		require.NoError(t, err)
		assert.True(t, got.Equal(end), "call deadline %v, context deadline %v", got, end)
	}
}
