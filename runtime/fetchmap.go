package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/clustron/zaris-go/runtime/clock"
	"github.com/clustron/zaris-go/runtime/clustermap"
)

// fetchMap asks the nodes of the current map, then the seeds, for a cluster map, and
// returns the first whose epoch is at least minEpoch, or else the newest it got: a node
// that has not yet learnt the map an answer showed (B1) is passed over for one that has.
// It asks one node at a time, the next when the last failed, or when the last has not
// answered within its silence threshold (rule B6: a stalled node costs a fetch no more),
// leaving the slow one to answer if it can; the fetches still out end when it returns.
func (c *Engine) fetchMap(ctx context.Context, minEpoch int64) (*clustermap.Map, error) {
	addrs := c.health.last(c.fetchAddrs()) // a node silent past its threshold is asked last (B6)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	f := &mapFetch{c: c, ctx: ctx, addrs: addrs, results: make(chan fetchedMap, len(addrs))}
	defer func() { stopTimer(f.hedge) }()
	return f.run(minEpoch)
}

// fetchAddrs is the addresses fetchMap asks: the current map's nodes, by id, then the seeds
// that are not among them.
func (c *Engine) fetchAddrs() []string {
	var addrs []string
	if t := c.router.Table(); t != nil {
		for _, n := range t.Nodes() {
			addrs = append(addrs, n.Addr)
		}
	}
	for _, s := range c.cfg.Seeds {
		if !slices.Contains(addrs, s) {
			addrs = append(addrs, s)
		}
	}
	return addrs
}

// fetchedMap is one node's answer to a fetch.
type fetchedMap struct {
	addr string
	m    *clustermap.Map
	err  error
}

// mapFetch is one fetchMap under way: the nodes to ask, in order, and what it has got.
type mapFetch struct {
	c       *Engine
	ctx     context.Context // ends the fetches still out when fetchMap returns
	addrs   []string
	results chan fetchedMap // room for every node's: never blocks a fetch left behind
	newest  *clustermap.Map
	errs    []error
	next    int         // addrs[next] is the next node to ask
	pending int         // fetches asked and not yet answered
	hedge   clock.Timer // fires when the last node asked has been silent past its threshold
}

// run asks the first node, then the next one each time the last fails or outstays its
// silence threshold, until a map of at least minEpoch comes back, every node asked has
// answered, or ctx ends; then it returns fetchMap's result.
func (f *mapFetch) run(minEpoch int64) (*clustermap.Map, error) {
	f.askNext()
	for f.pending > 0 {
		var hedged <-chan time.Time
		if f.hedge != nil {
			hedged = f.hedge.C()
		}
		select {
		case r := <-f.results:
			f.pending--
			if f.take(r, minEpoch) {
				return r.m, nil
			}
			f.askNext()
		case <-hedged:
			f.hedge = nil
			f.askNext()
		case <-f.ctx.Done():
			f.errs = append(f.errs, f.ctx.Err())
			f.pending = 0
		}
	}
	if f.newest != nil {
		return f.newest, nil
	}
	return nil, fmt.Errorf("zaris: no node answered with a cluster map: %w", errors.Join(f.errs...))
}

// take notes the answer r: its error, or its map if it is the newest yet. It reports
// whether the map's epoch is at least minEpoch, which ends the fetch.
func (f *mapFetch) take(r fetchedMap, minEpoch int64) bool {
	switch {
	case r.err != nil:
		f.errs = append(f.errs, fmt.Errorf("%s: %w", r.addr, r.err))
	case r.m.Epoch >= minEpoch:
		return true
	case f.newest == nil || r.m.Epoch > f.newest.Epoch:
		f.newest = r.m
	}
	return false
}

// askNext asks the next node, if one is left, for its map, and starts the timer of its
// silence threshold in place of the last one's.
func (f *mapFetch) askNext() {
	if f.next >= len(f.addrs) {
		return
	}
	addr := f.addrs[f.next]
	f.next++
	f.pending++
	go func() {
		m, err := f.c.fetchFrom(f.ctx, addr)
		f.results <- fetchedMap{addr, m, err}
	}()
	stopTimer(f.hedge)
	f.hedge = f.c.clock.NewTimer(f.c.health.threshold(f.c.health.node(addr)))
}

