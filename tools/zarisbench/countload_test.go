package main

import (
	"context"
	"errors"
	goruntime "runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// countLoad counts every call of every caller, and the calls that failed (not those the end
// of the run cut short), with the first failure's words.
func TestCountLoad_CountsCallsAndFailures(t *testing.T) {
	var calls atomic.Int64
	r := countLoad(context.Background(), 8, 20*time.Millisecond, func(ctx context.Context) error {
		if calls.Add(1)%10 == 0 {
			return errors.New("every tenth call fails")
		}
		return nil
	})
	require.Positive(t, r.Ops)
	// A failed call the end of the run cut short (one a caller at most) is not counted.
	assert.InDelta(t, calls.Load(), r.Ops, 8, "every call counted")
	assert.InDelta(t, calls.Load()/10, r.Errors, 8, "every tenth call failed")
	assert.Equal(t, "every tenth call fails", r.FirstError)
	assert.Equal(t, 8, r.Callers)

	cut := countLoad(context.Background(), 2, 20*time.Millisecond, func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	})
	assert.Zero(t, cut.Errors, "calls cut short by the end of the run")
	assert.Empty(t, cut.FirstError)
}

// countLoad allocates nothing per call: what the client section measures per call is the
// calls' own.
func TestCountLoad_AllocatesNothingPerCall(t *testing.T) {
	var before, after goruntime.MemStats
	goruntime.GC()
	goruntime.ReadMemStats(&before)
	r := countLoad(context.Background(), 64, 20*time.Millisecond, func(context.Context) error { return nil })
	goruntime.ReadMemStats(&after)
	require.Greater(t, r.Ops, 10000)
	assert.Less(t, after.Mallocs-before.Mallocs, uint64(r.Ops/100), "allocations in a load of %d calls", r.Ops)
}
