package store

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
)

// Each status a node answers, produced in the situation that calls for it, over a real
// socket with the generated client. Every answer carries the node's own map epoch.

var bg = context.Background()

// roles returns, for segment seg of the coordinator's map, its owner, a replica and a node
// holding no copy (noOwner when there is none).
func roles(c *Cluster, seg int32) (owner, replica, other int32) {
	s := c.Map().Segments[seg]
	owner, replica, other = noOwner, noOwner, noOwner
	if s.Owner != nil {
		owner = *s.Owner
	}
	if len(s.Replicas) > 0 {
		replica = s.Replicas[0]
	}
	for _, id := range c.Nodes() {
		if id != owner && !slices.Contains(s.Replicas, id) {
			other = id
		}
	}
	return owner, replica, other
}

// nodeEpoch returns node id's current map epoch.
func nodeEpoch(c *Cluster, id int32) int64 { return c.Node(id).Epoch() }

func TestStatus_Ok(t *testing.T) {
	c := StartCluster(t, fastCluster())
	key := keyIn(3, 16, "ok")
	owner, _, _ := roles(c, 3)
	cl := mustDial(t, c.Addr(owner))

	put, err := cl.Put(bg, &zaris.PutRequest{Key: key, Value: []byte("v1")})
	require.NoError(t, err)
	assert.Equal(t, zaris.KvStatus_Ok, put.Status)
	assert.Positive(t, put.Version)
	assert.Equal(t, nodeEpoch(c, owner), put.MapEpoch)

	get, err := cl.Get(bg, &zaris.GetRequest{Key: key})
	require.NoError(t, err)
	assert.Equal(t, zaris.KvStatus_Ok, get.Status)
	assert.Equal(t, []byte("v1"), get.Value)
	assert.Equal(t, put.Version, get.Version)
	assert.Equal(t, nodeEpoch(c, owner), get.MapEpoch)

	del, err := cl.Delete(bg, &zaris.DeleteRequest{Key: key})
	require.NoError(t, err)
	assert.Equal(t, zaris.KvStatus_Ok, del.Status)
	assert.Equal(t, put.Version, del.Version, "a delete answers the version the key had")
}

func TestStatus_NotFound(t *testing.T) {
	c := StartCluster(t, fastCluster())
	key := keyIn(5, 16, "nf")
	owner, _, _ := roles(c, 5)
	cl := mustDial(t, c.Addr(owner))

	get, err := cl.Get(bg, &zaris.GetRequest{Key: key})
	require.NoError(t, err)
	assert.Equal(t, zaris.KvStatus_NotFound, get.Status)
	assert.Equal(t, nodeEpoch(c, owner), get.MapEpoch)

	del, err := cl.Delete(bg, &zaris.DeleteRequest{Key: key})
	require.NoError(t, err)
	assert.Equal(t, zaris.KvStatus_NotFound, del.Status)
	assert.Equal(t, nodeEpoch(c, owner), del.MapEpoch)
}

