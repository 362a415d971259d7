package control

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func TestRegister_KeyLivesUnderTheLeaseAndCloseRemovesIt(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cli, prefix := ForTest(t)
	live := NewLiveness(SystemClock(), 100*time.Millisecond)
	reg, err := Register(ctx, cli, prefix, 2, "127.0.0.1:7002", 3*time.Second, live)
	require.NoError(t, err)
	assert.True(t, live.CanServe())

	resp, err := cli.Get(ctx, NodeKey(prefix, 2))
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	assert.Equal(t, "127.0.0.1:7002", string(resp.Kvs[0].Value))
	assert.Equal(t, int64(reg.Lease()), resp.Kvs[0].Lease)

	require.NoError(t, reg.Close(ctx))
	assert.False(t, live.CanServe())
	resp, err = cli.Get(ctx, NodeKey(prefix, 2))
	require.NoError(t, err)
	assert.Empty(t, resp.Kvs, "a clean leave removes the key at once")
	assert.NoError(t, reg.Err())
}

// The lease is revoked behind the node's back (as when it expired): the next renewal finds
// it gone, the registration ends with ErrLeaseLost and the node may no longer serve.
func TestRegister_LostLeaseEndsTheRightToServe(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cli, prefix := ForTest(t)
	live := NewLiveness(SystemClock(), 0)
	reg, err := Register(ctx, cli, prefix, 1, "127.0.0.1:7001", time.Second, live)
	require.NoError(t, err)
	_, err = cli.Revoke(ctx, reg.Lease())
	require.NoError(t, err)
	select {
	case <-reg.Done():
	case <-ctx.Done():
		t.Fatal("the registration did not notice its lease was gone")
	}
	assert.ErrorIs(t, reg.Err(), ErrLeaseLost)
	assert.False(t, live.CanServe())
	require.NoError(t, reg.Close(ctx))
}

// While registered, renewals keep the right to serve going beyond the first TTL.
func TestRegister_RenewalsExtendTheRight(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cli, prefix := ForTest(t)
	live := NewLiveness(SystemClock(), 0)
	reg, err := Register(ctx, cli, prefix, 3, "127.0.0.1:7003", 2*time.Second, live)
	require.NoError(t, err)
	defer reg.Close(ctx)
	// Watch the key for more than a TTL: it is not deleted, so the lease was renewed.
	w := cli.Watch(ctx, NodeKey(prefix, 3), clientv3.WithFilterPut())
	timer := time.NewTimer(2500 * time.Millisecond)
	defer timer.Stop()
	select {
	case ev := <-w:
		t.Fatalf("the node's key changed: %v", ev.Events)
	case <-timer.C:
	}
	assert.True(t, live.CanServe())
	assert.NoError(t, reg.Err())
}
