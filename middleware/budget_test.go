package middleware_test

import (
	"math"
	"sync"
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

var _ runtime.RetryBudget = (*middleware.TokenBudget)(nil)

// TestB3_RetryBudget: retries are capped to a ratio of calls plus a floor per second, on
// the injected clock; a call that finds the budget empty ends with its last outcome and an
// error saying so.
func TestB3_RetryBudget(t *testing.T) {
	t.Run("ratio of calls", func(t *testing.T) {
		b, err := middleware.NewTokenBudget(middleware.BudgetPolicy{Ratio: 0.2, MaxBanked: 100}, mwt.NewClock())
		require.NoError(t, err)
		for range 10 {
			b.Deposit()
		}
		assert.True(t, b.Withdraw())
		assert.True(t, b.Withdraw())
		assert.False(t, b.Withdraw(), "10 calls at 20% buy 2 retries")
	})

	t.Run("banked tokens are capped", func(t *testing.T) {
		b, err := middleware.NewTokenBudget(middleware.BudgetPolicy{Ratio: 1, MaxBanked: 3}, mwt.NewClock())
		require.NoError(t, err)
		for range 100 {
			b.Deposit()
		}
		for range 3 {
			assert.True(t, b.Withdraw())
		}
		assert.False(t, b.Withdraw())
	})

	t.Run("floor per second", func(t *testing.T) {
		clock := mwt.NewClock()
		b, err := middleware.NewTokenBudget(middleware.BudgetPolicy{MinPerSecond: 10}, clock)
		require.NoError(t, err)
		for range 10 {
			assert.True(t, b.Withdraw())
		}
		assert.False(t, b.Withdraw(), "one second's worth, then empty")
		clock.Advance(100 * time.Millisecond)
		assert.True(t, b.Withdraw(), "refills at 10 per second")
		assert.False(t, b.Withdraw())
		clock.Advance(time.Hour)
		for range 10 {
			assert.True(t, b.Withdraw())
		}
		assert.False(t, b.Withdraw(), "the floor keeps at most one second's worth")
	})

	t.Run("default policy", func(t *testing.T) {
		assert.Equal(t, middleware.BudgetPolicy{Ratio: 0.2, MinPerSecond: 10, MaxBanked: 100}, middleware.DefaultBudgetPolicy)
	})

	t.Run("invalid policy", func(t *testing.T) {
		nan, inf := math.NaN(), math.Inf(1)
		for _, p := range []middleware.BudgetPolicy{{Ratio: -0.1}, {Ratio: 1.5}, {MinPerSecond: -1}, {MaxBanked: -1},
			{Ratio: nan}, {MinPerSecond: nan}, {MaxBanked: nan}, {MinPerSecond: inf}, {MaxBanked: inf}, {MaxBanked: 1e300}} {
			_, err := middleware.NewTokenBudget(p, nil)
			assert.Error(t, err, "%+v", p)
		}
	})

	t.Run("the edges of each range", func(t *testing.T) {
		banked := float64(math.MaxInt64) / 1000 // the first MaxBanked whose milli-tokens overflow an int64
		require.Equal(t, float64(math.MaxInt64), banked*1000)
		for _, c := range []struct {
			p  middleware.BudgetPolicy
			ok bool
		}{
			{middleware.BudgetPolicy{Ratio: 0, MinPerSecond: 0, MaxBanked: 0}, true},
			{middleware.BudgetPolicy{Ratio: 1}, true},
			{middleware.BudgetPolicy{MinPerSecond: math.MaxFloat64}, true},
			{middleware.BudgetPolicy{MaxBanked: math.Nextafter(banked, 0)}, true},
			{middleware.BudgetPolicy{MaxBanked: banked}, false},
			{middleware.BudgetPolicy{MaxBanked: 1e16}, false},
		} {
			_, err := middleware.NewTokenBudget(c.p, nil)
			assert.Equal(t, c.ok, err == nil, "%+v: %v", c.p, err)
		}
	})

	t.Run("an outage does not multiply the load", func(t *testing.T) {
		clock := mwt.NewClock()
		b, err := middleware.NewTokenBudget(middleware.BudgetPolicy{Ratio: 0.2, MaxBanked: 100}, clock)
		require.NoError(t, err)
		s := newStack(t, runtime.DefaultRetryPolicy, []mwt.Outcome{mwt.Answer(zaris.KvStatus_Unavailable)}, withBudget(b))
		const calls = 100
		var exhausted int
		for range calls {
			call := zt.GetCall("k")
			_, err := s.do(call)
			var ce *runtime.CallError
			require.ErrorAs(t, err, &ce)
			if ce.Bound == runtime.BoundBudget {
				exhausted++
				assert.ErrorIs(t, err, runtime.ErrRetryBudgetExhausted)
				var se *runtime.StatusError
				require.ErrorAs(t, err, &se, "the call ends with its last outcome")
				assert.Equal(t, runtime.Status(zaris.KvStatus_Unavailable), se.Status)
				assert.Len(t, ce.Attempts, len(call.Attempts))
			}
		}
		attempts := s.transport.Attempts()
		assert.LessOrEqual(t, attempts, calls+calls/5, "retries add at most 20%%")
		assert.Greater(t, exhausted, 0)
	})

	t.Run("empty budget: no backoff, no refresh", func(t *testing.T) {
		b, err := middleware.NewTokenBudget(middleware.BudgetPolicy{}, mwt.NewClock())
		require.NoError(t, err)
		s := newStack(t, runtime.DefaultRetryPolicy, []mwt.Outcome{mwt.Answer(zaris.KvStatus_Moved)}, withBudget(b))
		call := zt.GetCall("k")
		_, err = s.do(call)
		var ce *runtime.CallError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, runtime.BoundBudget, ce.Bound)
		assert.Len(t, call.Attempts, 1)
		assert.Empty(t, s.clock.Sleeps())
		assert.Empty(t, s.refresher.Requests())
		assert.Contains(t, err.Error(), "retry budget exhausted")
	})

	t.Run("concurrent use", func(t *testing.T) {
		b, err := middleware.NewTokenBudget(middleware.BudgetPolicy{Ratio: 0.5, MinPerSecond: 0, MaxBanked: 1000}, mwt.NewClock())
		require.NoError(t, err)
		var wg sync.WaitGroup
		var mu sync.Mutex
		granted := 0
		for range 8 {
			wg.Go(func() {
				for range 100 {
					b.Deposit()
					if b.Withdraw() {
						mu.Lock()
						granted++
						mu.Unlock()
					}
				}
			})
		}
		wg.Wait()
		assert.LessOrEqual(t, granted, 400, "never more than half of 800 calls")
	})
}

// B3: the error of a policy whose MaxBanked is out of range names the range.
func TestNewTokenBudget_B3_ErrorNamesMaxBankedRange(t *testing.T) {
	_, err := middleware.NewTokenBudget(middleware.BudgetPolicy{MaxBanked: -1}, mwt.NewClock())
	assert.ErrorContains(t, err, "[0, 9223372036854776)")
}
