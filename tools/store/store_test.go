package store

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/clustron/zaris-go/gen/zaris"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestCluster_PutThenGet(t *testing.T) {
	c := StartCluster(t, fastCluster())
	r := newRouter(c.Seeds())
	defer r.close()
	st, err := r.put1("k", "v", nil)
	require.NoError(t, err)
	require.Equal(t, zaris.KvStatus_Ok, st)
	st, v, err := r.get1("k")
	require.NoError(t, err)
	require.Equal(t, zaris.KvStatus_Ok, st)
	require.Equal(t, "v", v)
}
