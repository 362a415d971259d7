package runtime

import (
	"maps"
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
// idle connections now, borrowed ones when they come back.
func (c *Engine) retirePools(_, cur *RoutingTable) {
	c.poolMu.Lock()
	defer c.poolMu.Unlock()
	kept := c.retired[:0]
	for _, p := range c.retired {
		if p.openCount() > 0 {
			kept = append(kept, p)
		}
	}
	c.retired = kept
	m := *c.pools.Load()
	var nm map[string]*pool
	for addr, p := range m {
		if cur.HasAddr(addr) {
			continue
		}
		if nm == nil {
			nm = maps.Clone(m)
		}
		delete(nm, addr)
		p.close(false)
		c.retired = append(c.retired, p)
	}
	if nm != nil {
		c.pools.Store(&nm)
	}
}
