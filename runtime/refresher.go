package runtime

import (
	"cmp"
	"context"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/clustron/zaris-go/runtime/clock"
	"github.com/clustron/zaris-go/runtime/clustermap"
)

// fetchFunc fetches a cluster map from the cluster; ctx bounds it. minEpoch is the epoch
// an answer has shown to exist (0 when none): nodes learn a new map one by one, so a fetch
// should keep asking until a node has one at least that new, and otherwise return the
// newest it got. The Engine's asks the nodes of its current map, then its seeds.
type fetchFunc func(ctx context.Context, minEpoch int64) (*clustermap.Map, error)

// flightKey is the one singleflight key: there is one map per client.
const flightKey = "map"

// Refresher refreshes a client's cluster map on request, under rules R6, B1 and B7:
// concurrent requests share one fetch, a request inside the debounce window is a no-op
// unless it carries a newer epoch, a request whose evidence no completed fetch has seen
// gets a fetch at the end of the window instead of being dropped, a caller waits at most
// the refresh wait while the fetch goes on for the others, and only a newer map is
// installed. It is safe for concurrent use; README.md says how it avoids holding locks
// across a fetch.
type Refresher struct {
	router       *currentTable
	fetch        fetchFunc
	clock        clock.Clock
	wait         time.Duration
	debounce     time.Duration
	fetchTimeout time.Duration
	onInstall    func(old, cur *routingTable) // called after a newer map is installed

	group    singleflight.Group
	inflight atomic.Bool  // a fetch is running
	lastDone atomic.Int64 // Clock time (UnixNano) the last fetch with a map completed; 0: never
	wanted   atomic.Int64 // the highest epoch evidence seen
	served   atomic.Int64 // the highest evidence a completed fetch set out to satisfy

	// Rule B7's clocks, Clock times in UnixNano.
	lastStart atomic.Int64 // when the newest fetch that completed with a map started; 0: never
	lastEnd   atomic.Int64 // when the last fetch ended, with a map or not; 0: never
	wantedAt  atomic.Int64 // the newest evidence time of a deferred request
	deferring atomic.Bool  // a deferred fetch is scheduled or running (runDeferred)

	base   context.Context // parent of every fetch's context; cancelled by Close
	cancel context.CancelFunc

	stopped atomic.Bool    // set by Close, read without the lock by Refresh and Observe
	mu      sync.Mutex     // protects closed and the Add side of flights
	closed  bool           // set by Close; no fetch starts after it
	flights sync.WaitGroup // running fetches, awaited by Close

	requested, performed, coalesced, debounced, deferred, ownerWaits, timedOut, failed, background atomic.Uint64
}

// newRefresher returns a refresher that fetches maps with fetch and installs them in
// router, with cfg's RefreshWait, RefreshDebounce and Clock (and DialTimeout plus
// AttemptTimeout as the least time a fetch gets). An Engine makes its own; this is for
// using the rules with another map source. Close it when done.
func newRefresher(cfg Config, router *currentTable, fetch fetchFunc) *Refresher {
	clock := cmp.Or(cfg.Clock, clock.System)
	ft := cfg.RefreshWait
	if least := cfg.DialTimeout + cfg.AttemptTimeout; ft < least {
		ft = least
	}
	if ft <= 0 {
		ft = DefaultRefreshWait
	}
	r := &Refresher{
		router:       router,
		fetch:        fetch,
		clock:        clock,
		wait:         cfg.RefreshWait,
		debounce:     cfg.RefreshDebounce,
		fetchTimeout: ft,
	}
	r.base, r.cancel = context.WithCancel(context.Background())
	return r
}

// Epoch returns the current map's epoch.
func (r *Refresher) Epoch() int64 { return r.router.Epoch() }

// Stats returns the refresher's counters.
func (r *Refresher) Stats() clustermap.RefreshStats {
	return clustermap.RefreshStats{
		Requested:  r.requested.Load(),
		Performed:  r.performed.Load(),
		Coalesced:  r.coalesced.Load(),
		Debounced:  r.debounced.Load(),
		Deferred:   r.deferred.Load(),
		OwnerWaits: r.ownerWaits.Load(),
		TimedOut:   r.timedOut.Load(),
		Failed:     r.failed.Load(),
		Background: r.background.Load(),
	}
}

