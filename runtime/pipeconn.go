package runtime

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/clustron/zaris-go/internal/framing"
	"github.com/clustron/zaris-go/internal/thriftbuf"
)

// Errors of pipelined connections. Those of a failed connection are Thrift transport or
// protocol exceptions, so Invoke reports them as ErrTransport.
var (
	errConnClosed = thrift.NewTTransportException(thrift.NOT_OPEN, "zaris: pipelined connection closed")
	errNoReply    = thrift.NewTTransportException(thrift.TIMED_OUT, "zaris: pipelined connection sent no reply within an attempt timeout")
)

// pipeConn is one pipelined connection. Callers queue encoded requests; whoever flushes
// (the first caller to find the writer free, else the writer goroutine) takes everything
// queued and writes it in one write; the reader goroutine reads replies in order and
// delivers each to the oldest request written, after checking its seqid and method.
type pipeConn struct {
	raw    net.Conn
	in     thrift.TProtocol  // read by the reader goroutine only
	frames *thriftbuf.Frames // in, when it is framed binary: a reply's body in memory
	// compactFrames is in's transport when in is framed compact: a reply's body is the rest
	// of its frame.
	compactFrames *framing.Reader
	tcfg          *thrift.TConfiguration // the bounds replies are decoded within

	seq     atomic.Int32
	pending atomic.Int32  // requests queued or in flight, to pick the least busy connection
	waiting atomic.Int32  // callers waiting on a request of theirs here; the sweep runs while any do
	replies atomic.Uint64 // replies read
	failed  atomic.Bool
	closing atomic.Bool // close when pending reaches zero

	mu       sync.Mutex // protects queue, taken, inflight, head, readingEnd, readingWatch, err and sweeping
	queue    []*pcall   // encoded, not yet taken by a flush
	taken    []*pcall   // taken by the flush under way, not yet in inflight
	inflight []*pcall   // written, in order, from head on
	head     int
	err      error // why the connection failed
	stop     chan struct{}
	sweeping bool // the sweep goroutine runs

	// reading is the call whose reply the reader reads, set when the reader claims it
	// (under mu); the reader, to deliver its reply, the sweep, at readingEnd (its
	// deadline), or an install that moves it away (readingWatch, rule B6) takes it.
	reading    atomic.Pointer[pcall]
	readingEnd time.Time
	// readingWatch is the B6 watch of the call reading was set to, copied when it was
	// claimed: the install's walk reads it, not the call, which may already be delivered
	// and reused (ownerwatch.go).
	readingWatch watchState

	sweepEvery time.Duration // how often the sweep ends the attempts past their deadline

	// quiet is the silence the sweep watches, under mu: since is when a request was written
	// (zero: none watched) whose attempt timeout passed with no reply since, and mark the
	// reply count then. Unless a reply comes, the connection fails an attempt timeout after
	// since.
	quiet struct {
		mark  uint64
		since time.Time
	}

	// attemptTimeout is the client's attempt timeout: the longest one write may stall, and
	// the silence after a write (quiet) that fails the connection.
	attemptTimeout time.Duration

	writeMu sync.Mutex // held by whoever flushes; protects wbuf, spare and batch
	wbuf    []byte
	spare   []*pcall
	batch   []*pcall
	kick    chan struct{} // wakes the writer goroutine

	wg sync.WaitGroup // the reader, writer and sweep goroutines
}

func newPipeConn(raw net.Conn, ps *pipelines) (*pipeConn, error) {
	in, err := replyProtocol(raw, ps)
	if err != nil {
		return nil, err
	}
	c := &pipeConn{raw: raw, in: in, tcfg: ps.tcfg, attemptTimeout: ps.timeout, sweepEvery: sweepInterval(ps.timeout),
		stop: make(chan struct{}), kick: make(chan struct{}, 1)}
	c.frames, _ = in.(*thriftbuf.Frames)
	if compact, ok := in.(*thrift.TCompactProtocol); ok {
		c.compactFrames, _ = compact.Transport().(*framing.Reader)
	}
	c.wg.Add(2)
	go c.readLoop()
	go c.writeLoop()
	return c, nil
}

