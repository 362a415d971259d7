package runtime

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	goruntime "runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/clustron/zaris-go/internal/framing"
	"github.com/clustron/zaris-go/internal/thriftbuf"
)

// pipelines is the pipelined connection mode of an Engine (Config.Pipeline.Enabled): a
// pipeGroup of a few shared connections per node, and the pool of per-call state.
type pipelines struct {
	conns      int
	timeout    time.Duration // the attempt timeout, also the longest a write may stall
	soloPooled bool          // a call alone in flight to its node takes a pooled connection; tests turn it off
	dialSocket func(ctx context.Context, addr string) (net.Conn, error)
	protocol   Protocol
	transport  Transport
	tcfg       *thrift.TConfiguration
	newClient  func(thrift.TClient) any // Service.NewClient

	calls sync.Pool // of *pcall, each with its own encoder

	groups atomic.Pointer[map[string]*pipeGroup] // by node address; replaced copy-on-write under mu

	mu      sync.Mutex   // serialises group creation, retirement and close
	retired []*pipeGroup // groups of nodes that left the map, closing as their calls end
	closed  bool
}

func newPipelines(cfg Config) *pipelines {
	ps := &pipelines{
		conns:      cfg.Pipeline.Conns,
		timeout:    cfg.AttemptTimeout,
		soloPooled: true,
		dialSocket: socketDialer(cfg),
		protocol:   cfg.Protocol,
		transport:  cfg.Transport,
		tcfg:       thriftConfig(cfg),
		newClient:  cfg.Service.NewClient,
	}
	ps.groups.Store(&map[string]*pipeGroup{})
	return ps
}

// invokePipelined is Invoke's attempt over a pipelined connection to the route's node: it
// queues the encoded request, waits for the reply (or the end of the attempt) and records
// the facts on a, as invoke does for a pooled connection. A request still queued when the
// attempt ends was never sent (a.Sent false).
//
// A call that finds no other call to its node in flight in this mode gains nothing from
// sharing a connection, so it takes a pooled connection instead and skips the hand-offs
// between goroutines a pipelined call costs.
func (c *Engine) invokePipelined(ctx context.Context, call *Call, a *Attempt, r Route, deadline time.Time, callBound bool) (Response, error) {
	ps := c.pipes
	g, err := ps.group(r.Addr, c.router.Table())
	if err != nil {
		return nil, c.noConnError(ctx, call, r, err)
	}
	defer g.active.Add(-1)
	if g.active.Add(1) == 1 && ps.soloPooled {
		return c.invokePooled(ctx, call, a, r, deadline, callBound)
	}
	conn, err := g.get(ctx, deadline)
	if err != nil {
		return nil, c.noConnError(ctx, call, r, err)
	}
	w, ok := c.startOwnerWait(call, r)
	if !ok {
		return nil, c.ownerMovedUnsent(ctx, call, r)
	}
	p := ps.getCall()
	p.conn, p.deadline, p.callBound, p.owner, p.debt = conn, deadline, callBound, w, &call.debt
	resp, err := call.Op.Invoke(ctx, p.kv, call.Request)
	a.Sent = p.wasSent
	if err == nil && resp == nil {
		err = ErrNoResponse
	}
	o := outcome{err: err, attemptTimeout: p.timedOut, ownerMoved: p.ownerMoved}
	ps.putCall(p)
	if err == nil {
		a.Answered, a.Status, a.AnswerEpoch = true, call.Op.Status(resp), resp.GetMapEpoch()
		return resp, nil
	}
	return nil, c.callError(ctx, call, r, o)
}

