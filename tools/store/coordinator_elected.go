package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"syscall"
	"time"

	"github.com/clustron/zaris-go/tools/store/control"
)

// DefaultSessionTTL is the lease of a coordinator's leadership: a standby takes over about
// this long after the leader's process dies.
const DefaultSessionTTL = time.Second

// ElectedCoordinator is one of any number of coordinators of a cluster. It campaigns for the
// leadership through an etcd election; while it leads, it runs a Coordinator on cfg.Listen
// that loads the cluster state from etcd and carries on, every commit fenced by the
// leadership. When the leadership ends (its session's lease ran out, say after a long
// stall) or a commit fails, that Coordinator stops and the candidate campaigns again. While
// it stands by, nothing listens on cfg.Listen: nodes and AdminClients given every
// coordinator's address reach the leader.
//
// An ElectedCoordinator is safe for concurrent use.
type ElectedCoordinator struct {
	cfg    CoordinatorConfig
	ttl    int
	name   string
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	cur     *Coordinator  // the running coordinator while leading, else nil
	leading chan struct{} // closed when cur is set, replaced when it is cleared
}

// StartElectedCoordinator starts a candidate that leads with a session lease of ttl (whole
// seconds, at least one; 0 means DefaultSessionTTL). cfg.Etcd must be set; cfg.Listen must
// name a fixed port, the one the nodes are given.
func StartElectedCoordinator(cfg CoordinatorConfig, ttl time.Duration) (*ElectedCoordinator, error) {
	if cfg.Etcd == nil {
		return nil, errors.New("store: an elected coordinator needs an etcd client")
	}
	if ttl <= 0 {
		ttl = DefaultSessionTTL
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	e := &ElectedCoordinator{
		cfg:     cfg,
		ttl:     int(max(1, math.Ceil(ttl.Seconds()))),
		name:    cfg.Listen,
		done:    make(chan struct{}),
		leading: make(chan struct{}),
	}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	go e.run()
	return e, nil
}

// run campaigns, leads until the leadership or the coordinator ends, and campaigns again,
// until Close.
func (e *ElectedCoordinator) run() {
	defer close(e.done)
	log := e.cfg.Logger
	for e.ctx.Err() == nil {
		el, err := control.NewElector(e.cfg.Etcd, e.cfg.EtcdPrefix, e.name, e.ttl)
		if err != nil {
			log.Error("cannot reach etcd to campaign", "err", err)
			sleepCtx(e.ctx, 200*time.Millisecond)
			continue
		}
		fence, err := el.Campaign(e.ctx)
		if err != nil {
			_ = el.Close()
			if e.ctx.Err() == nil {
				log.Warn("campaign failed", "err", err)
				sleepCtx(e.ctx, 200*time.Millisecond)
			}
			continue
		}
		cfg := e.cfg
		cfg.Fence = fence
		co, err := startOnFixedPort(e.ctx, cfg)
		if err != nil {
			log.Error("won the election but cannot run the coordinator; standing down", "err", err)
			_ = el.Close()
			sleepCtx(e.ctx, 200*time.Millisecond)
			continue
		}
		log.Info("leading the cluster", "addr", co.Addr(), "epoch", co.Map().Epoch)
		e.mu.Lock()
		e.cur = co
		close(e.leading)
		e.mu.Unlock()
		select {
		case <-co.Done():
			log.Warn("the coordinator stopped acting; campaigning again", "err", co.Err())
		case <-el.Lost():
			log.Warn("leadership lost (session expired); campaigning again")
		case <-e.ctx.Done():
		}
		e.mu.Lock()
		e.cur = nil
		e.leading = make(chan struct{})
		e.mu.Unlock()
		_ = co.Close()
		_ = el.Close() // revokes the session: a standby takes over at once
	}
}

// startOnFixedPort starts a coordinator, retrying for a while if its port is still held
// (by this process's previous leadership, or a previous run closing).
func startOnFixedPort(ctx context.Context, cfg CoordinatorConfig) (*Coordinator, error) {
	for {
		co, err := StartCoordinator(cfg)
		if err == nil || !errors.Is(err, syscall.EADDRINUSE) {
			return co, err
		}
		if !sleepCtx(ctx, 20*time.Millisecond) {
			return nil, fmt.Errorf("store: coordinator: %w", ErrClosed)
		}
	}
}

// Leader returns the running coordinator while this candidate leads, else nil.
func (e *ElectedCoordinator) Leader() *Coordinator {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cur
}

// WaitLeading waits until this candidate leads and returns its coordinator.
func (e *ElectedCoordinator) WaitLeading(ctx context.Context) (*Coordinator, error) {
	for {
		e.mu.Lock()
		co, ch := e.cur, e.leading
		e.mu.Unlock()
		if co != nil {
			return co, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-e.done:
			return nil, ErrClosed
		}
	}
}

// Close stops the candidate: if it leads, its coordinator stops and the leadership passes
// to a standby at once.
func (e *ElectedCoordinator) Close() error {
	e.cancel()
	<-e.done
	return nil
}
