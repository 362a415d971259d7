package runtime

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/clustron/zaris-go/internal/thriftbuf"
)

// Conn is one open connection to a node, with the service's generated client bound to it. A
// Conn carries one request at a time (the generated client is not safe for concurrent
// use), which is why connections are pooled per node. Close must be safe to call more than
// once and concurrently with a call in flight (it then makes that call fail).
type Conn interface {
	// Client returns the generated client that speaks over this connection: what
	// Service.NewClient made of its thrift.TClient, which Op.Invoke takes.
	Client() any
	// Close closes the connection.
	Close() error
}

// Dialer opens a connection to the node at addr (host:port). ctx bounds the dial; the
// built-in dialer also applies Config.DialTimeout. Replace it with WithDialer.
type Dialer func(ctx context.Context, addr string) (Conn, error)

// thriftConn is a Conn made by the built-in dialer.
type thriftConn struct {
	raw    net.Conn
	sock   *sockTransport // the buffered transport over raw that the protocol writes to
	client any            // Service.NewClient over the connection's thrift.TClient
	// codec is set on a framed binary or compact connection: an operation with a Codec
	// in its protocol is sent and read with it (codecCall), within tcfg's bounds and
	// limit's (the map's MaxMessageBytes), its request encoded into wire with sequence id
	// seq, its reply's body read into body (binary) or its frame into reply (compact, whose
	// header replyHeader reads).
	codec       codecWire
	reply       *thriftbuf.Protocol
	replyHeader thrift.TProtocol
	tcfg        *thrift.TConfiguration
	limit       *atomic.Int64
	wire        []byte
	body        []byte
	seq         int32
	// noDeadline wraps the context of the call in flight for the generated code (see
	// callSocket); reused from call to call.
	noDeadline withoutDeadline
	lastUsed   time.Time // when the last call started; read by usable
	deadline   time.Time // the socket's deadline as arm last set it
	once       sync.Once
	err        error

	// idleCheck is how long it may sit idle before usable peeks at its socket
	// (Config.idleCheckAfter).
	idleCheck time.Duration

	// The watch on the caller's context (see arm): a context.AfterFunc that aborts the
	// call in flight, kept from call to call while they come with the same context.
	stopCall  func() bool // c.endCall and c.abort, made once so arm does not allocate them
	abortCall func()
	watchMu   sync.Mutex
	watchDone <-chan struct{} // Done of the context watched; nil when there is no watch
	watchStop func() bool     // ends the watch
	lastDone  <-chan struct{} // Done of the previous call's context
	inCall    bool            // a call is in flight under the watch
	aborted   bool            // the watch moved the deadline to the past during this call
}

// Client returns the generated client bound to this connection.
func (c *thriftConn) Client() any { return c.client }

// Close closes the socket. Only the socket holds resources (the Thrift layers above it are
// buffers), and closing a net.Conn is safe while a call reads or writes it.
func (c *thriftConn) Close() error {
	c.once.Do(func() {
		c.err = c.raw.Close()
		c.watchMu.Lock()
		c.unwatch()
		c.watchMu.Unlock()
	})
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
//
// The watch on ctx is a context.AfterFunc, which costs two allocations and a lock and map
// update on the context's parent to make and again to stop. When a connection's call
// comes with the context (the same Done channel) of its previous call, as the calls of a
// long-lived context (one made by signal.NotifyContext, say) do, the watch is kept after
// the call for the next ones; it ends when a call comes with another context or the
// connection is closed. A watch that fires between calls does nothing.
func (c *thriftConn) arm(ctx context.Context, deadline, now time.Time, late time.Duration) (stop func() bool) {
	c.lastUsed = now
	if deadline.After(c.deadline) || c.deadline.Sub(deadline) > late {
		c.deadline = deadline.Add(late)
		c.raw.SetDeadline(c.deadline)
	}
	done := ctx.Done()
	if done == nil {
		return neverStopped
	}
	c.watchMu.Lock()
	if c.watchDone != done {
		c.unwatch()
		c.watchDone = done
		c.watchStop = context.AfterFunc(ctx, c.abortCall)
	}
	c.inCall, c.aborted = true, false
	c.watchMu.Unlock()
	if ctx.Err() != nil {
		// A kept watch fired between calls, when there was nothing to abort.
		c.abort()
	}
	return c.stopCall
}

// abort moves the socket's deadline to the past if a call is in flight and its context
// has ended. A watch that fires late, after the connection moved on to another context,
// so finds that context live and does nothing.
func (c *thriftConn) abort() {
	c.watchMu.Lock()
	defer c.watchMu.Unlock()
	if !c.inCall || c.aborted {
		return
	}
	select {
	case <-c.watchDone:
		c.aborted = true
		c.raw.SetDeadline(aLongTimeAgo)
	default:
	}
}

// endCall ends the call that arm armed with a context that can end, and reports false if
// its watch aborted it. The watch is kept for the next call if this call's context was
// also the previous call's; else it ends.
func (c *thriftConn) endCall() bool {
	c.watchMu.Lock()
	defer c.watchMu.Unlock()
	c.inCall = false
	if c.aborted {
		return false
	}
	if c.watchDone != c.lastDone {
		c.lastDone = c.watchDone
		c.unwatch()
	}
	return true
}

// unwatch ends the watch, if any; c.watchMu is held.
func (c *thriftConn) unwatch() {
	if c.watchStop != nil {
		c.watchStop()
	}
	c.watchDone, c.watchStop = nil, nil
}

func neverStopped() bool { return true }

// defaultIdleCheckAfter is how long a connection may sit idle before the pool checks, when
// lending it, that the node has not closed it meanwhile (a node's idle timeout, a restart),
// unless Config.idleCheckAfter says otherwise. Without the check the next call would fail
// after being written, which for a non-idempotent operation is an in-doubt error although
// the node never saw it.
const defaultIdleCheckAfter = 100 * time.Millisecond

// usable reports whether the pool may lend this idle connection at now: it was used
// recently (within c.idleCheck), or a peek at the socket finds it open with nothing
// unasked for waiting.
func (c *thriftConn) usable(now time.Time) bool {
	if now.Sub(c.lastUsed) < c.idleCheck {
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
