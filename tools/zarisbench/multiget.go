package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/middleware"
	"github.com/clustron/zaris-go/runtime"
	"github.com/clustron/zaris-go/runtime/clustermap"
	"github.com/clustron/zaris-go/tools/store"
)

// batchKeys is the size of the batch the batch section measures.
const batchKeys = 100

// batchResult is the batch section: one MultiGet of batchKeys keys over 3 nodes against the
// same keys read by single Gets, and which items a batch retries when segments move.
type batchResult struct {
	Nodes int `json:"nodes"`
	Keys  int `json:"keys"`
	// MultiKeysPerS is the keys/s of one caller making MultiGet calls of Keys keys.
	MultiKeysPerS float64 `json:"multiKeysPerSec"`
	// SequentialKeysPerS is the keys/s of one caller making Keys Gets one after another.
	SequentialKeysPerS float64 `json:"sequentialKeysPerSec"`
	// ConcurrentKeysPerS is the keys/s of Keys goroutines each making one Get, repeated.
	ConcurrentKeysPerS float64 `json:"concurrentKeysPerSec"`
	// OverSequential and OverConcurrent are MultiKeysPerS over the other two.
	OverSequential float64 `json:"overSequential"`
	OverConcurrent float64 `json:"overConcurrent"`
	// Events are the churn events a MultiGet loop ran through.
	Events []batchEvent `json:"events"`
	// GetEvents are the same events run through by a loop of rounds of Keys concurrent Gets.
	GetEvents []getEvent `json:"concurrentGetEvents"`
}

// batchEvent is what a loop of MultiGet calls retried while one churn event ran.
type batchEvent struct {
	Name string `json:"name"`
	// Calls is how many MultiGet calls ran during the event; Retrying how many retried items.
	Calls    int `json:"calls"`
	Retrying int `json:"retryingCalls"`
	// ItemsRetried counts item retries over the calls; MovedItems is how many of the
	// batch's items fall in the segments the event moved.
	ItemsRetried int `json:"itemsRetried"`
	MovedItems   int `json:"movedItemsPerBatch"`
	// MaxPerCall is the most items one call retried (at most MovedItems per round).
	MaxPerCall int `json:"maxItemsRetriedPerCall"`
	// Stray counts retries of items outside the moved segments: it must be 0.
	Stray int `json:"strayItemsRetried"`
	// FirstStray is the first attempt of the first stray item, which says why it was retried.
	FirstStray string `json:"firstStray,omitempty"`
	// ItemErrors counts items that got no answer; FirstError is the first one's error.
	ItemErrors int    `json:"itemErrors"`
	FirstError string `json:"firstError,omitempty"`
}