// replyProtocol returns the protocol a pipelined connection's reader reads replies with.
// Framed binary and compact replies are read a whole frame at a time (framing.Reader), and
// a binary reply's header with replyNames and its body from memory (thriftbuf.Frames). JSON
// replies are read through failedReads.
func replyProtocol(raw net.Conn, ps *pipelines) (thrift.TProtocol, error) {
	if ps.transport == TransportFramed {
		switch ps.protocol {
		case ProtocolBinary:
			return thriftbuf.NewFrames(newReplyNames(replyFrames(raw, ps), ps.tcfg), ps.tcfg).ShareBinaries(), nil
		case ProtocolCompact:
			return thrift.NewTCompactProtocolConf(replyFrames(raw, ps), ps.tcfg), nil
		case ProtocolJSON:
			return thrift.NewTJSONProtocol(&failedReads{TTransport: replyFrames(raw, ps)}), nil
		}
	}
	if ps.protocol == ProtocolJSON {
		return thrift.NewTJSONProtocol(&failedReads{TTransport: newSockTransport(raw)}), nil
	}
	return stackProtocol(newSockTransport(raw), ps.protocol, ps.transport, ps.tcfg)
}

// failedReads is a transport whose reads, once one has failed, all fail the same way. The
// JSON protocol drops the error of some reads (skipping white space) and reads on: over
// frames, it would take the bytes after a refused frame header for the next header, and
// wait for bytes that never come instead of failing the connection.
type failedReads struct {
	thrift.TTransport
	err error
}

func (f *failedReads) Read(p []byte) (int, error) {
	if f.err != nil {
		return 0, f.err
	}
	n, err := f.TTransport.Read(p)
	f.err = err
	return n, err
}

func replyFrames(raw net.Conn, ps *pipelines) *framing.Reader {
	return framing.NewReader(bufio.NewReaderSize(raw, bufferSize), ps.tcfg.GetMaxFrameSize())
}

// enqueue queues p and makes sure a flush will take it: on an idle connection with no one
// else writing this caller flushes, else the writer goroutine is woken.
func (c *pipeConn) enqueue(p *pcall) error {
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return err
	}
	// With nothing written and unanswered, no reply is coming to wake other callers: this
	// request goes out at once. Otherwise the callers that the replies on their way wake
	// will queue theirs too, and the writer goroutine takes them all in one write.
	idle := c.head == len(c.inflight) && len(c.queue) == 0
	c.queue = append(c.queue, p)
	c.pending.Add(1)
	c.startSweep()
	c.mu.Unlock()
	// The caller writes one batch at most, and only what fits in the socket's buffer: a
	// larger write could hold it for as long as the node does not read.
	if idle && c.writeMu.TryLock() {
		wrote := c.flushOnce(bufferSize)
		c.writeMu.Unlock()
		if wrote {
			return nil // whoever queued meanwhile woke the writer
		}
	}
	select {
	case c.kick <- struct{}{}:
	default:
	}
	return nil
}

func (c *pipeConn) writeLoop() {
	defer c.wg.Done()
	for {
		select {
		case <-c.kick:
		case <-c.stop:
			return
		}
		// Callers made runnable with this goroutine (by one read of several replies) run
		// first and queue their requests, which then share this write.
		goruntime.Gosched()
		c.writeMu.Lock()
		for c.flushOnce(math.MaxInt) {
		}
		c.writeMu.Unlock()
	}
}

