package store

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/clustron/zaris-go/internal/framing"
	"github.com/clustron/zaris-go/internal/thriftbuf"
)

func init() {
	// The generated processors start a goroutine and a 5 ms ticker per request to notice a
	// client that went away (thrift.ServerConnectivityCheckInterval). The store's handlers are
	// short, and the check costs up to half the throughput on loopback, so the store turns it
	// off. Every server in the process shares this switch; the store's own servers are the only
	// servers a process that imports this package runs.
	thrift.ServerConnectivityCheckInterval = 0
}

// Protocol selects the wire protocols a node's data port accepts.
type Protocol int

const (
	// ProtocolHeader, the default, serves THeader clients and, on the same port, framed and
	// unframed binary and compact clients, answering each in its own format.
	ProtocolHeader Protocol = iota
	// ProtocolJSON serves JSON-protocol clients, framed or unframed (told apart by the first
	// byte of the connection), instead of the protocols of ProtocolHeader.
	ProtocolJSON
)

// String returns the protocol's flag name: "header" or "json".
func (p Protocol) String() string {
	switch p {
	case ProtocolHeader:
		return "header"
	case ProtocolJSON:
		return "json"
	}
	return fmt.Sprintf("Protocol(%d)", int(p))
}

// ParseProtocol parses a Protocol from its String form.
func ParseProtocol(s string) (Protocol, error) {
	switch s {
	case "header", "":
		return ProtocolHeader, nil
	case "json":
		return ProtocolJSON, nil
	}
	return 0, fmt.Errorf("store: unknown protocol %q (want header or json)", s)
}

// wire says how a server reads and writes messages.
type wire int

const (
	wireHeader       wire = iota // THeader factories: header, binary, compact, framed or not
	wireJSON                     // JSON, framed or buffered by the first byte
	wireFramedBinary             // peer traffic: framed strict binary
)

// server is a Thrift server on one listener. Unlike thrift.TSimpleServer it tracks every
// connection, so close ends them all at once (a node's Kill) and waits for their goroutines.
type server struct {
	ln        net.Listener
	cfg       *thrift.TConfiguration // the one configuration of socket, transport and protocol
	processor thrift.TProcessor
	wire      wire
	log       *slog.Logger
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup

	lim *portLimits // nil: the data port, bounded by cfg alone

	mu     sync.Mutex // protects conns and closed
	conns  map[net.Conn]struct{}
	closed bool
}

// serverConfig returns the one TConfiguration a server shares between its sockets, transport
// factory and protocol factory. maxMessage bounds every frame and message; idle is the time a
// connection may stay silent (or stall mid-message) before it is closed.
func serverConfig(maxMessage int32, maxContainer int32, idle time.Duration) *thrift.TConfiguration {
	return &thrift.TConfiguration{
		MaxMessageSize:    maxMessage,
		MaxFrameSize:      maxMessage,
		MaxContainerSize:  maxContainer,
		SocketTimeout:     idle,
		TBinaryStrictRead: thrift.BoolPtr(true),
	}
}

// newServer listens on addr (wrapped in TLS when tlsConfig is set) and serves processor,
// wrapped in the recovery middleware, until close; its handlers get a context that ends
// with parent or close. lim, set for an internal port, bounds what it buffers. It returns
// once the listener is bound.
func newServer(parent context.Context, addr string, tlsConfig *tls.Config, cfg *thrift.TConfiguration, w wire, processor thrift.TProcessor, lim *portLimits, log *slog.Logger) (*server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	if tlsConfig != nil {
		ln = tls.NewListener(ln, tlsConfig)
	}
	s := &server{
		ln:        ln,
		cfg:       cfg,
		processor: thrift.WrapProcessor(processor, recoverMiddleware(log)),
		wire:      w,
		lim:       lim,
		log:       log,
		conns:     make(map[net.Conn]struct{}),
	}
	s.ctx, s.cancel = context.WithCancel(parent)
	s.wg.Add(1)
	go s.acceptLoop()
	return s, nil
}

