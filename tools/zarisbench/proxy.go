package main

import (
	"context"
	"net"
	"sync"
	"sync/atomic"

	"github.com/clustron/zaris-go/runtime"
)

// countingProxy forwards TCP connections to one target and counts the bytes each way.
type countingProxy struct {
	ln     net.Listener
	target string
	up     atomic.Int64 // client to node
	down   atomic.Int64 // node to client

	mu    sync.Mutex // protects conns
	conns []net.Conn
	wg    sync.WaitGroup
}

func newCountingProxy(target string) (*countingProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &countingProxy{ln: ln, target: target}
	p.wg.Go(p.accept)
	return p, nil
}

func (p *countingProxy) addr() string { return p.ln.Addr().String() }

func (p *countingProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		n, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, n)
		p.mu.Unlock()
		p.wg.Go(func() { copyCounting(n, c, &p.up) })
		p.wg.Go(func() { copyCounting(c, n, &p.down) })
	}
}

// copyCounting copies src to dst, adding each chunk to n as it passes, and closes both
// when src ends.
func copyCounting(dst, src net.Conn, n *atomic.Int64) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		k, err := src.Read(buf)
		if k > 0 {
			n.Add(int64(k))
			if _, werr := dst.Write(buf[:k]); werr != nil {
				return
			}
		}
		if err != nil {
			return // io.EOF or a closed connection: either way the stream is over
		}
	}
}

// bytes reports the bytes forwarded so far, up and down.
func (p *countingProxy) bytes() (up, down int64) { return p.up.Load(), p.down.Load() }

func (p *countingProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// proxies hands out one counting proxy per node address, made on first use.
type proxies struct {
	mu sync.Mutex // protects by
	by map[string]*countingProxy
}

// dialer wraps base so every connection goes through the proxy for its address.
func (ps *proxies) dialer(base runtime.Dialer) runtime.Dialer {
	return func(ctx context.Context, addr string) (runtime.Conn, error) {
		ps.mu.Lock()
		p, ok := ps.by[addr]
		if !ok {
			var err error
			if p, err = newCountingProxy(addr); err != nil {
				ps.mu.Unlock()
				return nil, err
			}
			if ps.by == nil {
				ps.by = map[string]*countingProxy{}
			}
			ps.by[addr] = p
		}
		ps.mu.Unlock()
		return base(ctx, p.addr())
	}
}

// bytes sums every proxy's bytes, up and down.
func (ps *proxies) bytes() (up, down int64) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for _, p := range ps.by {
		u, d := p.bytes()
		up, down = up+u, down+d
	}
	return up, down
}

func (ps *proxies) close() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for _, p := range ps.by {
		p.close()
	}
}
