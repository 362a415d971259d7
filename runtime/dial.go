package runtime

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/clustron/zaris-go/gen/zaris"
)

// Conn is one open connection to a node, with the generated Thrift client bound to it. A
// Conn carries one request at a time (the generated client is not safe for concurrent
// use), which is why connections are pooled per node. Close must be safe to call more than
// once and concurrently with a call in flight (it then makes that call fail).
type Conn interface {
	// Client returns the generated client that speaks over this connection.
	Client() zaris.ZarisKv
	// Close closes the connection.
	Close() error
}

// Dialer opens a connection to the node at addr (host:port). ctx bounds the dial; the
// built-in dialer also applies Config.DialTimeout. Replace it with WithDialer.
type Dialer func(ctx context.Context, addr string) (Conn, error)

// Limits of one Thrift message on a client connection. The store refuses keys and values
// past its own (much smaller) limits, so a bigger message is a broken or hostile peer.
const (
	maxMessageSize   = 16 << 20
	maxContainerSize = 1 << 20
	bufferSize       = 16 << 10
)

// thriftConfig is the one TConfiguration every client connection uses. SocketTimeout stays
// zero: each attempt's timeout and the caller's context are enforced per call (see
// thriftConn.arm), because protocol reads retry past socket timeouts while their
// context is live.
func thriftConfig(cfg Config) *thrift.TConfiguration {
	strict := true
	headerProto := thrift.THeaderProtocolBinary
	return &thrift.TConfiguration{
		MaxMessageSize:     maxMessageSize,
		MaxFrameSize:       maxMessageSize,
		MaxContainerSize:   maxContainerSize,
		ConnectTimeout:     cfg.DialTimeout,
		TBinaryStrictRead:  &strict,
		TBinaryStrictWrite: &strict,
		THeaderProtocolID:  &headerProto,
	}
}

// DefaultDialer returns the built-in dialer for cfg: TCP with cfg.DialTimeout, TLS when
// cfg.TLS is set (handshake inside the dial timeout), then cfg.Protocol over cfg.Transport
// (framed on a buffered socket, or buffered alone; header frames itself), with one shared
// TConfiguration bounding message and frame sizes.
func DefaultDialer(cfg Config) Dialer {
	tcfg := thriftConfig(cfg)
	dialSocket := socketDialer(cfg)
	protocol, transport := cfg.Protocol, cfg.Transport
	return func(ctx context.Context, addr string) (Conn, error) {
		raw, err := dialSocket(ctx, addr)
		if err != nil {
			return nil, err
		}
		c, err := newThriftConn(raw, protocol, transport, tcfg)
		if err != nil {
			raw.Close()
			return nil, err
		}
		return c, nil
	}
}

// socketDialer returns what DefaultDialer opens under the Thrift layers: a TCP connection
// within cfg.DialTimeout, wrapped in TLS (handshake done) when cfg.TLS is set.
func socketDialer(cfg Config) func(ctx context.Context, addr string) (net.Conn, error) {
	nd := &net.Dialer{Timeout: cfg.DialTimeout, KeepAlive: 30 * time.Second}
	tlsCfg, timeout := cfg.TLS, cfg.DialTimeout
	return func(ctx context.Context, addr string) (net.Conn, error) {
		if timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
		}
		raw, err := nd.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		if tlsCfg != nil {
			tc := tlsCfg
			if tc.ServerName == "" {
				tc = tc.Clone()
				tc.ServerName, _, _ = net.SplitHostPort(addr)
			}
			tconn := tls.Client(raw, tc)
			if err := tconn.HandshakeContext(ctx); err != nil {
				raw.Close()
				return nil, fmt.Errorf("tls handshake: %w", err)
			}
			raw = tconn
		}
		return raw, nil
	}
}

// newThriftConn stacks the protocol and transport on raw and binds a generated client.
func newThriftConn(raw net.Conn, p Protocol, t Transport, tcfg *thrift.TConfiguration) (*thriftConn, error) {
	proto, err := stackProtocol(newSockTransport(raw), p, t, tcfg)
	if err != nil {
		return nil, err
	}
	c := &thriftConn{
		raw:    raw,
		client: zaris.NewZarisKvClient(thrift.NewTStandardClient(proto, proto)),
	}
	c.abort = func() { c.raw.SetDeadline(aLongTimeAgo) }
	return c, nil
}

// stackProtocol puts protocol p over transport t (framed or not; header frames itself) on trans.
func stackProtocol(trans thrift.TTransport, p Protocol, t Transport, tcfg *thrift.TConfiguration) (thrift.TProtocol, error) {
	if p != ProtocolHeader && t == TransportFramed {
		trans = thrift.NewTFramedTransportConf(trans, tcfg)
	}
	switch p {
	case ProtocolBinary:
		return thrift.NewTBinaryProtocolConf(trans, tcfg), nil
	case ProtocolCompact:
		return thrift.NewTCompactProtocolConf(trans, tcfg), nil
	case ProtocolJSON:
		return thrift.NewTJSONProtocol(trans), nil
	case ProtocolHeader:
		return thrift.NewTHeaderProtocolConf(trans, tcfg), nil
	}
	return nil, fmt.Errorf("zaris: unknown protocol %q", p)
}

