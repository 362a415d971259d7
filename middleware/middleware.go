package middleware

import (
	"context"
	"slices"

	"github.com/clustron/zaris-go/runtime"
)

// Handler handles one call: the transport at the bottom of a stack, or a stack of middleware
// around it. A Handler returns either a response or an error; the call it is given records
// what happened (attempts, classes, stats) for the layers above it to read.
type Handler func(ctx context.Context, call *runtime.Call) (runtime.Response, error)

// Middleware wraps a Handler in one concern (classification, backoff, logging, ...) and
// returns the wrapped Handler. It is applied once, when a stack is built; the Handler it
// returns runs on every call and must be safe for concurrent use.
type Middleware func(next Handler) Handler

// Chain composes mw into one Middleware. The first listed is the outermost: it sees a call
// first and its outcome last. Nil entries are skipped. Chain copies mw, so later changes to
// the slice do not affect the result.
func Chain(mw ...Middleware) Middleware {
	mw = slices.Clone(mw)
	return func(next Handler) Handler {
		for i := len(mw) - 1; i >= 0; i-- {
			if mw[i] != nil {
				next = mw[i](next)
			}
		}
		return next
	}
}

// ForOps applies mw only to calls of the given operations and passes every other call
// straight to the next handler. Pass the generated operation descriptors (for example
// zarisclient.OpPut), so that naming an operation is checked by the compiler; a call matches
// an operation when its Op is the same descriptor or has the same name.
func ForOps(mw Middleware, ops ...*runtime.Op) Middleware {
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