func TestStatus_Conflict(t *testing.T) {
	c := StartCluster(t, fastCluster())
	key := keyIn(7, 16, "cf")
	owner, _, _ := roles(c, 7)
	cl := mustDial(t, c.Addr(owner))
	put, err := cl.Put(bg, &zaris.PutRequest{Key: key, Value: []byte("v1")})
	require.NoError(t, err)
	require.Equal(t, zaris.KvStatus_Ok, put.Status)
	current := put.Version

	stale, absent := current+100, true
	tests := []struct {
		name string
		call func() (zaris.KvStatus, int64, int64, error)
	}{
		{"put ifAbsent on an existing key", func() (zaris.KvStatus, int64, int64, error) {
			r, err := cl.Put(bg, &zaris.PutRequest{Key: key, Value: []byte("x"), IfAbsent: &absent})
			return r.GetStatus(), r.GetVersion(), r.GetMapEpoch(), err
		}},
		{"put ifMatchVersion with another version", func() (zaris.KvStatus, int64, int64, error) {
			r, err := cl.Put(bg, &zaris.PutRequest{Key: key, Value: []byte("x"), IfMatchVersion: &stale})
			return r.GetStatus(), r.GetVersion(), r.GetMapEpoch(), err
		}},
		{"delete ifMatchVersion with another version", func() (zaris.KvStatus, int64, int64, error) {
			r, err := cl.Delete(bg, &zaris.DeleteRequest{Key: key, IfMatchVersion: &stale})
			return r.GetStatus(), r.GetVersion(), r.GetMapEpoch(), err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, version, epoch, err := tt.call()
			require.NoError(t, err)
			assert.Equal(t, zaris.KvStatus_Conflict, st)
			assert.Equal(t, current, version, "a Conflict carries the current version")
			assert.Equal(t, nodeEpoch(c, owner), epoch)
		})
	}

	matched, err := cl.Put(bg, &zaris.PutRequest{Key: key, Value: []byte("v2"), IfMatchVersion: &current})
	require.NoError(t, err)
	assert.Equal(t, zaris.KvStatus_Ok, matched.Status, "the matching version applies")
}

func TestStatus_Moved(t *testing.T) {
	c := StartCluster(t, fastCluster())
	key := keyIn(2, 16, "mv")
	_, _, other := roles(c, 2)
	require.NotEqual(t, noOwner, other)
	cl := mustDial(t, c.Addr(other))

	get, err := cl.Get(bg, &zaris.GetRequest{Key: key})
	require.NoError(t, err)
	assert.Equal(t, zaris.KvStatus_Moved, get.Status)
	assert.Equal(t, nodeEpoch(c, other), get.MapEpoch)
	put, err := cl.Put(bg, &zaris.PutRequest{Key: key, Value: []byte("v")})
	require.NoError(t, err)
	assert.Equal(t, zaris.KvStatus_Moved, put.Status)
	assert.Equal(t, nodeEpoch(c, other), put.MapEpoch)
}

func TestStatus_ReplicaWriteRejected(t *testing.T) {
	c := StartCluster(t, fastCluster())
	key := keyIn(4, 16, "rw")
	_, replica, _ := roles(c, 4)
	cl := mustDial(t, c.Addr(replica))

	put, err := cl.Put(bg, &zaris.PutRequest{Key: key, Value: []byte("v")})
	require.NoError(t, err)
	assert.Equal(t, zaris.KvStatus_ReplicaWriteRejected, put.Status)
	assert.Equal(t, nodeEpoch(c, replica), put.MapEpoch)
	inc, err := cl.Increment(bg, &zaris.IncrementRequest{Key: key, Delta: 1})
	require.NoError(t, err)
	assert.Equal(t, zaris.KvStatus_ReplicaWriteRejected, inc.Status)

	get, err := cl.Get(bg, &zaris.GetRequest{Key: key})
	require.NoError(t, err)
	assert.Equal(t, zaris.KvStatus_Moved, get.Status, "a replica serves no reads")
}

