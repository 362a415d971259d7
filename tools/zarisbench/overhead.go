package main

import (
	"context"
	"fmt"
	goruntime "runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/runtime"
)

// overheadResult compares the typed client through the default stack, on pooled
// connections, with the raw generated client at one number of concurrent callers. The sides run in turn, Rounds
// times, the order swapped each round; a round's ratio compares two runs next to each
// other in time, and the median of the rounds' ratios is the one reported, so that a burst
// of load from elsewhere on a shared machine moves one round, not the result.
type overheadResult struct {
	Callers int `json:"callers"`
	Rounds  int `json:"rounds"`
	// TypedOpsPerS and RawOpsPerS are each side's best throughput.
	TypedOpsPerS float64 `json:"typedOpsPerSec"`
	RawOpsPerS   float64 `json:"rawOpsPerSec"`
	// Ratio is the median of the rounds' typed/raw throughput ratios (target >= 0.95);
	// RoundRatios are the rounds' ratios, in order.
	Ratio       float64   `json:"ratio"`
	RoundRatios []float64 `json:"roundRatios"`
	// TypedBackgroundOpsPerS and RatioBackground are the typed side's with
	// context.Background(), which cannot be cancelled, so the engine does not watch it.
	TypedBackgroundOpsPerS float64 `json:"typedBackgroundOpsPerSec"`
	RatioBackground        float64 `json:"ratioBackground"`
	// TypedAllocs, RawAllocs, TypedBytes and RawBytes are heap allocations and bytes per
	// call in the whole process (client and in-process server), the fewest of the rounds.
	TypedAllocs float64 `json:"typedAllocsPerOp"`
	RawAllocs   float64 `json:"rawAllocsPerOp"`
	TypedBytes  float64 `json:"typedBytesPerOp"`
	RawBytes    float64 `json:"rawBytesPerOp"`
	// AddedAllocs and AddedBytes are what the stack adds per call (target <= 3 allocs),
	// with the run's context, which can be cancelled (as an application's request context
	// can): the engine then watches it to abort the socket on cancel, a watch each
	// connection keeps while its calls come with that context.
	AddedAllocs float64 `json:"addedAllocsPerOp"`
	AddedBytes  float64 `json:"addedBytesPerOp"`
	// AddedAllocsBackground is AddedAllocs with context.Background(), which can never be
	// cancelled, measured over one caller's sequential calls.
	AddedAllocsBackground float64 `json:"addedAllocsPerOpBackground"`
}

// sideResult is one timed run of one side.
type sideResult struct {
	opsPerS, allocs, bytes float64
}

// overhead measures section 1 against a one-node store: Get of a present key, binary over
// framed (the default), for each number of callers.
func overhead(ctx context.Context, callerCounts []int, rounds int, d time.Duration, allocCalls int) ([]overheadResult, error) {
	cluster, err := startCluster(ctx, 1, 1)
	if err != nil {
		return nil, err
	}
	defer cluster.Close()
	maxCallers := 0
	for _, c := range callerCounts {
		maxCallers = max(maxCallers, c)
	}
	cl, err := dial(ctx, cluster, runtime.WithPoolSize(maxCallers), runtime.WithPipelining(false))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	key := []byte("bench")
	if err := preload(ctx, cl, [][]byte{key}); err != nil {
		return nil, err
	}
	// The raw side gets as many connections from the engine's own dialer and
	// configuration, each bound to one caller, as the engine's pool opens for the typed side.
	dialer := runtime.DefaultDialer(cl.Engine().Config())
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
		_, err := cl.Get(ctx, req)
		return err
	}
	typedBackground := func(context.Context, int) error {
		_, err := cl.Get(context.Background(), req)
		return err
	}
	rawCall := func(ctx context.Context, caller int) error {
		_, err := raw[caller].Client().(zaris.ZarisKv).Get(ctx, req)
		return err
	}

	var out []overheadResult
	for _, callers := range callerCounts {
		// Warm both sides up: the pool fills, the heap grows to its working size.
		if _, err := timed(ctx, callers, d, typed); err != nil {
			return nil, err
		}
		if _, err := timed(ctx, callers, d, rawCall); err != nil {
			return nil, err
		}
		r := overheadResult{Callers: callers, Rounds: rounds, TypedAllocs: -1, RawAllocs: -1}
		var bgRatios []float64
		for round := range rounds {
			// Each round runs the raw client, the typed client with the run's (cancellable)
			// context and the typed client with context.Background(), in an order that
			// rotates from round to round.
			var got [3]float64 // raw, typed, typed with Background
			for k := range 3 {
				side := (round + k) % 3
				f, ops, allocs, bytes := rawCall, &r.RawOpsPerS, &r.RawAllocs, &r.RawBytes
				switch side {
				case 1:
					f, ops, allocs, bytes = typed, &r.TypedOpsPerS, &r.TypedAllocs, &r.TypedBytes
				case 2:
					f, ops, allocs, bytes = typedBackground, &r.TypedBackgroundOpsPerS, new(float64), new(float64)
				}
				s, err := timed(ctx, callers, d, f)
				if err != nil {
					return nil, err
				}
				*ops = max(*ops, s.opsPerS)
				if *allocs < 0 || s.allocs < *allocs {
					*allocs, *bytes = s.allocs, s.bytes
				}
				got[side] = s.opsPerS
			}
			r.RoundRatios = append(r.RoundRatios, ratio(got[1], got[0]))
			bgRatios = append(bgRatios, ratio(got[2], got[0]))
		}
		r.RatioBackground = median(bgRatios)
		r.Ratio = median(r.RoundRatios)
		r.AddedAllocs, r.AddedBytes = r.TypedAllocs-r.RawAllocs, r.TypedBytes-r.RawBytes
		bg := context.Background()
		r.AddedAllocsBackground = allocsPer(allocCalls, func() { typed(bg, 0) }) - allocsPer(allocCalls, func() { rawCall(bg, 0) })
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

// median returns the median of xs (the mean of the middle two for an even count).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// allocsPer returns the process's heap allocations per call of f over n sequential calls.
func allocsPer(n int, f func()) float64 {
	var before, after goruntime.MemStats
	f()
	goruntime.ReadMemStats(&before)
	for range n {
		f()
	}
	goruntime.ReadMemStats(&after)
	return float64(after.Mallocs-before.Mallocs) / float64(n)
}
