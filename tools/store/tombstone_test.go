package store

import (
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/tools/gen/zarispeer"
)

// tombstones returns how many tombstones the segment holds.
func (s *segment) tombstones() int {
	n := 0
	for _, e := range s.data {
		if e.deleted {
			n++
		}
	}
	return n
}

func put(key string, v int64, value string) *zarispeer.Entry {
	return &zarispeer.Entry{Key: []byte(key), Value: []byte(value), Version: v}
}

func tomb(key string, v int64) *zarispeer.Entry {
	return &zarispeer.Entry{Key: []byte(key), Version: v, Deleted: true}
}

// A copy applies an entry only if it is newer than what it holds, tombstones included, so a
// late, resent or duplicated write is a no-op, before and after the tombstone is collected.
func TestSegment_AppliesOnlyNewerEntries(t *testing.T) {
	s := &segment{}
	s.apply(put("k", 5, "ghost"))
	s.apply(tomb("k", 6))
	s.apply(put("k", 5, "ghost")) // the resent Put lands after the delete
	_, ok := s.lookup([]byte("k"))
	require.False(t, ok, "a late write overwrote the tombstone")
	require.Equal(t, 1, s.tombstones())

	s.apply(put("j", 7, "a"))
	s.apply(put("j", 3, "older")) // reordered: an older write of the same key
	e, ok := s.lookup([]byte("j"))
	require.True(t, ok)
	require.Equal(t, "a", string(e.value))
	s.apply(put("j", 7, "a")) // a duplicate
	e, _ = s.lookup([]byte("j"))
	require.Equal(t, int64(7), e.version)

	// Collection only up to the stable version: a later tombstone stays.
	s.apply(tomb("j", 8))
	s.collect(7)
	require.Equal(t, 1, s.tombstones(), "the tombstone of version 8 is not stable at 7")
	_, ok = s.data["k"]
	require.False(t, ok, "the stable tombstone of version 6 was not collected")
	s.apply(put("k", 5, "ghost")) // and now it is gone, the late write is still refused
	_, ok = s.lookup([]byte("k"))
	require.False(t, ok, "a late write came back after its tombstone was collected")
	s.apply(put("k", 9, "new"))
	e, ok = s.lookup([]byte("k"))
	require.True(t, ok)
	require.Equal(t, "new", string(e.value))
}

// A delete leaves a versioned tombstone on the replica, which is collected once the owner
// reports a later state applied by every copy; a late Replicate of the deleted write stays a
// no-op throughout; a Put after the delete gets a higher version.
func TestTombstone_ReplicatedThenCollectedWhenEveryCopyMovedPast(t *testing.T) {
	cfg := fastCluster()
	cfg.Nodes = 2
	c := StartCluster(t, cfg)
	ctx := testCtx(t)
	const seg = 3
	owner := *c.Map().Segments[seg].Owner
	replica := c.Map().Segments[seg].Replicas[0]
	cl := mustDial(t, c.Addr(owner))
	key, other := keyIn(seg, 16, "tomb"), keyIn(seg, 16, "other")

	p, err := cl.Put(ctx, &zaris.PutRequest{Key: key, Value: []byte("v")})
	require.NoError(t, err)
	require.Equal(t, zaris.KvStatus_Ok, p.Status)
	d, err := cl.Delete(ctx, &zaris.DeleteRequest{Key: key})
	require.NoError(t, err)
	require.Equal(t, zaris.KvStatus_Ok, d.Status)

	rs := c.Node(replica).segments()[seg]
	state := func() (entry, bool, int) {
		rs.mu.Lock()
		defer rs.mu.Unlock()
		e, ok := rs.data[string(key)]
		return e, ok, rs.tombstones()
	}
	e, ok, _ := state()
	require.True(t, ok && e.deleted, "the replica holds no tombstone after the delete")
	require.Greater(t, e.version, p.Version)
	delVersion := e.version

	// The Put's Replicate, delivered late.
	late := func() {
		pm := c.Node(replica).current.Load().pm
		pool := newConnPool(time.Second, c.Credentials().ClientTLS())
		defer pool.close()
		err := pool.call(c.Node(replica).PeerAddr(), time.Second, func(tc thrift.TClient) error {
			r, err := zarispeer.NewZarisPeerClient(tc).Replicate(ctx, &zarispeer.ReplicateRequest{
				Sender: owner, Epoch: pm.Epoch, Segment: seg, ClusterId: pm.ClusterId,
				Entry: put(string(key), p.Version, "v"),
			})
			if err == nil {
				require.Equal(t, zarispeer.PeerStatus_Ok, r.Status)
			}
			return err
		})
		require.NoError(t, err)
	}
	late()
	e, _, _ = state()
	require.True(t, e.deleted, "a late Replicate resurrected the key on the replica")

	// A later write, applied by every copy, makes the tombstone collectable everywhere.
	p2, err := cl.Put(ctx, &zaris.PutRequest{Key: other, Value: []byte("x")})
	require.NoError(t, err)
	require.Equal(t, zaris.KvStatus_Ok, p2.Status)
	p3, err := cl.Put(ctx, &zaris.PutRequest{Key: other, Value: []byte("y")})
	require.NoError(t, err)
	require.Equal(t, zaris.KvStatus_Ok, p3.Status)
	_, ok, n := state()
	require.False(t, ok, "the tombstone of version %d outlived a later state every copy applied", delVersion)
	require.Zero(t, n)
	late()
	_, ok, _ = state()
	require.False(t, ok, "a late Replicate resurrected the key after its tombstone was collected")

	g, err := cl.Get(ctx, &zaris.GetRequest{Key: key})
	require.NoError(t, err)
	require.Equal(t, zaris.KvStatus_NotFound, g.Status)
	d, err = cl.Delete(ctx, &zaris.DeleteRequest{Key: key})
	require.NoError(t, err)
	require.Equal(t, zaris.KvStatus_NotFound, d.Status)
	p4, err := cl.Put(ctx, &zaris.PutRequest{Key: key, Value: []byte("again")})
	require.NoError(t, err)
	require.Equal(t, zaris.KvStatus_Ok, p4.Status)
	require.Greater(t, p4.Version, delVersion)
}
