package runtime

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
)

// A map without any node the client has a pool for retires them all and installs.
func TestInstall_MapWithoutAnyPooledNode(t *testing.T) {
	cl, _, addrs := stallClusterUnclosed(t)
	_, err := cl.Invoke(context.Background(), getCall("warm")) // node 1's pool
	require.NoError(t, err)
	m := ownedBy(2, 2, addrs...)
	m.Nodes = m.Nodes[1:]
	installNoPanic(t, cl, m)
	defer cl.Close()
	assert.Equal(t, int64(2), cl.router.Epoch())
}

// A node's pool that a map retired is forgotten at the next install once its connections
// are closed: a map that keeps changing keeps no pool of every node that ever left.
func TestInstall_ForgetsARetiredPoolWithNoConnectionOpen(t *testing.T) {
	cl, _, addrs := stallClusterUnclosed(t)
	defer cl.Close()
	_, err := cl.Invoke(context.Background(), getCall("warm")) // node 1's pool, its connection idle
	require.NoError(t, err)
	retired := func() int {
		cl.poolMu.Lock()
		defer cl.poolMu.Unlock()
		return len(cl.retired)
	}
	without1 := func(epoch int64) *zaris.ClusterMap {
		m := ownedBy(epoch, 2, addrs...)
		m.Nodes = m.Nodes[1:]
		return m
	}
	installNoPanic(t, cl, without1(2))
	require.Equal(t, 1, retired(), "node 1's pool is retired, its idle connection closed")
	installNoPanic(t, cl, without1(3))
	assert.Equal(t, 0, retired(), "the next install forgets it")
}
