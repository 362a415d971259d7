package clientexamples_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisclient"
	"github.com/clustron/zaris-go/runtime"
	"github.com/clustron/zaris-go/tools/store"
)

// This test is written as a user would write one for their own service: the store runs in
// the test's process (store.StartCluster closes it when the test ends), the client dials it
// like a real cluster, and the test can kill a node to see the service ride out a failover.
func TestInProcessClusterInYourOwnTest(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cluster := store.StartCluster(t, store.ClusterConfig{Nodes: 3})

	kv, err := zarisclient.Dial(ctx, runtime.WithSeeds(cluster.Seeds()...))
	require.NoError(t, err)
	t.Cleanup(func() { _ = kv.Close() })

	put, err := kv.Put(ctx, &zaris.PutRequest{Key: []byte("user:42"), Value: []byte("ada")})
	require.NoError(t, err)
	require.Equal(t, zaris.KvStatus_Ok, put.Status)

	// Kill the key's owner; its replica takes over and the read still answers.
	route, err := kv.Engine().Route([]byte("user:42"))
	require.NoError(t, err)
	require.NoError(t, cluster.Kill(route.Node))

	get, err := kv.Get(ctx, &zaris.GetRequest{Key: []byte("user:42")}, runtime.WithMaxAttempts(10))
	require.NoError(t, err)
	require.Equal(t, zaris.KvStatus_Ok, get.Status)
	require.Equal(t, "ada", string(get.Value))
}