// batch measures the batch section: rounds interleaved runs of d for each way of reading
// the keys, then a MultiGet loop through a migration and a kill, then the same events on a
// second cluster under rounds of concurrent Gets.
func batch(ctx context.Context, rounds int, d time.Duration) (batchResult, error) {
	res := batchResult{Nodes: 3, Keys: batchKeys}
	cluster, err := startCluster(ctx, res.Nodes, 0)
	if err != nil {
		return res, err
	}
	defer cluster.Close()
	var last atomic.Pointer[runtime.Call]
	kv, err := dial(ctx, cluster, runtime.WithPoolSize(batchKeys),
		runtime.WithCallMiddleware(func(next middleware.Handler) middleware.Handler {
			return func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
				resp, err := next(ctx, call)
				if call.Batch != nil {
					last.Store(call)
				}
				return resp, err
			}
		}))
	if err != nil {
		return res, err
	}
	defer kv.Close()
	ks := keys("batch", batchKeys)
	if err := preload(ctx, kv, ks); err != nil {
		return res, err
	}
	req := &zaris.MultiGetRequest{}
	for _, k := range ks {
		req.Items = append(req.Items, &zaris.GetItem{Key: k})
	}
	multi := func(ctx context.Context) error {
		r, err := kv.MultiGet(ctx, req)
		if err == nil {
			for i := range r.Errs {
				if err = r.Err(i); err != nil {
					break
				}
			}
		}
		return err
	}
	sequential := func(ctx context.Context) error {
		for _, k := range ks {
			if _, err := kv.Get(ctx, &zaris.GetRequest{Key: k}); err != nil {
				return err
			}
		}
		return nil
	}
	concurrent := func(ctx context.Context) error {
		var wg sync.WaitGroup
		var first atomic.Pointer[error]
		for _, k := range ks {
			wg.Go(func() {
				if _, err := kv.Get(ctx, &zaris.GetRequest{Key: k}); err != nil {
					first.CompareAndSwap(nil, &err)
				}
			})
		}
		wg.Wait()
		if e := first.Load(); e != nil {
			return *e
		}
		return nil
	}
	for range max(rounds, 1) {
		for _, m := range []struct {
			op   func(context.Context) error
			best *float64
		}{{multi, &res.MultiKeysPerS}, {sequential, &res.SequentialKeysPerS}, {concurrent, &res.ConcurrentKeysPerS}} {
			keysPerS, err := readKeys(ctx, d, m.op)
			if err != nil {
				return res, fmt.Errorf("batch: %w", err)
			}
			*m.best = max(*m.best, keysPerS)
		}
	}
	res.OverSequential = ratio(res.MultiKeysPerS, res.SequentialKeysPerS)
	res.OverConcurrent = ratio(res.MultiKeysPerS, res.ConcurrentKeysPerS)

	// Churn: a MultiGet loop while one segment migrates, then while a node dies. The moved
	// segments of an event are those it names plus any whose owner differs between the maps
	// before and after it (each event waits for the store to settle).
	m := cluster.Map()
	events := churnEvents(ctx, cluster, ks, res.Nodes)
	for _, ev := range events {
		e := batchEvent{Name: ev.name}
		before := cluster.Map()
		retried := make([]int, len(ks)) // per item, the calls that retried it
		why := make([]string, len(ks))  // per item, the first attempt of a call that retried it
		err := ev.during(func() error {
			r, err := kv.MultiGet(ctx, req)
			if r == nil {
				return err
			}
			call := last.Load()
			e.Calls++
			n := call.Batch.Stats.ItemsRetried
			e.ItemsRetried += n
			e.MaxPerCall = max(e.MaxPerCall, n)
			if n > 0 {
				e.Retrying++
			}
			for i, as := range call.Batch.Attempts {
				if len(as) > 1 {
					retried[i]++
					if why[i] == "" {
						why[i] = as[0].String()
					}
				}
				if r.Err(i) != nil {
					e.ItemErrors++
					if e.FirstError == "" {
						e.FirstError = r.Err(i).Error()
					}
				}
			}
			return nil
		})
		if err != nil {
			return res, fmt.Errorf("batch: %s: %w", ev.name, err)
		}
		moved := movedSegments(before, cluster.Map(), ev.seg)
		for i, k := range ks {
			if slices.Contains(moved, clustermap.SegmentOf(k, m.SegmentCount)) {
				e.MovedItems++
			} else if retried[i] > 0 {
				e.Stray += retried[i]
				if e.FirstStray == "" {
					e.FirstStray = why[i]
				}
			}
		}
		res.Events = append(res.Events, e)
	}
	res.GetEvents, err = getsUnderChurn(ctx, res.Nodes, ks)
	return res, err
}

// churnEvent is one churn event of the batch section: it moves seg (or -1: the segments of
// a node) and returns once the store has settled.
type churnEvent struct {
	name string
	seg  int32
	do   func() error
}

// during runs ev and calls round, one call after another, while ev runs and once after it
// ended; it returns ev's error or the first of round's.
func (ev churnEvent) during(round func() error) error {
	done := make(chan error, 1)
	go func() { done <- ev.do() }()
	for {
		var evErr error
		ended := false
		select {
		case evErr = <-done:
			ended = true
		default:
		}
		if err := round(); err != nil {
			if !ended {
				<-done
			}
			return err
		}
		if ended {
			return evErr
		}
	}
}

