package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// fetchMap asks the nodes of the current map, then the seeds, for a cluster map, and
// returns the first whose epoch is at least minEpoch, or else the newest it got: a node
// that has not yet learnt the map an answer showed (B1) is passed over for one that has.
func (c *Engine) fetchMap(ctx context.Context, minEpoch int64) (*ClusterMap, error) {
	var addrs []string
	if t := c.router.Table(); t != nil {
		for _, n := range t.Nodes() {
			addrs = append(addrs, n.Addr)
		}
	}
	for _, s := range c.cfg.Seeds {
		if !contains(addrs, s) {
			addrs = append(addrs, s)
		}
	}
	addrs = c.health.last(addrs) // a node silent past its threshold is asked last (B6)
	var (
		newest *ClusterMap
		errs   []error
	)
	for _, addr := range addrs {
		m, err := c.fetchFrom(ctx, addr)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", addr, err))
			if ctx.Err() != nil {
				break
			}
			continue
		}
		if m.Epoch >= minEpoch {
			return m, nil
		}
		if newest == nil || m.Epoch > newest.Epoch {
			newest = m
		}
	}
	if newest != nil {
		return newest, nil
	}
	return nil, fmt.Errorf("zaris: no node answered with a cluster map: %w", errors.Join(errs...))
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// fetchFrom asks the node at addr for its cluster map within one attempt timeout, over a
// pooled connection if the node is in the map, else over a connection of its own. An
// error after ctx ended matches ctx's error; one after the attempt timeout passed matches
// ErrAttemptTimeout.
func (c *Engine) fetchFrom(ctx context.Context, addr string) (m *ClusterMap, err error) {
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, c.cfg.AttemptTimeout)
	defer cancel()
	defer func() {
		if err == nil {
			return
		}
		if perr := parent.Err(); perr != nil {
			if !errors.Is(err, perr) {
				err = fmt.Errorf("%w: %w", perr, err)
			}
			return
		}
		// The socket's deadline may fire before the context's timer does: tell the
		// deadline that passed by the clock, not by the contexts' errors.
		dl, _ := ctx.Deadline()
		if time.Now().Before(dl) {
			return
		}
		if pdl, ok := parent.Deadline(); ok && !pdl.After(dl) {
			err = fmt.Errorf("%w: %w", context.DeadlineExceeded, err)
		} else {
			err = fmt.Errorf("%w: no map within %s: %w", ErrAttemptTimeout, c.cfg.AttemptTimeout, err)
		}
	}()
	p := c.poolFor(addr)
	var conn Conn
	if p != nil {
		conn, err = p.get(ctx)
	} else {
		conn, err = c.dial(ctx, addr)
	}
	if err != nil {
		return nil, err
	}
	spent := false
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
	switch {
	case p == nil:
		conn.Close()
	case err != nil || spent:
		p.discard(conn)
	default:
		p.put(conn)
	}
	return m, err
}
