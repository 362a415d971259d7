package main

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// countLoad runs callers goroutines for d, each calling op in a closed loop, and counts the
// calls: it reads no clock and records no latency per call, so that the CPU a load costs is
// its calls' own, which is what the client section measures (the floor it is held to reads
// the clock once per round trip, not per request). A call that fails because the run ended
// is not an error.
func countLoad(ctx context.Context, callers int, d time.Duration, op func(ctx context.Context) error) loadResult {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var ops, errs atomic.Int64
	var first atomic.Pointer[string]
	var wg sync.WaitGroup
	start := time.Now()
	for range callers {
		wg.Go(func() {
			n := int64(0)
			for ctx.Err() == nil {
				if err := op(ctx); err != nil {
					if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
						break // cut short by the end of the run
					}
					errs.Add(1)
					msg := err.Error()
					first.CompareAndSwap(nil, &msg)
				}
				n++
			}
			ops.Add(n)
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	r := loadResult{Callers: callers, Ops: int(ops.Load()), Errors: int(errs.Load())}
	r.OpsPerS = float64(r.Ops) / elapsed.Seconds()
	if f := first.Load(); f != nil {
		r.FirstError = *f
	}
	return r
}
