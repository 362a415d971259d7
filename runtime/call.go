package runtime

import "time"

// Call is one application call on its way through the middleware stack: which operation, the
// routing key, the typed request (never modified), and what has happened to it so far. A Call
// belongs to one goroutine at a time; middleware may read and update it while it handles it.
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
	// Options are the per-call overrides given to the typed method.
	Options CallOptions
	// Deadline is the whole-call deadline set by the deadline layer; zero means none.
	Deadline time.Time
	// Attempts records every attempt so far, oldest first.
	Attempts []Attempt
	// Stats counts what the call cost besides its attempts.
	Stats CallStats
	// Batch is set on a multi-key call (see RunBatch) and nil otherwise.
	Batch *Batch
	// Parent is set on a sub-request of a multi-key call: the batch call it is part of.
	Parent *Call
	// Target, when set, is where the call's attempts go instead of Key's owner under the
	// current map: the batch layer sets it to the owner it split a sub-request's items for.
	Target *Route

	attemptBuf [1]Attempt
	// attemptStart is when Engine.Invoke started the attempt in flight, on the wall clock.
	attemptStart time.Time
	// debt is the reply the attempt in flight makes its node owe once written (suspect.go).
	debt debt
}

// NewCall returns a call of op for the request req routed by key. The typed client builds one
// per application call.
func NewCall(op *Op, key []byte, req any, guarded bool, opts ...CallOption) *Call {
	c := &Call{Op: op, Key: key, Request: req, Guarded: guarded}
	c.Attempts = c.attemptBuf[:0]
	for _, o := range opts {
		o(&c.Options)
	}
	return c
}

// StartAttempt records the start of a new attempt and returns it for the layers below to fill in.
func (c *Call) StartAttempt() *Attempt {
	c.Attempts = append(c.Attempts, Attempt{N: len(c.Attempts) + 1, Node: NoNode})
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

// NoNode is the node id of an attempt that never chose a node (for example, the segment had
// no owner in the map).
const NoNode int32 = -1

// Attempt is what happened on one attempt of a call.
type Attempt struct {
	// N is the attempt's number, starting at 1.
	N int
	// Node is the id of the node the attempt was routed to, or NoNode.
	Node int32
	// Addr is that node's host:port.
	Addr string
	// MapEpoch is the epoch of the client's cluster map the attempt was routed with.
	MapEpoch int64
	// Answered reports whether a response arrived; Status and AnswerEpoch are set only then.
	Answered bool
	// Status is the response's status.
	Status Status
	// AnswerEpoch is the answering node's map epoch (the response's mapEpoch, rule B1).
	AnswerEpoch int64
	// Err is the attempt's error when no response arrived.
	Err error
	// Sent reports whether the request may have reached the node. False means it provably
	// never left (no owner, dial refused, no connection, still queued on a pipelined
	// connection, refused as too large), so replaying it is always safe.
	Sent bool
	// Class is how the classify layer judged the outcome.
	Class Class
	// Duration is how long the attempt took on the wire.
	Duration time.Duration
}

// Class is the verdict on one attempt's outcome, which the retry layer acts on.
type Class int

const (
	// Unclassified is an outcome no classifier has judged yet.
	Unclassified Class = iota
	// Answer is a final outcome for the application: a status of the IDL's zaris.answer class.
	Answer
	// Retry is a transient outcome retried after backoff without a map refresh: a status of
	// the IDL's zaris.retry class.
	Retry
	// RefreshRetry is an outcome that means the client's map may be stale: retried after a
	// shared map refresh (a status of the IDL's zaris.refresh class, transport failures).
	RefreshRetry
	// Fatal is an error returned at once: the caller's context ended, an application
	// exception, an in-doubt non-idempotent write, a bug.
	Fatal
)

// String names the class.
func (c Class) String() string {
	switch c {
	case Answer:
		return "answer"
	case Retry:
		return "retry"
	case RefreshRetry:
		return "refresh-retry"
	case Fatal:
		return "fatal"
	}
	return "unclassified"
}

// CallStats counts the work a call caused besides its attempts.
type CallStats struct {
	// RefreshesRequested counts map refreshes the call asked for.
	RefreshesRequested int
	// RefreshesPerformed counts those that fetched a map (not coalesced or debounced away).
	RefreshesPerformed int
	// Backoff is the time spent waiting between attempts.
	Backoff time.Duration
}

// CallOptions are per-call overrides of the client's configuration. A zero field means "use
// the client's setting".
type CallOptions struct {
	// MaxAttempts caps this call's attempts.
	MaxAttempts int
	// Timeout bounds this call's total time, like the client's request timeout; negative
	// means no time is left (WithTimeout of zero or less).
	Timeout time.Duration
}

// CallOption sets a per-call override; pass them to the typed client's methods.
type CallOption func(*CallOptions)

// WithMaxAttempts caps this call at n attempts in place of the client's cap; n < 1 leaves
// the client's cap. It cannot raise the cap above one when retries are disabled (rule R7).
// A CallOption is not an Option: the client-wide cap is WithDefaultMaxAttempts.
func WithMaxAttempts(n int) CallOption {
	return func(o *CallOptions) { o.MaxAttempts = n }
}

// WithTimeout bounds this call's total time to d, in place of the client's request timeout.
// As with context.WithTimeout, d <= 0 leaves no time: the call ends with its deadline
// passed, before any attempt. The client-wide bound is WithRequestTimeout.
func WithTimeout(d time.Duration) CallOption {
	if d <= 0 {
		d = -1
	}
	return func(o *CallOptions) { o.Timeout = d }
}
