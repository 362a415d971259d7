package runtime

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
)

// fakeConn is a Conn over any ZarisKv (a gomock mock or a handler), counting closes.
type fakeConn struct {
	kv     zaris.ZarisKv
	addr   string
	closes atomic.Int32
	broken atomic.Bool // usable reports false: the node closed it while idle
}

func (c *fakeConn) usable(time.Time) bool { return !c.broken.Load() }

func (c *fakeConn) Client() any  { return c.kv }
func (c *fakeConn) Close() error { c.closes.Add(1); return nil }
func (c *fakeConn) closed() bool { return c.closes.Load() > 0 }

// mustGet borrows a connection of p, failing the test if it cannot.
func mustGet(t *testing.T, p *pool) *pooledConn {
	t.Helper()
	c, err := p.get(context.Background())
	require.NoError(t, err)
	return c
}

// fakeDialer dials fakeConns whose client is kv(addr), or fails with fail(addr).
type fakeDialer struct {
	mu    sync.Mutex
	conns []*fakeConn
	kv    func(addr string) zaris.ZarisKv
	fail  func(addr string) error
	dials atomic.Int32
}

func (d *fakeDialer) dial(_ context.Context, addr string) (Conn, error) {
	d.dials.Add(1)
	if d.fail != nil {
		if err := d.fail(addr); err != nil {
			return nil, err
		}
	}
	var kv zaris.ZarisKv
	if d.kv != nil {
		kv = d.kv(addr)
	}
	c := &fakeConn{kv: kv, addr: addr}
	d.mu.Lock()
	d.conns = append(d.conns, c)
	d.mu.Unlock()
	return c, nil
}

// openConns counts the dialed conns not closed yet.
func (d *fakeDialer) openConns() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, c := range d.conns {
		if !c.closed() {
			n++
		}
	}
	return n
}

func TestPoolReusesIdleConnection(t *testing.T) {
	d := &fakeDialer{}
	p := newPool("n:1", 4, d.dial)
	c1 := mustGet(t, p)
	p.put(c1)
	c2 := mustGet(t, p)
	assert.Same(t, c1, c2)
	assert.Equal(t, int32(1), d.dials.Load())
	p.put(c2)
	p.close(false)
	assert.True(t, c1.Conn.(*fakeConn).closed())
}

func TestPoolIsBounded(t *testing.T) {
	d := &fakeDialer{}
	p := newPool("n:1", 2, d.dial)
	defer p.close(true)
	a := mustGet(t, p)
	b := mustGet(t, p)
	assert.NotSame(t, a, b)

	// A third borrower waits: here until its context ends.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := p.get(ctx)
	require.ErrorIs(t, err, context.Canceled)

	// Or until a connection comes back, which it then reuses.
	got := make(chan *pooledConn)
	go func() {
		c, err := p.get(context.Background())
		assert.NoError(t, err)
		got <- c
	}()
	p.put(a)
	assert.Same(t, a, <-got)
	assert.Equal(t, int32(2), d.dials.Load())
	assert.Equal(t, 2, p.openCount())
}

func TestPoolClosesConnectionOnError(t *testing.T) {
	d := &fakeDialer{}
	p := newPool("n:1", 1, d.dial)
	defer p.close(true)
	a := mustGet(t, p)

	// A waiter blocked on the full pool dials a fresh connection once the bad one is
	// discarded; the discarded one is closed, never handed out again.
	got := make(chan *pooledConn)
	go func() {
		c, err := p.get(context.Background())
		assert.NoError(t, err)
		got <- c
	}()
	p.discard(a)
	b := <-got
	assert.NotSame(t, a, b)
	assert.True(t, a.Conn.(*fakeConn).closed())
	assert.False(t, b.Conn.(*fakeConn).closed())
	assert.Equal(t, int32(2), d.dials.Load())
	assert.Equal(t, 1, p.openCount())
}

func TestPoolDialErrorFreesTheSlot(t *testing.T) {
	boom := errors.New("connection refused")
	var fail atomic.Bool
	fail.Store(true)
	d := &fakeDialer{fail: func(string) error {
		if fail.Load() {
			return boom
		}
		return nil
	}}
	p := newPool("n:1", 1, d.dial)
	defer p.close(true)
	_, err := p.get(context.Background())
	require.ErrorIs(t, err, boom)
	fail.Store(false)
	c := mustGet(t, p)
	assert.NotNil(t, c)
}

func TestPoolClose(t *testing.T) {
	d := &fakeDialer{}

	// A borrower waiting on a full pool is woken by close.
	p1 := newPool("n:1", 1, d.dial)
	held := mustGet(t, p1)
	waiting := make(chan error)
	go func() {
		_, err := p1.get(context.Background())
		waiting <- err
	}()
	p1.close(false)
	assert.ErrorIs(t, <-waiting, errPoolClosed)
	p1.put(held)
	assert.True(t, held.Conn.(*fakeConn).closed())

	// Idle connections are closed at once, borrowed ones when they come back.
	p := newPool("n:1", 2, d.dial)
	idle := mustGet(t, p)
	borrowed := mustGet(t, p)
	p.put(idle)
	p.close(false)
	assert.True(t, idle.Conn.(*fakeConn).closed(), "idle closed at once")
	assert.False(t, borrowed.Conn.(*fakeConn).closed(), "borrowed closed when it comes back")
	p.put(borrowed)
	assert.True(t, borrowed.Conn.(*fakeConn).closed())
	_, err := p.get(context.Background())
	assert.ErrorIs(t, err, errPoolClosed)
	assert.Zero(t, d.openConns())

	// Forced, borrowed connections are closed at once.
	p2 := newPool("n:1", 2, d.dial)
	c := mustGet(t, p2)
	p2.close(true)
	p2.close(true) // idempotent
	assert.True(t, c.Conn.(*fakeConn).closed())
	p2.discard(c)
	assert.Zero(t, p2.openCount())
}

func TestPoolConcurrentUseStaysBounded(t *testing.T) {
	const size = 3
	var inUse, most atomic.Int32
	d := &fakeDialer{}
	p := newPool("n:1", size, d.dial)
	var wg sync.WaitGroup
	for g := 0; g < 32; g++ {
		wg.Go(func() {
			for i := 0; i < 200; i++ {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				c, err := p.get(ctx)
				cancel()
				if !assert.NoError(t, err) {
					return
				}
				n := inUse.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				inUse.Add(-1)
				if (g+i)%7 == 0 {
					p.discard(c)
				} else {
					p.put(c)
				}
			}
		})
	}
	wg.Wait()
	assert.LessOrEqual(t, most.Load(), int32(size))
	assert.LessOrEqual(t, p.openCount(), size)
	p.close(true)
	assert.Zero(t, d.openConns())
}

func TestPoolDiscardsAnIdleConnectionTheNodeClosed(t *testing.T) {
	d := &fakeDialer{}
	p := newPool("n:1", 2, d.dial)
	defer p.close(true)
	a := mustGet(t, p)
	b := mustGet(t, p)
	p.put(a)
	p.put(b)
	a.Conn.(*fakeConn).broken.Store(true)
	b.Conn.(*fakeConn).broken.Store(true)
	c := mustGet(t, p)
	assert.NotSame(t, a, c)
	assert.NotSame(t, b, c)
	assert.True(t, a.Conn.(*fakeConn).closed())
	assert.True(t, b.Conn.(*fakeConn).closed())
	assert.Equal(t, int32(3), d.dials.Load())
	assert.Equal(t, 1, p.openCount())
}