// thriftConn is a Conn made by the built-in dialer.
type thriftConn struct {
	raw    net.Conn
	client *zaris.ZarisKvClient
	abort  func() // moves the socket deadline to the past; made once, so arm does not allocate it
	// noDeadline wraps the context of the call in flight for the generated code (see
	// callSocket); reused from call to call.
	noDeadline withoutDeadline
	lastUsed   time.Time // when the last call started; read by usable
	once       sync.Once
	err        error
}

// Client returns the generated client bound to this connection.
func (c *thriftConn) Client() zaris.ZarisKv { return c.client }

// Close closes the socket. Only the socket holds resources (the Thrift layers above it are
// buffers), and closing a net.Conn is safe while a call reads or writes it.
func (c *thriftConn) Close() error {
	c.once.Do(func() { c.err = c.raw.Close() })
	return c.err
}

// aLongTimeAgo is a deadline that has passed, which makes a blocked read or write return.
var aLongTimeAgo = time.Unix(1, 0)

// arm prepares the connection for one call: the socket's deadline is set to deadline,
// and if ctx ends first (the caller cancelled, or a context timeout fired) the deadline is
// moved to the past so a blocked read or write returns at once. The generated code does
// not watch its context itself. stop reports false when ctx ended first: the connection's
// deadline is then spent and it must not be reused.
func (c *thriftConn) arm(ctx context.Context, deadline time.Time) (stop func() bool) {
	c.lastUsed = time.Now()
	c.raw.SetDeadline(deadline)
	if ctx.Done() == nil {
		return neverStopped
	}
	return context.AfterFunc(ctx, c.abort)
}

func neverStopped() bool { return true }

// idleCheckAfter is how long a connection may sit idle before the pool checks, when
// lending it, that the node has not closed it meanwhile (a node's idle timeout, a restart).
// Without the check the next call would fail after being written, which for a
// non-idempotent operation is an in-doubt error although the node never saw it. In
// nanoseconds; tests change it.
var idleCheckAfter atomic.Int64

func init() { idleCheckAfter.Store(int64(100 * time.Millisecond)) }

// usable reports whether the pool may lend this idle connection: it was used recently, or
// a peek at the socket finds it open with nothing unasked for waiting.
func (c *thriftConn) usable() bool {
	if time.Since(c.lastUsed) < time.Duration(idleCheckAfter.Load()) {
		return true
	}
	return idleConnOK(c.raw)
}

// checkedConn is implemented by connections that can tell, while idle, whether they are
// still usable; the pool asks before lending one.
type checkedConn interface {
	usable() bool
}

// sockTransport is a buffered thrift.TTransport over a net.Conn. It is used instead of
// thrift.TSocket because TSocket rewrites the socket deadline on every read and write,
// which would undo arm, and clears its conn on Close, which races with a call in flight.
type sockTransport struct {
	conn net.Conn
	r    *bufio.Reader
	w    *bufio.Writer
}

func newSockTransport(conn net.Conn) *sockTransport {
	return &sockTransport{conn: conn, r: bufio.NewReaderSize(conn, bufferSize), w: bufio.NewWriterSize(conn, bufferSize)}
}

func (s *sockTransport) Open() error  { return nil }
func (s *sockTransport) IsOpen() bool { return true }
func (s *sockTransport) Close() error { return s.conn.Close() }
func (s *sockTransport) RemainingBytes() uint64 {
	return ^uint64(0) // unknown: a stream
}

func (s *sockTransport) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	return n, wrapTransport(err)
}

func (s *sockTransport) ReadByte() (byte, error) {
	b, err := s.r.ReadByte()
	return b, wrapTransport(err)
}

func (s *sockTransport) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	return n, wrapTransport(err)
}

func (s *sockTransport) WriteByte(b byte) error { return wrapTransport(s.w.WriteByte(b)) }

func (s *sockTransport) WriteString(str string) (int, error) {
	n, err := s.w.WriteString(str)
	return n, wrapTransport(err)
}

func (s *sockTransport) Flush(context.Context) error { return wrapTransport(s.w.Flush()) }

// wrapTransport types a socket error as a thrift.TTransportException, as TSocket does, so
// the layers above (and Cluster.Invoke) see one error type for every transport failure.
func wrapTransport(err error) error {
	if err == nil {
		return nil
	}
	var te thrift.TTransportException
	if errors.As(err, &te) {
		return err
	}
	return thrift.NewTTransportExceptionFromError(err)
}
