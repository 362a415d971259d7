package middlewaretest

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/clustron/zaris-go/runtime"
	"github.com/clustron/zaris-go/runtime/clustermap"
)

// Response is a minimal runtime.Response for scripted answers.
type Response struct {
	Status   runtime.Status
	MapEpoch int64
}

// GetStatus returns the status.
func (r *Response) GetStatus() runtime.Status { return r.Status }

// GetMapEpoch returns the answering node's map epoch.
func (r *Response) GetMapEpoch() int64 { return r.MapEpoch }

// Outcome is one scripted attempt: an answer with a status, or an error.
type Outcome struct {
	// Status is the answer's status, when Err is nil.
	Status runtime.Status
	// Epoch is the answering node's map epoch (the response's mapEpoch).
	Epoch int64
	// Err, when set, is returned instead of an answer.
	Err error
	// Sent reports, for an error, whether the request may have reached the node.
	Sent bool
	// Node is the node the attempt is routed to; NoNode (the default for errors that
	// were not sent) means none.
	Node int32
	// Took is how long the attempt takes; it moves the Transport's Clock, if any.
	Took time.Duration
}

// Answer scripts an answer with status s (a runtime.Status or a generated enum value) from
// node 1 at epoch 0.
func Answer[S ~int64](s S) Outcome { return Outcome{Status: runtime.Status(s), Node: 1} }

// AnswerAt scripts an answer with status s from node 1 whose map is at epoch.
func AnswerAt[S ~int64](s S, epoch int64) Outcome {
	return Outcome{Status: runtime.Status(s), Epoch: epoch, Node: 1}
}

// Fail scripts an error. sent says whether the request may have left (a reset or a timeout)
// or provably did not (no owner, dial refused); a sent request is routed to node 1.
func Fail(err error, sent bool) Outcome {
	o := Outcome{Err: err, Sent: sent, Node: clustermap.NoNode}
	if sent {
		o.Node = 1
	}
	return o
}

// FailAt scripts an error of an attempt routed to node, as a refused dial at a node is
// (sent false) or a timeout on its connection (sent true).
func FailAt(err error, sent bool, node int32) Outcome {
	return Outcome{Err: err, Sent: sent, Node: node}
}

// Seen is what the Transport saw of one attempt.
type Seen struct {
	// Op is the operation's name.
	Op string
	// Request is the request it was given.
	Request any
	// N is the attempt's number.
	N int
	// Deadline is call.Deadline at the time.
	Deadline time.Time
	// CtxDeadline is the context's deadline, if any.
	CtxDeadline time.Time
}

// Transport is a scripted fake of the client's transport (runtime.Engine.Invoke): its
// i-th attempt, counted over all calls, plays Script[i], and once the script runs out the
// last outcome repeats. Like the real transport it fills the current attempt's Node, Addr,
// MapEpoch, Sent and, for an answer, Answered, Status and AnswerEpoch, Duration and, with
// a Clock, End. Use
// its Invoke method as the Handler at the bottom of a stack. It is safe for concurrent use.
type Transport struct {
	// Script is the outcomes to play.
	Script []Outcome
	// MapEpoch is the client map epoch the attempts are routed with.
	MapEpoch int64
	// Clock, when set, is moved forward by each outcome's Took.
	Clock *Clock

	mu   sync.Mutex // protects seen
	seen []Seen
}

// Script returns a Transport that plays outcomes.
func Script(outcomes ...Outcome) *Transport { return &Transport{Script: outcomes} }

// Invoke plays the next outcome for call.
func (t *Transport) Invoke(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
	if len(t.Script) == 0 {
		panic("middlewaretest: Transport has an empty script")
	}
	a := call.Current()
	t.mu.Lock()
	i := min(len(t.seen), len(t.Script)-1)
	s := Seen{N: a.N, Request: call.Request, Deadline: call.Deadline}
	if call.Op != nil {
		s.Op = call.Op.Name
	}
	if d, ok := ctx.Deadline(); ok {
		s.CtxDeadline = d
	}
	t.seen = append(t.seen, s)
	t.mu.Unlock()

	o := t.Script[i]
	if t.Clock != nil && o.Took > 0 {
		t.Clock.Advance(o.Took)
	}
	a.Node, a.MapEpoch, a.Duration = o.Node, t.MapEpoch, o.Took
	if t.Clock != nil {
		a.End = t.Clock.Now()
	}
	if o.Node != clustermap.NoNode {
		a.Addr = fmt.Sprintf("node%d:9090", o.Node)
	}
	if o.Err != nil {
		a.Sent = o.Sent
		return nil, o.Err
	}
	a.Sent = true
	a.RecordAnswer(o.Status, o.Epoch)
	return &Response{Status: o.Status, MapEpoch: o.Epoch}, nil
}

// Attempts returns how many attempts the Transport has played.
func (t *Transport) Attempts() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.seen)
}

// Seen returns what the Transport saw of each attempt, in order.
func (t *Transport) Seen() []Seen {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Seen(nil), t.seen...)
}

// ClientTransport returns a transport that sends every attempt to client (a generated
// service client or a gomock mock of one) through the operation's Invoke, as the real
// transport does over a pooled connection, and fills the attempt as if node 1 at map epoch 1
// answered.
func ClientTransport(client any) func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
	return func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
		a := call.Current()
		a.Node, a.Addr, a.MapEpoch, a.Sent = 1, "node1:9090", 1, true
		resp, err := call.Op.Invoke(ctx, client, call.Request)
		if err != nil {
			return nil, err
		}
		a.RecordAnswer(call.Op.Status(resp), resp.GetMapEpoch())
		return resp, nil
	}
}
