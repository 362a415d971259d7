package runtime

import (
	"sync"
	"time"

	"github.com/clustron/zaris-go/runtime/clustermap"
)

// Call is one application call on its way through the middleware stack: which operation, the
// routing key, the typed request (never modified), and what has happened to it so far. A Call
// belongs to one goroutine at a time; middleware may read and update it while it handles it.
//
// Middleware, classifiers and handlers must not keep a *Call, or a pointer into it (an
// *Attempt, the Attempts slice), after the handler they were given it in returns: the typed
// client of zarisclient.Dial reuses its Calls (CallPool) when its stack has no middleware
// or classifier of the user's, and may reuse them in more cases later. Copy what you need
// to keep, as CallError copies the attempts.
type Call struct {
	// Op describes the operation.
	Op *Op
	// Key is the routing key: the bytes of the request field named by Op.RoutingField.
	Key []byte
	// Request is the typed request, for example *zaris.PutRequest.
	Request any
	// Guarded reports whether the request carries one of Op.Guards, so a replay of it answers
	// Conflict rather than applying twice (rule R9).
	Guarded bool
	// Token is the request token the request carries (Op.TokenField), the same on every
	// attempt; zero when it carries none. With it, a sent and unanswered attempt may be
	// replayed while the store's dedup window lasts (rule B8).
	Token Token
	// MaxAttempts, when above 0, caps this call's attempts in place of the client's cap
	// (WithMaxAttempts).
	MaxAttempts int
	// Timeout, when not 0, bounds this call's total time in place of the client's request
	// timeout (WithTimeout); negative means no time is left.
	Timeout time.Duration
	// Deadline is the whole-call deadline set by the deadline layer; zero means none.
	Deadline time.Time
	// Start is when the call entered the stack, on the client's Clock: the deadline layer
	// sets it from the one reading it takes, and the layers below it (the retry layer's
	// elapsed time and first deadline check) use it instead of reading the clock again.
	// Zero until set; a layer that finds it zero reads the clock itself.
	Start time.Time
	// Attempts records every attempt so far, oldest first.
	Attempts []Attempt
	// Stats counts what the call cost besides its attempts.
	Stats CallStats
	// Batch is set on a multi-key call (see batch.Run) and nil otherwise.
	Batch *Batch
	// Parent is set on a sub-request of a multi-key call: the batch call it is part of.
	Parent *Call
	// Target, when set, is where the call's attempts go instead of Key's owner under the
	// current map: the batch layer sets it to the owner it split a sub-request's items for.
	Target *clustermap.Route

	attemptBuf [1]Attempt
	// attemptStart is when Engine.Invoke started the attempt in flight, on the wall clock.
	attemptStart time.Time
	// replay is what rule B8 keeps of a tokened call (dedup.go).
	replay replayWindow
	// debt is the reply the attempt in flight makes its node owe once written (suspect.go).
	debt debt
}

// NewCall returns a call of op for the request req routed by key, never reused. The typed
// client takes one per application call from its CallPool, which makes them with NewCall
// when it is nil.
func NewCall(op *Op, key []byte, req any, guarded bool, opts ...CallOption) *Call {
	c := &Call{Op: op, Key: key, Request: req, Guarded: guarded}
	c.Attempts = c.attemptBuf[:0]
	applyCallOptions(c, opts)
	return c
}

// CallPool reuses the Calls of a typed client, whose methods take a Call with Get and give
// it back with Put once the stack has returned, so that a call allocates none. Nothing may
// keep a Call it gave out past Put (see Call). A nil *CallPool reuses nothing: Get is
// NewCall and Put does nothing, for a client whose stack may keep its calls. Its methods
// are safe for concurrent use.
type CallPool struct{ calls sync.Pool }

// NewCallPool returns the CallPool of a typed client whose stack is the default one around
// an engine configured with cfg (middleware.ForEngine), or nil when middleware or
// classifiers of the user's (cfg.CallMiddleware, cfg.AttemptMiddleware, cfg.Classifiers)
// see its calls and so might keep them.
func NewCallPool(cfg Config) *CallPool {
	if len(cfg.CallMiddleware) > 0 || len(cfg.AttemptMiddleware) > 0 || len(cfg.Classifiers) > 0 {
		return nil
	}
	return &CallPool{}
}

