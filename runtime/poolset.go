package runtime

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"
)

// poolFor returns the pool of the node at addr, making it on first use, or nil when no
// node of the current map listens there (it left the map) or the Engine is closed.
func (c *Engine) poolFor(addr string) *pool {
	return getOrAdd(&c.pools, &c.poolMu, addr, func() (*pool, bool) {
		// retirePools runs under poolMu after a new map is installed, so either it sees the
		// pool made here, or this check sees the new map.
		t := c.router.Table()
		if c.closed.Load() || t == nil || !t.HasAddr(addr) {
			return nil, false
		}
		return newPool(addr, c.cfg.PoolSize, c.dial), true
	})
}

// retirePools closes the pools of nodes that are not in the newly installed map cur:
// idle connections now, borrowed ones when they come back. It does the same for the
// pipelined connections.
func (c *Engine) retirePools(_, cur *routingTable) {
	if c.pipes != nil {
		c.pipes.retire(cur)
	}
	c.poolMu.Lock()
	defer c.poolMu.Unlock()
	c.retired = slices.DeleteFunc(c.retired, func(p *pool) bool { return p.openCount() == 0 })
	retireAbsent(&c.pools, cur, func(p *pool) {
		p.close(false)
		c.retired = append(c.retired, p)
	})
}

// retireAbsent removes from the registry reg (by node address, replaced copy-on-write)
// the entries of nodes not in cur and hands each to retire. The caller holds the lock
// that serialises reg's writers.
func retireAbsent[T any](reg *atomic.Pointer[map[string]T], cur *routingTable, retire func(T)) {
	m := *reg.Load()
	var nm map[string]T
	for addr, v := range m {
		if cur.HasAddr(addr) {
			continue
		}
		if nm == nil {
			nm = maps.Clone(m)
		}
		delete(nm, addr)
		retire(v)
	}
	if nm != nil {
		reg.Store(&nm)
	}
}

// getOrAdd returns the entry for addr of the registry reg (by node address, replaced
// copy-on-write under mu). When there is none it calls create under mu and adds the entry
// it makes, unless create reports false: then it adds nothing and returns the zero T. An
// entry already there costs one atomic load and no lock.
func getOrAdd[T any](reg *atomic.Pointer[map[string]T], mu *sync.Mutex, addr string, create func() (T, bool)) T {
	if v, ok := (*reg.Load())[addr]; ok {
		return v
	}
	mu.Lock()
	defer mu.Unlock()
	m := *reg.Load()
	if v, ok := m[addr]; ok {
		return v
	}
	v, ok := create()
	if !ok {
		var zero T
		return zero
	}
	nm := maps.Clone(m)
	nm[addr] = v
	reg.Store(&nm)
	return v
}