// group returns the group of the node at addr, making it on first use; a node not in
// table (it left the map) has none: errPoolClosed, nothing sent.
func (ps *pipelines) group(addr string, table *RoutingTable) (*pipeGroup, error) {
	if g := (*ps.groups.Load())[addr]; g != nil {
		return g, nil
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	m := *ps.groups.Load()
	if g := m[addr]; g != nil {
		return g, nil
	}
	if ps.closed || table == nil || !table.HasAddr(addr) {
		return nil, errPoolClosed
	}
	g := &pipeGroup{ps: ps, addr: addr, slots: make([]pipeSlot, ps.conns)}
	nm := maps.Clone(m)
	nm[addr] = g
	ps.groups.Store(&nm)
	return g, nil
}

// retire closes the groups of nodes not in the newly installed map cur: each connection
// once its calls in flight have ended.
func (ps *pipelines) retire(cur *RoutingTable) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	retireAbsent(&ps.groups, cur, func(g *pipeGroup) {
		g.close(false)
		ps.retired = append(ps.retired, g)
	})
	ps.retired = slices.DeleteFunc(ps.retired, (*pipeGroup).gone)
}

// close closes every connection, failing the calls in flight on them, and waits for the
// connections' goroutines.
func (ps *pipelines) close() {
	ps.mu.Lock()
	ps.closed = true
	m := *ps.groups.Load()
	ps.groups.Store(&map[string]*pipeGroup{})
	retired := ps.retired
	ps.retired = nil
	ps.mu.Unlock()
	for _, g := range m {
		g.close(true)
	}
	for _, g := range retired {
		g.close(true)
	}
}

// pipeGroup is the pipelined connections of one node.
type pipeGroup struct {
	ps     *pipelines
	addr   string
	slots  []pipeSlot
	closed atomic.Bool
	active atomic.Int32 // calls to the node in this mode, pooled or pipelined
}

// pipeSlot holds one connection of a group; mu is held while a connection is dialed into
// it, and dialed is closed when that dial ends.
type pipeSlot struct {
	mu     sync.Mutex
	conn   atomic.Pointer[pipeConn]
	dialed atomic.Pointer[chan struct{}] // nil while no dial runs
}

// spreadAt is the calls queued or in flight on every open connection of a node at which a
// call opens another (up to Pipelining.Conns): below it, calls share the connections
// already open, whose writes and replies then carry more calls each.
const spreadAt = 8

// get picks the open connection with the fewest calls queued or in flight; it dials a new
// one into a free slot when every open one carries spreadAt calls or more (or none is
// open), and goes on the least busy open one if that dial fails.
func (g *pipeGroup) get(ctx context.Context, deadline time.Time) (*pipeConn, error) {
	for {
		if g.closed.Load() {
			return nil, errPoolClosed
		}
		var best *pipeConn
		full := true
		for i := range g.slots {
			c := g.slots[i].conn.Load()
			if c == nil || c.failed.Load() {
				full = false
				continue
			}
			if best == nil || c.pending.Load() < best.pending.Load() {
				best = c
			}
		}
		if best != nil && (full || best.pending.Load() < spreadAt) {
			return best, nil
		}
		for i := range g.slots {
			s := &g.slots[i]
			if c := s.conn.Load(); c != nil && !c.failed.Load() {
				continue
			}
			if s.mu.TryLock() {
				dialed := make(chan struct{})
				s.dialed.Store(&dialed)
				c, err := g.dialInto(ctx, s, deadline)
				s.dialed.Store(nil)
				close(dialed)
				s.mu.Unlock()
				if err != nil && best != nil && ctx.Err() == nil && !g.closed.Load() {
					return best, nil // busy but open beats none
				}
				return c, err
			}
		}
		if best != nil {
			return best, nil
		}
		// Every free slot is being dialed by another caller: wait for one, then look again.
		if err := g.waitDial(ctx, deadline); err != nil {
			return nil, err
		}
	}
}

