package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisclient"
	"github.com/clustron/zaris-go/middleware"
	"github.com/clustron/zaris-go/runtime"
	"github.com/clustron/zaris-go/runtime/clustermap"
	"github.com/clustron/zaris-go/tools/store"
)

// refreshKillResult is the churn section's kill right after a refresh: callers loop on
// keys of one node, the client refreshes its map, and the node is killed at once, inside
// the debounce window that refresh opened (rule R6). Every refresh the callers then ask for
// is held back by the debounce; it is deferred to the window's end, not dropped, and a
// call that cannot reach the dead owner waits for a map naming another one instead of
// spending its attempts on the dead node (rule B7). Target: no call fails.
type refreshKillResult struct {
	Callers int `json:"callers"`
	Rounds  int `json:"rounds"`
	// Node is the killed node (the same in every round: it is restarted and handed its
	// segments back in between) and Keys how many of its keys the callers loop on.
	Node int32 `json:"node"`
	Keys int   `json:"keys"`
	// KillAfterMs is the longest time from a refresh's return to its kill, FailoverMs the
	// longest time from a kill to the store's first map that gives the node no segment.
	KillAfterMs float64 `json:"killAfterMs"`
	FailoverMs  float64 `json:"failoverMs"`
	// Calls counts the calls that ended from each kill to the end of its round, CallErrors
	// those that returned a *runtime.CallError and OtherErrors those that returned another
	// error; FirstError is the first error in full.
	Calls       int    `json:"calls"`
	CallErrors  int    `json:"callErrors"`
	OtherErrors int    `json:"otherErrors"`
	FirstError  string `json:"firstError,omitempty"`
	// MaxMs is the slowest of those calls.
	MaxMs float64 `json:"maxMs"`
	// OwnerWaitCalls counts the calls that waited for a map naming a new owner (rule B7),
	// OwnerWaitMaxMs the longest time one of them spent so.
	OwnerWaitCalls int     `json:"ownerWaitCalls"`
	OwnerWaitMaxMs float64 `json:"ownerWaitMaxMs"`
	// Debounced and Deferred are the refresher's counts over the rounds: refreshes the
	// debounce held back, and those of them deferred to the window's end (rule B7).
	Debounced uint64 `json:"debounced"`
	Deferred  uint64 `json:"deferred"`
}

// refreshKillKeys is how many of the victim's keys the callers loop on.
const refreshKillKeys = 256

// killAfterRefresh measures the kill right after a refresh: rounds rounds of callers
// callers on a cluster of its own. Each round refreshes, kills the node that owns the
// callers' keys, runs on until after the store failed the node over and the debounce
// window after that passed twice, and then restarts the node and fails it back.
func killAfterRefresh(ctx context.Context, callers, rounds int) (*refreshKillResult, error) {
	r := &refreshKillResult{Callers: callers, Rounds: rounds}
	cluster, err := startCluster(ctx, 3, 0)
	if err != nil {
		return r, err
	}
	defer cluster.Close()
	var waited, waitMax atomic.Int64 // calls that waited for a new owner, the longest wait
	kv, err := dial(ctx, cluster, runtime.WithCallMiddleware(func(next middleware.Handler) middleware.Handler {
		return func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
			resp, err := next(ctx, call)
			if call.Stats.OwnerWaits > 0 {
				waited.Add(1)
				raise(&waitMax, int64(call.Stats.OwnerWait))
			}
			return resp, err
		}
	}))
	if err != nil {
		return r, err
	}
	defer kv.Close()
	refresher := kv.Engine().Refresher()
	debounce := kv.Engine().Config().RefreshDebounce
	m := kv.Engine().Map()
	r.Node = m.Nodes[len(m.Nodes)-1].ID
	var ks [][]byte
	for _, k := range keys("refresh-kill", 16*refreshKillKeys) {
		if s := m.Segments[clustermap.SegmentOf(k, m.SegmentCount)]; s.Owner != nil && *s.Owner == r.Node && len(ks) < refreshKillKeys {
			ks = append(ks, k)
		}
	}
	if len(ks) == 0 {
		return r, fmt.Errorf("kill after a refresh: n%d owns none of the keys", r.Node)
	}
	r.Keys = len(ks)
	if err := preload(ctx, kv, ks); err != nil {
		return r, err
	}
	st0 := refresher.Stats()
	for round := range rounds {
		if round > 0 {
			if err := restore(ctx, cluster, r.Node); err != nil {
				return r, err
			}
		}
		if err := r.round(ctx, cluster, kv, debounce, ks); err != nil {
			return r, err
		}
	}
	st1 := refresher.Stats()
	r.Debounced, r.Deferred = st1.Debounced-st0.Debounced, st1.Deferred-st0.Deferred
	r.OwnerWaitCalls, r.OwnerWaitMaxMs = int(waited.Load()), ms(time.Duration(waitMax.Load()))
	return r, nil
}

