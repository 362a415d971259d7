package store

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/tools/gen/zarispeer"
	"github.com/clustron/zaris-go/tools/store/control"
)

// slowCluster starts a cluster whose coordinator suspects a node after a short silence but
// gives a suspected node a generous probe, so only a node that stops answering altogether is
// failed over.
func slowCluster(t *testing.T, probe time.Duration) *Cluster {
	cfg := fastCluster()
	cfg.FailureTimeout = 100 * time.Millisecond
	cfg.ProbeTimeout = probe
	return StartCluster(t, cfg)
}

func TestFailureDetector_SlowNodeIsNotFailedOver(t *testing.T) {
	c := slowCluster(t, 10*time.Second)
	ctx := testCtx(t)
	co := c.Coordinator()
	co.mu.Lock()
	rec := co.nodes[2]
	co.mu.Unlock()
	w := startWorkload(t, c.Seeds(), 2)
	w.cluster = c
	w.waitAcked(t, 20)

	// Node 2 answers every ping three failure timeouts late: its heartbeats time out, but it
	// answers the probe, so it is slow, not dead.
	n := c.Node(2)
	n.slowness.Store(int64(3 * 100 * time.Millisecond))
	base := co.slowKept.Load()
	require.NoError(t, co.waitUntil(ctx, func() (bool, error) {
		return co.slowKept.Load() >= base+3 || co.nodes[2] != rec || !rec.alive, nil
	}))
	co.mu.Lock()
	kept := co.nodes[2] == rec && rec.alive
	co.mu.Unlock()
	require.True(t, kept, "the slow node was failed over")
	n.slowness.Store(0)

	require.NoError(t, c.WaitSettled(ctx))
	w.waitAcked(t, 20)
	w.finish(t)
}

func TestFailureDetector_HungNodeIsFailedOverAfterTheProbe(t *testing.T) {
	c := slowCluster(t, 200*time.Millisecond)
	ctx := testCtx(t)

	// Node 2 stops answering the coordinator altogether while its ports still accept
	// connections, like a stopped process: the probe goes unanswered and it is failed over.
	c.Node(2).slowness.Store(int64(time.Hour))
	waitFailedOver(t, c.Coordinator(), 2, 0)
	require.NoError(t, c.WaitFor(ctx, func(m *zaris.ClusterMap) bool {
		for _, s := range m.Segments {
			if s.Owner == nil || *s.Owner == 2 {
				return false
			}
		}
		return true
	}))
}

func TestFailover_SyncedLearnerTakesOverWhenItsOwnerDies(t *testing.T) {
	c := StartCluster(t, fastCluster())
	r := newRouter(c.Seeds())
	defer r.close()
	const seg = 0
	acked := map[string]string{}
	for i := range 20 {
		k, v := string(keyIn(seg, 16, fmt.Sprintf("k%d-", i))), fmt.Sprintf("v%d", i)
		st, err := r.put1(k, v, nil)
		require.NoError(t, err)
		require.Equal(t, zaris.KvStatus_Ok, st)
		acked[k] = v
	}
	owner, replica, _ := roles(c, seg)

	// The replica is, as far as the coordinator knows, a learner that reported a full copy
	// from the owner and waits to be made a replica, when the owner dies. (It holds every
	// write: it was a replica until now, and no node sees the map in between.) Failing the
	// owner over must give the segment to the learner, not leave it without owner.
	co := c.Coordinator()
	co.mu.Lock()
	m := cloneMap(co.m)
	sg := m.Segments[seg]
	sg.Replicas, sg.Learners = remove(sg.Replicas, replica), append(sg.Learners, replica)
	co.m, co.public = m, publicMap(m)
	co.synced[syncKey{seg, replica}] = owner
	co.failLocked(co.nodes[owner], "test")
	got := ownerOf(co.m.Segments[seg])
	co.mu.Unlock()
	require.Equal(t, replica, got, "segment %d after its owner's failover", seg)

	for k, v := range acked {
		st, val, err := r.get1(k)
		require.NoError(t, err)
		require.Equal(t, zaris.KvStatus_Ok, st, k)
		require.Equal(t, v, val, k)
	}
}

