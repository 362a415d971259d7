package middleware

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/clustron/zaris-go/runtime"
	"github.com/clustron/zaris-go/runtime/batch"
	"github.com/clustron/zaris-go/runtime/clock"
	"github.com/clustron/zaris-go/runtime/clustermap"
)

// BatchRouter routes a key under the client's current cluster map. runtime.Refresher is one.
type BatchRouter interface {
	// Route returns the key's owner under the current map, or an error when its segment
	// has none.
	Route(key []byte) (clustermap.Route, error)
}

// BatchParallelism is the most sub-requests of one multi-key call in flight at once.
const BatchParallelism = 8

// BatchMaxBytes bounds one sub-request's items by their sizes, when the call's items know
// them (runtime.BatchItems.Size; the typed client's do): an owner's items beyond it go in
// several sub-requests, and an item larger than it alone goes in one of its own. It keeps a
// sub-request well inside the reference node's 4 MiB message limit.
const BatchMaxBytes = 1 << 20

// Batches returns the call-level middleware that runs multi-key calls (call.Batch set) in
// rounds: it splits the pending items by owner, sends each owner one sub-request through next
// as a single attempt, and applies the single-key rules to the items that met churn only
// (one backoff and one map refresh per round, both bounds of R4, B2, B3). Each item's error
// is in call.Batch.Errs; the call's error is a *batch.Error only when no item got an
// answer. Every other call goes straight to next. README.md in this directory has the details.
func Batches(p runtime.RetryPolicy, clock clock.Clock, r MapRefresher, router BatchRouter, budget runtime.RetryBudget) Middleware {
	clock = orSystem(clock)
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
	clock  clock.Clock
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

	start    time.Time // when the call began, for its items' terminal errors
	limit    int       // the attempt cap of each item (MaxAttempts)
	answered int       // the items answered so far, those batch.Run answered included

	// shared holds first attempts that items share (see first); sharedFrom is where the
	// records of the group being judged begin.
	shared     []runtime.Attempt
	sharedFrom int
}

// run runs the call's rounds until no item is pending, or until the call may make no further
// round (between): then the items still pending end with the bound that stopped it. The
// call's error is a *batch.Error only when no item got an answer.
func (e *batchRun) run(ctx context.Context) (runtime.Response, error) {
	pending := e.begin()
	stats := &e.call.Batch.Stats
	for round := 1; len(pending) > 0; round++ {
		stats.Rounds = round
		if pending = e.round(ctx, pending, round > 1); len(pending) == 0 {
			break
		}
		if stop := e.between(ctx, round, pending); stop != nil {
			for _, i := range pending {
				e.endItem(i, stop, nil)
			}
			break
		}
		stats.ItemsRetried += len(pending)
	}
	resp := e.call.Batch.Items.Response(e.epoch)
	if e.answered == 0 {
		return resp, &batch.Error{Op: opName(e.call), Errs: e.errs}
	}
	return resp, nil
}

// begin sets the call up for its first round: the items' histories and errors on
// call.Batch, the start and attempt cap, the retry budget's deposit (B3). It returns the
// items to send, in order, and counts as answered those batch.Run answered InvalidRequest.
func (e *batchRun) begin() (pending []int) {
	items := e.call.Batch.Items
	n := items.Len()
	e.hist = make([][]runtime.Attempt, n)
	e.errs = make([]error, n)
	e.call.Batch.Errs = e.errs
	e.call.Batch.Attempts = e.hist
	e.call.Batch.Ran = true
	e.start = callStart(e.call, e.clock)
	e.limit = MaxAttempts(e.p, e.call)
	if e.budget != nil {
		e.budget.Deposit()
	}
	pending = make([]int, 0, n)
	for i := range n {
		if items.Invalid(i) {
			e.answered++ // batch.Run answered it InvalidRequest
			continue
		}
		pending = append(pending, i)
	}
	return pending
}

// round sends the pending items, split by owner, one sub-request per group, judges each item
// by its sub-request's outcome (settle) and returns the items to retry, in order.
func (e *batchRun) round(ctx context.Context, pending []int, retry bool) []int {
	groups := e.split(pending)
	outs := e.send(ctx, groups, retry)
	var again []int
	for gi, g := range groups {
		again = e.settle(g, &outs[gi], again)
	}
	slices.Sort(again)
	return again
}

