package middleware

import (
	"github.com/clustron/zaris-go/runtime"
	"github.com/clustron/zaris-go/runtime/clock"
)

// Default returns the client's default stack around invoke, the transport that makes one
// attempt (runtime.Engine.Invoke), configured by cfg: its retry policy and clock, and the
// middleware, retry budget and classifiers given by the runtime options. The order is the
// package doc's "The default stack". When refresher has a Done method (runtime.Refresher
// does: its channel closes with the client), a call waiting out a backoff ends at once with
// runtime.ErrClosed when it closes. invoke and refresher must not be nil; the Handler is
// safe for concurrent use when they and the added middleware are.
func Default(invoke Handler, refresher MapRefresher, cfg runtime.Config) Handler {
	if invoke == nil || refresher == nil {
		panic("middleware: Default needs a transport and a map refresher")
	}
	clock := orSystem(cfg.Clock)
	return stack(cfg, clock, refresher)(invoke)
}

// ForEngine returns the default stack around the engine e: Default(e.Invoke,
// e.Refresher(), e.Config()). It is the stack the generated zarisclient.Dial builds.
func ForEngine(e *runtime.Engine) Handler {
	return Default(e.Invoke, e.Refresher(), e.Config())
}

// layer is one middleware of the default stack, named as the package doc's diagram names it.
type layer struct {
	name string
	mw   Middleware // nil when the configuration leaves the layer out
}

// Names of the layers the user supplies, as the diagram names them.
const (
	callLevel    = "call-level middleware"
	attemptLevel = "attempt-level middleware"
)

// layers is the one place the default order is written down: the call-level layers,
// outermost first, the last of which (Retry) runs the attempt-level layers, also listed.
func layers(cfg runtime.Config, clock clock.Clock, refresher MapRefresher) (call, attempt []layer) {
	p := cfg.Retry
	var budget Middleware
	if cfg.RetryBudget != nil {
		budget = Budget(cfg.RetryBudget)
	}
	sleeper := sleepUntilClosed(clock, refresher)
	attempt = []layer{
		{"Budget", budget},
		{"Backoff", Backoff(p, sleeper)},
		{"RefreshOnMoved", RefreshOnMoved(refresher, p, clock)},
		{"Classify", Classify(cfg.Classifiers...)},
	}
	for _, mw := range cfg.AttemptMiddleware {
		attempt = append(attempt, layer{attemptLevel, mw})
	}

	router, _ := refresher.(BatchRouter)
	for _, mw := range cfg.CallMiddleware {
		call = append(call, layer{callLevel, mw})
	}
	call = append(call,
		layer{"Deadline", Deadline(p, clock)},
		layer{"Batches", Batches(p, sleeper, refresher, router, cfg.RetryBudget)},
		layer{"Retry", Retry(p, clock, middlewares(attempt)...)},
	)
	return call, attempt
}

// stack chains the default layers.
func stack(cfg runtime.Config, clock clock.Clock, refresher MapRefresher) Middleware {
	call, _ := layers(cfg, clock, refresher)
	return Chain(middlewares(call)...)
}

// middlewares returns the layers' middleware, leaving out those not configured.
func middlewares(ls []layer) []Middleware {
	out := make([]Middleware, 0, len(ls))
	for _, l := range ls {
		if l.mw != nil {
			out = append(out, l.mw)
		}
	}
	return out
}
