package middlewaretest

import (
	"context"
	"sync"

	"github.com/clustron/zaris-go/runtime"
)

// Refresher is a fake of the client's shared map refresher (middleware.MapRefresher). It
// records every Refresh request's evidence and every Observe, and by default answers each
// request with a performed refresh that moves its epoch up to the evidence. It is safe for
// concurrent use.
type Refresher struct {
	// OnRefresh, when set, answers Refresh instead of the default.
	OnRefresh func(ctx context.Context, evidence int64) runtime.RefreshResult

	mu       sync.Mutex // protects the fields below
	epoch    int64
	requests []int64
	observed []int64
}

// NewRefresher returns a Refresher whose map is at epoch.
func NewRefresher(epoch int64) *Refresher { return &Refresher{epoch: epoch} }

// Refresh records the request and answers it.
func (r *Refresher) Refresh(ctx context.Context, evidence int64) runtime.RefreshResult {
	r.mu.Lock()
	r.requests = append(r.requests, evidence)
	hook := r.OnRefresh
	if hook == nil {
		r.epoch = max(r.epoch, evidence)
		res := runtime.RefreshResult{Performed: true, Epoch: r.epoch}
		r.mu.Unlock()
		return res
	}
	r.mu.Unlock()
	return hook(ctx, evidence)
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
