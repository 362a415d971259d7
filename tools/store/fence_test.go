package store

import (
	"context"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/tools/gen/zarispeer"
	"github.com/clustron/zaris-go/tools/store/control"
)

// The second reproduction: a segment migrates to a node that was not its replica while the
// old owner answers the coordinator's map pushes a few milliseconds late. As soon as the new
// owner acknowledges a write, the old owner must not answer a read with the value before it.
func TestCutover_SlowOldOwnerServesNoStaleRead(t *testing.T) {
	for _, d := range []time.Duration{2 * time.Millisecond, 10 * time.Millisecond} {
		t.Run(d.String(), func(t *testing.T) {
			c := StartCluster(t, fastCluster())
			ctx := testCtx(t)
			for seg := range int32(4) {
				sg := c.Map().Segments[seg]
				from := *sg.Owner
				to := int32(-1)
				for _, id := range c.Nodes() {
					if id != from && !slices.Contains(sg.Replicas, id) {
						to = id
					}
				}
				require.NotEqual(t, int32(-1), to)
				key := keyIn(seg, 16, "fence")
				old := mustDial(t, c.Addr(from))
				put, err := old.Put(ctx, &zaris.PutRequest{Key: key, Value: []byte("v1")})
				require.NoError(t, err)
				require.Equal(t, zaris.KvStatus_Ok, put.Status)

				c.Node(from).slowness.Store(int64(d))
				require.NoError(t, c.MigrateSegment(ctx, seg, to))
				put = putUntilOk(t, c.Addr(to), key, "v2", "new owner")
				get, err := old.Get(ctx, &zaris.GetRequest{Key: key})
				require.NoError(t, err)
				c.Node(from).slowness.Store(0)
				if get.Status == zaris.KvStatus_Ok {
					require.Equal(t, "v2", string(get.Value), fmt.Sprintf("segment %d: the old owner served a stale read at epoch %d after the new owner acknowledged v2 at epoch %d", seg, get.MapEpoch, put.MapEpoch))
				} else {
					require.True(t, retryable(get.Status), "get at the old owner: %s", get.Status)
				}
			}
		})
	}
}

// The same at a failback: while the returning node takes its segments back, the node that
// owned them in the meantime answers the coordinator slow by d; once the returning node
// acknowledged a write, the old owner must not answer a read with the value before it.
func TestCutover_SlowOldOwnerServesNoStaleReadAtFailback(t *testing.T) {
	c := StartCluster(t, fastCluster())
	ctx := testCtx(t)
	var segs []int32
	for _, sg := range c.Map().Segments {
		if *sg.Owner == 2 {
			segs = append(segs, sg.ID)
		}
	}
	require.NotEmpty(t, segs)
	require.NoError(t, c.Kill(2))
	require.NoError(t, c.Coordinator().WaitNode(ctx, 2, false))
	require.NoError(t, c.Restart(ctx, 2))
	require.NoError(t, c.WaitSettled(ctx))

	seg := segs[0]
	from := *c.Map().Segments[seg].Owner
	key := keyIn(seg, 16, "fence")
	old := mustDial(t, c.Addr(from))
	put, err := old.Put(ctx, &zaris.PutRequest{Key: key, Value: []byte("v1")})
	require.NoError(t, err)
	require.Equal(t, zaris.KvStatus_Ok, put.Status)

	for _, id := range c.Nodes() {
		if id != 2 {
			c.Node(id).slowness.Store(int64(10 * time.Millisecond))
		}
	}
	done := make(chan error, 1)
	go func() { done <- c.Failback(ctx, 2) }()
	put = putUntilOk(t, c.Addr(2), key, "v2", "returning node")
	get, err := old.Get(ctx, &zaris.GetRequest{Key: key})
	require.NoError(t, err)
	for _, id := range c.Nodes() {
		c.Node(id).slowness.Store(0)
	}
	require.NoError(t, <-done)
	if get.Status == zaris.KvStatus_Ok {
		require.Equal(t, "v2", string(get.Value), "the old owner served a stale read at epoch %d after the returning node acknowledged v2 at epoch %d", get.MapEpoch, put.MapEpoch)
	} else {
		require.True(t, retryable(get.Status), "get at the old owner: %s", get.Status)
	}
}

