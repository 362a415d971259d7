package middleware

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	"github.com/clustron/zaris-go/runtime"
)

// BatchRouter routes a key under the client's current cluster map. runtime.Refresher is one.
type BatchRouter interface {
	// Route returns the key's owner under the current map, or an error when its segment
	// has none.
	Route(key []byte) (runtime.Route, error)
}

// BatchParallelism is the most sub-requests of one multi-key call in flight at once.
const BatchParallelism = 8

// BatchMaxBytes bounds one sub-request's items by their sizes, when the call's items know
// them (runtime.BatchItemSizes; the typed client's do): an owner's items beyond it go in
// several sub-requests, and an item larger than it alone goes in one of its own. It keeps a
// sub-request well inside the reference node's 4 MiB message limit.
const BatchMaxBytes = 1 << 20

// Batches returns the call-level middleware that runs multi-key calls (call.Batch set) in
// rounds: it splits the pending items by owner, sends each owner one sub-request through next
// as a single attempt, and applies the single-key rules to the items that met churn only
// (one backoff and one map refresh per round, both bounds of R4, B2, B3). Each item's error
// is in call.Batch.Errs; the call's error is a *runtime.BatchError only when no item got an
// answer. Every other call goes straight to next. README.md in this directory has the details.
func Batches(p runtime.RetryPolicy, clock runtime.Clock, r MapRefresher, router BatchRouter, budget runtime.RetryBudget) Middleware {
	clock = cmp.Or(clock, runtime.SystemClock)
	return func(next Handler) Handler {
		return func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
			if call.Batch == nil {
				return next(ctx, call)
			}
			e := &batchRun{p: p, clock: clock, r: r, router: router, budget: budget, next: next, call: call}
			return e.run(ctx)
		}
	}
}

// batchRun is one multi-key call on its way through the batch layer.
type batchRun struct {
	p      runtime.RetryPolicy
	clock  runtime.Clock
	r      MapRefresher
	router BatchRouter
	budget runtime.RetryBudget // nil: no retry budget
	next   Handler
	call   *runtime.Call

	hist  [][]runtime.Attempt // per item, its attempts
	errs  []error
	epoch int64 // the newest answer epoch seen
	// most, once a sub-request failed on its connection, holds per item the most items it
	// may share a sub-request with from then on (0: no bound); nil until then.
	most []int

	// uncounted counts the rounds that R4 does not count: every item retried after them
	// had its last attempt refused by an unreachable owner (Uncounted, rule B7).
	uncounted int

	// shared holds first attempts that items share (see first); sharedFrom is where the
	// records of the group being judged begin.
	shared     []runtime.Attempt
	sharedFrom int
}

func (e *batchRun) run(ctx context.Context) (runtime.Response, error) {
	items := e.call.Batch.Items
	n := items.Len()
	e.hist = make([][]runtime.Attempt, n)
	e.errs = make([]error, n)
	e.call.Batch.Errs = e.errs
	e.call.Batch.Attempts = e.hist
	e.call.Batch.Ran = true
	stats := &e.call.Batch.Stats
	start := e.clock.Now()
	limit := MaxAttempts(e.p, e.call)
	answered := 0
	if e.budget != nil {
		e.budget.Deposit()
	}

	pending := make([]int, 0, n)
	for i := range n {
		if items.Invalid(i) {
			answered++ // RunBatch answered it InvalidRequest
			continue
		}
		pending = append(pending, i)
	}
	for round := 1; len(pending) > 0; round++ {
		stats.Rounds = round
		groups := e.split(pending)
		outs := e.send(ctx, groups, round > 1)
		var again []int
		for gi, g := range groups {
			o := &outs[gi]
			e.sharedFrom = len(e.shared)
			if sa := o.sub.lastAttempt(); sa != nil && sa.Answered && o.resp != nil {
				o.statuses, o.recordErr = items.Record(o.resp, g.idx)
			}
			halve := len(g.idx) > 1 && failedOnItsConnection(o.sub.lastAttempt())
			for j, i := range g.idx {
				class, final := e.judge(g, o, j, i)
				switch {
				case final == nil && class == runtime.Answer:
					answered++
				case final != nil:
					stop := &StopError{Bound: runtime.BoundNone}
					if se, ok := errors.AsType[*StopError](final); ok {
						stop, final = se, nil // ended before it was sent: the last attempt's cause
					}
					e.errs[i] = endCall(e.itemCall(i), e.clock, start, limit, stop, final)
				default:
					again = append(again, i)
					if halve {
						e.bound(i, (len(g.idx)+1)/2)
					}
				}
			}
		}
		if len(again) == 0 {
			break
		}
		slices.Sort(again)
		pending = again
		if stop := e.between(ctx, round, limit, pending); stop != nil {
			for _, i := range pending {
				e.errs[i] = endCall(e.itemCall(i), e.clock, start, limit, stop, nil)
			}
			break
		}
		stats.ItemsRetried += len(pending)
	}
	resp := items.Response(e.epoch)
	if answered == 0 {
		return resp, &runtime.BatchError{Op: opName(e.call), Errs: e.errs}
	}
	return resp, nil
}

