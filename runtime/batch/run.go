package batch

import (
	"context"
	"fmt"

	"github.com/clustron/zaris-go/runtime"
)

// MaxItems is the most items one multi-key request may carry. The typed client refuses a
// larger batch with runtime.ErrInvalidBatch before sending anything; the reference store
// answers one with the response status InvalidRequest.
const MaxItems = 1000

// Spec describes one multi-key operation to the batch engine: how to read the items of
// its request, build a sub-request from some of them, and read the per-item results of a
// sub-response. zarisgen fills one per multi-key operation from the IDL annotations
// (zaris.routing = "items[].key", zaris.results, zaris.guards); every field but Size is
// required.
type Spec[Req, Item, Resp, Res any] struct {
	// Items returns the request's items.
	Items func(req Req) []Item
	// Key returns an item's routing key; false for a missing (nil) item.
	Key func(item Item) ([]byte, bool)
	// Guarded reports whether a replay of the item comes back Conflict (rule R9).
	Guarded func(item Item) bool
	// Request returns a copy of req that carries items instead of req's own.
	Request func(req Req, items []Item) Req
	// Results returns a response's per-item results, one per item of its request.
	Results func(resp Resp) []Res
	// Status returns a result's status; false for a missing (nil) result.
	Status func(result Res) (runtime.Status, bool)
	// Result returns a result that carries only status, for an item the node did not judge
	// (the whole sub-request was answered with one status) or that got no answer.
	Result func(status runtime.Status) Res
	// Response returns the merged response: status Ok, results in request order, and epoch.
	Response func(results []Res, epoch int64) Resp
	// Size, when set, returns about how many bytes an item adds to a request (see
	// runtime.BatchItems.Size); nil means the batch layer splits the items by owner only.
	Size func(item Item) int
}

// Run runs one multi-key call: it checks the batch (runtime.ErrInvalidBatch for no items or
// more than MaxItems), builds a runtime.Call of op carrying the batch, and hands it to h, the
// client's stack, whose batch layer splits it by owner and retries churn per item. It
// returns the merged response and each item's error; the error it returns is non-nil only
// when no item got an answer, or when the batch was refused (then with a nil result). The
// typed client calls it.
func Run[Req, Item, Resp, Res any](ctx context.Context, h func(context.Context, *runtime.Call) (runtime.Response, error),
	op *runtime.Op, spec *Spec[Req, Item, Resp, Res], req Req, opts ...runtime.CallOption) (*Result[Resp], error) {
	items := spec.Items(req)
	switch {
	case len(items) == 0:
		return nil, fmt.Errorf("zaris: %s: %w: no items", op.Name, runtime.ErrInvalidBatch)
	case len(items) > MaxItems:
		return nil, fmt.Errorf("zaris: %s: %w: %d items, at most %d", op.Name, runtime.ErrInvalidBatch, len(items), MaxItems)
	}
	roles, ok := op.Statuses.Roles()
	if !ok {
		return nil, fmt.Errorf("zaris: %s: the operation's status table (runtime.Op.Statuses) has no multi-key roles", op.Name)
	}
	b := &typedItems[Req, Item, Resp, Res]{spec: spec, req: req, items: items, results: make([]Res, len(items)), set: make([]bool, len(items)),
		status: op.Status, ok: runtime.Status(roles.Ok), unanswered: runtime.Status(roles.Unanswered)}
	for i := range items {
		if b.Invalid(i) {
			b.results[i], b.set[i] = spec.Result(runtime.Status(roles.Invalid)), true
		}
	}
	call := runtime.NewCall(op, nil, req, false, opts...)
	call.Batch = &runtime.Batch{Items: b}
	resp, err := h(ctx, call)
	if !call.Batch.Ran {
		// No batch layer in the stack: the whole request went as one, and an item whose
		// status is not an answer is an item without one.
		errs := make([]error, len(items))
		var statuses []runtime.Status // one per item when err is nil
		switch {
		case resp != nil:
			var rerr error
			if statuses, rerr = b.Record(resp, b.all()); err == nil {
				err = rerr
			}
		case err == nil:
			err = fmt.Errorf("zaris: %s: %w: the stack returned neither a reply nor an error", op.Name, runtime.ErrNoResponse)
		}
		for i := range errs {
			switch {
			case err != nil:
				errs[i] = err
			case !op.Statuses.IsAnswer(int64(statuses[i])):
				errs[i] = runtime.NewStatusError(op.Statuses, statuses[i])
			}
		}
		call.Batch.Errs = errs
	}
	res := &Result[Resp]{Errs: call.Batch.Errs}
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
