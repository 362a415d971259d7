package store

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/runtime/batch"
)

// A node answers each item of a batch as the single-key operation would: items of its own
// segments are served, a write of a replica's segment answers ReplicaWriteRejected, other
// items Moved; guards and answers are per item, in request order.
func TestMulti_EachItemAnsweredAsASingleKeyCall(t *testing.T) {
	c := StartCluster(t, fastCluster())
	owner, replica, other := roles(c, 3)
	require.NotEqual(t, noOwner, other, "a node without a copy of segment 3")
	mine, theirs := keyIn(3, 16, "mine"), keyIn(3, 16, "theirs")
	var foreign []byte
	for s := int32(0); s < 16 && foreign == nil; s++ {
		if o, r, _ := roles(c, s); o != owner && r != owner {
			foreign = keyIn(s, 16, "foreign")
		}
	}
	require.NotNil(t, foreign)
	cl := mustDial(t, c.Addr(owner))

	put, err := cl.MultiPut(bg, &zaris.MultiPutRequest{Items: []*zaris.PutItem{
		{Key: mine, Value: []byte("v1")},
		{Key: foreign, Value: []byte("x")},
		{Key: mine, Value: []byte("v2")},
		{Key: theirs, Value: []byte("t"), IfAbsent: boolPtr(true)},
		{Key: mine, Value: []byte("v3"), IfMatchVersion: int64Ptr(1)},
		{Key: []byte{}, Value: []byte("empty key")},
	}})
	require.NoError(t, err)
	require.Equal(t, zaris.KvStatus_Ok, put.Status)
	require.Len(t, put.Results, 6)
	assert.Equal(t, zaris.KvStatus_Ok, put.Results[0].Status)
	assert.Equal(t, zaris.KvStatus_Moved, put.Results[1].Status)
	assert.Equal(t, zaris.KvStatus_Ok, put.Results[2].Status, "items of one key apply in request order")
	assert.Greater(t, put.Results[2].Version, put.Results[0].Version)
	assert.Equal(t, zaris.KvStatus_Ok, put.Results[3].Status)
	assert.Equal(t, zaris.KvStatus_Conflict, put.Results[4].Status)
	assert.Equal(t, put.Results[2].Version, put.Results[4].Version, "Conflict carries the current version")
	assert.Equal(t, zaris.KvStatus_InvalidRequest, put.Results[5].Status)
	assert.Equal(t, nodeEpoch(c, owner), put.MapEpoch)

	get, err := cl.MultiGet(bg, &zaris.MultiGetRequest{Items: []*zaris.GetItem{{Key: theirs}, {Key: foreign}, {Key: mine}, {Key: keyIn(3, 16, "missing")}}})
	require.NoError(t, err)
	require.Len(t, get.Results, 4)
	assert.Equal(t, "t", string(get.Results[0].Value))
	assert.Equal(t, zaris.KvStatus_Moved, get.Results[1].Status)
	assert.Equal(t, "v2", string(get.Results[2].Value))
	assert.Equal(t, put.Results[2].Version, get.Results[2].Version)
	assert.Equal(t, zaris.KvStatus_NotFound, get.Results[3].Status)

	// The writes reached the replica before they were acknowledged.
	rep := mustDial(t, c.Addr(replica))
	rput, err := rep.MultiPut(bg, &zaris.MultiPutRequest{Items: []*zaris.PutItem{{Key: mine, Value: []byte("at replica")}}})
	require.NoError(t, err)
	assert.Equal(t, zaris.KvStatus_ReplicaWriteRejected, rput.Results[0].Status)

	del, err := cl.MultiDelete(bg, &zaris.MultiDeleteRequest{Items: []*zaris.DeleteItem{
		{Key: mine, IfMatchVersion: int64Ptr(1)}, {Key: theirs}, {Key: theirs},
	}})
	require.NoError(t, err)
	assert.Equal(t, []zaris.KvStatus{zaris.KvStatus_Conflict, zaris.KvStatus_Ok, zaris.KvStatus_NotFound},
		[]zaris.KvStatus{del.Results[0].Status, del.Results[1].Status, del.Results[2].Status})
}

// A batch with no items or more than batch.MaxItems answers InvalidRequest with no
// results, and the node goes on serving.
func TestMulti_MalformedBatchIsInvalidRequest(t *testing.T) {
	c := StartCluster(t, fastCluster())
	cl := mustDial(t, c.Addr(c.Nodes()[0]))
	get, err := cl.MultiGet(bg, &zaris.MultiGetRequest{})
	require.NoError(t, err)
	assert.Equal(t, zaris.KvStatus_InvalidRequest, get.Status)
	assert.Empty(t, get.Results)
	big := &zaris.MultiPutRequest{}
	for i := range batch.MaxItems + 1 {
		big.Items = append(big.Items, &zaris.PutItem{Key: []byte(fmt.Sprint(i)), Value: []byte("v")})
	}
	put, err := cl.MultiPut(bg, big)
	require.NoError(t, err)
	assert.Equal(t, zaris.KvStatus_InvalidRequest, put.Status)
	assert.Empty(t, put.Results)
	del, err := cl.MultiDelete(bg, &zaris.MultiDeleteRequest{})
	require.NoError(t, err)
	assert.Equal(t, zaris.KvStatus_InvalidRequest, del.Status)
	_, err = cl.MultiGet(bg, &zaris.MultiGetRequest{Items: []*zaris.GetItem{{Key: []byte("k")}}})
	assert.NoError(t, err, "the node still serves")
}

func boolPtr(b bool) *bool    { return &b }
func int64Ptr(v int64) *int64 { return &v }

// A MultiGet's cost at the node does not grow by a request and a response per item: a
// batch of 100 items allocates about as many objects as one of 5 (the items are served,
// Moved or NotFound, in both). The margin absorbs the cluster's background work, which
// AllocsPerRun counts too; two objects per item would exceed it.
func TestMulti_GetAllocatesPerBatchNotPerItem(t *testing.T) {
	c := StartCluster(t, fastCluster())
	owner, _, _ := roles(c, 3)
	h := &kvHandler{n: c.Node(owner)}
	_, err := h.Put(bg, &zaris.PutRequest{Key: keyIn(3, 16, "mine"), Value: []byte("v")})
	require.NoError(t, err)
	batch := func(n int) *zaris.MultiGetRequest {
		req := &zaris.MultiGetRequest{}
		for i := range n {
			req.Items = append(req.Items, &zaris.GetItem{Key: keyIn(int32(i%16), 16, "mine")})
		}
		return req
	}
	small, big := batch(5), batch(100)
	allocs := func(req *zaris.MultiGetRequest) float64 {
		return testing.AllocsPerRun(50, func() {
			if _, err := h.MultiGet(bg, req); err != nil {
				t.Fatal(err)
			}
		})
	}
	assert.Less(t, allocs(big), allocs(small)+20)
}
