package main

import (
	"context"
	"errors"
	"net"
	"strconv"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisserver"
)

// faultyNode is a one-node "cluster" that serves its map, fails every Get with an
// application exception and drops the connection on every Increment without a reply.
type faultyNode struct {
	zarisserver.UnimplementedZarisKv
	host string
	port int32
}

func (n *faultyNode) GetClusterMap(context.Context) (*zaris.ClusterMap, error) {
	owner := int32(1)
	return &zaris.ClusterMap{
		Epoch:        1,
		SegmentCount: 1,
		Nodes:        []*zaris.NodeInfo{{ID: 1, Host: n.host, Port: n.port}},
		Segments:     []*zaris.SegmentInfo{{ID: 0, Owner: &owner, Replicas: []int32{}}},
	}, nil
}

func (n *faultyNode) Get(context.Context, *zaris.GetRequest) (*zaris.GetResponse, error) {
	return nil, errors.New("handler bug")
}

func (n *faultyNode) Increment(context.Context, *zaris.IncrementRequest) (*zaris.IncrementResponse, error) {
	return nil, thrift.ErrAbandonRequest // the server closes the connection without a reply
}

func (n *faultyNode) Put(context.Context, *zaris.PutRequest) (*zaris.PutResponse, error) {
	return &zaris.PutResponse{Status: zaris.KvStatus_Ok, Version: 1, MapEpoch: 1}, nil
}

func (n *faultyNode) Delete(context.Context, *zaris.DeleteRequest) (*zaris.DeleteResponse, error) {
	return &zaris.DeleteResponse{Status: zaris.KvStatus_Ok, Version: 1, MapEpoch: 1}, nil
}

// startFaultyNode serves a faultyNode over framed binary on loopback and returns its address.
func startFaultyNode(t *testing.T) string {
	t.Helper()
	sock, err := thrift.NewTServerSocket("127.0.0.1:0")
	require.NoError(t, err)
	require.NoError(t, sock.Listen())
	addr := sock.Addr().String()
	host, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	p, err := strconv.Atoi(port)
	require.NoError(t, err)
	cfg := &thrift.TConfiguration{}
	srv := thrift.NewTSimpleServer4(
		zaris.NewZarisKvProcessor(&faultyNode{host: host, port: int32(p)}), sock,
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
	return addr
}

// TestGaveUp_Fatal: a call that fails without a bound tripping (an application exception,
// an increment whose outcome is in doubt) is a *runtime.CallError too: exit 5, bound "none".
func TestGaveUp_Fatal(t *testing.T) {
	addr := startFaultyNode(t)
	tests := []struct {
		name    string
		args    []string
		outcome string
		stderr  string
	}{
		{"application exception", []string{"get", "k"}, "Error", "failed on attempt 1"},
		{"in doubt", []string{"incr", "k"}, "InDoubt", "outcome in doubt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := runZaris(t, nil, append([]string{"--seeds", addr, "--json", "--stats"}, tt.args...)...)
			assert.Equal(t, exitGaveUp, o.code, o.stderr)
			assert.Contains(t, o.stderr, tt.stderr)
			r := jsonResult(t, o)
			assert.Equal(t, statusGaveUp, r["status"])
			assert.Equal(t, "none", r["bound"])
			stats := r["stats"].(map[string]any)
			assert.EqualValues(t, 1, stats["attempts"], "neither is retried")
			assert.Equal(t, []any{tt.outcome}, stats["statuses"])
		})
	}
	t.Run("answers still work", func(t *testing.T) {
		o := runZaris(t, nil, "--seeds", addr, "put", "k", "v")
		assert.Equal(t, exitOK, o.code, o.stderr)
		assert.Equal(t, "ok version=1\n", o.stdout)
	})
}
