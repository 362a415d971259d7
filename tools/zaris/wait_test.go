package main

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisserver"
	"github.com/clustron/zaris-go/tools/store"
)

// placingNode is a one-node cluster whose map leaves its segment without an owner for the
// first unownedMaps fetches, as a cluster does before its segments are placed.
type placingNode struct {
	zarisserver.UnimplementedZarisKv
	host        string
	port        int32
	unownedMaps int32
	fetches     atomic.Int32
}

func (n *placingNode) GetClusterMap(context.Context) (*zaris.ClusterMap, error) {
	seg := &zaris.SegmentInfo{ID: 0, Replicas: []int32{}}
	if n.fetches.Add(1) > n.unownedMaps {
		owner := int32(1)
		seg.Owner = &owner
	}
	return &zaris.ClusterMap{
		Epoch: int64(n.fetches.Load()), SegmentCount: 1,
		Nodes:    []*zaris.NodeInfo{{ID: 1, Host: n.host, Port: n.port}},
		Segments: []*zaris.SegmentInfo{seg},
	}, nil
}

// servePlacingNode serves n over framed binary on addr until the test ends.
func servePlacingNode(t *testing.T, addr string, n *placingNode) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	p, err := strconv.Atoi(port)
	require.NoError(t, err)
	n.host, n.port = host, int32(p)
	sock, err := thrift.NewTServerSocket(addr)
	require.NoError(t, err)
	require.NoError(t, sock.Listen())
	cfg := &thrift.TConfiguration{}
	srv := thrift.NewTSimpleServer4(zaris.NewZarisKvProcessor(n), sock,
		thrift.NewTFramedTransportFactoryConf(thrift.NewTTransportFactory(), cfg),
		thrift.NewTBinaryProtocolFactoryConf(cfg))
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve()
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
}

// zaris wait returns at once against a cluster that answers.
func TestWait_ClusterUp(t *testing.T) {
	c := store.StartCluster(t, store.ClusterConfig{Nodes: 3})
	o := runZaris(t, nil, "--seeds", strings.Join(c.Seeds(), ","), "wait")
	require.Equal(t, exitOK, o.code, o.stderr)
	assert.Regexp(t, `^ok: the cluster answers \(map epoch \d+, 3 nodes, \d+ segments\) after \S+\n$`, o.stdout)
	assert.Empty(t, o.stderr)

	r := jsonResult(t, runZaris(t, nil, "--seeds", strings.Join(c.Seeds(), ","), "wait", "--json"))
	assert.Equal(t, "wait", r["command"])
	assert.Equal(t, "Ok", r["status"])
	assert.Contains(t, r, "mapEpoch")
}

// zaris wait keeps trying while the seeds refuse connections and while the map leaves a
// segment without an owner, and returns once both are over.
func TestWait_UntilTheClusterAnswers(t *testing.T) {
	addr := closedAddr(t)
	n := &placingNode{unownedMaps: 2}
	done := make(chan runOutput, 1)
	go func() { done <- runZaris(t, nil, "--seeds", addr, "wait", "--timeout", "20s") }()
	time.Sleep(300 * time.Millisecond) // a few refused tries; the outcome does not depend on it
	servePlacingNode(t, addr, n)
	o := <-done
	require.Equal(t, exitOK, o.code, o.stderr)
	assert.Contains(t, o.stdout, "ok: the cluster answers (map epoch 3, 1 nodes, 1 segments)")
	assert.EqualValues(t, 3, n.fetches.Load(), "two maps with an unowned segment, then one without")
}

// At --timeout, zaris wait exits 5 naming the bound and what the last try met.
func TestWait_Timeout(t *testing.T) {
	addr := closedAddr(t)
	o := runZaris(t, nil, "--seeds", addr, "wait", "--timeout", "300ms")
	assert.Equal(t, exitGaveUp, o.code)
	assert.Empty(t, o.stdout)
	assert.Contains(t, o.stderr, "zaris: wait: the cluster did not answer within 300ms: no seed reachable: seed "+addr+": dial tcp "+addr+": connect: connection refused")

	n := &placingNode{unownedMaps: 1 << 30}
	addr = closedAddr(t)
	servePlacingNode(t, addr, n)
	o = runZaris(t, nil, "--seeds", addr, "--timeout", "300ms", "wait")
	assert.Equal(t, exitGaveUp, o.code)
	assert.Regexp(t, `zaris: wait: the cluster did not answer within 300ms: the map \(epoch \d+\) leaves 1 of 1 segments without an owner\n$`, o.stderr)

	o = runZaris(t, nil, "--seeds", "nowhere", "wait")
	assert.Equal(t, exitUsage, o.code, "a configuration error does not wait")
	assert.Contains(t, o.stderr, `Seeds "nowhere"`)
}