func TestLeave_WaitsForTheSegmentsWhoseOnlyCopyTheNodeHolds(t *testing.T) {
	cfg := ClusterConfig{Nodes: 2, Segments: 16, ReplicationFactor: 1, FailureTimeout: time.Second, Logger: testLogger()}
	c := StartCluster(t, cfg)
	ctx := testCtx(t)
	r := newRouter(c.Seeds())
	defer r.close()
	acked := r.putKeys(t, 50)

	// Node 1, the only copy of its segments, is failed over while it runs and registers
	// again: its segments wait for it without owner. A Leave now must not count them as
	// drained, or they would go with the node.
	co := c.Coordinator()
	n := c.Node(1)
	co.mu.Lock()
	co.failLocked(co.nodes[1], "test")
	co.mu.Unlock()
	host, port, err := splitHostPort(n.Addr())
	require.NoError(t, err)
	_, err = co.register(&zarispeer.RegisterRequest{NodeId: 1, Incarnation: n.incarnation, Host: host, Port: port, PeerAddr: n.PeerAddr()})
	require.NoError(t, err)
	done, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, co.Leave(done, 1), context.Canceled, "Leave found nothing to drain")

	require.NoError(t, co.Leave(ctx, 1))
	require.NoError(t, c.WaitFor(ctx, func(m *zaris.ClusterMap) bool {
		for _, s := range m.Segments {
			if s.Owner == nil || *s.Owner != 2 {
				return false
			}
		}
		return true
	}))
	for k, v := range acked {
		st, got, err := r.get1(k)
		require.NoError(t, err)
		require.Equal(t, zaris.KvStatus_Ok, st, k)
		require.Equal(t, v, got, k)
	}
}

func TestLease_OwnerCutOffFromTheCoordinatorStopsServingBeforeItIsReplaced(t *testing.T) {
	// The owner stops answering the coordinator but still answers clients: the coordinator
	// fails it over to the replica, which takes new writes. The cut-off owner must not go on
	// answering reads with the value it holds. In "unreachable" the coordinator cannot even
	// connect to the owner's data port (a partition drops its SYNs, so the dial times out
	// rather than being refused): that is no proof the process is gone.
	for _, unreachable := range []bool{false, true} {
		name := map[bool]string{false: "silent", true: "unreachable"}[unreachable]
		t.Run(name, func(t *testing.T) {
			cfg := fastCluster()
			cfg.FailureTimeout = 100 * time.Millisecond
			cfg.ProbeTimeout = time.Second
			var cutOff atomic.Pointer[string] // the data address the coordinator cannot reach
			if unreachable {
				drop := synDroppingAddr(t)
				cfg.coordDial = func(network, addr string, timeout time.Duration) (net.Conn, error) {
					if p := cutOff.Load(); p != nil && *p == addr {
						addr = drop
					}
					return net.DialTimeout(network, addr, timeout)
				}
			}
			c := StartCluster(t, cfg)
			ctx := testCtx(t)
			const seg = 0
			key := keyIn(seg, 16, "k")
			owner, replica, _ := roles(c, seg)
			put := func(addr, value string) zaris.KvStatus {
				cl := mustDial(t, addr)
				defer cl.trans.Close()
				resp, err := cl.Put(ctx, &zaris.PutRequest{Key: key, Value: []byte(value)})
				require.NoError(t, err)
				return resp.Status
			}
			require.Equal(t, zaris.KvStatus_Ok, put(c.Addr(owner), "old"))

			addr := c.Addr(owner)
			cutOff.Store(&addr)
			c.Node(owner).slowness.Store(int64(time.Hour))
			waitFailedOver(t, c.Coordinator(), owner, 0)
			require.Eventually(t, func() bool { return put(c.Addr(replica), "new") == zaris.KvStatus_Ok },
				20*time.Second, 10*time.Millisecond, "the replica never took the segment over")

			cl := mustDial(t, c.Addr(owner))
			defer cl.trans.Close()
			resp, err := cl.Get(ctx, &zaris.GetRequest{Key: key})
			require.NoError(t, err)
			require.NotEqual(t, zaris.KvStatus_Ok, resp.Status, "the cut-off owner served a read: %q", resp.Value)
			require.True(t, retryable(resp.Status), "the cut-off owner answered %v", resp.Status)
		})
	}
}

// synDroppingAddr returns a loopback address whose SYNs the kernel drops: a socket listening
// with a full accept queue that nobody accepts from. A dial to it times out, as across a
// network partition.
func synDroppingAddr(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	require.NoError(t, err)
	t.Cleanup(func() { syscall.Close(fd) })
	require.NoError(t, syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}))
	require.NoError(t, syscall.Listen(fd, 0))
	sa, err := syscall.Getsockname(fd)
	require.NoError(t, err)
	addr := fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
	filler, err := net.DialTimeout("tcp", addr, time.Second) // fills the queue of one
	require.NoError(t, err)
	t.Cleanup(func() { filler.Close() })
	return addr
}