// addr returns the bound address, host:port.
func (s *server) addr() string { return s.ln.Addr().String() }

func (s *server) acceptLoop() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return
			}
			// A failed TLS handshake or a transient accept error: keep serving.
			time.Sleep(time.Millisecond)
			continue
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		if s.lim != nil && len(s.conns) >= s.lim.maxConns {
			s.mu.Unlock()
			c.Close()
			continue
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serveConn(c)
	}
}

// close stops accepting, closes every open connection at once (in-flight requests get no
// answer, like a crashed process) and waits for all connection goroutines.
func (s *server) close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.wg.Wait()
		return
	}
	s.closed = true
	s.ln.Close()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
}

func (s *server) serveConn(c net.Conn) {
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
		s.wg.Done()
	}()
	err := s.process(c)
	if tooLarge, ok := errors.AsType[*framing.FrameTooLargeError](err); ok {
		// A client sent more than this port takes: it is told nothing but a closed
		// connection, so say here who it was.
		s.log.Warn("refused a frame over the limit, connection closed", "remote", c.RemoteAddr().String(),
			"size", tooLarge.Size, "limit", tooLarge.Max)
		return
	}
	if err != nil && !isEOF(err) {
		s.log.Debug("connection closed", "remote", c.RemoteAddr().String(), "err", err)
	}
}

// batchConn is a net.Conn whose reads and writes go through buffers. Replies are written
// to the socket only when the next read would wait for the network, that is when no further
// request is already buffered: a client that sends many requests in one write (a pipelined
// client) gets their replies in one write, and a client that sends one request at a time
// gets each reply at once, as before. Its read buffer also lets the first bytes of a
// connection be peeked at before the Thrift transport reads them.
//
// The connection's idle timeout is applied here, once per read from or write to the socket,
// rather than by the Thrift socket above on every read and write of a buffer: the deadlines
// that socket sets are ignored.
type batchConn struct {
	net.Conn
	r    *bufio.Reader
	w    *bufio.Writer
	idle time.Duration // how long one read from or write to the socket may wait; 0: no bound
}

func newBatchConn(c net.Conn, idle time.Duration, size int) *batchConn {
	b := &batchConn{Conn: c, idle: idle}
	b.r = bufio.NewReaderSize(deadlineReader{b}, size)
	b.w = bufio.NewWriterSize(deadlineWriter{b}, size)
	return b
}

func (b *batchConn) Read(p []byte) (int, error) {
	if b.r.Buffered() == 0 && b.w.Buffered() > 0 {
		if err := b.w.Flush(); err != nil {
			return 0, err
		}
	}
	return b.r.Read(p)
}

func (b *batchConn) Write(p []byte) (int, error) { return b.w.Write(p) }

// SetDeadline, SetReadDeadline and SetWriteDeadline ignore the Thrift socket's deadlines.
func (b *batchConn) SetDeadline(time.Time) error      { return nil }
func (b *batchConn) SetReadDeadline(time.Time) error  { return nil }
func (b *batchConn) SetWriteDeadline(time.Time) error { return nil }

// deadlineReader and deadlineWriter are the socket under batchConn's buffers, each read and
// write bounded by the idle timeout.
type deadlineReader struct{ b *batchConn }

func (d deadlineReader) Read(p []byte) (int, error) {
	if d.b.idle > 0 {
		_ = d.b.Conn.SetReadDeadline(time.Now().Add(d.b.idle))
	}
	return d.b.Conn.Read(p)
}

type deadlineWriter struct{ b *batchConn }

func (d deadlineWriter) Write(p []byte) (int, error) {
	if d.b.idle > 0 {
		_ = d.b.Conn.SetWriteDeadline(time.Now().Add(d.b.idle))
	}
	return d.b.Conn.Write(p)
}