// churnEvents are the batch section's churn events on cluster: the segment of ks[0]
// migrates to the next node, then the node after that is killed.
func churnEvents(ctx context.Context, cluster *store.Cluster, ks [][]byte, nodes int) []churnEvent {
	m := cluster.Map()
	seg := clustermap.SegmentOf(ks[0], m.SegmentCount)
	owner := *m.Segments[seg].Owner
	to := owner%int32(nodes) + 1
	victim := to%int32(nodes) + 1
	return []churnEvent{
		{fmt.Sprintf("migrate segment %d to node %d", seg, to), seg, func() error {
			if err := cluster.MigrateSegment(ctx, seg, to); err != nil {
				return err
			}
			return cluster.WaitSettled(ctx)
		}},
		{fmt.Sprintf("kill node %d", victim), -1, func() error {
			if err := cluster.Kill(victim); err != nil {
				return err
			}
			if err := cluster.Coordinator().WaitNode(ctx, victim, false); err != nil {
				return err
			}
			return cluster.WaitSettled(ctx)
		}},
	}
}

// getEvent is what a loop of rounds of concurrent single-key Gets met during one churn
// event: the same keys and events as the MultiGet loop, on a cluster of its own.
type getEvent struct {
	Name string `json:"name"`
	// Rounds is how many rounds of Gets (one Get per key) ran during the event.
	Rounds int `json:"rounds"`
	// GetErrors counts Gets that got no answer; FirstError is the first one's error.
	GetErrors  int    `json:"getErrors"`
	FirstError string `json:"firstError,omitempty"`
}

// getsUnderChurn runs the batch section's churn events on a fresh cluster of n nodes with a
// loop of rounds of len(ks) concurrent Gets instead of MultiGet, to compare the keys left
// without an answer.
func getsUnderChurn(ctx context.Context, n int, ks [][]byte) ([]getEvent, error) {
	cluster, err := startCluster(ctx, n, 0)
	if err != nil {
		return nil, err
	}
	defer cluster.Close()
	kv, err := dial(ctx, cluster, runtime.WithPoolSize(len(ks)))
	if err != nil {
		return nil, err
	}
	defer kv.Close()
	if err := preload(ctx, kv, ks); err != nil {
		return nil, err
	}
	var out []getEvent
	for _, ev := range churnEvents(ctx, cluster, ks, n) {
		e := getEvent{Name: ev.name}
		err := ev.during(func() error {
			var wg sync.WaitGroup
			var mu sync.Mutex
			for _, k := range ks {
				wg.Go(func() {
					if _, err := kv.Get(ctx, &zaris.GetRequest{Key: k}); err != nil {
						mu.Lock()
						e.GetErrors++
						if e.FirstError == "" {
							e.FirstError = err.Error()
						}
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			e.Rounds++
			return nil
		})
		if err != nil {
			return out, fmt.Errorf("batch: gets: %s: %w", ev.name, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// movedSegments returns seg (unless -1) and the segments whose owner differs between the
// maps before and after.
func movedSegments(before, after *zaris.ClusterMap, seg int32) []int32 {
	var moved []int32
	if seg >= 0 {
		moved = append(moved, seg)
	}
	for i, s := range before.Segments {
		if i >= len(after.Segments) {
			break
		}
		a := after.Segments[i]
		if (s.Owner == nil) != (a.Owner == nil) || (s.Owner != nil && *s.Owner != *a.Owner) {
			moved = append(moved, s.ID)
		}
	}
	return moved
}

// readKeys calls op, which reads batchKeys keys, one call after another for at least d and
// at least once, and returns the keys read per second. A call is never cut short, so a
// loaded machine gives a low rate, not none.
func readKeys(ctx context.Context, d time.Duration, op func(context.Context) error) (float64, error) {
	start := time.Now()
	n := 0
	for n == 0 || time.Since(start) < d {
		if err := op(ctx); err != nil {
			return 0, err
		}
		n++
	}
	return float64(n*batchKeys) / time.Since(start).Seconds(), nil
}

// The recorder notes single-key answers only; multi-key calls pass through it.

func (k *recKv) MultiGet(ctx context.Context, req *zaris.MultiGetRequest) (*zaris.MultiGetResponse, error) {
	return k.inner.MultiGet(ctx, req)
}

func (k *recKv) MultiPut(ctx context.Context, req *zaris.MultiPutRequest) (*zaris.MultiPutResponse, error) {
	return k.inner.MultiPut(ctx, req)
}

func (k *recKv) MultiDelete(ctx context.Context, req *zaris.MultiDeleteRequest) (*zaris.MultiDeleteResponse, error) {
	return k.inner.MultiDelete(ctx, req)
}
