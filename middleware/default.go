package middleware

import (
	"context"

	"github.com/clustron/zaris-go/runtime"
)

// Option configures the default stack built by Default.
type Option interface {
	apply(*options)
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

type options struct {
	callMW      []Middleware
	attemptMW   []Middleware
	budget      *RetryBudget
	classifiers []Classifier
}

// WithCallMiddleware adds call-level middleware in front of the deadline and retry layers:
// it runs once per call and sees the call's final outcome (the answer, or the
// *runtime.CallError with every attempt). The first listed is the outermost; repeated
// options append. Wrap one in ForOps to apply it to some operations only.
func WithCallMiddleware(mw ...Middleware) Option {
	return optionFunc(func(o *options) { o.callMW = append(o.callMW, mw...) })
}

// WithAttemptMiddleware adds attempt-level middleware between Classify and the transport: it
// runs once per attempt and sees the transport's raw outcome, before it is classified (the
// attempt's Node, Addr, Sent and Status are filled in when it returns). The first listed is
// the outermost; repeated options append.
func WithAttemptMiddleware(mw ...Middleware) Option {
	return optionFunc(func(o *options) { o.attemptMW = append(o.attemptMW, mw...) })
}

// WithRetryBudget charges every call to b (rule B3; see Budget). Share one budget between
// all the stacks of one client. Without this option retries are bounded only by rule R4.
func WithRetryBudget(b *RetryBudget) Option {
	return optionFunc(func(o *options) { o.budget = b })
}

// WithClassifiers replaces DefaultClassifiers with c. To extend the default chain, pass
// your classifiers followed by DefaultClassifiers.
func WithClassifiers(c ...Classifier) Option {
	return optionFunc(func(o *options) { o.classifiers = append([]Classifier(nil), c...) })
}

// Default returns the client's default stack around invoke, the transport that makes one
// attempt (runtime.Cluster.Invoke). It is built once, here; calls only run it. The order,
// outermost first:
//
//	call-level middleware (WithCallMiddleware)
//	Deadline(cfg.Retry, clock)
//	Batches(cfg.Retry, clock, refresher, refresher as a BatchRouter, budget) (multi-key calls only)
//	Retry(cfg.Retry, clock,
//	    Budget (WithRetryBudget only),
//	    Backoff(cfg.Retry, clock),
//	    RefreshOnMoved(refresher, clock),
//	    Classify(classifiers...),
//	    attempt-level middleware (WithAttemptMiddleware))
//	invoke
//
// clock is cfg.Clock, or runtime.SystemClock when unset. invoke and refresher must not be
// nil. The returned Handler is safe for concurrent use when invoke, refresher and the added
// middleware are.
func Default(invoke Handler, refresher MapRefresher, cfg runtime.Config, opts ...Option) Handler {
	if invoke == nil || refresher == nil {
		panic("middleware: Default needs a transport and a map refresher")
	}
	var o options
	for _, opt := range opts {
		opt.apply(&o)
	}
	clock := cfg.Clock
	if clock == nil {
		clock = runtime.SystemClock
	}
	return stack(&o, cfg.Retry, clock, refresher)(invoke)
}

// stack is the one place the default order is written down.
func stack(o *options, p runtime.RetryPolicy, clock runtime.Clock, refresher MapRefresher) Middleware {
	var attempt []Middleware
	if o.budget != nil {
		attempt = append(attempt, Budget(o.budget))
	}
	attempt = append(attempt,
		Backoff(p, clock),
		RefreshOnMoved(refresher, clock),
		Classify(o.classifiers...),
	)
	attempt = append(attempt, o.attemptMW...)

	router, _ := refresher.(BatchRouter)
	call := append([]Middleware(nil), o.callMW...)
	call = append(call,
		Deadline(p, clock),
		Batches(p, clock, refresher, router, o.budget),
		Retry(p, clock, attempt...),
	)
	return Chain(call...)
}

// Engine is what the client engine (runtime.Cluster) offers the default stack: the
// transport that makes one attempt, and the configuration.
type Engine interface {
	// Invoke makes one attempt of call (see Handler).
	Invoke(ctx context.Context, call *runtime.Call) (runtime.Response, error)
	// Config returns the engine's validated configuration.
	Config() runtime.Config
}

// ForEngine returns Default(e.Invoke, refresher, e.Config(), opts...): the default stack
// around a client engine and its shared map refresher.
func ForEngine(e Engine, refresher MapRefresher, opts ...Option) Handler {
	return Default(e.Invoke, refresher, e.Config(), opts...)
}