// round is one kill after a refresh, with the callers looping on ks, half Gets, half Puts.
func (r *refreshKillResult) round(ctx context.Context, cluster *store.Cluster, kv *zarisclient.Client, debounce time.Duration, ks [][]byte) error {
	refresher := kv.Engine().Refresher()
	var killed atomic.Int64 // UnixNano of the kill; 0 before it
	var stop atomic.Bool
	var mu sync.Mutex // protects r's counts
	var wg sync.WaitGroup
	for c := range r.Callers {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				k := ks[(c*7919+i)%len(ks)]
				t := time.Now()
				var err error
				if i%2 == 0 {
					_, err = kv.Get(context.Background(), &zaris.GetRequest{Key: k})
				} else {
					_, err = kv.Put(context.Background(), &zaris.PutRequest{Key: k, Value: value})
				}
				at := killed.Load()
				if at == 0 || time.Now().UnixNano() < at {
					continue // ended before the kill
				}
				mu.Lock()
				r.Calls++
				r.MaxMs = max(r.MaxMs, ms(time.Since(t)))
				if err != nil {
					var ce *runtime.CallError
					if errors.As(err, &ce) {
						r.CallErrors++
					} else {
						r.OtherErrors++
					}
					if r.FirstError == "" {
						r.FirstError = err.Error()
					}
				}
				mu.Unlock()
			}
		})
	}
	defer func() {
		stop.Store(true)
		wg.Wait()
	}()
	// Warm up past the debounce window of the last fetch, so that the refresh below runs.
	if !sleepCtx(ctx, debounce+100*time.Millisecond) {
		return ctx.Err()
	}
	var res clustermap.RefreshResult
	for range 3 {
		if res = refresher.Refresh(ctx, clustermap.Evidence{}); res.Performed {
			break
		}
		if !sleepCtx(ctx, debounce) {
			return ctx.Err()
		}
	}
	if !res.Performed {
		return fmt.Errorf("kill after a refresh: the refresh did not fetch a map: %+v", res)
	}
	refreshed := time.Now()
	killed.Store(time.Now().UnixNano())
	if err := cluster.Kill(r.Node); err != nil {
		return err
	}
	r.KillAfterMs = max(r.KillAfterMs, ms(time.Since(refreshed)))
	kill := time.Unix(0, killed.Load())
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := cluster.WaitFor(wctx, func(m *zaris.ClusterMap) bool {
		for _, s := range m.Segments {
			if s.Owner != nil && *s.Owner == r.Node {
				return false
			}
		}
		return true
	}); err != nil {
		return fmt.Errorf("kill after a refresh: n%d was not failed over: %w", r.Node, err)
	}
	r.FailoverMs = max(r.FailoverMs, ms(time.Since(kill)))
	if !sleepCtx(ctx, 2*debounce+500*time.Millisecond) {
		return ctx.Err()
	}
	return nil
}

// restore starts node id again and hands it its segments back.
func restore(ctx context.Context, cluster *store.Cluster, id int32) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := cluster.Restart(ctx, id); err != nil {
		return fmt.Errorf("kill after a refresh: restarting n%d: %w", id, err)
	}
	if err := cluster.Failback(ctx, id); err != nil {
		return fmt.Errorf("kill after a refresh: failing n%d back: %w", id, err)
	}
	return cluster.WaitSettled(ctx)
}

// sleepCtx waits d and reports whether ctx was still live then.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return ctx.Err() == nil
	case <-ctx.Done():
		return false
	}
}

// raise sets a to v if v is larger.
func raise(a *atomic.Int64, v int64) {
	for cur := a.Load(); v > cur && !a.CompareAndSwap(cur, v); cur = a.Load() {
	}
}
