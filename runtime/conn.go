package runtime

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"

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

// thriftConn is a Conn made by the built-in dialer.
type thriftConn struct {
	raw    net.Conn
	client *zaris.ZarisKvClient
	abort  func() // moves the socket deadline to the past; made once, so arm does not allocate it
	// noDeadline wraps the context of the call in flight for the generated code (see
	// callSocket); reused from call to call.
	noDeadline withoutDeadline
	lastUsed   time.Time // when the last call started; read by usable
	deadline   time.Time // the socket's deadline as arm last set it
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

// arm prepares the connection for one call starting at now: the socket's deadline is set
// to deadline, or left where it is if that is no earlier than deadline and at most late
// after it (else it is set to deadline+late, so the calls of the next late reuse it); and
// if ctx ends first (the caller cancelled, or a context timeout fired) the deadline is
// moved to the past so a blocked read or write returns at once. The generated code does
// not watch its context itself. stop reports false when ctx ended first: the connection's
// deadline is then spent and it must not be reused.
func (c *thriftConn) arm(ctx context.Context, deadline, now time.Time, late time.Duration) (stop func() bool) {
	c.lastUsed = now
	if deadline.After(c.deadline) || c.deadline.Sub(deadline) > late {
		c.deadline = deadline.Add(late)
		c.raw.SetDeadline(c.deadline)
	}
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

// usable reports whether the pool may lend this idle connection at now: it was used
// recently, or a peek at the socket finds it open with nothing unasked for waiting.
func (c *thriftConn) usable(now time.Time) bool {
	if now.Sub(c.lastUsed) < time.Duration(idleCheckAfter.Load()) {
		return true
	}
	return idleConnOK(c.raw)
}

// checkedConn is implemented by connections that can tell, while idle, whether they are
// still usable; the pool asks before lending one.
type checkedConn interface {
	usable(now time.Time) bool
}

// withoutDeadline is a context that hides its parent's deadline but keeps its
// cancellation and values.
type withoutDeadline struct{ context.Context }

func (withoutDeadline) Deadline() (time.Time, bool) { return time.Time{}, false }