// Get returns a call as NewCall does, reusing one given back with Put if there is one.
func (p *CallPool) Get(op *Op, key []byte, req any, guarded bool, opts ...CallOption) *Call {
	if p == nil {
		return NewCall(op, key, req, guarded, opts...)
	}
	c, _ := p.calls.Get().(*Call)
	if c == nil {
		c = new(Call)
	}
	c.Op, c.Key, c.Request, c.Guarded = op, key, req, guarded
	c.Attempts = c.attemptBuf[:0]
	applyCallOptions(c, opts)
	return c
}

// Put gives back c, which Get returned, once the handler it went through has returned;
// everything it held is dropped. c must not be used after.
func (p *CallPool) Put(c *Call) {
	if p == nil {
		return
	}
	*c = Call{}
	p.calls.Put(c)
}

// StartAttempt records the start of a new attempt and returns it for the layers below to fill in.
func (c *Call) StartAttempt() *Attempt {
	c.Attempts = append(c.Attempts, Attempt{N: len(c.Attempts) + 1, Node: clustermap.NoNode})
	return &c.Attempts[len(c.Attempts)-1]
}

// Current returns the attempt in flight, starting the first one if none has started (as when
// the call runs through a stack without a retry layer).
func (c *Call) Current() *Attempt {
	if len(c.Attempts) == 0 {
		return c.StartAttempt()
	}
	return &c.Attempts[len(c.Attempts)-1]
}

// Last returns the most recent attempt, or nil before the first one.
func (c *Call) Last() *Attempt {
	if len(c.Attempts) == 0 {
		return nil
	}
	return &c.Attempts[len(c.Attempts)-1]
}

// Previous returns the attempt before the current one, or nil before the second attempt.
func (c *Call) Previous() *Attempt {
	if len(c.Attempts) < 2 {
		return nil
	}
	return &c.Attempts[len(c.Attempts)-2]
}

// Earlier returns the attempts before the current one, oldest first: empty before the
// second attempt. The slice shares the call's record.
func (c *Call) Earlier() []Attempt {
	return c.Attempts[:max(len(c.Attempts)-1, 0)]
}

// DropAttempt forgets the current attempt, one that was never made (an attempt-level layer
// stopped the call before it was sent); it does nothing before the first attempt.
func (c *Call) DropAttempt() {
	if len(c.Attempts) > 0 {
		c.Attempts = c.Attempts[:len(c.Attempts)-1]
	}
}

// CallStats counts the work a call caused besides its attempts.
type CallStats struct {
	// RefreshesRequested counts map refreshes the call asked for.
	RefreshesRequested int
	// RefreshesPerformed counts those that fetched a map (not coalesced or debounced away).
	RefreshesPerformed int
	// Backoff is the time spent waiting between attempts.
	Backoff time.Duration
	// OwnerWaits counts the waits for a map that moves an owner the call could not reach
	// (rule B7); each is also a refresh requested.
	OwnerWaits int
	// OwnerWait is the time spent in them, which stands in for backoff.
	OwnerWait time.Duration
}

// CallOption is a per-call override of the client's configuration (WithMaxAttempts,
// WithTimeout); pass them to the typed client's methods. The zero CallOption changes nothing.
type CallOption struct{ apply func(*Call) }

func applyCallOptions(c *Call, opts []CallOption) {
	for _, o := range opts {
		if o.apply != nil {
			o.apply(c)
		}
	}
}

// WithMaxAttempts caps this call at n attempts in place of the client's cap; n < 1 leaves
// the client's cap. It cannot raise the cap above one when retries are disabled (rule R7).
// A CallOption is not an Option: the client-wide cap is WithDefaultMaxAttempts.
func WithMaxAttempts(n int) CallOption {
	return CallOption{func(c *Call) { c.MaxAttempts = n }}
}

// WithTimeout bounds this call's total time to d, in place of the client's request timeout.
// As with context.WithTimeout, d <= 0 leaves no time: the call ends with its deadline
// passed, before any attempt. The client-wide bound is WithRequestTimeout.
func WithTimeout(d time.Duration) CallOption {
	if d <= 0 {
		d = -1
	}
	return CallOption{func(c *Call) { c.Timeout = d }}
}
