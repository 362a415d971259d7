package middleware

import (
	"context"
	"slices"

	"github.com/clustron/zaris-go/runtime"
)

// Chain composes mw into one Middleware, the first listed outermost; see runtime.Chain.
func Chain(mw ...Middleware) Middleware { return runtime.Chain(mw...) }

// ForOps applies mw only to calls of the given operations and passes every other call
// straight to the next handler. Pass the generated operation descriptors (for example
// zarisclient.OpPut), so that naming an operation is checked by the compiler; a call matches
// an operation when its Op is the same descriptor or has the same name. A nil mw applies to
// nothing.
func ForOps(mw Middleware, ops ...*runtime.Op) Middleware {
	if mw == nil {
		return func(next Handler) Handler { return next }
	}
	names := make([]string, 0, len(ops))
	for _, op := range ops {
		if op != nil {
			names = append(names, op.Name)
		}
	}
	return func(next Handler) Handler {
		wrapped := mw(next)
		return func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
			if call.Op != nil && slices.Contains(names, call.Op.Name) {
				return wrapped(ctx, call)
			}
			return next(ctx, call)
		}
	}
}
