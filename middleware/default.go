package middleware

import (
	"github.com/clustron/zaris-go/runtime"
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
	clock := cfg.Clock
	if clock == nil {
		clock = runtime.SystemClock
	}
	return stack(cfg, clock, refresher)(invoke)
}

// ForEngine returns the default stack around the engine e: Default(e.Invoke,
// e.Refresher(), e.Config()). It is the stack the generated zarisclient.Dial builds.
func ForEngine(e *runtime.Engine) Handler {
	return Default(e.Invoke, e.Refresher(), e.Config())
}

// stack is the one place the default order is written down.
func stack(cfg runtime.Config, clock runtime.Clock, refresher MapRefresher) Middleware {
	p := cfg.Retry
	var attempt []Middleware
	if cfg.RetryBudget != nil {
		attempt = append(attempt, Budget(cfg.RetryBudget))
	}
	sleeper := sleepUntilClosed(clock, refresher)
	attempt = append(attempt,
		Backoff(p, sleeper),
		RefreshOnMoved(refresher, clock),
		Classify(cfg.Classifiers...),
	)
	attempt = append(attempt, cfg.AttemptMiddleware...)

	router, _ := refresher.(BatchRouter)
	call := append([]Middleware(nil), cfg.CallMiddleware...)
	call = append(call,
		Deadline(p, clock),
		Batches(p, sleeper, refresher, router, cfg.RetryBudget),
		Retry(p, clock, attempt...),
	)
	return Chain(call...)
}