// stopTimer stops t, if there is one.
func stopTimer(t clock.Timer) {
	if t != nil {
		t.Stop()
	}
}

// fetchFrom asks the node at addr for its cluster map within one attempt timeout, over a
// pooled connection if the node is in the map, else over a connection of its own. An
// error after ctx ended matches ctx's error; one after the attempt timeout passed matches
// ErrAttemptTimeout.
func (c *Engine) fetchFrom(ctx context.Context, addr string) (*clustermap.Map, error) {
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, c.cfg.AttemptTimeout)
	defer cancel()
	m, err := c.fetchOnce(ctx, addr)
	if err != nil {
		err = c.fetchError(parent, ctx, err)
	}
	return m, err
}

// fetchOnce asks the node at addr for its cluster map within ctx, over a connection from
// its pool if it has one (given back, or discarded after an error or a spent deadline),
// else over a connection of its own, closed after.
func (c *Engine) fetchOnce(ctx context.Context, addr string) (*clustermap.Map, error) {
	p := c.poolFor(addr)
	var (
		conn   Conn
		pooled *pooledConn
		err    error
	)
	if p != nil {
		if pooled, err = p.get(ctx); err == nil {
			conn = pooled.Conn
		}
	} else {
		conn, err = c.dial(ctx, addr)
	}
	if err != nil {
		return nil, err
	}
	m, spent, err := c.fetchOver(ctx, conn)
	switch {
	case p == nil:
		conn.Close()
	case err != nil || spent:
		p.discard(pooled)
	default:
		p.put(pooled)
	}
	return m, err
}

// fetchOver sends the map request on conn within ctx. On a built-in connection the
// socket's own deadline bounds it; spent reports that ctx ended first, which leaves that
// deadline spent and the connection not to be reused. No map and no error is
// ErrNoResponse.
func (c *Engine) fetchOver(ctx context.Context, conn Conn) (m *clustermap.Map, spent bool, err error) {
	if sc, ok := conn.(*thriftConn); ok {
		dl, _ := ctx.Deadline()
		stop := sc.arm(ctx, dl, time.Now(), 0)
		m, err = c.cfg.Service.FetchMap(withoutDeadline{ctx}, sc.client)
		spent = !stop()
	} else {
		m, err = c.cfg.Service.FetchMap(ctx, conn.Client())
	}
	if err == nil && m == nil {
		err = ErrNoResponse
	}
	return m, spent, err
}

// fetchError says why the fetch of one attempt (ctx, a child of parent bounded by the
// attempt timeout) failed with err: an error after parent ended matches parent's error;
// one after ctx's deadline passed matches context.DeadlineExceeded when that deadline is
// parent's own, else ErrAttemptTimeout; any other is err as it is.
func (c *Engine) fetchError(parent, ctx context.Context, err error) error {
	if perr := parent.Err(); perr != nil {
		if !errors.Is(err, perr) {
			err = fmt.Errorf("%w: %w", perr, err)
		}
		return err
	}
	// The socket's deadline may fire before the context's timer does: tell the
	// deadline that passed by the clock, not by the contexts' errors.
	dl, _ := ctx.Deadline()
	if time.Now().Before(dl) {
		return err
	}
	switch pdl, ok := parent.Deadline(); {
	case ok && !pdl.After(dl):
		return fmt.Errorf("%w: %w", context.DeadlineExceeded, err)
	case errors.Is(err, context.DeadlineExceeded):
		// The attempt's own deadline, not the caller's: keep it out of the chain.
		return fmt.Errorf("%w: no map within %s: %s", ErrAttemptTimeout, c.cfg.AttemptTimeout, err)
	default:
		return fmt.Errorf("%w: no map within %s: %w", ErrAttemptTimeout, c.cfg.AttemptTimeout, err)
	}
}
