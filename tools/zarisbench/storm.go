package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/runtime"
	"github.com/clustron/zaris-go/runtime/clustermap"
)

// stormResult is section 5, the refresh-storm regression: with replication factor 1 a
// killed node leaves its segments with no owner; Callers callers then loop on keys in
// those segments (default maxAttempts 3, backoff 100 ms, 60 s timeout) while Healthy
// callers loop on keys elsewhere.
type stormResult struct {
	Callers int     `json:"callers"`
	Healthy int     `json:"healthyCallers"`
	Seconds float64 `json:"seconds"`
	// Calls is how many storm calls ended, Failed how many with an error (all should: the
	// partition has no owner), P50Ms, P99Ms and MaxMs how long they took, and BoundMs the
	// target: the backoff steps of maxAttempts attempts (100 + 200 ms).
	Calls   int     `json:"calls"`
	Failed  int     `json:"failed"`
	P50Ms   float64 `json:"p50Ms"`
	P99Ms   float64 `json:"p99Ms"`
	MaxMs   float64 `json:"maxMs"`
	BoundMs float64 `json:"boundMs"`
	// Bounds counts the failed calls by the bound that ended them; Sample is one of their
	// errors in full (each attempt's node, outcome and epoch).
	Bounds map[string]int `json:"bounds"`
	Sample string         `json:"sample,omitempty"`
	// Slowest breaks the slowest failed call down: its elapsed time, the time its attempts
	// took and the rest (backoff sleeps and waits for a shared map refresh).
	Slowest *slowCall `json:"slowest,omitempty"`
	// Requested and Performed are the refresher's counts during the storm; Windows is the
	// storm's length in debounce windows (target Performed <= Windows).
	Requested uint64  `json:"refreshesRequested"`
	Performed uint64  `json:"refreshesPerformed"`
	Windows   float64 `json:"debounceWindows"`
	// HealthyBefore, HealthyDuring and HealthyAfter are the healthy callers' throughput
	// before the kill, during the storm and after it; HealthyRatio is during over the mean
	// of before and after, which brackets the drift of a shared machine's load.
	HealthyBefore float64 `json:"healthyOpsPerSecBefore"`
	HealthyDuring float64 `json:"healthyOpsPerSecDuring"`
	HealthyAfter  float64 `json:"healthyOpsPerSecAfter"`
	HealthyRatio  float64 `json:"healthyRatio"`
	HealthyErrors int     `json:"healthyErrors"`
	HealthyP99Ms  float64 `json:"healthyP99MsDuring"`
}

// storm runs section 5.
func storm(ctx context.Context, callers, healthy int, d time.Duration) (stormResult, error) {
	r := stormResult{Callers: callers, Healthy: healthy, Seconds: d.Seconds(), Bounds: map[string]int{}}
	cluster, err := startCluster(ctx, 3, 1)
	if err != nil {
		return r, err
	}
	defer cluster.Close()
	cl, err := dial(ctx, cluster)
	if err != nil {
		return r, err
	}
	defer cl.Close()
	cfg := cl.Engine().Config()
	m := cl.Engine().Map()
	victim := m.Nodes[len(m.Nodes)-1].ID
	var dead, alive [][]byte
	for _, k := range keys("storm", 4096) {
		s := m.Segments[clustermap.SegmentOf(k, m.SegmentCount)]
		if s.Owner != nil && *s.Owner == victim {
			dead = append(dead, k)
		} else {
			alive = append(alive, k)
		}
	}
	if len(dead) == 0 || len(alive) == 0 {
		return r, errors.New("storm: no keys on both sides of the victim")
	}
	alive = alive[:min(len(alive), 512)]
	if err := preload(ctx, cl, alive); err != nil {
		return r, err
	}
	r.HealthyBefore = runLoad(ctx, healthy, d, mixed(cl, alive)).OpsPerS

	if err := cluster.Kill(victim); err != nil {
		return r, err
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := cluster.WaitFor(wctx, func(m *zaris.ClusterMap) bool {
		for _, s := range m.Segments {
			if s.Owner == nil {
				return true
			}
		}
		return false
	}); err != nil {
		return r, fmt.Errorf("storm: no segment lost its owner: %w", err)
	}
	// Let the client learn the ownerless map through ordinary traffic first, so that what
	// follows is the storm on a known-ownerless partition, not the failover.
	runLoad(ctx, healthy, cfg.RefreshDebounce*2, mixed(cl, alive))
	st0 := cl.Engine().Refresher().Stats()

	var mu sync.Mutex // protects durs and r.Bounds, r.Failed
	var durs []time.Duration
	sctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	start := time.Now()
	for c := range callers {
		wg.Go(func() {
			for i := 0; sctx.Err() == nil; i++ {
				t := time.Now()
				_, err := cl.Get(context.Background(), &zaris.GetRequest{Key: dead[(c+i*callers)%len(dead)]})
				dt := time.Since(t)
				mu.Lock()
				durs = append(durs, dt)
				if err != nil {
					r.Failed++
					if r.Sample == "" {
						r.Sample = err.Error()
					}
					var ce *runtime.CallError
					if errors.As(err, &ce) {
						r.Bounds[ce.Bound.String()]++
						if r.Slowest == nil || ce.Elapsed > time.Duration(r.Slowest.ElapsedMs*float64(time.Millisecond)) {
							r.Slowest = breakDown(ce)
						}
					} else {
						r.Bounds["other"]++
					}
				}
				mu.Unlock()
			}
		})
	}
	h := runLoad(ctx, healthy, d, mixed(cl, alive))
	elapsed := time.Since(start)
	st1 := cl.Engine().Refresher().Stats()
	stop()
	wg.Wait()
	r.HealthyAfter = runLoad(ctx, healthy, d, mixed(cl, alive)).OpsPerS

	slices.Sort(durs)
	r.Calls = len(durs)
	r.P50Ms, r.P99Ms, r.MaxMs = ms(quantile(durs, 0.5)), ms(quantile(durs, 0.99)), ms(quantile(durs, 1))
	for n := 1; n < cfg.Retry.MaxAttempts; n++ {
		r.BoundMs += ms(min(cfg.Retry.Backoff*time.Duration(n), cfg.Retry.MaxBackoff))
	}
	r.Requested, r.Performed = st1.Requested-st0.Requested, st1.Performed-st0.Performed
	r.Windows = elapsed.Seconds() / cfg.RefreshDebounce.Seconds()
	r.HealthyDuring, r.HealthyErrors, r.HealthyP99Ms = h.OpsPerS, h.Errors, h.P99Ms
	r.HealthyRatio = ratio(r.HealthyDuring, (r.HealthyBefore+r.HealthyAfter)/2)
	return r, nil
}

// slowCall is where one call's time went.
type slowCall struct {
	ElapsedMs  float64   `json:"elapsedMs"`
	AttemptsMs []float64 `json:"attemptsMs"`
	// OtherMs is the elapsed time outside the attempts: backoff sleeps and refresh waits.
	OtherMs float64 `json:"otherMs"`
}

func breakDown(ce *runtime.CallError) *slowCall {
	s := &slowCall{ElapsedMs: ms(ce.Elapsed)}
	rest := ce.Elapsed
	for _, a := range ce.Attempts {
		s.AttemptsMs = append(s.AttemptsMs, ms(a.Duration))
		rest -= a.Duration
	}
	s.OtherMs = ms(rest)
	return s
}