func (s *server) process(c net.Conn) error {
	if s.wire == wireFramedBinary {
		return s.processInternal(c)
	}
	bc := newBatchConn(c, s.cfg.SocketTimeout, 64<<10)
	defer bc.w.Flush() // a last reply (an exception before the connection ends) still goes out
	in, err := s.protocolFor(bc)
	if err != nil {
		return err
	}
	out := in
	hp, _ := in.(*thrift.THeaderProtocol)
	for {
		if s.ctx.Err() != nil {
			return nil
		}
		ctx := s.ctx
		if hp != nil {
			// Read the frame first so a header client's headers reach the context.
			if err := hp.ReadFrame(ctx); err != nil {
				return err
			}
			ctx = thrift.AddReadTHeaderToContext(ctx, hp.GetReadHeaders())
		}
		ok, err := s.processor.Process(ctx, in, out)
		if next, err := served(ok, err); !next {
			return err
		}
	}
}

// served judges what the processor returned for one request: whether the connection goes
// on to the next, or the error that ends it. A transport error ends it; an unknown method
// was answered and the connection goes on.
func served(ok bool, err error) (next bool, end error) {
	if err == nil {
		return ok, nil
	}
	var te thrift.TTransportException
	if errors.As(err, &te) {
		return false, err
	}
	var ae thrift.TApplicationException
	if errors.As(err, &ae) && ae.TypeId() == thrift.UNKNOWN_METHOD {
		return true, nil
	}
	return ok, err
}

// processInternal serves one connection of an internal port: framed strict binary, each
// request frame judged by its length before it is buffered, its bytes taken from the
// port's budget (portLimits), and replies of up to maxReply (a segment copy).
func (s *server) processInternal(c net.Conn) error {
	bc := newBatchConn(c, s.cfg.SocketTimeout, internalBufferSize)
	defer bc.w.Flush()
	maxRequest, maxReply := s.cfg.GetMaxFrameSize(), s.cfg.GetMaxFrameSize()
	if s.lim != nil {
		maxRequest, maxReply = s.lim.maxRequest, s.lim.maxReply
	}
	ft := newFrameTransport(bc, maxRequest)
	ft.maxFrame = maxReply
	if s.lim != nil {
		ft.SetBudget(s.lim.budget)
	}
	defer ft.Free()
	proto := thrift.NewTBinaryProtocolConf(ft, s.cfg)
	for s.ctx.Err() == nil {
		ok, err := s.processor.Process(s.ctx, proto, proto)
		if next, err := served(ok, err); !next {
			return err
		}
	}
	return nil
}

// protocolFor returns the protocol that reads bc's requests and writes its replies. A JSON
// server tells framed from unframed JSON by the first byte. A header server gives THeader
// clients the THeader protocol, and serves a client whose first message is plain binary or
// compact, framed or not, with that protocol directly, answering in the same format as
// THeader would but without its per-message detection and copying. A connection keeps the
// format of its first message.
//
// The Thrift socket under the protocol has no timeout: batchConn bounds each read from and
// write to the network itself, and a Thrift socket with a timeout reads the clock on every
// read and write of a buffer.
func (s *server) protocolFor(bc *batchConn) (thrift.TProtocol, error) {
	cfg := *s.cfg
	cfg.SocketTimeout = 0
	sock := thrift.NewTSocketFromConnConf(bc, &cfg)
	framed := func() thrift.TTransport { return thrift.NewTFramedTransportConf(sock, &cfg) }
	switch s.wire {
	case wireJSON:
		first, err := bc.r.Peek(1)
		if err != nil {
			return nil, err
		}
		var trans thrift.TTransport = framed()
		if first[0] == '[' {
			trans = thrift.NewTBufferedTransport(sock, 4096)
		}
		in := thrift.NewTJSONProtocol(trans)
		thrift.PropagateTConfiguration(in, &cfg) // the JSON protocol takes no configuration
		return in, nil
	}
	switch plainFormat(bc.r) {
	case formatBinary:
		return thrift.NewTBinaryProtocolConf(sock, &cfg), nil
	case formatCompact:
		return thrift.NewTCompactProtocolConf(sock, &cfg), nil
	case formatFramedBinary:
		return framedBinary(bc, &cfg), nil
	case formatFramedCompact:
		return thrift.NewTCompactProtocolConf(newFrameTransport(bc, cfg.GetMaxFrameSize()), &cfg), nil
	}
	return thrift.NewTHeaderProtocolConf(thrift.NewTHeaderTransportConf(sock, &cfg), &cfg), nil
}

