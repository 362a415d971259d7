package runtime

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/clustron/zaris-go/internal/thriftbuf"
)

// The states of a pcall. A pcall moves queued -> written -> reading -> done as its request
// is written and its reply read, or -> failing -> done when its connection fails; when its
// deadline passes first, the sweep or a flush moves it queued -> expired, or written (or
// reading, its reply stalled halfway) -> swept, and tells its caller. The caller that
// leaves on its own (its context, its timer) swaps in abandoned. A pcall expired, swept or
// abandoned may still be held by the connection, so it is never reused.
const (
	stQueued int32 = iota
	stWritten
	stReading // its reply is being read, or the failure of its read delivered
	stDone
	stAbandoned
	stExpired // its deadline passed while it was queued: dropped unwritten
	stSwept   // its deadline passed after it was written: its reply will be dropped
	stFailing // its connection's failure is being delivered, with whether it was written
)

// pcall is one request on a pipelined connection. It is the thrift.TClient of its own
// generated client, kv, so the operation's generated code encodes the request (on pcall's
// own protocol, into its own buffer) and decodes the reply into its result struct, while
// the connection writes and reads the bytes.
type pcall struct {
	kv    any // Service.NewClient(the pcall)
	enc   *thrift.TMemoryBuffer
	out   thrift.TProtocol
	limit *atomic.Int64 // the map's MaxMessageBytes (pipelines.limit)
	msg   []byte        // the request's bytes as written: enc's, or wire's
	wire  []byte        // the buffer a request with a Codec is encoded into (callCodec)
	frame int32         // the largest frame the client writes (its TConfiguration's)

	conn      *pipeConn
	deadline  time.Time
	callBound bool
	timer     *time.Timer

	state   atomic.Int32
	method  string
	seq     int32
	result  thrift.TStruct
	codec   *Codec        // set for a call sent by callCodec: its reply is decoded with it into resp
	resp    Response      // the reply's response (codec), set with err
	mark    uint64        // the connection's reply count when the request was written
	written time.Time     // when the write carrying the request began
	done    chan struct{} // receives once the reply or the failure is delivered

	// Set by whoever moved state to stReading or stFailing, read by the caller after done.
	err  error
	sent bool

	// Set by the caller.
	wasSent   bool // what the caller knows of sent: the request may have reached the node
	timedOut  bool // the attempt timeout fired while the caller's context was live
	abandoned bool // the caller left early: the connection may still hold this pcall
	// owner is what a newer map that moves the call's segment away ends it by (rule B6);
	// ownerMoved is set when it did.
	owner      ownerWatch
	ownerMoved bool
	debt       *debt // the reply the node owes once the request is queued (suspect.go)
}

func (ps *pipelines) getCall() *pcall {
	if p, ok := ps.calls.Get().(*pcall); ok {
		return p
	}
	p := &pcall{enc: thrift.NewTMemoryBufferLen(256), limit: ps.limit, frame: ps.tcfg.GetMaxFrameSize(), done: make(chan struct{}, 1)}
	var err error
	if p.out, err = stackProtocol(p.enc, ps.protocol, ps.transport, ps.tcfg); err != nil {
		panic(err) // the Config was validated
	}
	if ps.protocol == ProtocolBinary && ps.transport == TransportFramed {
		p.out = thriftbuf.NewFrames(p.out, ps.tcfg) // the request is encoded in memory (thriftbuf); encode checks its size
	}
	p.kv = ps.newClient(p)
	p.timer = time.NewTimer(time.Hour)
	p.timer.Stop()
	return p
}

// putCall makes p reusable unless its caller left it with the connection. Either way p
// lets go of its Call's debt: a pcall left with the connection outlives the attempt, and
// the Call may be reused (CallPool) once its call returns.
func (ps *pipelines) putCall(p *pcall) {
	p.debt = nil
	if p.abandoned {
		return
	}
	p.conn, p.result, p.err, p.sent, p.wasSent, p.timedOut = nil, nil, nil, false, false, false
	p.ownerMoved = false
	p.codec, p.resp, p.msg = nil, nil, nil
	if cap(p.wire) > maxKeptRequest {
		p.wire = nil
	}
	ps.calls.Put(p)
}

// Call queues the request and waits for its reply, the end of the caller's context or the
// attempt's deadline, whichever comes first. It implements thrift.TClient for the
// generated client kv. The attempt timeout reaches the caller through the connection's
// sweep, up to one sweep interval late; a call's own deadline (callBound) that the
// context does not carry is kept exactly, by a timer.
func (p *pcall) Call(ctx context.Context, method string, args, result thrift.TStruct) (thrift.ResponseMeta, error) {
	var meta thrift.ResponseMeta
	p.method, p.result, p.seq = method, result, p.conn.seq.Add(1)
	p.enc.Reset()
	if err := p.encode(ctx, args); err != nil {
		return meta, err
	}
	p.msg = p.enc.Bytes()
	return meta, p.send(ctx)
}

// maxKeptRequest is the largest request buffer a pcall keeps for its next call.
const maxKeptRequest = 1 << 20