// An old owner that hangs is fenced by its etcd lease: the new owner acknowledges a write
// only once the old owner's right to serve has ended.
func TestCutover_HungOldOwner_NewOwnerWritesOnlyAfterItsLeaseRanOut(t *testing.T) {
	cfg := fastCluster()
	cfg.FailureTimeout = 100 * time.Millisecond
	cfg.ProbeTimeout = 300 * time.Millisecond
	cfg.Node.LeaseTTL = time.Second
	c := StartCluster(t, cfg)
	ctx := testCtx(t)
	const seg = 0
	key := keyIn(seg, 16, "hung")
	from, _, to := roles(c, seg)
	old := c.Node(from)

	old.slowness.Store(int64(time.Hour))
	done := make(chan error, 1)
	go func() { done <- c.MigrateSegment(ctx, seg, to) }()
	put := putUntilOk(t, c.Addr(to), key, "v", "new owner")
	// Once the old owner lost its right, it serves again only after registering anew, with
	// a map that no longer gives it the segment.
	v := old.current.Load()
	require.False(t, old.leased() && v.route(seg, from, false) == zaris.KvStatus_Ok,
		"the new owner took a write at epoch %d while the old owner could still serve the segment at epoch %d", put.MapEpoch, v.epoch)
	require.NoError(t, <-done)
}

// The fence's second step: it ends when the old owner confirms the revoking map, or when it
// is failed over (its etcd lease is gone) although it never answers.
func TestCutover_AwaitRevokedEndsOnConfirmationOrFailover(t *testing.T) {
	cli, prefix := control.ForTest(t)
	co, err := StartCoordinator(CoordinatorConfig{FailureTimeout: 100 * time.Millisecond, Heartbeat: 10 * time.Millisecond, Etcd: cli, EtcdPrefix: prefix})
	require.NoError(t, err)
	t.Cleanup(func() { co.Close() })
	// A peer that accepts and never answers: a hung old owner.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		var conns []net.Conn
		for {
			c, err := ln.Accept()
			if err != nil {
				for _, c := range conns {
					c.Close()
				}
				return
			}
			conns = append(conns, c)
		}
	}()
	m := cloneMap(co.m)
	m.Epoch = 7
	hung := &nodeRec{info: &zarispeer.PeerNode{ID: 1, PeerAddr: ln.Addr().String()}, alive: true}

	ended := make(chan bool, 1)
	go func() { ended <- co.awaitRevoked(hung, m) }()
	select {
	case <-ended:
		t.Fatal("the fence ended while the old owner neither confirmed nor was failed over")
	case <-time.After(200 * time.Millisecond):
	}
	co.mu.Lock()
	hung.alive = false // failed over: its lease is gone
	co.mu.Unlock()
	require.True(t, <-ended)

	co.mu.Lock()
	hung.alive, hung.known = true, 7
	co.mu.Unlock()
	require.True(t, co.awaitRevoked(hung, m), "a confirmed revoke ends the fence")
}

// putUntilOk writes value to key at the node at addr until it acknowledges the write (10 s
// at most), failing the test on a status a client would not retry; who names the node. A
// call that fails (a timeout on a loaded machine, a write in doubt) is sent again on a new
// connection: the value is the same.
func putUntilOk(t *testing.T, addr string, key []byte, value, who string) *zaris.PutResponse {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var cl *rawClient
	defer func() {
		if cl != nil {
			cl.trans.Close()
		}
	}()
	for ; ; time.Sleep(time.Millisecond) {
		require.True(t, time.Now().Before(deadline), "the %s never took the write", who)
		if cl == nil {
			var err error
			if cl, err = dialRaw(addr); err != nil {
				cl = nil
				continue
			}
		}
		put, err := cl.Put(context.Background(), &zaris.PutRequest{Key: key, Value: []byte(value)})
		if err != nil {
			cl.trans.Close()
			cl = nil
			continue
		}
		if put.Status == zaris.KvStatus_Ok {
			return put
		}
		require.True(t, retryable(put.Status), "put at the %s: %s", who, put.Status)
	}
}
