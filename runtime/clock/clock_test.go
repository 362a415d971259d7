package clock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/runtime/clock"
)

// Clock.Sleep of zero on a context already done returns the context's error, every time:
// a zero wait does not race a timer against the context.
func TestSystem_ZeroSleepOnAnEndedContextReportsIt(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 200 {
		require.ErrorIs(t, clock.System.Sleep(ctx, 0), context.Canceled)
	}
	assert.NoError(t, clock.System.Sleep(context.Background(), 0))
}

// The system clock's timer fires after its duration, and Stop of a fired timer reports
// that it stopped nothing.
func TestSystem_TimerFires(t *testing.T) {
	tm := clock.System.NewTimer(time.Millisecond)
	select {
	case <-tm.C():
	case <-time.After(10 * time.Second):
		t.Fatal("the timer did not fire")
	}
	assert.False(t, tm.Stop(), "a fired timer")
	assert.True(t, clock.System.NewTimer(time.Hour).Stop(), "a pending timer")
	assert.WithinDuration(t, time.Now(), clock.System.Now(), time.Second)
}
