package store

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// failoverLog is a slog.Handler that keeps when each node was failed over, and why.
type failoverLog struct {
	mu     *sync.Mutex
	events *[]failoverEvent
}

type failoverEvent struct {
	at   time.Time
	node int64
	why  string
}

func newFailoverLog() failoverLog {
	return failoverLog{mu: new(sync.Mutex), events: new([]failoverEvent)}
}

func (l failoverLog) Enabled(context.Context, slog.Level) bool { return true }
func (l failoverLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l failoverLog) WithGroup(string) slog.Handler            { return l }

func (l failoverLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "node failed over" {
		return nil
	}
	e := failoverEvent{at: time.Now()}
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "node":
			e.node = a.Value.Int64()
		case "why":
			e.why = a.Value.String()
		}
		return true
	})
	l.mu.Lock()
	*l.events = append(*l.events, e)
	l.mu.Unlock()
	return nil
}

func (l failoverLog) of(node int64) []failoverEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []failoverEvent
	for _, e := range *l.events {
		if e.node == node {
			out = append(out, e)
		}
	}
	return out
}

// failoverLoggedCluster starts a cluster whose log records its failovers.
func failoverLoggedCluster(t *testing.T) (*Cluster, failoverLog) {
	log := newFailoverLog()
	cfg := fastCluster()
	cfg.Logger = slog.New(log)
	return StartCluster(t, cfg), log
}

// commitRevokeAndStop is a leader deposed right after the fenced commit of its intent to
// revoke node's lease: it commits the intent, then stops without revoking. It returns the
// node's record and its lease and TTL.
func commitRevokeAndStop(t *testing.T, c *Cluster, node int32) (*nodeRec, clientv3.LeaseID, time.Duration) {
	co := c.Coordinator()
	co.mu.Lock()
	rec := co.nodes[node]
	lease, ttl := rec.lease, rec.ttl
	rec.revoking = true
	require.NoError(t, co.persistLocked())
	co.mu.Unlock()
	require.NoError(t, c.StopCoordinator())
	return rec, lease, ttl
}

// TestCoordinator_RevokeOfADeposedLeaderIsWaitedOut: a leader commits its intent to revoke
// a node's lease and loses the leadership before the revoke, which still lands later. The
// next leader must not take the key's deletion for an expiry and fail the node over at once,
// while the node may serve until the TTL from its last renewal: the failover waits the
// lease's TTL, and here the node, which learns of the loss at its next renewal and stops
// serving, registers again first.
func TestCoordinator_RevokeOfADeposedLeaderIsWaitedOut(t *testing.T) {
	c, log := failoverLoggedCluster(t)
	ctx := testCtx(t)
	const node = 2

	rec, lease, ttl := commitRevokeAndStop(t, c, node)
	require.NoError(t, c.RestartCoordinator())
	require.NoError(t, c.WaitSettled(ctx))

	// Its revoke lands under the new leader.
	next := c.Coordinator()
	revoked := time.Now()
	_, err := next.etcd.Revoke(ctx, lease)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		next.mu.Lock()
		defer next.mu.Unlock()
		r := next.nodes[node]
		return r != nil && r != rec && r.lease != lease && r.alive
	}, 20*time.Second, 10*time.Millisecond, "node %d did not register again", node)
	require.NoError(t, c.WaitSettled(ctx))

	for _, e := range log.of(node) {
		assert.False(t, e.at.Before(revoked.Add(ttl)) && e.why == "etcd lease gone",
			"node %d failed over %v after a previous leader's revoke, within its lease's TTL of %v: %s", node, e.at.Sub(revoked), ttl, e.why)
	}
}

// TestCoordinator_RevokeLandedBeforeTakeoverIsWaitedOut is the same with the revoke landing
// before the next leader reads the registrations: a node whose key is gone at takeover is
// failed over only once the lease's TTL has run out, unless it registered again first.
func TestCoordinator_RevokeLandedBeforeTakeoverIsWaitedOut(t *testing.T) {
	c, log := failoverLoggedCluster(t)
	ctx := testCtx(t)
	const node = 2

	co := c.Coordinator()
	_, lease, ttl := commitRevokeAndStop(t, c, node)
	revoked := time.Now()
	_, err := co.etcd.Revoke(ctx, lease)
	require.NoError(t, err)
	require.NoError(t, c.RestartCoordinator())
	require.NoError(t, c.WaitSettled(ctx))
	require.Eventually(t, func() bool { return len(log.of(node)) > 0 }, 20*time.Second, 10*time.Millisecond,
		"node %d was never failed over", node)

	for _, e := range log.of(node) {
		assert.False(t, e.at.Before(revoked.Add(ttl)) && e.why == "no etcd registration",
			"node %d failed over %v after a previous leader's revoke, within its lease's TTL of %v: %s", node, e.at.Sub(revoked), ttl, e.why)
	}
}
