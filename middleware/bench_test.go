package middleware_test

import (
	"context"
	"testing"
	"time"

	"github.com/clustron/zaris-go/gen/zaris"
	zt "github.com/clustron/zaris-go/internal/testsupport/zaristest"
	"github.com/clustron/zaris-go/middleware"
	mwt "github.com/clustron/zaris-go/middleware/middlewaretest"
	"github.com/clustron/zaris-go/runtime"
	"github.com/clustron/zaris-go/runtime/clock"
)

// noopTransport answers Ok at once, filling the attempt like the real transport.
func noopTransport() middleware.Handler {
	resp := &zaris.PutResponse{Status: zaris.KvStatus_Ok, MapEpoch: 1}
	return func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
		a := call.Current()
		a.Node, a.MapEpoch, a.Sent, a.Answered, a.Status, a.AnswerEpoch = 1, 1, true, true, runtime.Status(resp.Status), resp.MapEpoch
		return resp, nil
	}
}

// benchCall runs h on one reused call (reset between iterations, as a fresh NewCall would
// be), so the allocations reported are the stack's own.
func benchCall(b *testing.B, ctx context.Context, h middleware.Handler) {
	call := zt.PutCall("user:42", "Ada")
	attempts := call.Attempts[:0]
	b.ReportAllocs()
	for b.Loop() {
		call.Attempts, call.Stats, call.Deadline = attempts, runtime.CallStats{}, time.Time{}
		if _, err := h(ctx, call); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTransportOnly is the baseline: the no-op transport without middleware.
func BenchmarkTransportOnly(b *testing.B) {
	benchCall(b, context.Background(), noopTransport())
}

// BenchmarkDefault measures the default stack's cost on the success path (one attempt,
// answered Ok) around the no-op transport.
func BenchmarkDefault(b *testing.B) {
	cfg := runtime.Config{Retry: runtime.DefaultRetryPolicy, Clock: clock.System}
	refresher := mwt.NewRefresher(1)
	budget, err := middleware.NewTokenBudget(middleware.DefaultBudgetPolicy, nil)
	if err != nil {
		b.Fatal(err)
	}
	withDeadline, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	noTimeout := cfg
	noTimeout.Retry.RequestTimeout = 0

	b.Run("background ctx", func(b *testing.B) {
		benchCall(b, context.Background(), middleware.Default(noopTransport(), refresher, cfg))
	})
	b.Run("ctx with an earlier deadline", func(b *testing.B) {
		cfg := cfg
		cfg.Retry.RequestTimeout = 2 * time.Hour
		benchCall(b, withDeadline, middleware.Default(noopTransport(), refresher, cfg))
	})
	b.Run("no request timeout", func(b *testing.B) {
		benchCall(b, context.Background(), middleware.Default(noopTransport(), refresher, noTimeout))
	})
	b.Run("with retry budget", func(b *testing.B) {
		budgeted := cfg
		budgeted.RetryBudget = budget
		benchCall(b, context.Background(), middleware.Default(noopTransport(), refresher, budgeted))
	})
}
