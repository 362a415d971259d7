package proof

import (
	"crypto/tls"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clustron/zaris-go/tools/store"
)

// peerAction is what a peerProxy does with one request frame of the store's peer traffic.
type peerAction struct {
	// delay holds the frame this long before it is forwarded; the connection's later
	// frames wait behind it. The frame is delivered even if the sender gave up meanwhile.
	delay time.Duration
	// drop closes the connection instead of forwarding the frame: the frame is lost.
	drop bool
	// dup also delivers a copy of the frame on a connection of its own after this long (0:
	// no copy); the node's answer to the copy is discarded.
	dup time.Duration
	// delivered, when set, is closed once the node answered the (delayed) frame.
	delivered chan struct{}
}

// peerRule decides the action for each request frame, by Thrift method name.
type peerRule func(method string) peerAction

// peerProxy is a TCP proxy on loopback in front of a node's peer port (framed binary
// Thrift). Its rule, switchable at run time, can delay, drop or duplicate each request
// frame; it counts the frames it faulted by method. Close ends every connection and
// goroutine of the proxy.
type peerProxy struct {
	ln     net.Listener
	target string
	creds  *store.Credentials
	rule   atomic.Pointer[peerRule]
	done   chan struct{}
	wg     sync.WaitGroup

	mu      sync.Mutex // protects everything below
	conns   map[net.Conn]struct{}
	faulted map[string]int
	closed  bool
}

// startPeerProxy starts a proxy to target on 127.0.0.1:0, closed by t.Cleanup. It is a
// member of the cluster: it ends the members' mutual TLS with creds on both sides, so it
// sees the frames it delays, duplicates and drops.
func startPeerProxy(t *testing.T, target string, creds *store.Credentials) *peerProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("peer proxy listen: %v", err)
	}
	p := &peerProxy{ln: tls.NewListener(ln, creds.ServerTLS()), target: target, creds: creds,
		done: make(chan struct{}), conns: map[net.Conn]struct{}{}, faulted: map[string]int{}}
	p.wg.Add(1)
	go p.acceptLoop()
	t.Cleanup(p.Close)
	return p
}

// dial opens a member's connection to the proxied node.
func (p *peerProxy) dial() (net.Conn, error) {
	return tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", p.target, p.creds.ClientTLS())
}

// Addr is the proxy's listening address.
func (p *peerProxy) Addr() string { return p.ln.Addr().String() }

// setRule switches the rule; nil forwards everything untouched.
func (p *peerProxy) setRule(r peerRule) {
	if r == nil {
		p.rule.Store(nil)
		return
	}
	p.rule.Store(&r)
}

// faults returns how many frames of method the rule delayed, dropped or duplicated.
func (p *peerProxy) faults(method string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.faulted[method]
}

// Close stops the proxy and ends every connection through it.
func (p *peerProxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	close(p.done)
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}

// track registers c to be closed by Close; it reports false (and closes c) once closed.
func (p *peerProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *peerProxy) untrack(c net.Conn) {
	c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

func (p *peerProxy) acceptLoop() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			continue
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// serve forwards one client connection: request frames through the rule, replies as they
// come. A reply the client can no longer take is read and discarded.
func (p *peerProxy) serve(client net.Conn) {
	defer p.wg.Done()
	defer p.untrack(client)
	up, err := p.dial()
	if err != nil || !p.track(up) {
		return
	}
	defer p.untrack(up)
	var notify atomic.Pointer[chan struct{}]
	replies := make(chan struct{})
	go func() {
		defer close(replies)
		buf := make([]byte, 32<<10)
		clientGone := false
		for {
			n, err := up.Read(buf)
			if n > 0 {
				if ch := notify.Swap(nil); ch != nil {
					close(*ch)
				}
				if !clientGone {
					_, werr := client.Write(buf[:n])
					clientGone = werr != nil
				}
			}
			if err != nil {
				client.Close()
				return
			}
		}
	}()
	defer func() { <-replies }()
	for {
		frame, method, err := readFrame(client)
		if err != nil {
			// The sender is gone: let the node answer what it got, then end.
			if tc, ok := up.(*net.TCPConn); ok {
				tc.CloseWrite()
			}
			return
		}
		var act peerAction
		if r := p.rule.Load(); r != nil {
			act = (*r)(method)
		}
		if act.drop || act.delay > 0 || act.dup > 0 {
			p.mu.Lock()
			p.faulted[method]++
			p.mu.Unlock()
		}
		if act.drop {
			up.Close()
			return
		}
		if act.delay > 0 {
			select {
			case <-time.After(act.delay):
			case <-p.done:
				return
			}
		}
		if act.delivered != nil {
			notify.Store(&act.delivered)
		}
		if act.dup > 0 {
			p.wg.Add(1)
			go p.duplicate(frame, act.dup)
		}
		if _, err := up.Write(frame); err != nil {
			return
		}
	}
}

// duplicate delivers frame again after d on a connection of its own and discards the answer.
func (p *peerProxy) duplicate(frame []byte, d time.Duration) {
	defer p.wg.Done()
	select {
	case <-time.After(d):
	case <-p.done:
		return
	}
	c, err := p.dial()
	if err != nil || !p.track(c) {
		return
	}
	defer p.untrack(c)
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write(frame); err == nil {
		readFrame(c)
	}
}

// readFrame reads one framed message (size prefix included) and its method name ("" when
// it is not strict binary).
func readFrame(r io.Reader) ([]byte, string, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, "", err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n > 64<<20 {
		return nil, "", io.ErrUnexpectedEOF
	}
	frame := make([]byte, 4+int(n))
	copy(frame, size[:])
	if _, err := io.ReadFull(r, frame[4:]); err != nil {
		return nil, "", err
	}
	name, _ := methodName(frame[4:])
	return frame, name, nil
}
