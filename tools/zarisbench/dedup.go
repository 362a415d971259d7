package main

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisclient"
	"github.com/clustron/zaris-go/gen/zariscodec"
	"github.com/clustron/zaris-go/middleware"
	zrt "github.com/clustron/zaris-go/runtime"
)

// dedupKeys is how many counter keys the dedup section spreads its Increments over.
const dedupKeys = 256

// dedupResult is the exactly-once section: what a request token (rule B8) costs an
// Increment, against the same Increment sent without one, on a 3-node in-process cluster
// (replication factor 2). Its CPU and allocations are the whole process's, client and nodes.
type dedupResult struct {
	Nodes   int `json:"nodes"`
	Callers int `json:"callers"`
	// CallsPerRound is the Increments of one side in one of Rounds interleaved rounds.
	CallsPerRound int `json:"callsPerRound"`
	Rounds        int `json:"rounds"`
	// Tokened and Untokened are the medians over the rounds.
	Tokened   dedupRow `json:"tokened"`
	Untokened dedupRow `json:"untokened"`
	// RequestBytes and TokenedRequestBytes are an Increment request's size on the wire
	// (binary protocol) without and with its token.
	RequestBytes        int `json:"requestBytes"`
	TokenedRequestBytes int `json:"tokenedRequestBytes"`
	// OutcomeBytes is the heap one kept outcome costs a node: the heap the tokened rounds
	// left over the untokened ones, over the outcomes kept (each write's, on its 2 copies).
	OutcomeBytes float64 `json:"outcomeBytes"`
}

// dedupRow is one side of the comparison: CPU and allocations per Increment.
type dedupRow struct {
	CPUMicrosPerCall float64 `json:"cpuMicrosPerCall"`
	AllocsPerCall    float64 `json:"allocsPerCall"`
	BytesPerCall     float64 `json:"bytesPerCall"`
}

// dedup measures the dedup section: rounds of calls tokened Increments (the typed client's)
// and as many untokened ones (the same request without a token, through the same engine's
// default stack), interleaved, each by callers goroutines; the heap left after them over
// the heap before them is the outcomes'.
func dedup(ctx context.Context, callers, calls, rounds int) (dedupResult, error) {
	res := dedupResult{Nodes: 3, Callers: callers, CallsPerRound: calls, Rounds: rounds}
	req := &zaris.IncrementRequest{Key: []byte("counter-000"), Delta: 1}
	res.RequestBytes = len(zariscodec.AppendIncrementRequest(nil, req))
	res.TokenedRequestBytes = len(zariscodec.AppendIncrementRequest(nil, &zaris.IncrementRequest{Key: req.Key, Delta: 1,
		Token: &zaris.RequestToken{Client: -1 << 62, Sequence: 1 << 40}}))

	cluster, err := startCluster(ctx, res.Nodes, 2)
	if err != nil {
		return res, err
	}
	defer cluster.Close()
	kv, err := zarisclient.Dial(ctx, zrt.WithSeeds(cluster.Seeds()...), zrt.WithEnv(nil))
	if err != nil {
		return res, err
	}
	defer kv.Close()
	untokened := middleware.ForEngine(kv.Engine())
	keys := make([][]byte, dedupKeys)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "counter-%03d", i)
	}
	tokenedCall := func(ctx context.Context, key []byte) error {
		_, err := kv.Increment(ctx, &zaris.IncrementRequest{Key: key, Delta: 1})
		return err
	}
	untokenedCall := func(ctx context.Context, key []byte) error {
		_, err := untokened(ctx, zrt.NewCall(zarisclient.OpIncrement, key, &zaris.IncrementRequest{Key: key, Delta: 1}, false))
		return err
	}
	if _, err := dedupRound(ctx, untokenedCall, keys, callers, calls); err != nil { // warm up
		return res, err
	}
	heapBefore := heapInUse() // no outcome kept yet
	var tok, untok []dedupRow
	for r := range rounds {
		sides := []bool{false, true} // tokened?
		if r%2 == 1 {
			slices.Reverse(sides)
		}
		for _, tokened := range sides {
			call := untokenedCall
			if tokened {
				call = tokenedCall
			}
			row, err := dedupRound(ctx, call, keys, callers, calls)
			if err != nil {
				return res, err
			}
			if tokened {
				tok = append(tok, row)
			} else {
				untok = append(untok, row)
			}
		}
	}
	heapAfter := heapInUse()
	res.Tokened, res.Untokened = medianRow(tok), medianRow(untok)
	// Every tokened call kept one outcome on each of its 2 copies, all within the window.
	kept := float64(2 * calls * rounds)
	res.OutcomeBytes = (float64(heapAfter) - float64(heapBefore)) / kept
	return res, nil
}

// heapInUse is the heap in use after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// dedupRound runs calls Increments of call over keys by callers goroutines and returns
// the process's CPU, allocations and bytes allocated per call.
func dedupRound(ctx context.Context, call func(context.Context, []byte) error, keys [][]byte, callers, calls int) (dedupRow, error) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cpu := cpuTime()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(calls) {
					return
				}
				if err := call(ctx, keys[i%int64(len(keys))]); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return dedupRow{}, err
	}
	spent := cpuTime() - cpu
	runtime.ReadMemStats(&after)
	n := float64(calls)
	return dedupRow{
		CPUMicrosPerCall: float64(spent.Microseconds()) / n,
		AllocsPerCall:    float64(after.Mallocs-before.Mallocs) / n,
		BytesPerCall:     float64(after.TotalAlloc-before.TotalAlloc) / n,
	}, nil
}

// medianRow is the median of each field of rows.
func medianRow(rows []dedupRow) dedupRow {
	med := func(f func(dedupRow) float64) float64 {
		v := make([]float64, len(rows))
		for i, r := range rows {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	return dedupRow{
		CPUMicrosPerCall: med(func(r dedupRow) float64 { return r.CPUMicrosPerCall }),
		AllocsPerCall:    med(func(r dedupRow) float64 { return r.AllocsPerCall }),
		BytesPerCall:     med(func(r dedupRow) float64 { return r.BytesPerCall }),
	}
}
