package runtime

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Sentinel errors name the kinds of failure; find them with errors.Is. The errors the client
// returns wrap them with the details (node, attempt history).
var (
	// ErrNodeUnavailable: the owning node could not be reached (dial refused or failed). The
	// request never left, so a retry is always safe.
	ErrNodeUnavailable = errors.New("zaris: node unavailable")
	// ErrPartitionUnavailable: the client's map names no owner for the key's segment.
	ErrPartitionUnavailable = errors.New("zaris: partition unavailable")
	// ErrTransport: the connection or the protocol failed, once the request was written or
	// before any of it left, as while it was queued on a pipelined connection (Attempt.Sent
	// says which).
	ErrTransport = errors.New("zaris: transport failure")
	// ErrAttemptTimeout: one attempt ran past the per-attempt timeout (distinct from the
	// whole-call deadline).
	ErrAttemptTimeout = errors.New("zaris: attempt timed out")
	// ErrOwnerMoved: the attempt was waiting on a node when a newer cluster map named
	// another owner for its segment, so it was ended (rule B6): retried at once when it
	// was not sent or is safe to replay, else in doubt.
	ErrOwnerMoved = errors.New("zaris: segment owner moved")
	// ErrInDoubt: a non-idempotent, unguarded write was sent and no reply came back, so it
	// may or may not have been applied; it is not replayed (rule B2), unless its request
	// token lets the store answer a replay with the first outcome (rule B8).
	ErrInDoubt = errors.New("zaris: outcome in doubt")
	// ErrRetryBudgetExhausted: the client's retry budget had no token for another attempt.
	ErrRetryBudgetExhausted = errors.New("zaris: retry budget exhausted")
	// ErrClosed: the client was closed.
	ErrClosed = errors.New("zaris: client closed")
	// ErrNoSeeds: no seed node answered with a cluster map.
	ErrNoSeeds = errors.New("zaris: no seed reachable")
	// ErrNilRequest: a typed method was called with a nil request.
	ErrNilRequest = errors.New("zaris: nil request")
	// ErrNoResponse: a node's reply carried no response struct.
	ErrNoResponse = errors.New("zaris: no response in reply")
	// ErrRequestTooLarge: the request's encoding is over the client's message limit
	// (16 MiB) or the node's, which its cluster map states (clustermap.Map.MaxMessageBytes;
	// the reference node's is 4 MiB), so it was not sent; no node would take it, so it is
	// not retried. Framed and header transports check the client's limit; framed binary
	// connections and pipelined ones check the map's too; the buffered transport checks
	// neither, and sends it.
	ErrRequestTooLarge = errors.New("zaris: request too large")
	// ErrInvalidBatch: a multi-key call was refused before anything was sent: no items, or
	// more than batch.MaxItems.
	ErrInvalidBatch = errors.New("zaris: invalid batch")
)

// StatusError is the cause recorded for an attempt answered with a status the application
// does not see (Moved, Migrating, ...). A call that runs out of budget on one unwraps to it.
type StatusError struct {
	Status Status
	// Name is the status's name in the IDL, or Enum(value) for a value the status table
	// does not hold (StatusTable.Name).
	Name string
}

// Error names the status.
func (e *StatusError) Error() string {
	if e.Name == "" {
		return "zaris: status " + strconv.FormatInt(int64(e.Status), 10)
	}
	return "zaris: status " + e.Name
}

// NewStatusError returns the StatusError of an answer carrying s, named by t.
func NewStatusError(t *StatusTable, s Status) *StatusError {
	return &StatusError{Status: s, Name: t.Name(int64(s))}
}

// Bound names what ended a call that did not get an answer.
type Bound int

const (
	// BoundNone: the call was not stopped by a bound; it failed with a fatal error.
	BoundNone Bound = iota
	// BoundAttempts: maxAttempts attempts were made (rule R4).
	BoundAttempts
	// BoundDeadline: the whole-call deadline passed (rule R4).
	BoundDeadline
	// BoundBudget: the retry budget had no token left (rule B3).
	BoundBudget
)

// String names the bound as the documentation does.
func (b Bound) String() string {
	switch b {
	case BoundAttempts:
		return "maxAttempts"
	case BoundDeadline:
		return "deadline"
	case BoundBudget:
		return "retry budget"
	}
	return "none"
}

// CallError is the error of a call that ended without an answer: it says which bound tripped
// (or none, for a fatal error), carries every attempt's node, status or error and map epoch,
// and unwraps to the last attempt's cause, so errors.Is(err, ErrNodeUnavailable) and
// errors.Is(err, context.Canceled) work on it (rule B4).
type CallError struct {
	// Op is the operation's name.
	Op string
	// Bound is what stopped the call.
	Bound Bound
	// MaxAttempts is the attempt cap that applied to the call.
	MaxAttempts int
	// Attempts is the attempt history, oldest first.
	Attempts []Attempt
	// Statuses is the operation's status table, which names the attempts' statuses.
	Statuses *StatusTable
	// Elapsed is the call's total time.
	Elapsed time.Duration
	// Err is the last cause.
	Err error
}

// Error describes the call's end and every attempt.
func (e *CallError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "zaris: %s", e.Op)
	switch e.Bound {
	case BoundAttempts:
		fmt.Fprintf(&b, ": gave up after %d of %d attempts", min(len(e.Attempts), e.MaxAttempts), e.MaxAttempts)
		if extra := len(e.Attempts) - e.MaxAttempts; extra > 0 {
			fmt.Fprintf(&b, " and %d not counted (refused by an unreachable owner, rule B7)", extra)
		}
	case BoundDeadline:
		fmt.Fprintf(&b, ": deadline passed after %s", attempts(len(e.Attempts)))
	case BoundBudget:
		fmt.Fprintf(&b, ": retry budget exhausted after %s", attempts(len(e.Attempts)))
	default:
		if len(e.Attempts) == 0 {
			b.WriteString(": ended before its first attempt")
		} else {
			fmt.Fprintf(&b, ": failed on attempt %d", len(e.Attempts))
		}
	}
	fmt.Fprintf(&b, " in %s", e.Elapsed.Round(time.Millisecond))
	for _, a := range e.Attempts {
		b.WriteString("; ")
		b.WriteString(a.Describe(e.Statuses))
	}
	// The last cause is usually the last attempt's error, already written above.
	if last := len(e.Attempts) - 1; e.Err != nil && (last < 0 || e.Attempts[last].Err != e.Err) {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	return b.String()
}

// Unwrap returns the last cause.
func (e *CallError) Unwrap() error { return e.Err }

// attempts writes n with the noun "attempt" in the right number.
func attempts(n int) string {
	if n == 1 {
		return "1 attempt"
	}
	return fmt.Sprintf("%d attempts", n)
}
