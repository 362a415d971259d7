package runtime

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// errPoolClosed is returned by a pool that was closed: its node left the map or the client
// was closed. Nothing was sent.
var errPoolClosed = errors.New("zaris: connection pool closed")

// pool is a bounded set of connections to one node. A borrower gets an idle connection if
// there is one, dials a new one while fewer than size are open, and otherwise waits for a
// connection to come back (or for its context to end). A connection that saw any error is
// closed by the borrower (discard), never returned, so no call reuses a connection in an
// unknown state.
//
// The hot path (get of an idle connection, put back) is two channel operations and an
// atomic load; mu is taken only to dial, discard and close.
type pool struct {
	addr string
	dial Dialer

	idle  chan *pooledConn // idle connections; capacity size, so a put never blocks
	slots chan struct{}    // one token per open or dialing connection; capacity size
	done  chan struct{}    // closed by close, wakes every waiting borrower

	closed atomic.Bool

	mu   sync.Mutex               // protects open
	open map[*pooledConn]struct{} // every open connection, idle or borrowed
}

// pooledConn is a connection a pool opened, with rule B6's record of the call in flight on
// it (ownerwatch.go), made once per connection whatever dialed it.
type pooledConn struct {
	Conn
	inFlight inFlight
}

func newPool(addr string, size int, dial Dialer) *pool {
	return &pool{
		addr:  addr,
		dial:  dial,
		idle:  make(chan *pooledConn, size),
		slots: make(chan struct{}, size),
		done:  make(chan struct{}),
		open:  make(map[*pooledConn]struct{}),
	}
}

// get borrows a connection: an idle one, else a new one while fewer than size are open,
// else the first to come back. A dial error is returned as is, a closed pool as
// errPoolClosed, an ended ctx as ctx.Err().
func (p *pool) get(ctx context.Context) (*pooledConn, error) {
	if p.closed.Load() {
		return nil, errPoolClosed
	}
	if c, ok := p.tryIdle(time.Now()); ok {
		return c, nil
	}
	for {
		select {
		case c := <-p.idle:
			if p.lendable(c, time.Now()) {
				return c, nil
			}
		case p.slots <- struct{}{}:
			return p.dialNew(ctx)
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-p.done:
			return nil, errPoolClosed
		}
	}
}

// lendable reports whether an idle connection may be lent at now (wall clock); one the
// node closed while it sat idle is discarded.
func (p *pool) lendable(c *pooledConn, now time.Time) bool {
	if cc, ok := c.Conn.(checkedConn); ok && !cc.usable(now) {
		p.discard(c)
		return false
	}
	return true
}

// tryIdle borrows an idle connection if there is one, without waiting; now is the
// wall-clock time.
func (p *pool) tryIdle(now time.Time) (*pooledConn, bool) {
	if p.closed.Load() {
		return nil, false
	}
	for {
		select {
		case c := <-p.idle:
			if p.lendable(c, now) {
				return c, true
			}
		default:
			return nil, false
		}
	}
}

// dialNew opens a connection in the slot its caller took.
func (p *pool) dialNew(ctx context.Context) (*pooledConn, error) {
	conn, err := p.dial(ctx, p.addr)
	if err != nil {
		<-p.slots
		return nil, err
	}
	p.mu.Lock()
	if p.closed.Load() {
		p.mu.Unlock()
		conn.Close()
		<-p.slots
		return nil, errPoolClosed
	}
	c := &pooledConn{Conn: conn}
	p.open[c] = struct{}{}
	p.mu.Unlock()
	return c, nil
}

// put returns a healthy connection for reuse. On a closed pool it is closed instead.
func (p *pool) put(c *pooledConn) {
	p.idle <- c
	// close stores closed before draining; whichever of the two runs last sees the
	// connection in idle and closes it.
	if p.closed.Load() {
		p.drainIdle()
	}
}

// discard closes a connection that saw an error and frees its slot for a new dial.
func (p *pool) discard(c *pooledConn) {
	c.Close()
	p.mu.Lock()
	delete(p.open, c)
	p.mu.Unlock()
	<-p.slots
}

// drainIdle closes every idle connection.
func (p *pool) drainIdle() {
	for {
		select {
		case c := <-p.idle:
			p.discard(c)
		default:
			return
		}
	}
}

// close stops the pool: borrowers waiting for a connection get errPoolClosed, idle
// connections are closed now, and borrowed ones when they come back. With force, borrowed
// connections are closed now too, which fails the calls they carry. close is idempotent.
func (p *pool) close(force bool) {
	if p.closed.CompareAndSwap(false, true) {
		close(p.done)
	}
	p.drainIdle()
	if force {
		p.mu.Lock()
		for c := range p.open {
			c.Close()
		}
		p.mu.Unlock()
	}
}

// openCount reports the open connections, idle or borrowed.
func (p *pool) openCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.open)
}