// settle judges the items of group g, whose sub-request ended as o: an answered item is
// counted, one that ends without an answer gets its error, and the others are appended to
// again, which it returns. After a sub-request that failed on its connection, those items
// go in sub-requests of at most half as many items from then on.
func (e *batchRun) settle(g group, o *subOutcome, again []int) []int {
	e.sharedFrom = len(e.shared)
	if sa := o.sub.lastAttempt(); sa != nil && sa.Answered && o.resp != nil {
		o.statuses, o.recordErr = e.call.Batch.Items.Record(o.resp, g.idx)
	}
	halve := len(g.idx) > 1 && failedOnItsConnection(o.sub.lastAttempt())
	for j, i := range g.idx {
		class, final := e.judge(g, o, j, i)
		switch {
		case final == nil && class == runtime.Answer:
			e.answered++
		case final != nil:
			stop := &StopError{Bound: runtime.BoundNone}
			if se, ok := errors.AsType[*StopError](final); ok {
				stop, final = se, nil // ended before it was sent: the last attempt's cause
			}
			e.endItem(i, stop, final)
		default:
			again = append(again, i)
			if halve {
				e.bound(i, (len(g.idx)+1)/2)
			}
		}
	}
	return again
}

// endItem ends item i without an answer: its error is the terminal error that stop and cause
// make of its attempts (endCall).
func (e *batchRun) endItem(i int, stop *StopError, cause error) {
	itemCall := &runtime.Call{Op: e.call.Op, Attempts: e.hist[i]}
	e.errs[i] = endCall(itemCall, e.clock, e.start, e.limit, stop, cause)
}

// between applies the single-key rules to the pending items after round: the bounds
// (stopAfter), then the retry step a single call takes before a retry, for all of them
// (step). It returns why the call stops, or nil to go on.
func (e *batchRun) between(ctx context.Context, round int, pending []int) *StopError {
	if stop := e.stopAfter(ctx, round, pending); stop != nil {
		return stop
	}
	now := e.clock.Now()
	step, waits := e.step(pending, now)
	if stop := sleepBackoff(ctx, e.clock, e.call, step.backoff, now); stop != nil || e.r == nil {
		return stop
	}
	return awaitThenRefresh(ctx, e.clock, e.r, e.call, waits, step.refresh, step.ev)
}

// step returns the retry step between rounds, made of the pending items' (stepAfter) at
// now: the longest backoff any of them needs, and one refresh with the newest evidence of
// those that ask for it; and the waits for a new owner of the items whose owner could not
// be reached (rule B7), which stand in for their backoff and refresh.
func (e *batchRun) step(pending []int, now time.Time) (step retryStep, waits []ownerWait) {
	for _, i := range pending {
		s := stepAfter(e.p, e.call, e.hist[i], e.call.Batch.Items.Key(i), true, now)
		if s.awaits {
			waits = append(waits, s.wait)
			continue
		}
		step.backoff = max(step.backoff, s.backoff)
		if s.refresh {
			step.refresh, step.ev = true, newer(step.ev, s.ev)
		}
	}
	return step, waits
}

// stopAfter returns why the call makes no round after round, or nil: its context ended, its
// items are out of attempts (R4; a round after which every pending item's last attempt is
// Uncounted does not count, rule B7, and is counted in e.uncounted here), or its deadline
// passed.
func (e *batchRun) stopAfter(ctx context.Context, round int, pending []int) *StopError {
	if err := ctx.Err(); err != nil {
		return stopForContext(ctx, err)
	}
	if e.uncountedRound(pending) {
		e.uncounted++
	}
	if round-e.uncounted >= e.limit {
		return &StopError{Bound: runtime.BoundAttempts}
	}
	if !beforeDeadline(e.clock, e.call.Deadline) {
		return &StopError{Bound: runtime.BoundDeadline}
	}
	return nil
}

// uncountedRound reports whether the round just ended does not count toward the call's
// attempts: the last attempt of every pending item (there is at least one) is Uncounted.
func (e *batchRun) uncountedRound(pending []int) bool {
	now := e.clock.Now()
	for _, i := range pending {
		if !Uncounted(e.p, e.limit, e.hist[i], e.call.Deadline, now) {
			return false
		}
	}
	return true
}
