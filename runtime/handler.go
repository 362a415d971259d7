package runtime

import (
	"context"
	"slices"
)

// Handler handles one call: the transport at the bottom of a stack (Engine.Invoke), or a
// stack of middleware around it. It returns a response or an error; the call records what
// happened (attempts, classes, stats) for the layers above it to read.
type Handler func(ctx context.Context, call *Call) (Response, error)

// Middleware wraps a Handler in one concern and returns the wrapped Handler. It is applied
// once, when a stack is built; the Handler it returns runs on every call, must be safe for
// concurrent use, and must not keep the *Call past its return (see CallPool).
type Middleware func(next Handler) Handler

// Chain composes mw into one Middleware, the first listed outermost (it sees a call first
// and its outcome last). Nil entries are skipped; later changes to the slice do not
// affect the result.
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
