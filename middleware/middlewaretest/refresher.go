package middlewaretest

import (
	"context"
	"sync"
	"time"

	"github.com/clustron/zaris-go/runtime/clustermap"
)

// Refresher is a fake of the client's shared map refresher (middleware.MapRefresher). It
// records every Refresh request's evidence and every Observe, and by default answers each
// request with a performed refresh that moves its epoch up to the evidence. It is safe for
// concurrent use.
type Refresher struct {
	// OnRefresh, when set, answers Refresh instead of the default.
	OnRefresh func(ctx context.Context, ev clustermap.Evidence) clustermap.RefreshResult
	// OnAwaitOwner, when set, answers AwaitOwner instead of the default.
	OnAwaitOwner func(ctx context.Context, w OwnerWait) clustermap.RefreshResult

	mu       sync.Mutex // protects the fields below
	epoch    int64
	requests []int64
	times    []time.Time
	waits    []OwnerWait
	observed []int64
}

// OwnerWait is one AwaitOwner request, as the Refresher recorded it.
type OwnerWait struct {
	Key   []byte
	Gone  int32
	Until time.Time
}

// NewRefresher returns a Refresher whose map is at epoch.
func NewRefresher(epoch int64) *Refresher { return &Refresher{epoch: epoch} }

// Refresh records the request and answers it.
func (r *Refresher) Refresh(ctx context.Context, ev clustermap.Evidence) clustermap.RefreshResult {
	r.mu.Lock()
	r.requests = append(r.requests, ev.Epoch)
	r.times = append(r.times, ev.At)
	hook := r.OnRefresh
	if hook == nil {
		r.epoch = max(r.epoch, ev.Epoch)
		res := clustermap.RefreshResult{Performed: true, Epoch: r.epoch}
		r.mu.Unlock()
		return res
	}
	r.mu.Unlock()
	return hook(ctx, ev)
}

// AwaitOwner records the request and answers it: by default at once, with a performed
// refresh (the map has moved the owner).
func (r *Refresher) AwaitOwner(ctx context.Context, key []byte, gone int32, until time.Time) clustermap.RefreshResult {
	w := OwnerWait{Key: key, Gone: gone, Until: until}
	r.mu.Lock()
	r.waits = append(r.waits, w)
	hook := r.OnAwaitOwner
	epoch := r.epoch
	r.mu.Unlock()
	if hook != nil {
		return hook(ctx, w)
	}
	return clustermap.RefreshResult{Performed: true, Epoch: epoch}
}

// OwnerWaits returns every AwaitOwner request, in order.
func (r *Refresher) OwnerWaits() []OwnerWait {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]OwnerWait(nil), r.waits...)
}

// RequestTimes returns the evidence time of every Refresh request, in order.
func (r *Refresher) RequestTimes() []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Time(nil), r.times...)
}

// Observe records epoch.
func (r *Refresher) Observe(epoch int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.observed = append(r.observed, epoch)
}

// Epoch returns the fake map's epoch.
func (r *Refresher) Epoch() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.epoch
}

// SetEpoch sets the fake map's epoch.
func (r *Refresher) SetEpoch(epoch int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.epoch = epoch
}

// Requests returns the evidence of every Refresh request, in order.
func (r *Refresher) Requests() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int64(nil), r.requests...)
}

// Observed returns every epoch passed to Observe, in order.
func (r *Refresher) Observed() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int64(nil), r.observed...)
}
