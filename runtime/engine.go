package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/clustron/zaris-go/runtime/clock"
	"github.com/clustron/zaris-go/runtime/clustermap"
)

// Engine is the client engine: the configuration, the current cluster map and its
// routing table, a connection pool per node (and, pipelining on, a few shared pipelined
// connections per node), and the shared map refresher. Its Invoke is
// the terminal handler of the middleware stack: it sends one attempt to the key's owner
// and records what happened. The generated zarisclient.Dial makes one per client (reach
// it with Client.Engine). An Engine is safe for concurrent use.
type Engine struct {
	cfg      Config
	dial     Dialer
	clock    clock.Clock
	sysClock bool // clock is clock.System: one reading serves as wall-clock and Clock time
	// lateTimeout is how late a pooled connection's socket may fire an attempt timeout
	// (see lateAttemptTimeout).
	lateTimeout time.Duration
	router      currentTable
	refresher   *Refresher
	closed      atomic.Bool

	pools atomic.Pointer[map[string]*pool] // by node address; replaced copy-on-write under poolMu

	poolMu  sync.Mutex // serialises pool creation, retirement and Close
	retired []*pool    // pools of nodes that left the map, still lending connections

	pipes *pipelines // the pipelined connections (pipeline.go); nil in pooled mode

	health *health // the replies each node owes, and the watch for silent ones (suspect.go, B6)
}

// Dial builds a Config from opts (see NewConfig), fetches the first cluster map from the
// seeds in order (the first that answers with a valid map wins) and returns the engine.
// If no seed answers, the error wraps ErrNoSeeds and each seed's error. ctx bounds the
// bootstrap only. Close the engine when done.
func Dial(ctx context.Context, opts ...Option) (*Engine, error) {
	cfg, err := NewConfig(opts...)
	if err != nil {
		return nil, err
	}
	if cfg.Service == nil {
		return nil, fmt.Errorf("zaris: Dial needs the generated service (WithService); zarisclient.Dial gives it")
	}
	c := &Engine{cfg: cfg, dial: cfg.Dialer, clock: cfg.Clock}
	c.cfg.requestLimit = &c.router.maxRequest
	cfg = c.cfg
	c.sysClock = c.clock == clock.System
	c.lateTimeout = lateAttemptTimeout(cfg.AttemptTimeout)
	if c.dial == nil {
		c.dial = DefaultDialer(cfg)
	}
	c.pools.Store(&map[string]*pool{})
	if cfg.Pipelining && cfg.Dialer == nil {
		c.pipes = newPipelines(cfg)
	}
	c.refresher = newRefresher(cfg, &c.router, c.fetchMap)
	c.refresher.onInstall = c.mapInstalled
	c.health = newHealth(c.clock, cfg.AttemptTimeout, c.suspected)

	var errs []error
	for _, seed := range cfg.Seeds {
		m, err := c.fetchFrom(ctx, seed)
		if err == nil {
			var t *routingTable
			if t, err = newRoutingTable(m); err == nil {
				// The bootstrap is not a refresh: it opens no debounce window (R6), so a
				// client whose first calls meet a stale map (started just after a node
				// died) refreshes at once instead of retrying into the dead node.
				c.router.Install(t)
				return c, nil
			}
		}
		errs = append(errs, fmt.Errorf("seed %s: %w", seed, err))
		if ctx.Err() != nil {
			break
		}
	}
	c.refresher.Close()
	c.health.close()
	return nil, fmt.Errorf("%w: %w", ErrNoSeeds, errors.Join(errs...))
}

// Config returns a copy of the client's configuration: changing it changes nothing of
// the client's.
func (c *Engine) Config() Config {
	cfg := c.cfg
	cfg.Seeds = slices.Clone(cfg.Seeds)
	cfg.CallMiddleware = slices.Clone(cfg.CallMiddleware)
	cfg.AttemptMiddleware = slices.Clone(cfg.AttemptMiddleware)
	cfg.Classifiers = slices.Clone(cfg.Classifiers)
	return cfg
}

// Refresher returns the client's shared map refresher, which the refresh middleware asks
// for refreshes (rules R2, R3, R6, B1).
func (c *Engine) Refresher() *Refresher { return c.refresher }

// Map returns a copy of the current cluster map.
func (c *Engine) Map() *clustermap.Map { return c.router.Table().Map() }

// Close closes every connection (failing the calls in flight on them), stops the
// refresher and waits for its fetch, so nothing of the client is left running. After
// Close, Invoke returns ErrClosed, and a call of the default stack waiting out a backoff
// ends with ErrClosed at once (see Refresher.Done). Close is idempotent and always returns
// nil.
func (c *Engine) Close() error {
	if !c.closed.CompareAndSwap(false, true) {
		return nil
	}
	c.refresher.Close()
	c.health.close()
	if c.pipes != nil {
		c.pipes.close()
	}
	c.poolMu.Lock()
	defer c.poolMu.Unlock()
	for _, p := range *c.pools.Load() {
		p.close(true)
	}
	for _, p := range c.retired {
		p.close(true)
	}
	c.retired = nil
	c.pools.Store(&map[string]*pool{})
	return nil
}