// flushOnce writes everything queued in one write, unless it comes to more than limit
// bytes. It reports whether it took the queue: false when the queue was empty, over limit
// or the connection failed. The caller holds writeMu.
func (c *pipeConn) flushOnce(limit int) bool {
	c.mu.Lock()
	q := c.queue
	if len(q) == 0 || c.err != nil || limit < math.MaxInt && queuedBytes(q) > limit {
		c.mu.Unlock()
		return false
	}
	c.queue, c.taken = c.spare[:0], q
	c.mu.Unlock()

	buf, batch := c.wbuf[:0], c.batch[:0]
	mark := c.replies.Load()
	now := time.Now()
	for _, p := range q {
		p.mark, p.written = mark, now // before the swap, which publishes them to the sweep
		if !now.Before(p.deadline) && p.endAttempt(stQueued, stExpired, false, errSwept) {
			// Its attempt ended while it was queued: it is not written, and its caller
			// is told so now.
			c.release()
			continue
		}
		if !p.state.CompareAndSwap(stQueued, stWritten) {
			c.release() // its caller left while it was queued
			continue
		}
		buf = append(buf, p.msg...)
		batch = append(batch, p)
	}
	c.mu.Lock()
	clear(q)
	c.spare, c.taken = q[:0], nil
	if err := c.err; err != nil {
		c.mu.Unlock()
		// Failed while the batch was assembled: none of it was written.
		for _, p := range batch {
			c.failCall(p, stWritten, err, false, (*pcall).deliver)
			c.release()
		}
		return true
	}
	c.inflight = append(c.inflight, batch...)
	c.mu.Unlock()
	clear(batch)
	c.wbuf, c.batch = buf, batch[:0]
	if len(buf) > 0 {
		// A node that takes in no batch for a whole attempt timeout is treated as one
		// that sends no reply for as long (see Call): the connection fails. Without
		// the bound it would hold the writer for as long as the node does not read.
		// The bound counts from the batch's one reading of the clock, taken just before.
		c.raw.SetWriteDeadline(now.Add(c.attemptTimeout))
		if _, err := c.raw.Write(buf); err != nil {
			c.fail(thrift.NewTTransportExceptionFromError(err))
		}
	}
	return true
}

// queuedBytes is the size of the requests in q.
func queuedBytes(q []*pcall) int {
	n := 0
	for _, p := range q {
		n += len(p.msg)
	}
	return n
}

// release counts one request out of the connection, and closes a retired connection once
// it carries none.
func (c *pipeConn) release() {
	if c.pending.Add(-1) == 0 && c.closing.Load() {
		c.fail(errConnClosed)
	}
}

// closeIdle closes the connection once no request is queued or in flight on it.
func (c *pipeConn) closeIdle() {
	c.closing.Store(true)
	if c.pending.Load() == 0 {
		c.fail(errConnClosed)
	}
}

func (c *pipeConn) readLoop() {
	defer c.wg.Done()
	ctx := context.Background()
	for {
		name, typeID, seq, err := c.in.ReadMessageBegin(ctx)
		if err != nil {
			c.fail(err)
			return
		}
		c.mu.Lock()
		var p *pcall
		claimed := false
		if c.head < len(c.inflight) {
			p = c.inflight[c.head]
			c.inflight[c.head] = nil
			c.head++
			if c.head == len(c.inflight) {
				c.inflight, c.head = c.inflight[:0], 0
			}
			// Claimed under mu, so that the sweep can end its attempt while the reply is
			// read (a reply may stall halfway).
			if claimed = p.state.CompareAndSwap(stWritten, stReading); claimed {
				c.reading.Store(p)
				c.readingEnd, c.readingWatch = p.deadline, p.owner.s
			}
		}
		c.mu.Unlock()
		if p == nil {
			c.fail(thrift.NewTProtocolExceptionWithType(thrift.INVALID_DATA,
				fmt.Errorf("zaris: reply %s seqid %d for a request never sent on this connection", name, seq)))
			return
		}
		err = c.readReply(ctx, p, claimed, name, typeID, seq)
		if err != nil {
			c.fail(err) // first, so that no caller picks the connection again
			if claimed && c.stillReading(p) {
				p.deliver(err, true)
			}
			c.pending.Add(-1)
			return
		}
	}
}

// readReply reads the rest of a reply to p: into p's result if claimed (and delivers it),
// else it reads it and drops it; either way it counts p out. An error means the connection
// can no longer be trusted, and p is still counted in.
func (c *pipeConn) readReply(ctx context.Context, p *pcall, claimed bool, name string, typeID thrift.TMessageType, seq int32) error {
	if seq != p.seq || name != p.method {
		return thrift.NewTProtocolExceptionWithType(thrift.BAD_SEQUENCE_ID,
			fmt.Errorf("zaris: reply %s seqid %d out of order: the oldest request written is %s seqid %d", name, seq, p.method, p.seq))
	}
	var callErr error
	switch {
	case typeID == thrift.EXCEPTION:
		exc := thrift.NewTApplicationException(thrift.UNKNOWN_APPLICATION_EXCEPTION, "Unknown Exception")
		if err := exc.Read(ctx, c.in); err != nil {
			return err
		}
		callErr = exc
	case typeID != thrift.REPLY:
		return thrift.NewTProtocolExceptionWithType(thrift.INVALID_DATA,
			fmt.Errorf("zaris: reply %s seqid %d has message type %d", name, seq, typeID))
	case claimed && p.codec != nil:
		resp, err := c.decodeResult(p)
		if err != nil {
			return err
		}
		p.resp = resp
	case claimed:
		if err := p.result.Read(ctx, c.in); err != nil {
			return err
		}
	default:
		if err := thrift.SkipDefaultDepth(ctx, c.in, thrift.STRUCT); err != nil {
			return err
		}
	}
	if err := c.in.ReadMessageEnd(ctx); err != nil {
		return err
	}
	c.replies.Add(1)
	c.release()
	if claimed && c.stillReading(p) {
		p.deliver(callErr, true)
	}
	return nil
}

