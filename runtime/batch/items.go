package batch

import (
	"fmt"

	"github.com/clustron/zaris-go/runtime"
)

// typedItems is runtime.BatchItems over a typed request. Record may run concurrently for
// disjoint item sets; each item's slot is written by one sub-request at a time.
type typedItems[Req, Item, Resp, Res any] struct {
	spec    *Spec[Req, Item, Resp, Res]
	req     Req
	items   []Item
	results []Res
	set     []bool
	status  func(runtime.Response) runtime.Status // the operation's Op.Status
	// ok and unanswered are the statuses of the operation's multi-key roles (StatusRoles):
	// a response whose items were judged one by one, and an item no node answered.
	ok, unanswered runtime.Status
}

func (b *typedItems[Req, Item, Resp, Res]) all() []int {
	idx := make([]int, len(b.items))
	for i := range idx {
		idx[i] = i
	}
	return idx
}

func (b *typedItems[Req, Item, Resp, Res]) Len() int { return len(b.items) }
func (b *typedItems[Req, Item, Resp, Res]) Key(i int) []byte {
	k, _ := b.spec.Key(b.items[i])
	return k
}

func (b *typedItems[Req, Item, Resp, Res]) Invalid(i int) bool {
	k, ok := b.spec.Key(b.items[i])
	return !ok || len(k) == 0
}

func (b *typedItems[Req, Item, Resp, Res]) Guarded(i int) bool { return b.spec.Guarded(b.items[i]) }

func (b *typedItems[Req, Item, Resp, Res]) Size(i int) int {
	if b.spec.Size == nil {
		return 0
	}
	return b.spec.Size(b.items[i])
}

func (b *typedItems[Req, Item, Resp, Res]) SubRequest(idx []int) any {
	sub := make([]Item, len(idx))
	for j, i := range idx {
		sub[j] = b.items[i]
	}
	return b.spec.Request(b.req, sub)
}

func (b *typedItems[Req, Item, Resp, Res]) Record(resp runtime.Response, idx []int) ([]runtime.Status, error) {
	typed, ok := resp.(Resp)
	if !ok {
		return nil, fmt.Errorf("%w: reply of type %T", runtime.ErrNoResponse, resp)
	}
	statuses := make([]runtime.Status, len(idx))
	if s := b.status(resp); s != b.ok {
		for j, i := range idx {
			statuses[j] = s
			b.results[i], b.set[i] = b.spec.Result(s), true
		}
		return statuses, nil
	}
	results := b.spec.Results(typed)
	if len(results) != len(idx) {
		return nil, fmt.Errorf("%w: reply carries %d results for %d items", runtime.ErrNoResponse, len(results), len(idx))
	}
	for j := range idx {
		s, ok := b.spec.Status(results[j])
		if !ok {
			return nil, fmt.Errorf("%w: reply carries no result for item %d", runtime.ErrNoResponse, idx[j])
		}
		statuses[j] = s
	}
	for j, i := range idx {
		b.results[i], b.set[i] = results[j], true
	}
	return statuses, nil
}

func (b *typedItems[Req, Item, Resp, Res]) Response(epoch int64) runtime.Response {
	out := make([]Res, len(b.results))
	for i, r := range b.results {
		if b.set[i] {
			out[i] = r
		} else {
			out[i] = b.spec.Result(b.unanswered)
		}
	}
	resp := b.spec.Response(out, epoch)
	if r, ok := any(resp).(runtime.Response); ok {
		return r
	}
	return nil
}
