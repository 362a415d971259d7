package middleware_test

import (
	"context"
	"sync/atomic"
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

// TestR5_Backoff: before attempt n+1 the client waits backoff*n, x8 after Migrating, capped
// at 2 s, clamped to the time left before the deadline, zero past it; a cancelled context
// ends the wait.
func TestR5_Backoff(t *testing.T) {
	p := runtime.DefaultRetryPolicy
	now := mwt.Epoch
	moved := &runtime.Attempt{Answered: true, Status: runtime.Status(zaris.KvStatus_Moved)}
	migrating := &runtime.Attempt{Answered: true, Status: runtime.Status(zaris.KvStatus_Migrating)}
	failed := &runtime.Attempt{Err: runtime.ErrTransport}
	ms := time.Millisecond
	tests := []struct {
		name     string
		n        int
		last     *runtime.Attempt
		deadline time.Time
		want     time.Duration
	}{
		{"after attempt 1", 1, moved, time.Time{}, 100 * ms},
		{"after attempt 2", 2, moved, time.Time{}, 200 * ms},
		{"after attempt 3", 3, failed, time.Time{}, 300 * ms},
		{"no last attempt", 1, nil, time.Time{}, 100 * ms},
		{"migrating x8", 1, migrating, time.Time{}, 800 * ms},
		{"migrating x8 after attempt 2", 2, migrating, time.Time{}, 1600 * ms},
		{"capped at 2s", 3, migrating, time.Time{}, 2 * time.Second},
		{"capped at 2s without migrating", 25, moved, time.Time{}, 2 * time.Second},
		{"huge n does not overflow", 1 << 40, migrating, time.Time{}, 2 * time.Second},
		{"deadline far", 2, moved, now.Add(time.Minute), 200 * ms},
		{"clamped to the time left", 2, moved, now.Add(150 * ms), 150 * ms},
		{"migrating clamped", 1, migrating, now.Add(500 * ms), 500 * ms},
		{"zero at the deadline", 1, moved, now, 0},
		{"zero past the deadline", 1, moved, now.Add(-time.Second), 0},
		{"n 0", 0, moved, time.Time{}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, middleware.Delay(p, tt.n, middleware.SlowFactor(p, zt.GetCall("k"), tt.last), now, tt.deadline))
		})
	}

	t.Run("a policy's SlowFactor replaces the IDL's for slow statuses only", func(t *testing.T) {
		three := p
		three.SlowFactor = 3
		call := zt.GetCall("k")
		assert.Equal(t, 3, middleware.SlowFactor(three, call, migrating), "Migrating: the policy's factor")
		assert.Equal(t, 1, middleware.SlowFactor(three, call, moved), "Moved is not slow: no factor")
		assert.Equal(t, 1, middleware.SlowFactor(three, call, failed), "no answer: no factor")
	})

	t.Run("MaxBackoff zero is no cap, Backoff zero no wait", func(t *testing.T) {
		uncapped := p
		uncapped.MaxBackoff = 0
		assert.Equal(t, 30*time.Second, middleware.Delay(uncapped, 300, 1, now, time.Time{}))
		none := p
		none.Backoff = 0
		assert.Zero(t, middleware.Delay(none, 3, 8, now, time.Time{}))
	})

	t.Run("stack sleeps 100 then 200", func(t *testing.T) {
		s := newStack(t, policy(func(p *runtime.RetryPolicy) { p.MaxAttempts = 4 }), []mwt.Outcome{
			mwt.Answer(zaris.KvStatus_Unavailable), mwt.Answer(zaris.KvStatus_Unavailable), mwt.Answer(zaris.KvStatus_Ok),
		})
		call := zt.GetCall("k")
		_, err := s.do(call)
		require.NoError(t, err)
		assert.Equal(t, []time.Duration{100 * ms, 200 * ms}, s.clock.Sleeps())
		assert.Equal(t, 300*ms, call.Stats.Backoff)
	})

	t.Run("stack sleeps x8 after Migrating", func(t *testing.T) {
		s := newStack(t, policy(func(p *runtime.RetryPolicy) { p.MaxAttempts = 4 }), repeat(mwt.Answer(zaris.KvStatus_Migrating), 4))
		call := zt.PutCall("k", "v")
		_, err := s.do(call)
		require.Error(t, err)
		assert.Equal(t, []time.Duration{800 * ms, 1600 * ms, 2 * time.Second}, s.clock.Sleeps())
		assert.Equal(t, 4400*ms, call.Stats.Backoff)
	})

	t.Run("cancelled context ends the sleep", func(t *testing.T) {
		s := newStack(t, runtime.DefaultRetryPolicy, []mwt.Outcome{mwt.Answer(zaris.KvStatus_Unavailable), mwt.Answer(zaris.KvStatus_Ok)})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		s.clock.OnSleep = func(context.Context, time.Duration) { cancel() }
		call := zt.GetCall("k")
		_, err := s.handler(ctx, call)
		require.Error(t, err)
		assert.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, 1, s.transport.Attempts(), "no attempt after the cancelled sleep")
		assert.Len(t, call.Attempts, 1, "the attempt that was never made is not recorded")
		var ce *runtime.CallError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, runtime.BoundNone, ce.Bound)
		var se *runtime.StatusError
		require.ErrorAs(t, err, &se, "the last outcome is kept")
		assert.Equal(t, runtime.Status(zaris.KvStatus_Unavailable), se.Status)
		assert.Equal(t, mwt.Epoch, s.clock.Now(), "no time passed")
	})
}

// TestBackoff_Alone: the backoff layer waits only before attempts after the first, and
// stops the call when the wait uses up the deadline.
func TestBackoff_Alone(t *testing.T) {
	clock := mwt.NewClock()
	next := func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
		return &mwt.Response{Status: runtime.Status(zaris.KvStatus_Ok)}, nil
	}
	h := middleware.Backoff(runtime.DefaultRetryPolicy, clock)(next)

	call := zt.GetCall("k")
	call.StartAttempt()
	_, err := h(context.Background(), call)
	require.NoError(t, err)
	assert.Empty(t, clock.Sleeps(), "no wait before the first attempt")

	call.StartAttempt()
	call.Deadline = clock.Now().Add(60 * time.Millisecond)
	_, err = h(context.Background(), call)
	var stop *middleware.StopError
	require.ErrorAs(t, err, &stop)
	assert.Equal(t, runtime.BoundDeadline, stop.Bound)
	assert.Equal(t, []time.Duration{60 * time.Millisecond}, clock.Sleeps())
}

// sleepCounter is a fake clock that counts every Sleep, zero-length ones included.
type sleepCounter struct {
	*mwt.Clock
	calls atomic.Int32
}

func (c *sleepCounter) Sleep(ctx context.Context, d time.Duration) error {
	c.calls.Add(1)
	return c.Clock.Sleep(ctx, d)
}

// R5: with no backoff (Backoff 0) a retry waits not at all: the layer takes no sleep.
func TestBackoff_R5_ZeroDelayTakesNoSleep(t *testing.T) {
	clock := &sleepCounter{Clock: mwt.NewClock()}
	next := func(context.Context, *runtime.Call) (runtime.Response, error) {
		return &mwt.Response{Status: runtime.Status(zaris.KvStatus_Ok)}, nil
	}
	h := middleware.Backoff(policy(func(p *runtime.RetryPolicy) { p.Backoff = 0 }), clock)(next)
	call := zt.GetCall("k")
	call.StartAttempt()
	call.StartAttempt()
	_, err := h(context.Background(), call)
	require.NoError(t, err)
	assert.Zero(t, clock.calls.Load())
}
