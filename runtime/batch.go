package runtime

import (
	"context"
	"fmt"
)

// MaxBatchItems is the most items one multi-key request may carry. The typed client refuses a
// larger batch with ErrInvalidBatch before sending anything; the reference store answers one
// with the response status InvalidRequest.
const MaxBatchItems = 1000

// BatchSpec describes one multi-key operation to the batch engine: how to read the items of
// its request, build a sub-request from some of them, and read the per-item results of a
// sub-response. zarisgen fills one per multi-key operation from the IDL annotations
// (zaris.routing = "items[].key", zaris.results, zaris.guards); every field but Size is
// required.
type BatchSpec[Req, Item, Resp, Result any] struct {
	// Items returns the request's items.
	Items func(req Req) []Item
	// Key returns an item's routing key; false for a missing (nil) item.
	Key func(item Item) ([]byte, bool)
	// Guarded reports whether a replay of the item comes back Conflict (rule R9).
	Guarded func(item Item) bool
	// Request returns a copy of req that carries items instead of req's own.
	Request func(req Req, items []Item) Req
	// Results returns a response's per-item results, one per item of its request.
	Results func(resp Resp) []Result
	// Status returns a result's status; false for a missing (nil) result.
	Status func(result Result) (Status, bool)
	// Result returns a result that carries only status, for an item the node did not judge
	// (the whole sub-request was answered with one status) or that got no answer.
	Result func(status Status) Result
	// Response returns the merged response: status Ok, results in request order, and epoch.
	Response func(results []Result, epoch int64) Resp
	// Size, when set, returns about how many bytes an item adds to a request (see
	// BatchItems.Size); nil means the batch layer splits the items by owner only.
	Size func(item Item) int
}

// BatchItems is the batch engine's view of one multi-key call, whatever its types. The
// engine never sees the typed request; RunBatch builds one over a BatchSpec.
type BatchItems interface {
	// Len returns the number of items.
	Len() int
	// Key returns item i's routing key.
	Key(i int) []byte
	// Invalid reports whether item i is missing or has an empty key: RunBatch answers it
	// InvalidRequest without sending it.
	Invalid(i int) bool
	// Guarded reports whether a replay of item i comes back Conflict.
	Guarded(i int) bool
	// SubRequest returns a request carrying the items idx, in that order.
	SubRequest(idx []int) any
	// Record takes a sub-response to SubRequest(idx): it keeps each item's result and returns
	// their statuses. A response whose own status is not Ok gives every item that status. It
	// fails when resp is not of the operation's type or its results do not match idx.
	Record(resp Response, idx []int) ([]Status, error)
	// Response returns the merged response, with epoch as its map epoch. An item without a
	// recorded result gets one with status Unavailable.
	Response(epoch int64) Response
	// Size returns about how many bytes item i adds to a request (its keys' and values'
	// lengths and a few bytes per field), or 0 when not known. The batch layer splits an
	// owner's items into sub-requests of a bounded size by it, so a batch of large values
	// fits the node's message limit.
	Size(i int) int
}

// Batch is what a multi-key Call carries besides the ordinary fields: its items, and what
// the batch engine found per item. Call-level middleware sees it once per call.
type Batch struct {
	// Items are the call's items.
	Items BatchItems
	// Errs has one entry per item once the engine has run: nil for an item that got an
	// answer (Ok, NotFound, Conflict, InvalidRequest), else the item's error: a *CallError
	// with the item's own attempts, wrapping ErrInDoubt for an item that was sent, got no
	// reply and is not replayed (rule B2).
	Errs []error
	// Attempts has, once the engine has run, each item's own attempts, oldest first: an
	// item's attempt is its sub-request's, with the item's status and class. Items one
	// sub-request answered with the same status share the record of that first attempt,
	// so the histories are to be read, not written.
	Attempts [][]Attempt
	// Stats counts the engine's work.
	Stats BatchStats
	// Ran is set by the batch engine when it has handled the call.
	Ran bool
}