// framedBinary is the protocol of a framed binary connection: each request frame read
// whole (frameTransport) and its body decoded, and each reply encoded, in memory
// (thriftbuf.Frames).
func framedBinary(bc *batchConn, cfg *thrift.TConfiguration) thrift.TProtocol {
	return thriftbuf.NewFrames(thrift.NewTBinaryProtocolConf(newFrameTransport(bc, cfg.GetMaxFrameSize()), cfg), cfg)
}

// The formats plainFormat tells apart.
const (
	formatOther         = iota // THeader, or bytes no format accepts: the THeader transport decides
	formatBinary               // strict binary, unframed
	formatCompact              // compact, unframed
	formatFramedBinary         // strict binary in frames
	formatFramedCompact        // compact in frames
)

// plainFormat peeks at the first message of a connection and names its format. It waits
// for at most 6 bytes, fewer than any message of any format holds; a read error leaves the
// decision (and the error) to the THeader transport.
func plainFormat(r *bufio.Reader) int {
	head, err := r.Peek(4)
	if err != nil {
		return formatOther
	}
	if isBinary(head) {
		return formatBinary
	}
	if isCompact(head) {
		return formatCompact
	}
	head, err = r.Peek(6)
	if err != nil {
		return formatOther
	}
	switch {
	case isBinary(head[4:]):
		return formatFramedBinary
	case isCompact(head[4:]):
		return formatFramedCompact
	}
	return formatOther
}

// isBinary reports whether b starts a strict binary message: version 1 in the first two bytes.
func isBinary(b []byte) bool { return b[0] == 0x80 && b[1] == 0x01 }

// isCompact reports whether b starts a compact message: the protocol id, then version 1.
func isCompact(b []byte) bool {
	return b[0] == thrift.COMPACT_PROTOCOL_ID && b[1]&thrift.COMPACT_VERSION_MASK == thrift.COMPACT_VERSION
}

// isEOF reports whether err is the peer going away or the idle timeout closing the conn.
func isEOF(err error) bool {
	var te thrift.TTransportException
	if errors.As(err, &te) {
		switch te.TypeId() {
		case thrift.END_OF_FILE, thrift.NOT_OPEN:
			return true
		}
	}
	return errors.Is(err, net.ErrClosed)
}

// recoverMiddleware turns a panicking handler into a closed connection: the panic is logged
// and the one connection that carried the request ends, while the node keeps serving.
func recoverMiddleware(log *slog.Logger) thrift.ProcessorMiddleware {
	return func(name string, next thrift.TProcessorFunction) thrift.TProcessorFunction {
		return thrift.WrappedTProcessorFunction{
			Wrapped: func(ctx context.Context, seqID int32, in, out thrift.TProtocol) (ok bool, err thrift.TException) {
				defer func() {
					if r := recover(); r != nil {
						log.Error("handler panicked", "method", name, "panic", fmt.Sprint(r))
						ok = false
						err = thrift.NewTTransportException(thrift.UNKNOWN_TRANSPORT_EXCEPTION,
							fmt.Sprintf("store: handler %s panicked: %v", name, r))
					}
				}()
				return next.Process(ctx, seqID, in, out)
			},
		}
	}
}
