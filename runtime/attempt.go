package runtime

import (
	"fmt"
	"time"

	"github.com/clustron/zaris-go/runtime/clustermap"
)

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
	// DedupWindow is, for a call with a request token, the dedup window of the map the
	// attempt was routed with (0: none); a sent attempt that got no reply may be replayed
	// only when it is set (rule B8).
	DedupWindow time.Duration
	// Class is how the classify layer judged the outcome.
	Class Class
	// Duration is how long the attempt took on the wire.
	Duration time.Duration
	// End is when the attempt's outcome came back, on the client's Clock: the time of the
	// evidence a failure gives (rule B7). The transport sets it; the refresh layer sets it
	// for a failure when a transport of the user's did not.
	End time.Time
}

// begin records where the attempt is routed: r's node and address, and the epoch of the map
// it was routed with.
func (a *Attempt) begin(r clustermap.Route) { a.Node, a.Addr, a.MapEpoch = r.Node, r.Addr, r.Epoch }

// RecordAnswer records that a response arrived, with status s and epoch, the answering
// node's map epoch (rule B1): it sets Answered, Status and AnswerEpoch together.
func (a *Attempt) RecordAnswer(s Status, epoch int64) {
	a.Answered, a.Status, a.AnswerEpoch = true, s, epoch
}

// finish records the attempt's end: it took d from start, on the client's Clock, and ended
// with err (nil for a response).
func (a *Attempt) finish(start time.Time, d time.Duration, err error) {
	a.Duration, a.End, a.Err = d, start.Add(d), err
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

// String describes one attempt: its number, node, map epoch and outcome (a status by its
// number: CallError.Error names it by the operation's status table).
func (a Attempt) String() string { return a.Describe(nil) }

// Describe is String with the status named by t, the operation's Op.Statuses.
func (a Attempt) Describe(t *StatusTable) string {
	node := "no node"
	if a.Node != clustermap.NoNode {
		node = fmt.Sprintf("node %d", a.Node)
	}
	out := "no outcome"
	switch {
	case a.Answered:
		out = fmt.Sprintf("%s (node epoch %d)", t.Name(int64(a.Status)), a.AnswerEpoch)
	case a.Err != nil:
		out = a.Err.Error()
	}
	return fmt.Sprintf("attempt %d %s epoch %d: %s", a.N, node, a.MapEpoch, out)
}