func TestStatus_Migrating(t *testing.T) {
	c := StartCluster(t, fastCluster())
	ctx := testCtx(t)
	const seg = 6
	key := keyIn(seg, 16, "mg")
	owner, _, other := roles(c, seg)
	cl := mustDial(t, c.Addr(owner))
	put, err := cl.Put(bg, &zaris.PutRequest{Key: key, Value: []byte("v")})
	require.NoError(t, err)
	require.Equal(t, zaris.KvStatus_Ok, put.Status)

	release := c.HoldChurn()
	defer release()
	done := make(chan error, 1)
	go func() { done <- c.MigrateSegment(ctx, seg, other) }()

	// Writes go on while the copy is made; an acknowledged one must survive the move. (A write
	// answered otherwise may or may not have reached the copies: either value is right then.)
	var last *zaris.PutResponse
	acked := false
	require.Eventually(t, func() bool {
		last, err = cl.Put(bg, &zaris.PutRequest{Key: key, Value: []byte("w")})
		if err != nil {
			// A write in doubt is dropped unanswered with its connection; dial again.
			if fresh, err := dialRaw(c.Addr(owner)); err == nil {
				t.Cleanup(func() { fresh.trans.Close() })
				cl = fresh
			}
			return false
		}
		acked = acked || last.Status == zaris.KvStatus_Ok
		return last.Status == zaris.KvStatus_Migrating
	}, 10*time.Second, time.Millisecond, "the owner never answered Migrating during the cut-over")
	check := func(value []byte) {
		t.Helper()
		if acked {
			assert.Equal(t, []byte("w"), value)
		} else {
			assert.Contains(t, []string{"v", "w"}, string(value))
		}
	}
	assert.Equal(t, nodeEpoch(c, owner), last.MapEpoch)
	// The cut-over revoked the owner's right to serve: a read it answered now could be
	// stale as soon as the new owner takes writes.
	get, err := cl.Get(bg, &zaris.GetRequest{Key: key})
	require.NoError(t, err)
	assert.Equal(t, zaris.KvStatus_Unavailable, get.Status, "the fenced owner still serves reads during the cut-over")

	release()
	require.NoError(t, <-done)
	require.NoError(t, c.WaitSettled(ctx))
	require.Eventually(t, func() bool {
		g, err := cl.Get(bg, &zaris.GetRequest{Key: key})
		return err == nil && g.Status == zaris.KvStatus_Moved
	}, 10*time.Second, time.Millisecond, "the source does not answer Moved after the cut-over")
	newOwner := mustDial(t, c.Addr(other))
	g, err := newOwner.Get(bg, &zaris.GetRequest{Key: key})
	require.NoError(t, err)
	assert.Equal(t, zaris.KvStatus_Ok, g.Status)
	check(g.Value)
}

func TestStatus_OwnershipChanging(t *testing.T) {
	c := StartCluster(t, fastCluster())
	ctx := testCtx(t)
	require.NoError(t, c.Kill(1))
	require.NoError(t, c.Coordinator().WaitNode(ctx, 1, false))
	require.NoError(t, c.Restart(ctx, 1))
	require.NoError(t, c.WaitSettled(ctx))

	// Segment 0's preferred primary is node 1; it is now a replica of its failover owner.
	const seg = 0
	key := keyIn(seg, 16, "oc")
	failoverOwner, _, other := roles(c, seg)
	require.NotEqual(t, int32(1), failoverOwner)

	release := c.HoldChurn()
	defer release()
	done := make(chan error, 1)
	go func() { done <- c.Failback(ctx, 1) }()
	require.NoError(t, c.WaitFor(ctx, func(m *zaris.ClusterMap) bool { return m.Segments[seg].Transitioning }))

	for _, id := range []int32{failoverOwner, other} {
		cl := mustDial(t, c.Addr(id))
		var get *zaris.GetResponse
		require.Eventually(t, func() bool {
			var err error
			get, err = cl.Get(bg, &zaris.GetRequest{Key: key})
			return err == nil && get.Status == zaris.KvStatus_OwnershipChanging
		}, 10*time.Second, time.Millisecond, "node %d does not answer OwnershipChanging during the handoff", id)
		assert.Equal(t, nodeEpoch(c, id), get.MapEpoch)
	}
	release()
	require.NoError(t, <-done)
}

func TestStatus_Unavailable(t *testing.T) {
	c := StartCluster(t, ClusterConfig{Nodes: 2, Segments: 16, ReplicationFactor: 1})
	ctx := testCtx(t)
	const seg = 0
	key := keyIn(seg, 16, "un")
	owner, _, other := roles(c, seg)
	require.NoError(t, c.Kill(owner))
	require.NoError(t, c.WaitFor(ctx, func(m *zaris.ClusterMap) bool { return m.Segments[seg].Owner == nil }))

	cl := mustDial(t, c.Addr(other))
	require.Eventually(t, func() bool { return nodeEpoch(c, other) == c.Map().Epoch }, 10*time.Second, time.Millisecond)
	get, err := cl.Get(bg, &zaris.GetRequest{Key: key})
	require.NoError(t, err)
	assert.Equal(t, zaris.KvStatus_Unavailable, get.Status)
	assert.Equal(t, nodeEpoch(c, other), get.MapEpoch)
	put, err := cl.Put(bg, &zaris.PutRequest{Key: key, Value: []byte("v")})
	require.NoError(t, err)
	assert.Equal(t, zaris.KvStatus_Unavailable, put.Status)
}

