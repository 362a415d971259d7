package middleware_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/middleware"
	mwt "github.com/clustron/zaris-go/middleware/middlewaretest"
	"github.com/clustron/zaris-go/runtime"
)

// TestDeadline: the call's deadline is the earliest of the context's deadline and now plus
// the call's timeout (or the request timeout; zero is no bound), and the context passed on
// carries it.
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
		wantCtx     time.Duration // 0: no context deadline
	}{
		{"request timeout", 60 * time.Second, 0, 0, 60 * time.Second, 60 * time.Second},
		{"call timeout wins over the request timeout", 60 * time.Second, 2 * time.Second, 0, 2 * time.Second, 2 * time.Second},
		{"call timeout above the request timeout", 1 * time.Second, 5 * time.Second, 0, 5 * time.Second, 5 * time.Second},
		{"infinite", 0, 0, 0, 0, 0},
		{"infinite with a call timeout", 0, 3 * time.Second, 0, 3 * time.Second, 3 * time.Second},
		{"earlier context deadline", 60 * time.Second, 0, 10 * time.Second, 10 * time.Second, 10 * time.Second},
		{"later context deadline", 5 * time.Second, 0, time.Hour, 5 * time.Second, 5 * time.Second},
		{"infinite with a context deadline", 0, 0, 10 * time.Second, 10 * time.Second, 10 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := mwt.NewClock()
			var got seen
			next := func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
				got.deadline = call.Deadline
				got.ctxDeadline, got.hasCtx = ctx.Deadline()
				return &mwt.Response{Status: zaris.KvStatus_Ok}, nil
			}
			p := policy(func(p *runtime.RetryPolicy) { p.RequestTimeout = tt.timeout })
			h := middleware.Deadline(p, clock)(next)
			ctx := context.Background()
			if tt.ctxTimeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.ctxTimeout)
				defer cancel()
			}
			call := mwt.GetCall("k")
			if tt.callTimeout > 0 {
				call = mwt.GetCall("k", runtime.WithTimeout(tt.callTimeout))
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
	call := mwt.GetCall("k")
	call.Deadline = clock.Now().Add(time.Second)
	next := func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
		return &mwt.Response{Status: zaris.KvStatus_Ok}, nil
	}
	_, err := middleware.Deadline(runtime.DefaultRetryPolicy, clock)(next)(context.Background(), call)
	require.NoError(t, err)
	assert.Equal(t, mwt.Epoch.Add(time.Second), call.Deadline)
}

// TestDeadline_EndsAHungAttempt: the context passed on carries the call's deadline, so an
// attempt that hangs until its context ends is cut at the deadline, and the call names the
// deadline bound. (The wait is on a context, on the wall clock: 20 ms.)
func TestDeadline_EndsAHungAttempt(t *testing.T) {
	hung := func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
		call.Current().Sent = true
		<-ctx.Done()
		return nil, ctx.Err()
	}
	p := policy(func(p *runtime.RetryPolicy) { p.RequestTimeout = 20 * time.Millisecond })
	h := middleware.Default(hung, mwt.NewRefresher(1), runtime.Config{Retry: p, Clock: runtime.SystemClock})
	_, err := h(context.Background(), mwt.GetCall("k"))
	var ce *runtime.CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, runtime.BoundDeadline, ce.Bound)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Len(t, ce.Attempts, 1)
}
