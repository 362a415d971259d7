package runtime_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/runtime"
)

// Clock.Sleep of zero on a context already done returns the context's error, every time:
// a zero wait does not race a timer against the context.
func TestSystemClock_ZeroSleepOnAnEndedContextReportsIt(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 200 {
		require.ErrorIs(t, runtime.SystemClock.Sleep(ctx, 0), context.Canceled)
	}
	assert.NoError(t, runtime.SystemClock.Sleep(context.Background(), 0))
}