func TestStatus_InvalidRequest(t *testing.T) {
	c := StartCluster(t, fastCluster())
	cl := mustDial(t, c.Seeds()[0])
	bigKey := bytes.Repeat([]byte("k"), DefaultMaxKeySize+1)
	bigValue := []byte(strings.Repeat("v", DefaultMaxValueSize+1))
	tests := []struct {
		name string
		call func() (zaris.KvStatus, int64, error)
	}{
		{"get empty key", func() (zaris.KvStatus, int64, error) {
			r, err := cl.Get(bg, &zaris.GetRequest{Key: []byte{}})
			return r.GetStatus(), r.GetMapEpoch(), err
		}},
		{"put empty key", func() (zaris.KvStatus, int64, error) {
			r, err := cl.Put(bg, &zaris.PutRequest{Key: []byte{}, Value: []byte("v")})
			return r.GetStatus(), r.GetMapEpoch(), err
		}},
		{"delete empty key", func() (zaris.KvStatus, int64, error) {
			r, err := cl.Delete(bg, &zaris.DeleteRequest{Key: []byte{}})
			return r.GetStatus(), r.GetMapEpoch(), err
		}},
		{"increment empty key", func() (zaris.KvStatus, int64, error) {
			r, err := cl.Increment(bg, &zaris.IncrementRequest{Key: []byte{}, Delta: 1})
			return r.GetStatus(), r.GetMapEpoch(), err
		}},
		{"get key over 64 KiB", func() (zaris.KvStatus, int64, error) {
			r, err := cl.Get(bg, &zaris.GetRequest{Key: bigKey})
			return r.GetStatus(), r.GetMapEpoch(), err
		}},
		{"put value over 1 MiB", func() (zaris.KvStatus, int64, error) {
			r, err := cl.Put(bg, &zaris.PutRequest{Key: []byte("k"), Value: bigValue})
			return r.GetStatus(), r.GetMapEpoch(), err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, epoch, err := tt.call()
			require.NoError(t, err)
			assert.Equal(t, zaris.KvStatus_InvalidRequest, st)
			assert.Equal(t, c.Map().Epoch, epoch)
		})
	}
}

func TestStatus_InvalidRequestForNonDecimalIncrement(t *testing.T) {
	c := StartCluster(t, fastCluster())
	key := keyIn(1, 16, "inc")
	owner, _, _ := roles(c, 1)
	cl := mustDial(t, c.Addr(owner))
	_, err := cl.Put(bg, &zaris.PutRequest{Key: key, Value: []byte("not a number")})
	require.NoError(t, err)
	inc, err := cl.Increment(bg, &zaris.IncrementRequest{Key: key, Delta: 1})
	require.NoError(t, err)
	assert.Equal(t, zaris.KvStatus_InvalidRequest, inc.Status)
}

func TestIncrement_AddsToDecimalValueStartingAtZero(t *testing.T) {
	c := StartCluster(t, fastCluster())
	key := keyIn(9, 16, "ctr")
	owner, _, _ := roles(c, 9)
	cl := mustDial(t, c.Addr(owner))
	var last int64
	for _, step := range []struct{ delta, want int64 }{{5, 5}, {-7, -2}, {12, 10}} {
		inc, err := cl.Increment(bg, &zaris.IncrementRequest{Key: key, Delta: step.delta})
		require.NoError(t, err)
		require.Equal(t, zaris.KvStatus_Ok, inc.Status)
		assert.Equal(t, step.want, inc.Value)
		assert.Greater(t, inc.Version, last)
		last = inc.Version
	}
	get, err := cl.Get(bg, &zaris.GetRequest{Key: key})
	require.NoError(t, err)
	assert.Equal(t, []byte("10"), get.Value)
}