// waitDial waits for the end of a dial into a free slot of g, within the caller's context
// and deadline.
func (g *pipeGroup) waitDial(ctx context.Context, deadline time.Time) error {
	for i := range g.slots {
		s := &g.slots[i]
		if c := s.conn.Load(); c != nil && !c.failed.Load() {
			continue
		}
		dialed := s.dialed.Load()
		if dialed == nil {
			goruntime.Gosched() // the dial is starting, or just ended: look again
			break
		}
		t := time.NewTimer(time.Until(deadline))
		select {
		case <-*dialed:
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		break
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if !time.Now().Before(deadline) {
		return errNoConnInTime
	}
	return nil
}

// dialInto opens a connection in slot s, whose mu the caller holds, unless another caller
// did meanwhile.
func (g *pipeGroup) dialInto(ctx context.Context, s *pipeSlot, deadline time.Time) (*pipeConn, error) {
	if c := s.conn.Load(); c != nil && !c.failed.Load() {
		return c, nil
	}
	dctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	raw, err := g.ps.dialSocket(dctx, g.addr)
	if err != nil {
		if dctx.Err() != nil && ctx.Err() == nil {
			err = errNoConnInTime
		}
		return nil, err
	}
	c, err := newPipeConn(raw, g.ps)
	if err != nil {
		raw.Close()
		return nil, err
	}
	s.conn.Store(c)
	if g.closed.Load() {
		// close ran while this dial was in flight and may have missed the slot.
		c.fail(errConnClosed)
		return nil, errPoolClosed
	}
	return c, nil
}

// close stops the group: new calls get errPoolClosed; with force every connection fails
// now (and close waits for its goroutines), else each closes when its last call ends.
func (g *pipeGroup) close(force bool) {
	g.closed.Store(true)
	for i := range g.slots {
		c := g.slots[i].conn.Load()
		if c == nil {
			continue
		}
		if force {
			c.fail(errConnClosed)
			c.wg.Wait()
		} else {
			c.closeIdle()
		}
	}
}

// gone reports whether every connection of a closed group has closed.
func (g *pipeGroup) gone() bool {
	for i := range g.slots {
		if c := g.slots[i].conn.Load(); c != nil && !c.failed.Load() {
			return false
		}
	}
	return true
}

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

// Errors of pipelined connections. Those of a failed connection are Thrift transport or
// protocol exceptions, so Invoke reports them as ErrTransport.
var (
	errConnClosed = thrift.NewTTransportException(thrift.NOT_OPEN, "zaris: pipelined connection closed")
	errNoReply    = thrift.NewTTransportException(thrift.TIMED_OUT, "zaris: pipelined connection sent no reply within an attempt timeout")
)

// pcall is one request on a pipelined connection. It is the thrift.TClient of its own
// generated client, kv, so the operation's generated code encodes the request (on pcall's
// own protocol, into its own buffer) and decodes the reply into its result struct, while
// the connection writes and reads the bytes.
type pcall struct {
	kv  any // Service.NewClient(the pcall)
	enc *thrift.TMemoryBuffer
	out thrift.TProtocol

	conn      *pipeConn
	deadline  time.Time
	callBound bool
	timer     *time.Timer

	state   atomic.Int32
	method  string
	seq     int32
	result  thrift.TStruct
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
	// owner lets the caller notice a newer map that moves its segment away (rule B6);
	// ownerMoved is set when the caller left for that reason.
	owner      ownerWait
	ownerMoved bool
	debt       *debt // the reply the node owes once the request is queued (suspect.go)
}

func (ps *pipelines) getCall() *pcall {
	if p, ok := ps.calls.Get().(*pcall); ok {
		return p
	}
	p := &pcall{enc: thrift.NewTMemoryBufferLen(256), done: make(chan struct{}, 1)}
	var err error
	if p.out, err = stackProtocol(p.enc, ps.protocol, ps.transport, ps.tcfg); err != nil {
		panic(err) // the Config was validated
	}
	if ps.protocol == ProtocolBinary && ps.transport == TransportFramed {
		p.out = thriftbuf.NewFrames(p.out, ps.tcfg) // the request is encoded in memory (thriftbuf)
	}
	p.kv = ps.newClient(p)
	p.timer = time.NewTimer(time.Hour)
	p.timer.Stop()
	return p
}

// putCall makes p reusable unless its caller left it with the connection.
func (ps *pipelines) putCall(p *pcall) {
	if p.abandoned {
		return
	}
	p.conn, p.result, p.err, p.sent, p.wasSent, p.timedOut = nil, nil, nil, false, false, false
	p.owner, p.ownerMoved, p.debt = ownerWait{}, false, nil
	ps.calls.Put(p)
}

// Call queues the request and waits for its reply, the end of the caller's context or the
// attempt's deadline, whichever comes first. It implements thrift.TClient for the
// generated client kv. The attempt timeout reaches the caller through the connection's
// sweep, up to one sweep interval late; a call's own deadline (callBound) that the
// context does not carry is kept exactly, by a timer.
func (p *pcall) Call(ctx context.Context, method string, args, result thrift.TStruct) (thrift.ResponseMeta, error) {
	var meta thrift.ResponseMeta
	c := p.conn
	p.method, p.result, p.seq = method, result, c.seq.Add(1)
	p.enc.Reset()
	if err := p.encode(ctx, args); err != nil {
		return meta, err
	}
	if err := ctx.Err(); err != nil {
		return meta, err // the caller left while it waited for the connection: send nothing
	}
	if p.debt != nil {
		p.debt.owe()
	}
	p.state.Store(stQueued)
	c.waiting.Add(1) // before enqueue, which starts the sweep if it does not run
	if err := c.enqueue(p); err != nil {
		c.waiting.Add(-1)
		return meta, err
	}
	err := p.wait(ctx)
	c.waiting.Add(-1)
	return meta, err
}

// wait waits for the outcome of p, queued: its reply, the end of the caller's context, or
// the end of its attempt, told by the sweep or kept by p's timer.
func (p *pcall) wait(ctx context.Context) error {
	var timeout <-chan time.Time
	if cdl, ok := ctx.Deadline(); p.callBound && (!ok || cdl.After(p.deadline)) {
		p.timer.Reset(time.Until(p.deadline))
		timeout = p.timer.C
	}
	ctxDone, moved := ctx.Done(), p.owner.ch
	if ctxDone == nil && timeout == nil && moved == nil {
		<-p.done
		return p.ended(ctx)
	}
	for moved != nil || ctxDone != nil || timeout != nil {
		select {
		case <-p.done:
			if timeout != nil {
				p.timer.Stop()
			}
			return p.ended(ctx)
		case <-ctxDone:
		case <-timeout:
		case <-moved:
			if moved = p.owner.next(); moved != nil {
				continue // a newer map, with the same owner for this segment
			}
		}
		break
	}
	if timeout != nil {
		p.timer.Stop()
	}
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
	p.abandoned = true
	if err := ctx.Err(); err != nil {
		return err
	}
	if moved == nil && p.owner.ch != nil {
		p.ownerMoved = true
		return errOwnerMoved
	}
	return context.DeadlineExceeded // the call's deadline
}

// ended is the outcome of a call told by done: its reply or its connection's failure, or
// the end of its attempt at its deadline (errSwept), after which the connection may still
// hold it.
func (p *pcall) ended(ctx context.Context) error {
	p.wasSent = p.sent
	if p.err != errSwept {
		return p.err
	}
	p.abandoned = true
	if err := ctx.Err(); err != nil {
		return err
	}
	p.timedOut = !p.callBound
	return context.DeadlineExceeded // the attempt timeout or the call's deadline
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
	return p.out.Flush(ctx)
}

// deliver hands p its outcome; the caller of deliver moved p to stReading or stFailing.
func (p *pcall) deliver(err error, sent bool) {
	p.err, p.sent = err, sent
	p.state.Store(stDone)
	p.done <- struct{}{}
}

// pipeConn is one pipelined connection. Callers queue encoded requests; whoever flushes
// (the first caller to find the writer free, else the writer goroutine) takes everything
// queued and writes it in one write; the reader goroutine reads replies in order and
// delivers each to the oldest request written, after checking its seqid and method.
type pipeConn struct {
	raw net.Conn
	in  thrift.TProtocol // read by the reader goroutine only

	seq     atomic.Int32
	pending atomic.Int32  // requests queued or in flight, to pick the least busy connection
	waiting atomic.Int32  // callers waiting on a request of theirs here; the sweep runs while any do
	replies atomic.Uint64 // replies read
	failed  atomic.Bool
	closing atomic.Bool // close when pending reaches zero

	mu       sync.Mutex // protects queue, inflight, head, readingEnd, err and sweeping
	queue    []*pcall   // encoded, not yet taken by a flush
	inflight []*pcall   // written, in order, from head on
	head     int
	err      error // why the connection failed
	stop     chan struct{}
	sweeping bool // the sweep goroutine runs

	// reading is the call whose reply the reader reads, set when the reader claims it
	// (under mu); the reader, to deliver its reply, or the sweep, at readingEnd (its
	// deadline), takes it.
	reading    atomic.Pointer[pcall]
	readingEnd time.Time

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

	// failClaimed, set by tests only, runs when the connection's failure has claimed a call
	// and not yet told it.
	failClaimed func(p *pcall)
}

func newPipeConn(raw net.Conn, ps *pipelines) (*pipeConn, error) {
	in, err := replyProtocol(raw, ps)
	if err != nil {
		return nil, err
	}
	c := &pipeConn{raw: raw, in: in, attemptTimeout: ps.timeout, sweepEvery: sweepInterval(ps.timeout),
		stop: make(chan struct{}), kick: make(chan struct{}, 1)}
	c.wg.Add(2)
	go c.readLoop()
	go c.writeLoop()
	return c, nil
}

// replyProtocol returns the protocol a pipelined connection's reader reads replies with.
// Framed binary and compact replies are read a whole frame at a time (framing.Reader), and
// a binary reply's body is decoded from memory (thriftbuf.Frames). JSON replies are read
// through failedReads.
func replyProtocol(raw net.Conn, ps *pipelines) (thrift.TProtocol, error) {
	if ps.transport == TransportFramed {
		switch ps.protocol {
		case ProtocolBinary:
			return thriftbuf.NewFrames(thrift.NewTBinaryProtocolConf(replyFrames(raw, ps), ps.tcfg), ps.tcfg).ShareBinaries(), nil
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
	c.queue = c.spare[:0]
	c.mu.Unlock()

	buf, batch := c.wbuf[:0], c.batch[:0]
	mark := c.replies.Load()
	now := time.Now()
	for _, p := range q {
		p.mark, p.written = mark, now // before the swap, which publishes them to the sweep
		if !now.Before(p.deadline) && p.expire(stQueued, stExpired, false) {
			// Its attempt ended while it was queued: it is not written, and its caller
			// is told so now.
			c.release()
			continue
		}
		if !p.state.CompareAndSwap(stQueued, stWritten) {
			c.release() // its caller left while it was queued
			continue
		}
		buf = append(buf, p.enc.Bytes()...)
		batch = append(batch, p)
	}
	clear(q)
	c.spare = q[:0]
	c.mu.Lock()
	if err := c.err; err != nil {
		c.mu.Unlock()
		// Failed while the batch was assembled: none of it was written.
		for _, p := range batch {
			c.failCall(p, stWritten, err, false)
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
		c.raw.SetWriteDeadline(time.Now().Add(c.attemptTimeout))
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
		n += p.enc.Len()
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
				c.readingEnd = p.deadline
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

// stillReading takes p, whose reply the reader has read or failed to read, back from the
// sweep, and reports whether it is still the reader's to deliver: the sweep did not end
// its attempt meanwhile.
func (c *pipeConn) stillReading(p *pcall) bool {
	return c.reading.CompareAndSwap(p, nil)
}

// fail closes the connection for err (the first failure wins) and fails every request on
// it: those queued were never sent, those written are in doubt.
func (c *pipeConn) fail(err error) {
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
		c.failCall(p, stQueued, err, false)
		c.pending.Add(-1)
	}
	for _, p := range inflight {
		c.failCall(p, stWritten, err, true)
		c.pending.Add(-1)
	}
}

// failCall tells p, in state from, the connection's failure err, unless its caller or the
// sweep ended it first; sent says whether its request was written. A caller that leaves
// meanwhile waits for it, so that its attempt's Sent is exact.
func (c *pipeConn) failCall(p *pcall, from int32, err error, sent bool) {
	if p.state.CompareAndSwap(from, stFailing) {
		if c.failClaimed != nil {
			c.failClaimed(p)
		}
		p.deliver(err, sent)
	}
}

// isThriftError reports whether err is a Thrift transport or protocol exception.
func isThriftError(err error) bool {
	var te thrift.TTransportException
	var pe thrift.TProtocolException
	return errors.As(err, &te) || errors.As(err, &pe)
}