// callCodec is Call for an operation with a Codec in the protocol w of a framed binary or
// compact connection: the request is encoded by w.of(op) into p's own buffer, and the
// reader decodes the reply into p.resp with it. A result without a response is the Thrift
// client's MISSING_RESULT application exception. A request over the client's frame limit
// is refused as the framed transport refuses it.
func (p *pcall) callCodec(ctx context.Context, op *Op, w codecWire, req any) (Response, error) {
	p.method, p.codec, p.seq = op.Name, w.of(op), p.conn.seq.Add(1)
	b := append(p.wire[:0], 0, 0, 0, 0) // the frame's size, set once the message is encoded
	b = w.appendCall(b, op, p.seq)
	b = p.codec.AppendArgs(b, req)
	size := len(b) - 4
	binary.BigEndian.PutUint32(b, uint32(size))
	p.wire, p.msg = b, b
	if int64(size) > int64(p.frame) {
		return nil, thrift.NewTProtocolExceptionWithType(thrift.SIZE_LIMIT, fmt.Errorf("frame too large: %d bytes", size))
	}
	if err := thriftbuf.OverLimit(p.limit, len(b)); err != nil {
		return nil, err
	}
	if err := p.send(ctx); err != nil {
		return nil, err
	}
	if p.resp == nil {
		return nil, thrift.NewTApplicationException(thrift.MISSING_RESULT, op.Name+" failed: unknown result")
	}
	return p.resp, nil
}

// send queues p's encoded request (p.msg) and waits for its outcome.
func (p *pcall) send(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err // the caller left while it waited for the connection: send nothing
	}
	if p.debt != nil {
		p.debt.owe()
	}
	c := p.conn
	p.state.Store(stQueued)
	c.waiting.Add(1) // before enqueue, which starts the sweep if it does not run
	if err := c.enqueue(p); err != nil {
		c.waiting.Add(-1)
		return err
	}
	var err error
	if p.owner.gone() {
		// Installed before the connection held p, that map's install did not find it.
		err = p.leave(ctx, errOwnerMoved)
	} else {
		err = p.wait(ctx)
	}
	c.waiting.Add(-1)
	return err
}

// wait waits for the outcome of p, queued: its reply, the end of the caller's context, or
// the end of its attempt, told by the sweep or a map install (rule B6), or kept by p's
// timer.
func (p *pcall) wait(ctx context.Context) error {
	var timeout <-chan time.Time
	if cdl, ok := ctx.Deadline(); p.callBound && (!ok || cdl.After(p.deadline)) {
		p.timer.Reset(time.Until(p.deadline))
		timeout = p.timer.C
	}
	ctxDone := ctx.Done()
	if ctxDone == nil && timeout == nil {
		<-p.done
		return p.ended(ctx)
	}
	select {
	case <-p.done:
		if timeout != nil {
			p.timer.Stop()
		}
		return p.ended(ctx)
	case <-ctxDone:
	case <-timeout:
	}
	if timeout != nil {
		p.timer.Stop()
	}
	return p.leave(ctx, context.DeadlineExceeded) // the call's deadline, unless ctx ended
}

// leave ends p's attempt from its caller's side, for cause (the call's deadline or
// errOwnerMoved) or the caller's context if it ended, unless the reply or the
// connection's failure won the race, whose outcome it then takes.
func (p *pcall) leave(ctx context.Context, cause error) error {
	switch p.state.Swap(stAbandoned) {
	case stDone, stFailing:
		// The reply, or the connection's failure (told at once, and only it knows whether
		// the request was written), won the race: take it.
		<-p.done
		p.state.Store(stDone)
		p.wasSent = p.sent
		return p.err
	case stQueued, stExpired:
		p.wasSent = false // the writer skips it, or dropped it: nothing goes on the wire
	default:
		// Written, or taken by a flush that writes it unless the connection fails first:
		// in doubt.
		p.wasSent = true
	}
	return p.left(ctx, cause)
}

// left is the outcome of p's attempt ended before its reply, for cause, the caller's
// context aside; the connection may still hold p.
func (p *pcall) left(ctx context.Context, cause error) error {
	p.abandoned = true
	if err := ctx.Err(); err != nil {
		return err
	}
	p.ownerMoved = cause == errOwnerMoved
	return cause
}

// ended is the outcome of a call told by done: its reply or its connection's failure, or
// the end of its attempt at its deadline (errSwept) or by a map that moved its segment
// away (errOwnerMoved), after which the connection may still hold it.
func (p *pcall) ended(ctx context.Context) error {
	p.wasSent = p.sent
	switch p.err {
	case errSwept:
		p.abandoned = true
		if err := ctx.Err(); err != nil {
			return err
		}
		p.timedOut = !p.callBound
		return context.DeadlineExceeded // the attempt timeout or the call's deadline
	case errOwnerMoved:
		return p.left(ctx, errOwnerMoved)
	}
	return p.err
}

// encode writes the request message to p.enc through p's own protocol.
func (p *pcall) encode(ctx context.Context, args thrift.TStruct) error {
	if err := p.out.WriteMessageBegin(ctx, p.method, thrift.CALL, p.seq); err != nil {
		return err
	}
	if err := args.Write(ctx, p.out); err != nil {
		return err
	}
	if err := p.out.WriteMessageEnd(ctx); err != nil {
		return err
	}
	if err := p.out.Flush(ctx); err != nil {
		return err
	}
	// Any protocol: the whole request is in p.enc now, and none of it has left.
	return thriftbuf.OverLimit(p.limit, p.enc.Len())
}

// deliver hands p its outcome; the caller of deliver moved p to stReading or stFailing.
func (p *pcall) deliver(err error, sent bool) {
	p.err, p.sent = err, sent
	p.state.Store(stDone)
	p.done <- struct{}{}
}
