package store

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A zero or negative field of NodeConfig or CoordinatorConfig takes its default; a set one is
// kept; a missing id, coordinator or etcd, or a failure timeout under the heartbeat, is an error.
func TestConfig_Defaults(t *testing.T) {
	etcd := &clientv3.Client{}
	n, err := NodeConfig{ID: 1, Coordinator: "c:1", Etcd: etcd, MaxKeySize: -1, IdleTimeout: time.Second}.withDefaults()
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:0", n.Listen)
	assert.Equal(t, "127.0.0.1:0", n.PeerListen)
	assert.Equal(t, "/zaris/", n.EtcdPrefix)
	assert.Equal(t, DefaultMaxKeySize, n.MaxKeySize)
	assert.Equal(t, DefaultMaxValueSize, n.MaxValueSize)
	assert.Equal(t, time.Second, n.IdleTimeout)
	assert.Equal(t, DefaultReplicationTimeout, n.ReplicationTimeout)
	assert.Equal(t, DefaultLeaseWait, n.LeaseWait)
	assert.Equal(t, DefaultCutoverWait, n.CutoverWait)
	assert.Equal(t, DefaultLeaseTTL, n.LeaseTTL)
	assert.NotNil(t, n.Clock)
	assert.NotNil(t, n.Logger)

	n, err = NodeConfig{ID: 1, Coordinator: "c:1", Etcd: etcd, LeaseTTL: 3500 * time.Millisecond, EtcdPrefix: "/p/"}.withDefaults()
	require.NoError(t, err)
	assert.Equal(t, 3*time.Second, n.LeaseTTL)
	assert.Equal(t, "/p/", n.EtcdPrefix)

	for _, bad := range []NodeConfig{{Coordinator: "c:1", Etcd: etcd}, {ID: 1, Etcd: etcd}, {ID: 1, Coordinator: "c:1"}} {
		_, err := bad.withDefaults()
		assert.Error(t, err, "%+v", bad)
	}

	c, err := CoordinatorConfig{Segments: -3, Heartbeat: 10 * time.Millisecond}.withDefaults()
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:0", c.Listen)
	assert.Equal(t, "/zaris/", c.EtcdPrefix)
	assert.Equal(t, 1, c.InitialNodes)
	assert.Equal(t, int32(DefaultSegments), c.Segments)
	assert.Equal(t, DefaultReplicationFactor, c.ReplicationFactor)
	assert.Equal(t, 10*time.Millisecond, c.Heartbeat)
	assert.Equal(t, DefaultFailureTimeout, c.FailureTimeout)
	assert.Equal(t, DefaultProbeTimeout, c.ProbeTimeout)
	assert.NotNil(t, c.Logger)
	assert.NotNil(t, c.dial)

	_, err = CoordinatorConfig{Heartbeat: time.Second, FailureTimeout: time.Millisecond}.withDefaults()
	assert.Error(t, err)
}