// BatchStats counts what a multi-key call cost.
type BatchStats struct {
	// Rounds counts the rounds of sub-requests: 1 when no item met churn.
	Rounds int
	// SubRequests counts the sub-requests sent (or tried): per round, one per owner, or
	// more when the batch layer cuts an owner's items (by size, or in halves after a
	// sub-request failed on its connection).
	SubRequests int
	// ItemsRetried counts item retries: an item sent in three rounds counts 2.
	ItemsRetried int
}

// BatchResult is what a typed multi-key method returns: the merged response and each
// item's error.
type BatchResult[Resp any] struct {
	// Response carries one result per item, in request order, and the newest map epoch
	// an answering node showed. An item that got no answer has the last status it met
	// (Unavailable if none).
	Response Resp
	// Errs has one entry per item: nil for an answered item, else its error (see Batch.Errs).
	Errs []error
}

// Err returns item i's error: nil when it got an answer.
func (r *BatchResult[Resp]) Err(i int) error {
	if i < 0 || i >= len(r.Errs) {
		return nil
	}
	return r.Errs[i]
}

// BatchError is the error of a multi-key call in which no item got an answer. It wraps each
// item's error, so errors.Is and errors.As find them.
type BatchError struct {
	// Op is the operation's name.
	Op string
	// Errs are the items' errors, in request order.
	Errs []error
}

// Error names the operation and the first item's error.
func (e *BatchError) Error() string {
	s := fmt.Sprintf("zaris: %s: none of %d items got an answer", e.Op, len(e.Errs))
	for _, err := range e.Errs {
		if err != nil {
			return s + ": " + err.Error()
		}
	}
	return s
}