// decodeResult decodes the result of the reply to p, whose message header was read, with
// p's Codec, from the reply's body in memory (binary: Frames's; compact: the rest of the
// frame): with DecodeResultCopy, which copies the response's binaries out, in the reader's
// buffer, reused for the next reply; else taken from the reader (Detach), or a copy of the
// rest of the frame, so that the response may keep slices of it.
func (c *pipeConn) decodeResult(p *pcall) (Response, error) {
	if c.compactFrames != nil {
		body := c.compactFrames.Unread()
		c.compactFrames.Discard(len(body)) // what follows the result, as Frames drops it
		if p.codec.DecodeResultCopy != nil {
			return p.codec.DecodeResultCopy(body, c.tcfg)
		}
		return p.codec.DecodeResult(bytes.Clone(body), c.tcfg)
	}
	var mem *thriftbuf.Protocol
	if c.frames != nil {
		mem = c.frames.Memory()
	}
	if p.codec.DecodeResultCopy != nil {
		var body []byte // no body in memory: none at all, which decodes as no result
		if mem != nil {
			body = mem.Unread()
		}
		return p.codec.DecodeResultCopy(body, c.tcfg)
	}
	var body []byte
	if mem != nil {
		body = mem.Detach()
	}
	return p.codec.DecodeResult(body, c.tcfg)
}

// stillReading takes p, whose reply the reader has read or failed to read, back from the
// sweep, and reports whether it is still the reader's to deliver: the sweep did not end
// its attempt meanwhile.
func (c *pipeConn) stillReading(p *pcall) bool {
	return c.reading.CompareAndSwap(p, nil)
}

// fail closes the connection for err (the first failure wins) and fails every request on
// it: those queued were never sent, those written are in doubt.
func (c *pipeConn) fail(err error) { c.failTelling(err, (*pcall).deliver) }

// failTelling is fail, with tell telling each call the failure claimed its outcome:
// pcall.deliver, or a test's pause in front of it.
func (c *pipeConn) failTelling(err error, tell func(p *pcall, err error, sent bool)) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	if !isThriftError(err) {
		err = thrift.NewTTransportExceptionFromError(err)
	}
	c.err = err
	c.failed.Store(true)
	queued, inflight := c.queue, c.inflight[c.head:]
	c.queue, c.inflight, c.head = nil, nil, 0
	close(c.stop)
	c.mu.Unlock()
	c.raw.Close()
	for _, p := range queued {
		c.failCall(p, stQueued, err, false, tell)
		c.pending.Add(-1)
	}
	for _, p := range inflight {
		c.failCall(p, stWritten, err, true, tell)
		c.pending.Add(-1)
	}
}

// failCall tells p, in state from, the connection's failure err through tell, unless its
// caller or the sweep ended it first; sent says whether its request was written. A caller
// that leaves meanwhile waits for it, so that its attempt's Sent is exact.
func (c *pipeConn) failCall(p *pcall, from int32, err error, sent bool, tell func(p *pcall, err error, sent bool)) {
	if p.state.CompareAndSwap(from, stFailing) {
		tell(p, err, sent)
	}
}

// isThriftError reports whether err is a Thrift transport or protocol exception.
func isThriftError(err error) bool {
	var te thrift.TTransportException
	var pe thrift.TProtocolException
	return errors.As(err, &te) || errors.As(err, &pe)
}
