package store

import (
	"crypto/tls"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/clustron/zaris-go/tools/gen/zarispeer"
)

// errPoolClosed is returned by connPool.call after close; the call was not sent.
var errPoolClosed = notSentError{errors.New("store: connection pool closed")}

// notSentError is a call that provably never left: no connection could be had.
type notSentError struct{ err error }

func (e notSentError) Error() string { return e.err.Error() }
func (e notSentError) Unwrap() error { return e.err }

// notSent reports whether err says the call never reached the peer.
func notSent(err error) bool { return errors.As(err, new(notSentError)) }

// peerMaxMessage bounds one peer message (a segment copy travels in one message).
const peerMaxMessage = 256 << 20

// peerIdleTimeout is how long a peer or coordinator connection may stay silent.
const peerIdleTimeout = 30 * time.Second

// poolMaxIdleAge drops pooled connections unused for longer, well before the far end's
// idle timeout closes them.
const poolMaxIdleAge = peerIdleTimeout / 3

// pconn is one pooled framed-binary connection. Generated clients are not safe for concurrent
// use, so a connection serves one call at a time and a cheap client is built per call.
type pconn struct {
	addr  string
	cfg   *thrift.TConfiguration // owned by this connection: its socket timeout changes per call
	sock  socket
	proto thrift.TProtocol
	used  time.Time
}

// socket is a plain or a TLS Thrift socket.
type socket interface {
	thrift.TTransport
	SetSocketTimeout(time.Duration) error
}

// newSocket returns a socket to addr: TLS with tlsConfig, plain TCP when it is nil.
func newSocket(addr string, tlsConfig *tls.Config, cfg *thrift.TConfiguration) socket {
	if tlsConfig != nil {
		cfg.TLSConfig = tlsConfig
		return thrift.NewTSSLSocketConf(addr, cfg)
	}
	return thrift.NewTSocketConf(addr, cfg)
}

// connPool keeps idle connections per address for the store's internal traffic (node to
// node, coordinator to node, node to coordinator).
type connPool struct {
	connectTimeout time.Duration
	tls            *tls.Config // the member's client side (Credentials); nil: plain TCP

	mu     sync.Mutex // protects idle, busy and closed
	idle   map[string][]*pconn
	busy   map[*pconn]struct{}
	closed bool
}

// newConnPool returns a pool whose connections are TLS with tlsConfig, or plain TCP when nil.
func newConnPool(connectTimeout time.Duration, tlsConfig *tls.Config) *connPool {
	return &connPool{
		connectTimeout: connectTimeout,
		tls:            tlsConfig,
		idle:           make(map[string][]*pconn),
		busy:           make(map[*pconn]struct{}),
	}
}

// call borrows a connection to addr (dialling one if none is idle), runs fn with a client on
// it under the given socket timeout, and returns the connection to the pool, or drops it when
// fn failed: any error may have left the connection mid-message.
func (p *connPool) call(addr string, timeout time.Duration, fn func(thrift.TClient) error) error {
	c, err := p.get(addr)
	if err != nil {
		return err
	}
	_ = c.sock.SetSocketTimeout(timeout)
	err = fn(thrift.NewTStandardClient(c.proto, c.proto))
	p.put(c, err == nil)
	return err
}

func (p *connPool) get(addr string) (*pconn, error) {
	now := time.Now()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errPoolClosed
	}
	var stale []*pconn
	for list := p.idle[addr]; len(list) > 0; list = p.idle[addr] {
		c := list[len(list)-1]
		p.idle[addr] = list[:len(list)-1]
		if now.Sub(c.used) > poolMaxIdleAge {
			stale = append(stale, c)
			continue
		}
		p.busy[c] = struct{}{}
		p.mu.Unlock()
		closeAll(stale)
		return c, nil
	}
	p.mu.Unlock()
	closeAll(stale)

	cfg := &thrift.TConfiguration{
		ConnectTimeout:    p.connectTimeout,
		MaxMessageSize:    peerMaxMessage,
		MaxFrameSize:      peerMaxMessage,
		TBinaryStrictRead: thrift.BoolPtr(true),
	}
	sock := newSocket(addr, p.tls, cfg)
	if err := sock.Open(); err != nil {
		return nil, notSentError{err}
	}
	trans := thrift.NewTFramedTransportConf(thrift.NewTBufferedTransport(sock, 8192), cfg)
	c := &pconn{addr: addr, cfg: cfg, sock: sock, proto: thrift.NewTBinaryProtocolConf(trans, cfg)}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		sock.Close()
		return nil, errPoolClosed
	}
	p.busy[c] = struct{}{}
	p.mu.Unlock()
	return c, nil
}

func (p *connPool) put(c *pconn, ok bool) {
	p.mu.Lock()
	_, tracked := p.busy[c]
	delete(p.busy, c)
	if ok && tracked && !p.closed {
		c.used = time.Now()
		p.idle[c.addr] = append(p.idle[c.addr], c)
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	c.sock.Close()
}

// drop closes the idle connections to addr (after its node was found dead or restarted).
func (p *connPool) drop(addr string) {
	p.mu.Lock()
	list := p.idle[addr]
	delete(p.idle, addr)
	p.mu.Unlock()
	closeAll(list)
}

// close closes every connection, idle or busy; calls in flight fail and later calls get
// errPoolClosed.
func (p *connPool) close() {
	p.mu.Lock()
	p.closed = true
	var all []*pconn
	for _, list := range p.idle {
		all = append(all, list...)
	}
	for c := range p.busy {
		all = append(all, c)
	}
	p.idle = map[string][]*pconn{}
	p.busy = map[*pconn]struct{}{}
	p.mu.Unlock()
	closeAll(all)
}

func closeAll(list []*pconn) {
	for _, c := range list {
		c.sock.Close()
	}
}

// coordinators is a list of coordinator addresses (one leads; the others stand by and
// listen on nothing) and the index of the one that answered last.
type coordinators struct {
	addrs []string
	last  atomic.Int32
}

// newCoordinators parses a comma-separated list of coordinator addresses.
func newCoordinators(list string) *coordinators {
	var addrs []string
	for _, a := range strings.Split(list, ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	return &coordinators{addrs: addrs}
}

// call runs fn with the first coordinator that answers it without error, starting with the
// one that answered last, and returns the last error if none did. A LeftCluster answer is
// final: it comes from the leader.
func (cs *coordinators) call(p *connPool, timeout time.Duration, fn func(thrift.TClient) error) error {
	err := errors.New("store: no coordinator address")
	start := int(cs.last.Load())
	for i := range cs.addrs {
		k := (start + i) % len(cs.addrs)
		if err = p.call(cs.addrs[k], timeout, fn); err == nil {
			cs.last.Store(int32(k))
			return nil
		}
		if left := (*zarispeer.LeftCluster)(nil); errors.As(err, &left) {
			return err
		}
	}
	return err
}