// Unwrap returns the items' errors.
func (e *BatchError) Unwrap() []error {
	var errs []error
	for _, err := range e.Errs {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// RunBatch runs one multi-key call: it checks the batch (ErrInvalidBatch for no items or
// more than MaxBatchItems), builds a Call of op carrying the batch, and hands it to h, the
// client's stack, whose batch layer splits it by owner and retries churn per item. It
// returns the merged response and each item's error; the error it returns is non-nil only
// when no item got an answer, or when the batch was refused (then with a nil result). The
// typed client calls it.
func RunBatch[Req, Item, Resp, Result any](ctx context.Context, h func(context.Context, *Call) (Response, error),
	op *Op, spec *BatchSpec[Req, Item, Resp, Result], req Req, opts ...CallOption) (*BatchResult[Resp], error) {
	items := spec.Items(req)
	switch {
	case len(items) == 0:
		return nil, fmt.Errorf("zaris: %s: %w: no items", op.Name, ErrInvalidBatch)
	case len(items) > MaxBatchItems:
		return nil, fmt.Errorf("zaris: %s: %w: %d items, at most %d", op.Name, ErrInvalidBatch, len(items), MaxBatchItems)
	}
	roles, ok := op.Statuses.Roles()
	if !ok {
		return nil, fmt.Errorf("zaris: %s: the operation's status table (Op.Statuses) has no multi-key roles", op.Name)
	}
	b := &batchOf[Req, Item, Resp, Result]{spec: spec, req: req, items: items, results: make([]Result, len(items)), set: make([]bool, len(items)),
		statuses: op.Statuses, status: op.Status}
	for i := range items {
		if b.Invalid(i) {
			b.results[i], b.set[i] = spec.Result(Status(roles.Invalid)), true
		}
	}
	call := NewCall(op, nil, req, false, opts...)
	call.Batch = &Batch{Items: b}
	resp, err := h(ctx, call)
	if !call.Batch.Ran {
		// No batch layer in the stack: the whole request went as one, and an item whose
		// status is not an answer is an item without one.
		errs := make([]error, len(items))
		var statuses []Status // one per item when err is nil
		switch {
		case resp != nil:
			var rerr error
			if statuses, rerr = b.Record(resp, b.all()); err == nil {
				err = rerr
			}
		case err == nil:
			err = fmt.Errorf("zaris: %s: %w: the stack returned neither a reply nor an error", op.Name, ErrNoResponse)
		}
		for i := range errs {
			switch {
			case err != nil:
				errs[i] = err
			case !op.Statuses.IsAnswer(int64(statuses[i])):
				errs[i] = NewStatusError(op.Statuses, statuses[i])
			}
		}
		call.Batch.Errs = errs
	}
	res := &BatchResult[Resp]{Errs: call.Batch.Errs}
	if merged, ok := resp.(Resp); ok && call.Batch.Ran {
		res.Response = merged
	} else {
		var epoch int64
		if resp != nil {
			epoch = resp.GetMapEpoch()
		}
		res.Response, _ = b.Response(epoch).(Resp)
	}
	return res, err
}

// batchOf is BatchItems over a typed request. Record may run concurrently for disjoint
// item sets; each item's slot is written by one sub-request at a time.
type batchOf[Req, Item, Resp, Result any] struct {
	spec    *BatchSpec[Req, Item, Resp, Result]
	req     Req
	items   []Item
	results []Result
	set     []bool
	// statuses is the operation's status table, which has multi-key roles (see RunBatch).
	statuses *StatusTable
	status   func(Response) Status // the operation's Op.Status
}

func (b *batchOf[Req, Item, Resp, Result]) all() []int {
	idx := make([]int, len(b.items))
	for i := range idx {
		idx[i] = i
	}
	return idx
}

func (b *batchOf[Req, Item, Resp, Result]) Len() int { return len(b.items) }
func (b *batchOf[Req, Item, Resp, Result]) Key(i int) []byte {
	k, _ := b.spec.Key(b.items[i])
	return k
}

func (b *batchOf[Req, Item, Resp, Result]) Invalid(i int) bool {
	k, ok := b.spec.Key(b.items[i])
	return !ok || len(k) == 0
}

func (b *batchOf[Req, Item, Resp, Result]) Guarded(i int) bool { return b.spec.Guarded(b.items[i]) }

func (b *batchOf[Req, Item, Resp, Result]) Size(i int) int {
	if b.spec.Size == nil {
		return 0
	}
	return b.spec.Size(b.items[i])
}

func (b *batchOf[Req, Item, Resp, Result]) SubRequest(idx []int) any {
	sub := make([]Item, len(idx))
	for j, i := range idx {
		sub[j] = b.items[i]
	}
	return b.spec.Request(b.req, sub)
}

func (b *batchOf[Req, Item, Resp, Result]) Record(resp Response, idx []int) ([]Status, error) {
	typed, ok := resp.(Resp)
	if !ok {
		return nil, fmt.Errorf("%w: reply of type %T", ErrNoResponse, resp)
	}
	statuses := make([]Status, len(idx))
	if s := b.status(resp); int64(s) != b.statuses.roles.Ok {
		for j, i := range idx {
			statuses[j] = s
			b.results[i], b.set[i] = b.spec.Result(s), true
		}
		return statuses, nil
	}
	results := b.spec.Results(typed)
	if len(results) != len(idx) {
		return nil, fmt.Errorf("%w: reply carries %d results for %d items", ErrNoResponse, len(results), len(idx))
	}
	for j := range idx {
		s, ok := b.spec.Status(results[j])
		if !ok {
			return nil, fmt.Errorf("%w: reply carries no result for item %d", ErrNoResponse, idx[j])
		}
		statuses[j] = s
	}
	for j, i := range idx {
		b.results[i], b.set[i] = results[j], true
	}
	return statuses, nil
}

func (b *batchOf[Req, Item, Resp, Result]) Response(epoch int64) Response {
	out := make([]Result, len(b.results))
	for i, r := range b.results {
		if b.set[i] {
			out[i] = r
		} else {
			out[i] = b.spec.Result(Status(b.statuses.roles.Unanswered))
		}
	}
	resp := b.spec.Response(out, epoch)
	if r, ok := any(resp).(Response); ok {
		return r
	}
	return nil
}
