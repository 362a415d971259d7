package middleware

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/clustron/zaris-go/runtime"
)

// DefaultClassifiers is the chain Classify uses when given none: the caller's context, a
// closed client and a request too large to send first, then statuses (R1, R2, R8), Thrift
// application exceptions, an owner moved away (B6), the runtime's transport sentinels and Thrift transport and
// protocol exceptions (R3). Anything no classifier decides is Fatal. Copy it to extend it;
// do not modify it.
var DefaultClassifiers = []Classifier{
	CallerContext,
	ClientClosed,
	RequestTooLarge,
	StatusClass,
	ApplicationException,
	OwnerMoved,
	TransportFailure,
	ThriftTransport,
}

// CallerContext decides Fatal for an error that came back after the caller's context
// ended (cancelled, or past its deadline), whatever the error looks like: the caller has
// stopped waiting, so nothing is retried (R3). A per-attempt timeout does not end the
// call's context, so it is not matched here.
func CallerContext(o Outcome) (runtime.Class, bool) {
	if o.Err != nil && o.Ctx != nil && o.Ctx.Err() != nil {
		return runtime.Fatal, true
	}
	return runtime.Unclassified, false
}

// ClientClosed decides Fatal for an attempt that failed because the client was closed
// (runtime.ErrClosed): no retry can succeed.
func ClientClosed(o Outcome) (runtime.Class, bool) {
	if o.Err != nil && errors.Is(o.Err, runtime.ErrClosed) {
		return runtime.Fatal, true
	}
	return runtime.Unclassified, false
}

// RequestTooLarge decides Fatal for a request refused unsent because it is over the
// client's message limit (runtime.ErrRequestTooLarge): every retry would be refused alike.
func RequestTooLarge(o Outcome) (runtime.Class, bool) {
	if o.Err != nil && errors.Is(o.Err, runtime.ErrRequestTooLarge) {
		return runtime.Fatal, true
	}
	return runtime.Unclassified, false
}

// StatusClass decides an answered attempt by its status, as the status table of the IDL
// says (call.Op.Statuses, generated from the annotations on the status enum): an answer (R8),
// a status that means the map is stale (R1, R2: RefreshRetry) or a transient one (R1, R2:
// Retry). A status the table does not hold, or a call without a table, is Fatal rather than
// silently retried.
func StatusClass(o Outcome) (runtime.Class, bool) {
	if o.Err != nil || o.Response == nil {
		return runtime.Unclassified, false
	}
	if o.Call == nil || o.Call.Op == nil {
		return runtime.Fatal, true
	}
	return o.Call.Op.Statuses.Class(int64(o.Call.Op.Status(o.Response))), true
}

// ApplicationException decides Fatal for a Thrift application exception (unknown method,
// internal error, ...): the node answered that the request itself failed, so a replay
// would fail the same way (R3).
func ApplicationException(o Outcome) (runtime.Class, bool) {
	if o.Err == nil {
		return runtime.Unclassified, false
	}
	if _, ok := errors.AsType[thrift.TApplicationException](o.Err); ok {
		return runtime.Fatal, true
	}
	return runtime.Unclassified, false
}

// OwnerMoved decides Retry for an attempt ended because a newer map, already installed,
// names another owner for its segment (runtime.ErrOwnerMoved, rule B6): it needs no
// refresh, and Delay lets it go at once. Rule B2 still holds a sent, unsafe one in doubt.
func OwnerMoved(o Outcome) (runtime.Class, bool) {
	if o.Err != nil && errors.Is(o.Err, runtime.ErrOwnerMoved) {
		return runtime.Retry, true
	}
	return runtime.Unclassified, false
}

// TransportFailure decides RefreshRetry for the runtime's transport sentinels:
// ErrNodeUnavailable, ErrPartitionUnavailable, ErrTransport and ErrAttemptTimeout. Each
// may mean the map names the wrong owner, so the retry follows a map refresh (R3).
func TransportFailure(o Outcome) (runtime.Class, bool) {
	if o.Err == nil {
		return runtime.Unclassified, false
	}
	switch {
	case errors.Is(o.Err, runtime.ErrNodeUnavailable),
		errors.Is(o.Err, runtime.ErrPartitionUnavailable),
		errors.Is(o.Err, runtime.ErrTransport),
		errors.Is(o.Err, runtime.ErrAttemptTimeout):
		return runtime.RefreshRetry, true
	}
	return runtime.Unclassified, false
}

