package main

import (
	"context"
	"fmt"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/runtime"
)

// overheadResult compares the typed client through the default stack with the raw
// generated client at one number of concurrent callers. Each side's figure is its best of
// Rounds interleaved runs, so a burst of load from elsewhere on the machine hits one run,
// not one side.
type overheadResult struct {
	Callers int `json:"callers"`
	Rounds  int `json:"rounds"`
	// TypedOpsPerS and RawOpsPerS are each side's best throughput.
	TypedOpsPerS float64 `json:"typedOpsPerSec"`
	RawOpsPerS   float64 `json:"rawOpsPerSec"`
	// Ratio is TypedOpsPerS / RawOpsPerS (target >= 0.95).
	Ratio float64 `json:"ratio"`
	// TypedAllocs, RawAllocs, TypedBytes and RawBytes are heap allocations and bytes per
	// call in the whole process (client and in-process server), the fewest of the rounds.
	TypedAllocs float64 `json:"typedAllocsPerOp"`
	RawAllocs   float64 `json:"rawAllocsPerOp"`
	TypedBytes  float64 `json:"typedBytesPerOp"`
	RawBytes    float64 `json:"rawBytesPerOp"`
	// AddedAllocs and AddedBytes are what the stack adds per call (target <= 3 allocs).
	AddedAllocs float64 `json:"addedAllocsPerOp"`
	AddedBytes  float64 `json:"addedBytesPerOp"`
}

// sideResult is one timed run of one side.
type sideResult struct {
	opsPerS, allocs, bytes float64
}

// overhead measures section 1 against a one-node store: Get of a present key, binary over
// framed (the default), for each number of callers.
func overhead(ctx context.Context, callerCounts []int, rounds int, d time.Duration) ([]overheadResult, error) {
	cluster, err := startCluster(ctx, 1, 1)
	if err != nil {
		return nil, err
	}
	defer cluster.Close()
	maxCallers := 0
	for _, c := range callerCounts {
		maxCallers = max(maxCallers, c)
	}
	cl, err := dial(ctx, cluster, runtime.WithPoolSize(maxCallers))
	if err != nil {
		return nil, err
	}
	defer cl.engine.Close()
	key := []byte("bench")
	if err := preload(ctx, cl.kv, [][]byte{key}); err != nil {
		return nil, err
	}
	// The raw side gets as many connections from the engine's own dialer and
	// configuration, each bound to one caller, as the engine's pool opens for the typed side.
	dialer := runtime.DefaultDialer(cl.engine.Config())
	addr := cluster.Seeds()[0]
	raw := make([]runtime.Conn, maxCallers)
	for i := range raw {
		if raw[i], err = dialer(ctx, addr); err != nil {
			return nil, fmt.Errorf("dialing %s: %w", addr, err)
		}
		defer raw[i].Close()
	}
	req := &zaris.GetRequest{Key: key}
	typed := func(ctx context.Context, _ int) error {
		_, err := cl.kv.Get(ctx, req)
		return err
	}
	rawCall := func(ctx context.Context, caller int) error {
		_, err := raw[caller].Client().Get(ctx, req)
		return err
	}

	var out []overheadResult
	for _, callers := range callerCounts {
		// Warm both sides up: the pool fills, the heap grows to its working size.
		timed(ctx, callers, d/4, typed)
		timed(ctx, callers, d/4, rawCall)
		r := overheadResult{Callers: callers, Rounds: rounds, TypedAllocs: -1, RawAllocs: -1}
		for range rounds {
			for _, side := range []bool{false, true} {
				f, ops, allocs, bytes := rawCall, &r.RawOpsPerS, &r.RawAllocs, &r.RawBytes
				if side {
					f, ops, allocs, bytes = typed, &r.TypedOpsPerS, &r.TypedAllocs, &r.TypedBytes
				}
				s, err := timed(ctx, callers, d, f)
				if err != nil {
					return nil, err
				}
				*ops = max(*ops, s.opsPerS)
				if *allocs < 0 || s.allocs < *allocs {
					*allocs, *bytes = s.allocs, s.bytes
				}
			}
		}
		r.Ratio = ratio(r.TypedOpsPerS, r.RawOpsPerS)
		r.AddedAllocs, r.AddedBytes = r.TypedAllocs-r.RawAllocs, r.TypedBytes-r.RawBytes
		out = append(out, r)
	}
	return out, nil
}

// timed runs callers goroutines calling f in a closed loop for d and returns the
// throughput and the process's heap allocations per call. The first error stops the run.
func timed(ctx context.Context, callers int, d time.Duration, f func(ctx context.Context, caller int) error) (sideResult, error) {
	var ops atomic.Int64
	var stop atomic.Bool
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	var before, after goruntime.MemStats
	goruntime.GC()
	goruntime.ReadMemStats(&before)
	start := time.Now()
	for c := range callers {
		wg.Go(func() {
			n := int64(0)
			for !stop.Load() {
				if err := f(ctx, c); err != nil {
					once.Do(func() { firstErr = err })
					stop.Store(true)
				}
				n++
			}
			ops.Add(n)
		})
	}
	timer := time.NewTimer(d)
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
	stop.Store(true)
	wg.Wait()
	elapsed := time.Since(start)
	goruntime.ReadMemStats(&after)
	if firstErr != nil {
		return sideResult{}, firstErr
	}
	n := float64(max(ops.Load(), 1))
	return sideResult{
		opsPerS: float64(ops.Load()) / elapsed.Seconds(),
		allocs:  float64(after.Mallocs-before.Mallocs) / n,
		bytes:   float64(after.TotalAlloc-before.TotalAlloc) / n,
	}, nil
}
