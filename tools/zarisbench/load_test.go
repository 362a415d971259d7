package main

import (
	"context"
	goruntime "runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A measured load charges the calls nothing of its own: its latency histograms (about
// 25 kB a caller) are made before it, so the bytes a client section divides among the
// calls are the client's. Made inside, 64 callers' would be 1.6 MB.
func TestLoadAllocatesNoHistogramWhileMeasured(t *testing.T) {
	const callers = 64
	lats := newLatencies(callers)
	var before, after goruntime.MemStats
	for range 2 { // the second run reuses what the first one recorded into
		goruntime.GC()
		goruntime.ReadMemStats(&before)
		r := runLoadWith(context.Background(), lats, 20*time.Millisecond, func(context.Context, int, int) error { return nil })
		goruntime.ReadMemStats(&after)
		require.Positive(t, r.Ops)
		assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(64<<10), "bytes allocated by a load of %d callers", callers)
		assert.Equal(t, callers, r.Callers)
	}
}
