package control

import (
	"context"
	"errors"
	"fmt"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Elector campaigns for a cluster's leadership (the coordinator's) through an etcd election
// under prefix+"leader/". Its leadership lasts while its session's lease lives: if the
// process dies, the lease expires after the TTL and a standby's Campaign returns.
type Elector struct {
	session  *concurrency.Session
	election *concurrency.Election
	id       string

	mu     sync.Mutex
	leader bool
	fence  Fence
}

// NewElector opens a session with a lease of ttlSeconds for the candidate id (its value in
// the election, e.g. the coordinator's address) in the cluster under prefix.
func NewElector(cli *clientv3.Client, prefix, id string, ttlSeconds int) (*Elector, error) {
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(ttlSeconds))
	if err != nil {
		return nil, fmt.Errorf("election session: %w", err)
	}
	return &Elector{session: s, election: concurrency.NewElection(s, prefix+"leader/"), id: id}, nil
}

// Campaign blocks until this candidate leads, ctx ends, or the session ends, and returns
// the Fence every state write of this leadership must carry.
func (e *Elector) Campaign(ctx context.Context) (Fence, error) {
	if err := e.election.Campaign(ctx, e.id); err != nil {
		return Fence{}, fmt.Errorf("campaign: %w", err)
	}
	select {
	case <-e.session.Done():
		return Fence{}, errors.New("campaign: the session ended")
	default:
	}
	f := Fence{Key: e.election.Key(), Revision: e.election.Rev()}
	e.mu.Lock()
	e.leader, e.fence = true, f
	e.mu.Unlock()
	return f, nil
}

// Leading reports whether this candidate won a campaign and has neither resigned nor lost
// its session. A leader must still fence its writes: it may learn of the loss late.
func (e *Elector) Leading() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.leader {
		return false
	}
	select {
	case <-e.session.Done():
		e.leader = false
	default:
	}
	return e.leader
}

// Fence returns the current leadership's fence, or false if not leading.
func (e *Elector) Fence() (Fence, bool) {
	if !e.Leading() {
		return Fence{}, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.fence, true
}

// Lost is closed when the session ends (its lease expired or was revoked): from then on
// this candidate does not lead.
func (e *Elector) Lost() <-chan struct{} { return e.session.Done() }

// Leader returns the value (id) of the current leader, or "" when there is none.
func (e *Elector) Leader(ctx context.Context) (string, error) {
	resp, err := e.election.Leader(ctx)
	if errors.Is(err, concurrency.ErrElectionNoLeader) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return string(resp.Kvs[0].Value), nil
}

// Resign gives up the leadership, if held, so a standby takes over at once.
func (e *Elector) Resign(ctx context.Context) error {
	e.mu.Lock()
	e.leader = false
	e.mu.Unlock()
	return e.election.Resign(ctx)
}

// Close ends the session, revoking its lease: leadership, if held, passes on at once.
func (e *Elector) Close() error {
	e.mu.Lock()
	e.leader = false
	e.mu.Unlock()
	return e.session.Close()
}