func TestVersion_GrowsAcrossDeleteAndPut(t *testing.T) {
	c := StartCluster(t, fastCluster())
	key := keyIn(8, 16, "ver")
	owner, _, _ := roles(c, 8)
	cl := mustDial(t, c.Addr(owner))
	first, err := cl.Put(bg, &zaris.PutRequest{Key: key, Value: []byte("a")})
	require.NoError(t, err)
	_, err = cl.Delete(bg, &zaris.DeleteRequest{Key: key})
	require.NoError(t, err)
	again, err := cl.Put(bg, &zaris.PutRequest{Key: key, Value: []byte("b")})
	require.NoError(t, err)
	assert.Greater(t, again.Version, first.Version+1, "the delete took a version of its own; the put must not reuse one")
}

func TestVersion_SurvivesFailover(t *testing.T) {
	c := StartCluster(t, fastCluster())
	ctx := testCtx(t)
	key := keyIn(10, 16, "vf")
	owner, replica, _ := roles(c, 10)
	cl := mustDial(t, c.Addr(owner))
	first, err := cl.Put(bg, &zaris.PutRequest{Key: key, Value: []byte("a")})
	require.NoError(t, err)
	_, err = cl.Delete(bg, &zaris.DeleteRequest{Key: key})
	require.NoError(t, err)

	require.NoError(t, c.Kill(owner))
	require.NoError(t, c.WaitFor(ctx, func(m *zaris.ClusterMap) bool { return *m.Segments[10].Owner == replica }))
	cl2 := mustDial(t, c.Addr(replica))
	require.Eventually(t, func() bool { return nodeEpoch(c, replica) == c.Map().Epoch }, 10*time.Second, time.Millisecond)
	again, err := cl2.Put(bg, &zaris.PutRequest{Key: key, Value: []byte("b")})
	require.NoError(t, err)
	require.Equal(t, zaris.KvStatus_Ok, again.Status)
	assert.Greater(t, again.Version, first.Version+1, "the new owner reused a version")
}

func TestInDoubt_WriteAReplicaAppliedGetsNoStatus(t *testing.T) {
	c := StartCluster(t, ClusterConfig{Nodes: 3, Segments: 16, ReplicationFactor: 3, FailureTimeout: time.Second})
	const seg = 0
	key := keyIn(seg, 16, "doubt")
	sg := c.Map().Segments[seg]
	owner, applied, rejecting := *sg.Owner, sg.Replicas[0], sg.Replicas[1]

	// One replica has moved on to a newer map in which the owner no longer owns the segment:
	// it rejects the owner's write while the other replica applies it, and the owner, learning
	// the newer map, may not answer a status: the client would take it for "not applied".
	rn := c.Node(rejecting)
	pm := cloneMap(rn.current.Load().pm)
	pm.Epoch++
	setOwner(pm.Segments[seg], rejecting)
	pm.Segments[seg].Replicas = []int32{applied, owner}
	require.True(t, rn.install(pm))

	cl := mustDial(t, c.Addr(owner))
	_, err := cl.Put(bg, &zaris.PutRequest{Key: key, Value: []byte("v")})
	require.Error(t, err, "a write some copy applied must not be answered with a status")

	// The owner stops waiting once the newer map drops a copy; the write still reaches the
	// other replica, which is why its outcome is in doubt.
	sa := c.Node(applied).segments()[seg]
	require.Eventually(t, func() bool {
		sa.mu.Lock()
		defer sa.mu.Unlock()
		_, ok := sa.data[string(key)]
		return ok
	}, 10*time.Second, time.Millisecond, "the replica never applied the write")
}