// Refresh asks for a fresh map and waits for it, at most the refresh wait or until ctx
// ends. ev.Epoch newer than the current map skips the debounce (B1); a request the
// debounce holds back whose ev.At is after the start of the last completed fetch is
// deferred (B7): it returns at once, and a fetch runs at the end of the window. Every
// caller of one flight receives the same outcome: whether a map came back, the fetch
// error if not, and the epoch after it.
func (r *Refresher) Refresh(ctx context.Context, ev clustermap.Evidence) clustermap.RefreshResult {
	r.requested.Add(1)
	if r.stopped.Load() {
		return clustermap.RefreshResult{Epoch: r.Epoch(), Err: ErrClosed}
	}
	r.noteEvidence(ev.Epoch)
	if !r.urgent(ev.Epoch) && r.withinDebounce() {
		return r.debouncedFor(ev.At)
	}
	tok := new(flightToken)
	ch := r.group.DoChan(flightKey, r.flight(tok, false))
	if r.wait <= 0 {
		// No wait at all: take the outcome only if it is already there.
		select {
		case res := <-ch:
			return r.received(res, tok, ev.At)
		default:
			return r.gaveUp(tok, ev.At)
		}
	}
	t := r.clock.NewTimer(r.wait)
	defer t.Stop()
	select {
	case res := <-ch:
		return r.received(res, tok, ev.At)
	case <-ctx.Done():
	case <-t.C():
	}
	return r.gaveUp(tok, ev.At)
}

// debouncedFor is the result of a request that the debounce holds back; one whose evidence
// time at no completed fetch has seen is deferred, not dropped (B7).
func (r *Refresher) debouncedFor(at time.Time) clustermap.RefreshResult {
	r.debounced.Add(1)
	rr := clustermap.RefreshResult{Debounced: true, Epoch: r.Epoch()}
	if r.unseen(at) {
		r.deferred.Add(1)
		rr.Deferred = true
		r.deferFetch(at)
	}
	return rr
}

// received turns the flight's outcome into the result of the request tok with evidence
// time at. A flight that started before at does not satisfy it: a fetch is deferred for it.
func (r *Refresher) received(res singleflight.Result, tok *flightToken, at time.Time) clustermap.RefreshResult {
	out := res.Val.(*flightResult)
	if out.debounced {
		return r.debouncedFor(at)
	}
	rr := clustermap.RefreshResult{Performed: out.err == nil, Coalesced: out.leader != tok, Err: out.err, Epoch: r.Epoch()}
	if rr.Coalesced {
		r.coalesced.Add(1)
	}
	if rr.Performed && r.unseen(at) {
		r.deferFetch(at)
	}
	return rr
}

// gaveUp is the result of the request tok whose caller stopped waiting; the fetch goes on
// for the others. Whether this caller led it is known only once the flight has started,
// which it has by the time any real wait expires.
func (r *Refresher) gaveUp(tok *flightToken, at time.Time) clustermap.RefreshResult {
	r.timedOut.Add(1)
	if r.unseen(at) {
		r.deferFetch(at) // it rides the flight under way, and fetches again if that one started too early
	}
	rr := clustermap.RefreshResult{TimedOut: true, Coalesced: !tok.led.Load(), Epoch: r.Epoch()}
	if rr.Coalesced {
		r.coalesced.Add(1)
	}
	return rr
}

// Observe is told the map epoch of every answer (B1). An epoch newer than the current map
// starts a shared background fetch, without waiting for it, unless one is already running
// or a fetch already set out for that evidence within the debounce window. When the epoch
// is not newer, Observe costs one atomic load.
func (r *Refresher) Observe(epoch int64) {
	if epoch <= r.router.Epoch() {
		return
	}
	r.noteEvidence(epoch)
	if r.stopped.Load() || r.inflight.Load() || (epoch <= r.served.Load() && r.withinDebounce()) {
		return
	}
	r.group.DoChan(flightKey, r.flight(nil, true)) // the result channel is buffered; nobody needs to read it
}

