package proof

import (
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fault is what a faultProxy does to the connections through it.
type fault int

const (
	// faultNone forwards every byte both ways at once.
	faultNone fault = iota
	// faultDelay forwards every chunk both ways after the proxy's delay.
	faultDelay
	// faultBlackhole accepts connections and reads requests but never forwards or answers.
	faultBlackhole
	// faultDrop closes every open connection when set, and every new one at once.
	faultDrop
	// faultReset resets (RST) every open connection when set, and every new one as soon as
	// it sends something, so a request is written and its reply is a reset.
	faultReset
	// faultLoseEveryOtherReply forwards every request, and closes the connection instead of
	// forwarding every second Increment reply (counted across the proxy's connections): the
	// node applied the Increment and its reply is lost.
	faultLoseEveryOtherReply
	// faultCloseAfterEveryOtherRequest closes the connection right after forwarding every
	// second Increment request: the node gets it and cannot answer.
	faultCloseAfterEveryOtherRequest
	// faultSwallowReplies forwards every request and discards every reply, keeping the
	// connection open: the node applies writes the client never hears of.
	faultSwallowReplies
)

// String names the fault.
func (f fault) String() string {
	switch f {
	case faultDelay:
		return "delay"
	case faultBlackhole:
		return "blackhole"
	case faultDrop:
		return "drop"
	case faultReset:
		return "reset"
	case faultLoseEveryOtherReply:
		return "lose-every-other-reply"
	case faultCloseAfterEveryOtherRequest:
		return "close-after-every-other-request"
	case faultSwallowReplies:
		return "swallow-replies"
	}
	return "none"
}

// faultProxy is a TCP proxy on loopback in front of one node. Its fault can be switched at
// run time; it counts the connections it accepted and the requests clients sent through it
// by Thrift method name (framed binary, the client's default). Close ends every connection
// and goroutine of the proxy.
type faultProxy struct {
	ln       net.Listener
	target   string
	accepted atomic.Int64
	wg       sync.WaitGroup
	// increments counts the Increment requests (or replies) the every-other faults saw.
	increments atomic.Int64

	mu       sync.Mutex // protects everything below
	fault    fault
	delay    time.Duration
	pairs    map[*proxyPair]struct{}
	requests map[string]int
	closed   bool
}

// startFaultProxy starts a proxy to target on 127.0.0.1:0, closed by t.Cleanup.
func startFaultProxy(t *testing.T, target string) *faultProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy listen: %v", err)
	}
	p := &faultProxy{ln: ln, target: target, pairs: map[*proxyPair]struct{}{}, requests: map[string]int{}}
	p.wg.Add(1)
	go p.acceptLoop()
	t.Cleanup(p.Close)
	return p
}

// Addr is the proxy's listening address.
func (p *faultProxy) Addr() string { return p.ln.Addr().String() }

// set switches the fault (delay applies to faultDelay). Drop closes and reset resets every
// connection open now.
func (p *faultProxy) set(f fault, delay time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fault, p.delay = f, delay
	for pr := range p.pairs {
		switch f {
		case faultDrop:
			pr.close()
		case faultReset:
			pr.reset()
		}
	}
}

// current returns the fault and delay in force.
func (p *faultProxy) current() (fault, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fault, p.delay
}

// resetCounts zeroes the connection and request counts.
func (p *faultProxy) resetCounts() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.accepted.Store(0)
	clear(p.requests)
}

// requestCount is how many requests for method clients sent since the last resetCounts.
func (p *faultProxy) requestCount(method string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.requests[method]
}

// open is how many proxied connections are open.
func (p *faultProxy) open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.pairs)
}

func (p *faultProxy) count(methods []string) {
	if len(methods) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range methods {
		p.requests[m]++
	}
}

