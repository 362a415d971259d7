package middleware

import (
	"context"
	"errors"
	"sync"

	"github.com/clustron/zaris-go/runtime"
	"github.com/clustron/zaris-go/runtime/clustermap"
)

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

// failedOnItsConnection reports whether a sub-request's attempt a was sent and failed on its
// connection (ErrTransport): a node closes the connection on a message over its limit, the
// reply to a MultiGet of large values included.
func failedOnItsConnection(a *runtime.Attempt) bool {
	return a != nil && a.Sent && !a.Answered && errors.Is(a.Err, runtime.ErrTransport)
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
		a = runtime.Attempt{Node: clustermap.NoNode, Err: g.routeErr, Class: runtime.RefreshRetry}
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
