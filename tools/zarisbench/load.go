package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisclient"
	"github.com/clustron/zaris-go/runtime"
	"github.com/clustron/zaris-go/tools/store"
)

// value is the 100-byte value every write carries.
var value = []byte(fmt.Sprintf("%-100s", "zarisbench"))[:100]

// loadResult is what a closed-loop load of some callers saw.
type loadResult struct {
	Callers int     `json:"callers"`
	Ops     int     `json:"ops"`
	Errors  int     `json:"errors"`
	OpsPerS float64 `json:"opsPerSec"`
	P50Ms   float64 `json:"p50Ms"`
	P99Ms   float64 `json:"p99Ms"`
	MaxMs   float64 `json:"maxMs"`
	// FirstError is the first error a call returned, if any.
	FirstError string `json:"firstError,omitempty"`
}

// runLoad runs callers goroutines for d, each calling op in a closed loop with its index
// and iteration, and sums what they saw.
func runLoad(ctx context.Context, callers int, d time.Duration, op func(ctx context.Context, caller, i int) error) loadResult {
	return runLoadWith(ctx, newLatencies(callers), d, op)
}

// latencies is a latency histogram per caller of a load: a fixed allocation, made before the
// load, so that the load's own record of its calls allocates nothing while it runs (64
// callers' histograms are about 1.6 MB).
type latencies []*hdrhistogram.Histogram

func newLatencies(callers int) latencies {
	lats := make(latencies, callers)
	for c := range lats {
		lats[c] = hdrhistogram.New(int64(latencyResolution), int64(latencyCeiling), latencySigFigs)
	}
	return lats
}

// runLoadWith is runLoad with one caller per histogram of lats, which it resets first.
func runLoadWith(ctx context.Context, lats latencies, d time.Duration, op func(ctx context.Context, caller, i int) error) loadResult {
	callers := len(lats)
	for _, h := range lats {
		h.Reset()
	}
	end := time.Now().Add(d)
	ctx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	// The context's timer fires a little after its deadline, while a socket deadline set to
	// it fires on time (or a hair early: the client carries the context's deadline over to
	// its own clock and back): a call failing in between, or failing on the deadline, which
	// only the run's end sets, is the run's end too.
	over := func(now time.Time) bool { return ctx.Err() != nil || !now.Before(end) }
	var errs atomic.Int64
	var first atomic.Pointer[string]
	var wg sync.WaitGroup
	start := time.Now()
	for c := range callers {
		wg.Go(func() {
			// One clock reading per call: the end of one call is the start of the next.
			t := time.Now()
			for i := 0; !over(t); i++ {
				err := op(ctx, c, i)
				now := time.Now()
				if err != nil {
					// The run's end is the only deadline a call of the run can meet (the
					// attempt timeout is ErrAttemptTimeout), and the layers that see it
					// first may read the clock a moment before over does.
					if over(now) || errors.Is(err, context.DeadlineExceeded) {
						return // cut short by the end of the run
					}
					errs.Add(1)
					msg := err.Error()
					first.CompareAndSwap(nil, &msg)
				}
				_ = lats[c].RecordValue(int64(min(now.Sub(t), latencyCeiling))) // in range: it cannot fail
				t = now
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	all := lats[0]
	for _, h := range lats[1:] {
		all.Merge(h)
	}
	ops := int(all.TotalCount())
	r := loadResult{Callers: callers, Ops: ops, Errors: int(errs.Load()), OpsPerS: float64(ops) / elapsed.Seconds()}
	if ops > 0 {
		at := func(q float64) float64 { return ms(time.Duration(all.ValueAtQuantile(q))) }
		r.P50Ms, r.P99Ms, r.MaxMs = at(50), at(99), ms(time.Duration(all.Max()))
	}
	if f := first.Load(); f != nil {
		r.FirstError = *f
	}
	return r
}

// The latency histograms' range and precision: 1 µs to 2 minutes, two significant digits
// (a quantile within 1% of the exact one).
const (
	latencyResolution = time.Microsecond
	latencyCeiling    = 2 * time.Minute
	latencySigFigs    = 2
)

// quantile returns the q-quantile of sorted durations (nearest rank), 0 for none.
func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := int(q*float64(len(d))+0.5) - 1
	return d[min(max(i, 0), len(d)-1)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// ratio is a/b, 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// dial connects a client to cluster with opts after the seeds.
func dial(ctx context.Context, cluster *store.Cluster, opts ...runtime.Option) (*zarisclient.Client, error) {
	opts = append([]runtime.Option{runtime.WithSeeds(cluster.Seeds()...), runtime.WithEnv(noEnv)}, opts...)
	return zarisclient.Dial(ctx, opts...)
}

// noEnv keeps the environment out of every client the bench builds, so a ZARIS_ variable
// in the shell cannot change what is measured.
func noEnv(string) (string, bool) { return "", false }

// keys returns n keys named prefix-i.
func keys(prefix string, n int) [][]byte {
	ks := make([][]byte, n)
	for i := range ks {
		ks[i] = fmt.Appendf(nil, "%s-%d", prefix, i)
	}
	return ks
}

// preload writes value under every key.
func preload(ctx context.Context, kv *zarisclient.Client, ks [][]byte) error {
	for _, k := range ks {
		if _, err := kv.Put(ctx, &zaris.PutRequest{Key: k, Value: value}); err != nil {
			return fmt.Errorf("preloading %s: %w", k, err)
		}
	}
	return nil
}

// mixed is the scale workload: half reads, half writes of value, over ks.
func mixed(kv *zarisclient.Client, ks [][]byte) func(ctx context.Context, caller, i int) error {
	return func(ctx context.Context, caller, i int) error {
		k := ks[(caller*7919+i)%len(ks)]
		if i%2 == 0 {
			_, err := kv.Get(ctx, &zaris.GetRequest{Key: k})
			return err
		}
		_, err := kv.Put(ctx, &zaris.PutRequest{Key: k, Value: value})
		return err
	}
}

// startCluster starts an in-process store of n nodes with replication factor rf (0: the
// store's default, capped at n).
func startCluster(ctx context.Context, n, rf int) (*store.Cluster, error) {
	if rf == 0 {
		rf = min(store.DefaultReplicationFactor, n)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return store.NewCluster(ctx, store.ClusterConfig{Nodes: n, ReplicationFactor: rf})
}