// Close stops accepting, closes every connection and waits for the proxy's goroutines.
func (p *faultProxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.ln.Close()
	for pr := range p.pairs {
		pr.close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *faultProxy) acceptLoop() {
	defer p.wg.Done()
	for {
		conn, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.accepted.Add(1)
		p.mu.Lock()
		if p.closed || p.fault == faultDrop {
			p.mu.Unlock()
			conn.Close()
			continue
		}
		pr := &proxyPair{client: conn}
		p.pairs[pr] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		go p.serve(pr)
	}
}

// serve dials the node for pr's client and pumps both ways until either side ends.
func (p *faultProxy) serve(pr *proxyPair) {
	defer p.wg.Done()
	defer func() {
		pr.close()
		p.mu.Lock()
		delete(p.pairs, pr)
		p.mu.Unlock()
	}()
	up, err := net.DialTimeout("tcp", p.target, time.Second)
	if err != nil {
		return
	}
	if !pr.setUpstream(up) {
		up.Close()
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.pumpReplies(pr)
	}()
	p.pumpRequests(pr)
	pr.close()
	<-done
}

// pumpRequests forwards client bytes to the node under the fault in force, counting the
// requests they carry.
func (p *faultProxy) pumpRequests(pr *proxyPair) {
	var frames frameCounter
	buf := make([]byte, 32<<10)
	for {
		n, err := pr.client.Read(buf)
		if n > 0 {
			methods := frames.feed(buf[:n])
			p.count(methods)
			f, delay := p.current()
			switch f {
			case faultBlackhole:
				continue // read and discard, never answer
			case faultDrop:
				return
			case faultReset:
				pr.reset()
				return
			case faultDelay:
				time.Sleep(delay)
			}
			if _, werr := pr.upstream.Write(buf[:n]); werr != nil {
				return
			}
			if f == faultCloseAfterEveryOtherRequest && p.everyOther(methods) {
				return // the request went out; the connection closes before its reply
			}
		}
		if err != nil {
			return
		}
	}
}

// everyOther counts the Increments among methods and reports whether one of them was the
// second of a pair.
func (p *faultProxy) everyOther(methods []string) bool {
	hit := false
	for _, m := range methods {
		if m == "Increment" && p.increments.Add(1)%2 == 0 {
			hit = true
		}
	}
	return hit
}

// pumpReplies forwards the node's bytes to the client under the fault in force.
func (p *faultProxy) pumpReplies(pr *proxyPair) {
	var frames frameCounter
	buf := make([]byte, 32<<10)
	for {
		n, err := pr.upstream.Read(buf)
		if n > 0 {
			f, delay := p.current()
			methods := frames.feed(buf[:n])
			switch f {
			case faultBlackhole, faultSwallowReplies:
				continue
			case faultDrop, faultReset:
				return
			case faultLoseEveryOtherReply:
				if p.everyOther(methods) {
					pr.close() // the reply is lost with the connection
					return
				}
			case faultDelay:
				time.Sleep(delay)
			}
			if _, werr := pr.client.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// proxyPair is one client connection and its connection to the node.
type proxyPair struct {
	client net.Conn

	mu       sync.Mutex // protects upstream's assignment and closed
	upstream net.Conn
	closed   bool
}

// setUpstream records the node side; false if the pair was closed meanwhile.
func (pr *proxyPair) setUpstream(up net.Conn) bool {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.closed {
		return false
	}
	pr.upstream = up
	return true
}

// close closes both sides with a FIN.
func (pr *proxyPair) close() { pr.end(false) }

// reset closes the client side with an RST (linger 0) and the node side normally.
func (pr *proxyPair) reset() { pr.end(true) }

func (pr *proxyPair) end(rst bool) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.closed {
		return
	}
	pr.closed = true
	if tc, ok := pr.client.(*net.TCPConn); ok && rst {
		tc.SetLinger(0)
	}
	pr.client.Close()
	if pr.upstream != nil {
		pr.upstream.Close()
	}
}

// frameCounter splits a framed binary Thrift request stream into messages and returns the
// method name of each complete one.
type frameCounter struct {
	buf []byte
}

// errNotThrift marks a stream that is not framed strict binary; counting then stops.
var errNotThrift = errors.New("not framed binary")

func (fc *frameCounter) feed(b []byte) []string {
	if fc.buf == nil && len(b) == 0 {
		return nil
	}
	fc.buf = append(fc.buf, b...)
	var names []string
	for len(fc.buf) >= 4 {
		size := int(binary.BigEndian.Uint32(fc.buf))
		if size > 16<<20 {
			fc.buf = fc.buf[:0]
			return names
		}
		if len(fc.buf) < 4+size {
			break
		}
		if name, err := methodName(fc.buf[4 : 4+size]); err == nil {
			names = append(names, name)
		}
		fc.buf = fc.buf[4+size:]
	}
	return names
}

// methodName reads the method name of a strict binary message.
func methodName(msg []byte) (string, error) {
	if len(msg) < 8 || msg[0] != 0x80 || msg[1] != 0x01 {
		return "", errNotThrift
	}
	n := int(binary.BigEndian.Uint32(msg[4:]))
	if n < 0 || 8+n > len(msg) {
		return "", errNotThrift
	}
	return string(msg[8 : 8+n]), nil
}
