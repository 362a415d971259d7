package control

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOpen_EmbedsWhenNoEndpointsAreGiven(t *testing.T) {
	ctx := context.Background()
	b, err := Open(ctx, Options{Embed: EmbedConfig{NoFsync: true}})
	require.NoError(t, err)
	require.NotNil(t, b.Embedded())
	assert.Equal(t, "/zaris/", b.Prefix)
	_, err = NewStateStore(b.Client, b.Prefix).Commit(ctx, Fence{}, State{}, sampleState(1))
	require.NoError(t, err)
	b.Close()
}

func TestOpen_UsesExternalEndpoints(t *testing.T) {
	ctx := context.Background()
	cli, prefix := ForTest(t)
	b, err := Open(ctx, Options{Endpoints: cli.Endpoints(), Prefix: prefix})
	require.NoError(t, err)
	defer b.Close()
	assert.Nil(t, b.Embedded(), "nothing embedded when endpoints are given")
	committed, err := NewStateStore(b.Client, b.Prefix).Commit(ctx, Fence{}, State{}, sampleState(3))
	require.NoError(t, err)
	loaded, err := NewStateStore(cli, prefix).Load(ctx)
	require.NoError(t, err)
	assert.Equal(t, committed, loaded, "the state went to the external etcd")
}

func TestOpen_UnreachableEndpointsFailNamingThem(t *testing.T) {
	_, err := Open(context.Background(), Options{Endpoints: []string{"127.0.0.1:1"}, DialTimeout: 300 * time.Millisecond})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "127.0.0.1:1")
}

func TestParseEndpoints(t *testing.T) {
	got, err := ParseEndpoints("127.0.0.1:2379, 127.0.0.1:22379,")
	require.NoError(t, err)
	assert.Equal(t, []string{"127.0.0.1:2379", "127.0.0.1:22379"}, got)
	for _, bad := range []string{"", " , ", "127.0.0.1", "http://127.0.0.1:2379"} {
		_, err := ParseEndpoints(bad)
		assert.Error(t, err, "%q", bad)
	}
}
