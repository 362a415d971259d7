package runtime

import (
	"context"
	"time"

	"github.com/clustron/zaris-go/runtime/clustermap"
)

// Rule B7: no churn evidence is lost. A refresh request that R6's debounce holds back is
// deferred, not dropped, when its evidence is newer than the start of the last completed
// fetch: one fetch runs at the end of the window for every such request. And a call whose
// owner could not be reached at all waits (AwaitOwner) until the map names another owner,
// riding one shared fetch per window, instead of spending its next attempts on the same
// dead node.

// unseen reports whether evidence seen at at is newer than the start of the last fetch
// that completed with a map, so that no completed fetch satisfies it. A zero at is never
// unseen.
func (r *Refresher) unseen(at time.Time) bool {
	return !at.IsZero() && at.UnixNano() > r.lastStart.Load()
}

// satisfied reports whether a fetch that started at or after at (UnixNano) has completed
// with a map.
func (r *Refresher) satisfied(at int64) bool { return r.lastStart.Load() >= at }

// untilNextFetch is how long, from now, until the debounce window of the last fetch ends
// (whether or not it returned a map): a deferred or awaited fetch starts no earlier, so
// a store that answers no fetch is asked once per window, not in a loop.
func (r *Refresher) untilNextFetch() time.Duration {
	last := r.lastEnd.Load()
	if last == 0 {
		return 0
	}
	return time.Duration(last + int64(r.debounce) - r.clock.Now().UnixNano())
}

// deferFetch makes sure a fetch that starts at or after at runs, at the end of the current
// debounce window: it schedules one unless one is scheduled already, which then also
// serves at.
func (r *Refresher) deferFetch(at time.Time) {
	raise(&r.wantedAt, at.UnixNano())
	if !r.deferring.CompareAndSwap(false, true) {
		return
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		r.deferring.Store(false)
		return
	}
	r.flights.Add(1)
	r.mu.Unlock()
	go r.runDeferred()
}

// runDeferred waits out the debounce window and fetches, as a shared flight, until a fetch
// that started after the newest deferred evidence has completed with a map; a fetch that
// fails ends it (the next request defers again). Close ends it.
func (r *Refresher) runDeferred() {
	defer r.flights.Done()
	for {
		if r.satisfied(r.wantedAt.Load()) {
			r.deferring.Store(false)
			// Evidence noted after the check above and before the flag was cleared would
			// find the flag set and rely on this run: look once more.
			if r.satisfied(r.wantedAt.Load()) || !r.deferring.CompareAndSwap(false, true) {
				return
			}
		}
		if !r.timer(r.untilNextFetch()) {
			r.deferring.Store(false)
			return
		}
		if r.satisfied(r.wantedAt.Load()) {
			continue
		}
		select {
		case res := <-r.group.DoChan(flightKey, r.flight(nil, true)):
			if out := res.Val.(*flightResult); out.err != nil {
				r.deferring.Store(false)
				return
			}
		case <-r.base.Done():
			r.deferring.Store(false)
			return
		}
	}
}

// timer waits d on a timer of the refresher's clock, or until the refresher closes, and
// reports whether d ran out. A deferred fetch waits so: it is nobody's call, so it moves no
// fake clock, as a Sleep may.
func (r *Refresher) timer(d time.Duration) bool {
	if d <= 0 {
		return !r.stopped.Load()
	}
	t := r.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-r.base.Done():
		return false
	}
}

// sleep is a caller's wait of d on the refresher's clock (Clock.Sleep), cut short by the
// end of ctx, the refresher's closing or the Clock time until (zero: no bound); it reports
// whether d ran out first. With d <= 0 it waits for nothing and reports whether ctx, the
// refresher and the bound are all still open.
func (r *Refresher) sleep(ctx context.Context, d time.Duration, until time.Time) bool {
	short := false
	if !until.IsZero() {
		if left := until.Sub(r.clock.Now()); left < d {
			d, short = left, true
		}
	}
	if d <= 0 {
		return !short && ctx.Err() == nil && !r.stopped.Load()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(r.base, cancel)
	defer stop()
	return r.clock.Sleep(ctx, d) == nil && !short
}

// AwaitOwner waits until the client's map names an owner other than node gone for key's
// segment (rule B7): at once if it already does; else it rides the shared fetches, the
// next one the debounce window allows (at most one per window, one flight for every
// caller), and waits again while each new map still names gone (or no owner). It returns
// when such a map is installed, when ctx ends, when the refresher closes (Err ErrClosed),
// or when the Clock passes until (zero: no bound), with TimedOut set. Performed reports
// that a fetch made for the wait brought the map; Epoch is the map's epoch on return.
func (r *Refresher) AwaitOwner(ctx context.Context, key []byte, gone int32, until time.Time) clustermap.RefreshResult {
	r.requested.Add(1)
	r.ownerWaits.Add(1)
	for fetched := false; ; fetched = true {
		if r.stopped.Load() {
			return clustermap.RefreshResult{Epoch: r.Epoch(), Err: ErrClosed}
		}
		if rt, err := r.router.Route(key); err == nil && rt.Node != gone {
			return clustermap.RefreshResult{Performed: fetched, Epoch: r.Epoch()}
		}
		// The wait for the debounce window, which with none left still stops a caller
		// that has gone (or a bound that has passed) before it starts a fetch.
		if !r.sleep(ctx, r.untilNextFetch(), until) {
			return r.awaitEnded()
		}
		if !r.awaitFlight(ctx, until, fetched) {
			return r.awaitEnded()
		}
	}
}

// awaitFlight leads or joins the shared fetch and waits for it, and reports whether it
// completed before ctx ended, the refresher closed or the Clock passed until (zero: no
// bound). An owner wait's fetches after its first (again) are Background.
func (r *Refresher) awaitFlight(ctx context.Context, until time.Time, again bool) bool {
	ch := r.group.DoChan(flightKey, r.flight(nil, again))
	var bound <-chan time.Time
	if !until.IsZero() {
		t := r.clock.NewTimer(until.Sub(r.clock.Now()))
		defer t.Stop()
		bound = t.C()
	}
	select {
	case <-ch:
		return true
	case <-bound:
	case <-ctx.Done():
	case <-r.base.Done():
	}
	return false
}

// awaitEnded is the result of an AwaitOwner that stopped waiting.
func (r *Refresher) awaitEnded() clustermap.RefreshResult {
	if r.stopped.Load() {
		return clustermap.RefreshResult{Epoch: r.Epoch(), Err: ErrClosed}
	}
	r.timedOut.Add(1)
	return clustermap.RefreshResult{TimedOut: true, Epoch: r.Epoch()}
}