func TestRefused_OnlyARefusedConnectionMeansTheProcessIsGone(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	live := ln.Addr().String()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	gone := closed.Addr().String()
	require.NoError(t, closed.Close())
	defer ln.Close()

	require.False(t, refused(net.DialTimeout, live, time.Second), "a port that accepts")
	require.True(t, refused(net.DialTimeout, gone, time.Second), "a port nothing listens on")
	require.False(t, refused(net.DialTimeout, synDroppingAddr(t), 50*time.Millisecond), "a port that does not answer")
}

func TestFailureDetector_NodeFailedOverWhileAliveComesBackWithItsData(t *testing.T) {
	cfg := ClusterConfig{Nodes: 2, Segments: 16, ReplicationFactor: 1, FailureTimeout: 100 * time.Millisecond,
		ProbeTimeout: 200 * time.Millisecond, Logger: testLogger()}
	c := StartCluster(t, cfg)
	ctx := testCtx(t)
	r := newRouter(c.Seeds())
	defer r.close()
	acked := r.putKeys(t, 50)

	// Node 1, the only copy of its segments, stops answering the coordinator long enough to
	// be failed over (its etcd lease revoked); its segments have no owner. It learns of the
	// lost lease, registers again as the same process and gets them back, data intact.
	co := c.Coordinator()
	n := c.Node(1)
	n.slowness.Store(int64(time.Hour))
	waitFailedOver(t, co, 1, 0)
	n.slowness.Store(0)
	require.NoError(t, c.WaitFor(ctx, func(m *zaris.ClusterMap) bool {
		for _, s := range m.Segments {
			if s.Owner == nil {
				return false
			}
		}
		return true
	}))
	for k, v := range acked {
		st, got, err := r.get1(k)
		require.NoError(t, err)
		require.Equal(t, zaris.KvStatus_Ok, st, k)
		require.Equal(t, v, got, k)
	}
}

// A second process registers as a node from another address (the node restarted elsewhere
// while its first process still runs, cut off from the coordinator but not from its clients
// or etcd). Its registration in etcd replaces the first process's key, but not its lease, so
// the first process keeps its right to serve: the coordinator must fence it (revoke that
// lease, wait its TTL out) before it hands the segments to another node, or the first
// process answers reads from a copy the new owner has moved past. In "takeover" the second
// process registers while no coordinator runs, and the next one finds it in etcd.
func TestRegister_NewProcessOfALiveNodeFencesTheOldOne(t *testing.T) {
	for _, takeover := range []bool{false, true} {
		t.Run(map[bool]string{false: "running", true: "takeover"}[takeover], func(t *testing.T) {
			c := StartCluster(t, fastCluster())
			ctx := testCtx(t)
			const seg = 0
			key := keyIn(seg, 16, "twin")
			owner, replica, _ := roles(c, seg)
			putUntilOk(t, c.Addr(owner), key, "old", "owner")
			c.Node(owner).slowness.Store(int64(time.Hour)) // cut off from the coordinator

			coordAddr := c.Coordinator().Addr()
			if takeover {
				require.NoError(t, c.StopCoordinator())
			}
			cfg := c.cfg.Node
			cfg.ID, cfg.Coordinator, cfg.Etcd, cfg.EtcdPrefix = owner, coordAddr, c.cfg.Etcd, c.cfg.EtcdPrefix
			twin, err := StartNode(cfg)
			require.NoError(t, err)
			defer twin.Close()
			if takeover {
				require.Eventually(t, func() bool {
					resp, err := c.cfg.Etcd.Get(ctx, control.NodeKey(twin.cfg.EtcdPrefix, owner))
					return err == nil && len(resp.Kvs) == 1 && parseRegistration(resp.Kvs[0].Value, 0).value.Incarnation == twin.incarnation
				}, 10*time.Second, time.Millisecond, "the second process never registered in etcd")
				require.NoError(t, c.RestartCoordinator())
			}

			waitFailedOver(t, c.Coordinator(), owner, 0)
			putUntilOk(t, c.Addr(replica), key, "new", "replica")
			cl := mustDial(t, c.Addr(owner))
			defer cl.trans.Close()
			resp, err := cl.Get(ctx, &zaris.GetRequest{Key: key})
			require.NoError(t, err)
			require.NotEqual(t, zaris.KvStatus_Ok, resp.Status, "the first process served a read: %q", resp.Value)
		})
	}
}