// ThriftTransport decides RefreshRetry for a Thrift transport or protocol exception that
// reached the middleware without a runtime sentinel, found by type (errors.As on
// thrift.TTransportException and thrift.TProtocolException, then the TException type) and
// never by message: over the JSON protocol a reset arrives as END_OF_FILE with its OS cause
// gone (R3). Compiled (IDL-declared) exceptions are Fatal.
func ThriftTransport(o Outcome) (runtime.Class, bool) {
	if o.Err == nil {
		return runtime.Unclassified, false
	}
	if _, ok := errors.AsType[thrift.TTransportException](o.Err); ok {
		return runtime.RefreshRetry, true
	}
	if _, ok := errors.AsType[thrift.TProtocolException](o.Err); ok {
		return runtime.RefreshRetry, true
	}
	if te, ok := errors.AsType[thrift.TException](o.Err); ok {
		switch te.TExceptionType() {
		case thrift.TExceptionTypeTransport, thrift.TExceptionTypeProtocol:
			return runtime.RefreshRetry, true
		case thrift.TExceptionTypeApplication, thrift.TExceptionTypeCompiled:
			return runtime.Fatal, true
		}
	}
	return runtime.Unclassified, false
}

// Classify returns the middleware that judges every attempt: the first definite answer of
// classifiers (nil entries skipped; DefaultClassifiers when none are left; Fatal when none
// decides) becomes call.Current().Class. Rule B2 then applies and no classifier can
// override it: a failure that would be retried after the request may have been sent
// (Attempt.Sent), on an operation neither idempotent nor guarded nor tokened under a
// store's dedup window (rule B8), is Fatal with an error that wraps runtime.ErrInDoubt and
// the cause.
func Classify(classifiers ...Classifier) Middleware {
	classifiers = slices.DeleteFunc(slices.Clone(classifiers), func(c Classifier) bool { return c == nil })
	if len(classifiers) == 0 {
		classifiers = slices.Clone(DefaultClassifiers)
	}
	return func(next Handler) Handler {
		return func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
			resp, err := next(ctx, call)
			a := call.Current()
			o := Outcome{Ctx: ctx, Call: call, Attempt: a, Response: resp, Err: err}
			switch {
			case err != nil:
				o.Response = nil
			case resp == nil:
				err = errNoOutcome
				o.Err = err
			case !a.Answered:
				a.RecordAnswer(call.Op.Status(resp), resp.GetMapEpoch())
			}
			class := runtime.Fatal
			for _, c := range classifiers {
				if cl, ok := c(o); ok {
					class = cl
					break
				}
			}
			if err != nil && inDoubt(ctx, call, a, class) {
				class = runtime.Fatal
				err = &inDoubtError{op: opName(call), cause: err}
			}
			a.Class = class
			if err != nil {
				a.Err = err
			}
			return resp, err
		}
	}
}

var errNoOutcome = errors.New("zaris: transport returned neither a response nor an error")

// inDoubt reports whether rule B2 forbids replaying the failed attempt a. A tokened call
// routed under a map that advertises a dedup window may be replayed (rule B8): the store
// answers the replay with the first outcome, and the transport ends the replay before the
// window does.
func inDoubt(ctx context.Context, call *runtime.Call, a *runtime.Attempt, class runtime.Class) bool {
	if !a.Sent || a.Answered || call.Guarded || (call.Op != nil && call.Op.Idempotent) {
		return false
	}
	if !call.Token.IsZero() && a.DedupWindow > 0 {
		return false
	}
	return class == runtime.Retry || class == runtime.RefreshRetry || ctx.Err() != nil
}

// inDoubtError is the error of a non-idempotent, unguarded write that was sent without a
// reply. It matches runtime.ErrInDoubt and unwraps to the cause.
type inDoubtError struct {
	op    string
	cause error
}

func (e *inDoubtError) Error() string {
	return fmt.Sprintf("%v: %s was sent and no reply came back, so it is not replayed: %v", runtime.ErrInDoubt, e.op, e.cause)
}

func (e *inDoubtError) Unwrap() []error { return []error{runtime.ErrInDoubt, e.cause} }

// statusesOf returns the status table of call's operation, or nil.
func statusesOf(call *runtime.Call) *runtime.StatusTable {
	if call.Op == nil {
		return nil
	}
	return call.Op.Statuses
}

func opName(call *runtime.Call) string {
	if call.Op == nil {
		return "call"
	}
	return call.Op.Name
}