// Close stops the refresher: the fetch in flight, if any, is cancelled and awaited, and
// later requests return ErrClosed. Close is idempotent.
func (r *Refresher) Close() {
	r.stopped.Store(true)
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	r.flights.Wait()
}

// Done returns a channel closed by Close: the client the refresher serves is closing. The
// default middleware stack ends a call's backoff with ErrClosed when it closes.
func (r *Refresher) Done() <-chan struct{} { return r.base.Done() }

// urgent reports whether evidence shows a map newer than the current one that no completed
// fetch has yet set out to satisfy, which skips the debounce (B1).
func (r *Refresher) urgent(evidence int64) bool {
	return evidence > r.router.Epoch() && evidence > r.served.Load()
}

// withinDebounce reports whether the last fetch with a map completed less than the
// debounce window ago.
func (r *Refresher) withinDebounce() bool {
	last := r.lastDone.Load()
	return last != 0 && r.clock.Now().UnixNano()-last < int64(r.debounce)
}

// noteEvidence raises wanted to evidence.
func (r *Refresher) noteEvidence(evidence int64) {
	raise(&r.wanted, evidence)
}

// raise stores v in a if it is larger than a's value.
func raise(a *atomic.Int64, v int64) {
	for {
		cur := a.Load()
		if v <= cur || a.CompareAndSwap(cur, v) {
			return
		}
	}
}

// flightToken identifies the request whose function singleflight runs.
type flightToken struct {
	led atomic.Bool
}

// flightResult is what every rider of one flight receives.
type flightResult struct {
	leader    *flightToken
	debounced bool // a fetch completed between the request's debounce check and this flight
	err       error
}

// flight returns the function singleflight runs for the request tok (nil for Observe):
// fetch on the refresher's own context, install a newer map, note the time, clear the slot.
// A background flight is counted in Background too when it brings a map.
func (r *Refresher) flight(tok *flightToken, background bool) func() (any, error) {
	return func() (any, error) {
		if tok != nil {
			tok.led.Store(true)
		}
		out := &flightResult{leader: tok}
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			out.err = ErrClosed
			r.group.Forget(flightKey)
			return out, nil
		}
		r.flights.Add(1)
		r.mu.Unlock()
		defer r.flights.Done()

		// A fetch may have completed between the requests' debounce check and this flight
		// (its slot was already cleared): then this flight is the no-op the window asks for.
		target := r.wanted.Load()
		if !r.urgent(target) && r.withinDebounce() {
			out.debounced = true
			r.group.Forget(flightKey)
			return out, nil
		}
		r.inflight.Store(true)
		started := r.clock.Now().UnixNano()
		ctx, cancel := context.WithTimeout(r.base, r.fetchTimeout)
		minEpoch := int64(0)
		if target > r.router.Epoch() {
			minEpoch = target
		}
		m, err := r.fetch(ctx, minEpoch)
		cancel()
		if err == nil {
			err = r.install(m)
		}
		if err != nil {
			r.failed.Add(1)
			out.err = err
		} else {
			r.performed.Add(1)
			if background {
				r.background.Add(1)
			}
			raise(&r.served, target)
			raise(&r.lastStart, started)
		}
		end := r.clock.Now().UnixNano()
		if err == nil {
			r.lastDone.Store(end)
		}
		r.lastEnd.Store(end)
		r.inflight.Store(false)
		r.group.Forget(flightKey)
		return out, nil
	}
}

// install validates m and installs it if it is newer than the current map.
func (r *Refresher) install(m *clustermap.Map) error {
	t, err := newRoutingTable(m)
	if err != nil {
		return err
	}
	if old, ok := r.router.Install(t); ok && r.onInstall != nil {
		r.onInstall(old, t)
	}
	return nil
}
