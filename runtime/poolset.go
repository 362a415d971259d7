package runtime

import (
	"maps"
	"slices"
	"sync/atomic"
)

// poolFor returns the pool of the node at addr, making it on first use, or nil when no
// node of the current map listens there (it left the map) or the Engine is closed.
func (c *Engine) poolFor(addr string) *pool {
	if p := (*c.pools.Load())[addr]; p != nil {
		return p
	}
	c.poolMu.Lock()
	defer c.poolMu.Unlock()
	// retirePools runs under poolMu after a new map is installed, so either it sees the
	// pool made here, or this check sees the new map.
	m := *c.pools.Load()
	if p := m[addr]; p != nil {
		return p
	}
	t := c.router.Table()
	if c.closed.Load() || t == nil || !t.HasAddr(addr) {
		return nil
	}
	p := newPool(addr, c.cfg.PoolSize, c.dial)
	nm := maps.Clone(m)
	nm[addr] = p
	c.pools.Store(&nm)
	return p
}

// retirePools closes the pools of nodes that are not in the newly installed map cur:
// idle connections now, borrowed ones when they come back. It does the same for the
// pipelined connections.
func (c *Engine) retirePools(_, cur *RoutingTable) {
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
func retireAbsent[T any](reg *atomic.Pointer[map[string]T], cur *RoutingTable, retire func(T)) {
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
