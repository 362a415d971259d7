package middleware

import (
	"context"
	"errors"
	"slices"
	"sync"
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

// Batches returns the call-level middleware that runs multi-key calls (call.Batch set);
// every other call goes straight to next. It sits between Deadline and Retry, so call-level
// middleware sees a batch once, and the layers below Retry see each sub-request as one
// attempt of its own call.
//
// A batch runs in rounds. Each round splits the pending items by owner under the current
// map (router; without one, all items go in one sub-request) and, when the items know their
// sizes, one owner's items further into sub-requests of at most BatchMaxBytes; it sends each
// sub-request through next with at most one attempt, addressed to that owner (call.Target)
// whatever the map says by the time it is sent, at most BatchParallelism at a time, and
// judges each item by its own status (an item without a key is answered InvalidRequest
// by RunBatch and never sent), by the status table of the IDL (call.Op.Statuses) as
// StatusClass does for a single key: an answer is final and never resent; churn leaves the
// item pending. A sub-request that got no reply leaves its items pending, except that an item of
// a non-idempotent operation that is not guarded is in doubt and never replayed (rule B2);
// items never sent are always pending. When it failed on its connection (ErrTransport: a
// node closes the connection on a message over its limit, such as the reply to a MultiGet
// of large values), its items go in sub-requests of at most half as many items from then
// on, so a reply too large for the node is read in parts over the next rounds.
//
// Between rounds the single-key rules apply to the pending items only: the attempt cap and
// the call's deadline (R4), one backoff, the longest any pending item needs (R5, with the
// slow factor of its status), and one shared map refresh when any pending item met a status or
// failure that calls for one (R2, R3, B1), before the items are split again by the
// refreshed map. With a retry budget (rule B3) the batch call deposits once, and each
// sub-request after the first round takes a token; without one its items end with
// runtime.BoundBudget. An item out of attempts, time or budget gets its own
// *runtime.CallError with its attempts.
//
// call.Batch.Errs holds each item's error and call.Batch.Attempts each item's attempts
// (items a sub-request answered alike share the record of that first attempt);
// call.Attempts gets one entry per sub-request. The call's error is a *runtime.BatchError
// only when no item got an answer.
func Batches(p runtime.RetryPolicy, clock runtime.Clock, r MapRefresher, router BatchRouter, budget runtime.RetryBudget) Middleware {
	if clock == nil {
		clock = runtime.SystemClock
	}
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

	// shared holds first attempts that items share (see first); sharedFrom is where the
	// records of the group being judged begin.
	shared     []runtime.Attempt
	sharedFrom int
}

// group is the items of one sub-request.
type group struct {
	route *runtime.Route // the owner the items were split for; nil without a router
	idx   []int
	// routeErr is set for items whose segment has no owner: they are not sent.
	routeErr error
}

// subOutcome is how one sub-request ended.
type subOutcome struct {
	sub  *subCall
	resp runtime.Response
	err  error
	// statuses are the items' statuses of an answered sub-request, or recordErr why its
	// reply could not be read.
	statuses  []runtime.Status
	recordErr error
}

// subCall is a sub-request's call; nil for a group that was not sent.
type subCall struct{ *runtime.Call }

func (s *subCall) lastAttempt() *runtime.Attempt {
	if s == nil {
		return nil
	}
	return s.Last()
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

// failedOnItsConnection reports whether a sub-request's attempt a was sent and failed on its
// connection (ErrTransport): a node closes the connection on a message over its limit, the
// reply to a MultiGet of large values included.
func failedOnItsConnection(a *runtime.Attempt) bool {
	return a != nil && a.Sent && !a.Answered && errors.Is(a.Err, runtime.ErrTransport)
}

// bound lets item i share a sub-request with at most most-1 other items from now on.
func (e *batchRun) bound(i, most int) {
	if e.most == nil {
		e.most = make([]int, len(e.hist))
	}
	if e.most[i] == 0 || most < e.most[i] {
		e.most[i] = most
	}
}

// itemCall is a call holding item i's attempts, for building its terminal error.
func (e *batchRun) itemCall(i int) *runtime.Call {
	return &runtime.Call{Op: e.call.Op, Attempts: e.hist[i]}
}

// split groups the items idx by owner under the current map, in order of first appearance,
// after one group per item whose segment has no owner (those are not sent), and cuts a
// group larger than BatchMaxBytes (splitBySize). The groups' index slices share one
// backing array.
func (e *batchRun) split(idx []int) []group {
	items := e.call.Batch.Items
	sizes, _ := items.(runtime.BatchItemSizes)
	if e.router == nil {
		return cut([]group{{idx: idx}}, sizes, e.most)
	}
	routes := make([]runtime.Route, 0, 4) // the owners, in order of first appearance
	var unrouted []group                  // items whose segment has no owner, one group each
	of := make([]int, len(idx))           // per item, its owner's index in routes, or -1
	var count []int                       // per owner, its items
	for j, i := range idx {
		rt, err := e.router.Route(items.Key(i))
		if err != nil {
			of[j] = -1
			unrouted = append(unrouted, group{idx: idx[j : j+1 : j+1], routeErr: err})
			continue
		}
		gi := 0
		for gi < len(routes) && (routes[gi].Node != rt.Node || routes[gi].Addr != rt.Addr) {
			gi++
		}
		if gi == len(routes) {
			routes = append(routes, rt)
			count = append(count, 0)
		}
		of[j] = gi
		count[gi]++
	}
	groups := slices.Grow(unrouted, len(routes))
	first := len(groups)
	buf := make([]int, 0, len(idx)-len(unrouted))
	for gi := range routes {
		groups = append(groups, group{route: &routes[gi], idx: buf[len(buf) : len(buf) : len(buf)+count[gi]]})
		buf = buf[:len(buf)+count[gi]]
	}
	for j, i := range idx {
		if gi := of[j]; gi >= 0 {
			g := &groups[first+gi]
			g.idx = append(g.idx, i)
		}
	}
	return cut(groups, sizes, e.most)
}

// cut cuts every group into consecutive groups for the same owner: each within
// BatchMaxBytes by the items' sizes (when sizes is set) or of one item, and none with more
// items than one of its items may share a sub-request with (most, when set; see bound). It
// returns groups itself when none is cut.
func cut(groups []group, sizes runtime.BatchItemSizes, most []int) []group {
	if sizes == nil && most == nil {
		return groups
	}
	var out []group // nil until a group is cut
	for gi, g := range groups {
		total, from, fewest := 0, 0, 0
		for j, i := range g.idx {
			s, m := 0, 0
			if sizes != nil {
				s = sizes.Size(i)
			}
			if most != nil {
				m = most[i]
			}
			if m > 0 && (fewest == 0 || m < fewest) {
				fewest = m
			}
			if j > from && (total+s > BatchMaxBytes || fewest > 0 && j-from+1 > fewest) {
				if out == nil {
					out = append(make([]group, 0, len(groups)+1), groups[:gi]...)
				}
				out = append(out, group{route: g.route, idx: g.idx[from:j:j]})
				from, total, fewest = j, 0, m
			}
			total += s
		}
		if out != nil {
			out = append(out, group{route: g.route, idx: g.idx[from:], routeErr: g.routeErr})
		}
	}
	if out == nil {
		return groups
	}
	return out
}

// send runs one sub-request per group through next, at most BatchParallelism at a time, and
// records each one's attempt on the batch call. On a retry round each sub-request first
// takes a token from the retry budget, if there is one; a group refused one is not sent.
func (e *batchRun) send(ctx context.Context, groups []group, retry bool) []subOutcome {
	items := e.call.Batch.Items
	outs := make([]subOutcome, len(groups))
	one := func(gi int) {
		g := groups[gi]
		if g.routeErr != nil {
			return
		}
		if retry && e.budget != nil && !e.budget.Withdraw() {
			outs[gi] = subOutcome{sub: nil, err: &StopError{Bound: runtime.BoundBudget, Err: runtime.ErrRetryBudgetExhausted}}
			return
		}
		guarded := true
		for _, i := range g.idx {
			guarded = guarded && items.Guarded(i)
		}
		sub := runtime.NewCall(e.call.Op, items.Key(g.idx[0]), items.SubRequest(g.idx), guarded, runtime.WithMaxAttempts(1))
		sub.Deadline = e.call.Deadline
		sub.Parent = e.call
		sub.Target = g.route
		resp, err := e.next(ctx, sub)
		outs[gi] = subOutcome{sub: &subCall{sub}, resp: resp, err: err}
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, BatchParallelism)
	for gi := range groups {
		if gi == len(groups)-1 {
			one(gi) // the last in the caller's goroutine
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			growStack()
			one(gi)
		}()
	}
	wg.Wait()
	for gi, o := range outs {
		if groups[gi].routeErr != nil || o.sub == nil {
			continue // not sent
		}
		e.call.Batch.Stats.SubRequests++
		if a := o.sub.Last(); a != nil {
			rec := *a
			rec.N = len(e.call.Attempts) + 1
			e.call.Attempts = append(e.call.Attempts, rec)
			if a.Answered {
				e.epoch = max(e.epoch, a.AnswerEpoch)
			}
		}
		e.call.Stats.RefreshesRequested += o.sub.Stats.RefreshesRequested
		e.call.Stats.RefreshesPerformed += o.sub.Stats.RefreshesPerformed
	}
	return outs
}

// judge records item i's attempt (the j-th item of group g, whose sub-request ended as o)
// in its history, unless none was made (the sub-request was stopped before it was sent),
// and returns the attempt's class and, when the item ends here without an answer, its
// final cause.
func (e *batchRun) judge(g group, o *subOutcome, j, i int) (runtime.Class, error) {
	var a runtime.Attempt
	if g.routeErr != nil {
		a = runtime.Attempt{Node: runtime.NoNode, Err: g.routeErr, Class: runtime.RefreshRetry}
		if rt, ok := errors.AsType[*runtime.PartitionError](g.routeErr); ok {
			a.MapEpoch = rt.Epoch
		}
		return e.record(i, &a), nil
	}
	sa := o.sub.lastAttempt()
	if sa == nil {
		err := o.err
		if ce, ok := errors.AsType[*runtime.CallError](err); ok && len(ce.Attempts) == 0 {
			// The retry layer ended the sub-request before its attempt (the context had
			// ended, or the deadline passed): the item ends the same way, with its bound
			// and cause, not with a call error inside its own.
			err = &StopError{Bound: ce.Bound, Err: ce.Err}
		}
		if err == nil {
			err = errNoOutcome
		}
		return runtime.Fatal, err
	}
	a = *sa
	if a.Answered && o.resp != nil {
		if o.recordErr != nil {
			a.Class, a.Err = runtime.Fatal, o.recordErr
			return e.record(i, &a), o.recordErr
		}
		a.Status, a.Class, a.Err = o.statuses[j], e.call.Op.Statuses.Class(int64(o.statuses[j])), nil
		if a.Class == runtime.Fatal {
			a.Err = runtime.NewStatusError(e.call.Op.Statuses, a.Status)
			return e.record(i, &a), a.Err
		}
		if len(e.hist[i]) == 0 {
			return e.first(i, &a), nil
		}
		return e.record(i, &a), nil
	}
	if errors.Is(a.Err, runtime.ErrInDoubt) && e.call.Batch.Items.Guarded(i) {
		// The sub-request is in doubt as a whole, but a replay of this item comes back
		// Conflict (R9): retry it like any failure that calls for a refresh.
		a.Class = runtime.RefreshRetry
	}
	if a.Class == runtime.Retry || a.Class == runtime.RefreshRetry {
		return e.record(i, &a), nil
	}
	err := a.Err
	if err == nil {
		err = o.err
	}
	return e.record(i, &a), err
}

// record appends a to item i's attempts, numbered, and returns its class.
func (e *batchRun) record(i int, a *runtime.Attempt) runtime.Class {
	a.N = len(e.hist[i]) + 1
	e.hist[i] = append(e.hist[i], *a)
	return a.Class
}

// first makes a, an answered attempt without an error, item i's first attempt, sharing the
// record with the items of the same sub-request answered with the same status: a batch's
// items cost a record per status per owner, not one each.
func (e *batchRun) first(i int, a *runtime.Attempt) runtime.Class {
	a.N = 1
	for k := e.sharedFrom; k < len(e.shared); k++ {
		if s := &e.shared[k]; s.Status == a.Status && s.Class == a.Class {
			e.hist[i] = e.shared[k : k+1 : k+1]
			return a.Class
		}
	}
	if len(e.shared) == cap(e.shared) {
		// A new array; the histories already made keep the old one.
		e.shared = append(make([]runtime.Attempt, 0, max(4, 2*cap(e.shared))), e.shared[e.sharedFrom:]...)
		e.sharedFrom = 0
	}
	e.shared = append(e.shared, *a)
	k := len(e.shared) - 1
	e.hist[i] = e.shared[k : k+1 : k+1]
	return a.Class
}

// between applies the single-key rules between rounds to the pending items: the bounds,
// one backoff, one shared refresh. It returns why the call stops, or nil to go on.
func (e *batchRun) between(ctx context.Context, round, limit int, pending []int) *StopError {
	if err := ctx.Err(); err != nil {
		return stopForContext(ctx, err)
	}
	if round >= limit {
		return &StopError{Bound: runtime.BoundAttempts}
	}
	deadline := e.call.Deadline
	if !beforeDeadline(e.clock, deadline) {
		return &StopError{Bound: runtime.BoundDeadline}
	}
	now := e.clock.Now()
	var refresh bool
	var d time.Duration
	var evidence int64
	for _, i := range pending {
		last := &e.hist[i][len(e.hist[i])-1]
		if !AtOnce(last) {
			d = max(d, Delay(e.p, round, SlowFactor(e.p, e.call, last), now, deadline))
		}
		if last.Class == runtime.RefreshRetry {
			refresh = true
			if last.Answered {
				evidence = max(evidence, last.AnswerEpoch)
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
	if refresh && e.r != nil {
		res := refreshBefore(ctx, e.clock, deadline, e.r, evidence)
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

// growStack gives the goroutine that calls it first (a sub-request's) the stack the layers
// below a sub-request use, at once. A goroutine starts with a small stack, and those layers
// (retry, the transport, the Thrift codec, the socket) would grow it several times, each
// growth a copy of every frame on it; taken here, with one frame on it, it is one small
// copy. 8 KiB of frame makes the runtime give the goroutine a 16 KiB stack.
func growStack() byte {
	var b [8 << 10]byte
	return touchLast(b[:])
}

// touchLast keeps growStack's frame from being optimised away.
//
//go:noinline
func touchLast(b []byte) byte { return b[len(b)-1] }