// itemCall is a call holding item i's attempts, for building its terminal error.
func (e *batchRun) itemCall(i int) *runtime.Call {
	return &runtime.Call{Op: e.call.Op, Attempts: e.hist[i]}
}

// between applies the single-key rules between rounds to the pending items: the bounds,
// one backoff, the wait for a new owner of the items whose owner could not be reached
// (rule B7: in place of their backoff, one wait per such node), one shared refresh. It
// returns why the call stops, or nil to go on.
func (e *batchRun) between(ctx context.Context, round, limit int, pending []int) *StopError {
	if err := ctx.Err(); err != nil {
		return stopForContext(ctx, err)
	}
	deadline := e.call.Deadline
	if e.uncountedRound(limit, pending, deadline) {
		e.uncounted++ // every pending item's last attempt never left an unreachable owner (B7)
	}
	if round-e.uncounted >= limit {
		return &StopError{Bound: runtime.BoundAttempts}
	}
	if !beforeDeadline(e.clock, deadline) {
		return &StopError{Bound: runtime.BoundDeadline}
	}
	now := e.clock.Now()
	var refresh bool
	var d time.Duration
	var ev runtime.Evidence
	var waits []ownerWait
	for _, i := range pending {
		last := &e.hist[i][len(e.hist[i])-1]
		if until, ok := OwnerWaitUntil(e.p, e.hist[i], deadline, now); ok {
			waits = append(waits, ownerWait{key: e.call.Batch.Items.Key(i), prev: last, until: until})
			continue
		}
		if !AtOnce(last) {
			d = max(d, Delay(e.p, round, SlowFactor(e.p, e.call, last), now, deadline))
		}
		if last.Class == runtime.RefreshRetry {
			refresh = true
			if last.Answered {
				ev.Epoch = max(ev.Epoch, last.AnswerEpoch)
			}
			if last.End.After(ev.At) {
				ev.At = last.End
			}
		}
	}
	if d > 0 {
		err := e.clock.Sleep(ctx, d)
		e.call.Stats.Backoff += e.clock.Now().Sub(now)
		if err != nil {
			return stopForContext(ctx, err)
		}
	}
	if !beforeDeadline(e.clock, deadline) {
		return &StopError{Bound: runtime.BoundDeadline}
	}
	if len(waits) > 0 && e.r != nil {
		if at, timedOut := e.awaitOwners(ctx, waits); timedOut {
			// As after a single call's wait that ran out: the refresh carries the failures'
			// end as its evidence (B7).
			refresh = true
			if at.After(ev.At) {
				ev.At = at
			}
		}
		if err := ctx.Err(); err != nil {
			return stopForContext(ctx, err)
		}
		if !beforeDeadline(e.clock, deadline) {
			return &StopError{Bound: runtime.BoundDeadline}
		}
	}
	if refresh && e.r != nil {
		res := refreshBefore(ctx, e.clock, deadline, e.r, ev)
		e.call.Stats.RefreshesRequested++
		if res.Performed {
			e.call.Stats.RefreshesPerformed++
		}
		if err := ctx.Err(); err != nil {
			return stopForContext(ctx, err)
		}
	}
	return nil
}

// uncountedRound reports whether the round just ended does not count toward the call's
// attempts: the last attempt of every pending item is Uncounted.
func (e *batchRun) uncountedRound(limit int, pending []int, deadline time.Time) bool {
	now := e.clock.Now()
	for _, i := range pending {
		if !Uncounted(e.p, limit, e.hist[i], deadline, now) {
			return false
		}
	}
	return len(pending) > 0
}

// ownerWait is one wait of rule B7 between rounds: for a map that moves key's segment away
// from the node prev could not reach, until until.
type ownerWait struct {
	key   []byte
	prev  *runtime.Attempt
	until time.Time
}

// awaitOwners waits (rule B7) until the map moves every item of waits away from the node
// its last attempt could not reach, or its bound passes, counted as one wait and one
// refresh in the call's stats; the items share the fetches, so once one item's map is in,
// the others' waits are a look at it. It reports whether any wait ran out, and the latest
// end of the attempts whose wait did.
func (e *batchRun) awaitOwners(ctx context.Context, waits []ownerWait) (at time.Time, timedOut bool) {
	stats := &e.call.Stats
	start := e.clock.Now()
	performed := false
	for _, w := range waits {
		res := e.r.AwaitOwner(ctx, w.key, w.prev.Node, w.until)
		if res.TimedOut {
			timedOut = true
			if w.prev.End.After(at) {
				at = w.prev.End
			}
		}
		performed = performed || res.Performed
		if ctx.Err() != nil {
			break
		}
	}
	stats.OwnerWaits++
	stats.OwnerWait += e.clock.Now().Sub(start)
	stats.RefreshesRequested++
	if performed {
		stats.RefreshesPerformed++
	}
	return at, timedOut
}
