package store

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisserver"
)

// fixedKv answers MultiGet with one Ok outcome per item, from outcomes; other methods are
// not served.
type fixedKv struct {
	zarisserver.UnimplementedZarisKv // the other methods are not called
	outcomes                         []*zaris.GetOutcome
}

func (k *fixedKv) MultiGet(_ context.Context, req *zaris.MultiGetRequest) (*zaris.MultiGetResponse, error) {
	if len(req.Items) == 0 {
		return &zaris.MultiGetResponse{Status: zaris.KvStatus_InvalidRequest, Results: []*zaris.GetOutcome{}}, nil
	}
	return &zaris.MultiGetResponse{MapEpoch: 3, Results: k.outcomes[:len(req.Items)]}, nil
}

func (k *fixedKv) Get(context.Context, *zaris.GetRequest) (*zaris.GetResponse, error) {
	return &zaris.GetResponse{Status: zaris.KvStatus_Ok, Value: []byte("v"), Version: 7, MapEpoch: 3}, nil
}

func (k *fixedKv) GetClusterMap(context.Context) (*zaris.ClusterMap, error) {
	owner := int32(1)
	return &zaris.ClusterMap{Epoch: 3, SegmentCount: 1, Nodes: []*zaris.NodeInfo{{ID: 1, Host: "h", Port: 1}},
		Segments: []*zaris.SegmentInfo{{ID: 0, Owner: &owner, Replicas: []int32{}}}}, nil
}

// pipeTransport reads what a client sent from r and keeps what the server writes in w.
type pipeTransport struct{ r, w *bytes.Buffer }

func (p pipeTransport) Read(b []byte) (int, error)               { return p.r.Read(b) }
func (p pipeTransport) Write(b []byte) (int, error)              { return p.w.Write(b) }
func (p pipeTransport) Close() error                             { return nil }
func (p pipeTransport) Flush(context.Context) error              { return nil }
func (p pipeTransport) RemainingBytes() uint64                   { return uint64(p.r.Len()) }
func (p pipeTransport) Open() error                              { return nil }
func (p pipeTransport) IsOpen() bool                             { return true }
func (p pipeTransport) SetTConfiguration(*thrift.TConfiguration) {}

// framedBinaryID and framedCompactID stand for a framed binary and a framed compact client in
// headerCall.
const (
	framedBinaryID  thrift.THeaderProtocolID = -1
	framedCompactID thrift.THeaderProtocolID = -2
)

// headerCall returns a client's frame carrying a call of method with args: a THeader
// frame of protocol id, or a framed binary or compact one for framedBinaryID and
// framedCompactID.
func headerCall(t testing.TB, id thrift.THeaderProtocolID, method string, args thrift.TStruct) []byte {
	var buf bytes.Buffer
	var p thrift.TProtocol
	cfg := &thrift.TConfiguration{}
	switch id {
	case framedBinaryID:
		p = thrift.NewTBinaryProtocolConf(thrift.NewTFramedTransportConf(pipeTransport{w: &buf}, cfg), cfg)
	case framedCompactID:
		p = thrift.NewTCompactProtocolConf(thrift.NewTFramedTransportConf(pipeTransport{w: &buf}, cfg), cfg)
	default:
		p = thrift.NewTHeaderProtocolConf(pipeTransport{w: &buf}, &thrift.TConfiguration{THeaderProtocolID: &id})
	}
	require.NoError(t, p.WriteMessageBegin(bg, method, thrift.CALL, 7))
	require.NoError(t, args.Write(bg, p))
	require.NoError(t, p.WriteMessageEnd(bg))
	require.NoError(t, p.Flush(bg))
	return buf.Bytes()
}

// serveFrames runs proc in the store's server over one connection that carries frames,
// and returns what it wrote back.
func serveFrames(t testing.TB, proc thrift.TProcessor, frames ...[]byte) []byte {
	s := &server{cfg: serverConfig(4<<20, 1<<16, 0), wire: wireHeader, ctx: bg, log: discardLogger(), processor: proc}
	conn := &scriptConn{chunks: [][]byte{bytes.Join(frames, nil)}}
	_ = s.process(conn) // the end of the frames, or a call that does not decode, ends it
	return bytes.Join(conn.writes, nil)
}

func multiGetArgs(keys ...string) *zaris.ZarisKvMultiGetArgs {
	req := &zaris.MultiGetRequest{Items: []*zaris.GetItem{}}
	for _, k := range keys {
		req.Items = append(req.Items, &zaris.GetItem{Key: []byte(k)})
	}
	return &zaris.ZarisKvMultiGetArgs{Req: req}
}

// tooManyItems is MultiGet arguments whose list of items claims more items than a
// connection allows (and carries none).
type tooManyItems struct{}

func (tooManyItems) Write(ctx context.Context, p thrift.TProtocol) error {
	_ = p.WriteStructBegin(ctx, "args")
	_ = p.WriteFieldBegin(ctx, "req", thrift.STRUCT, 1)
	_ = p.WriteStructBegin(ctx, "req")
	_ = p.WriteFieldBegin(ctx, "items", thrift.LIST, 1)
	return p.WriteListBegin(ctx, thrift.STRUCT, 1<<20)
}

func (tooManyItems) Read(context.Context, thrift.TProtocol) error { return nil }

// The in-memory path writes byte for byte what the generated path writes, for framed
// binary frames and header frames of either protocol, several on one connection, an empty batch and a call whose
// arguments do not decode (a PROTOCOL_ERROR exception).
func TestInMemory_RepliesAsTheGeneratedCode(t *testing.T) {
	kv := &fixedKv{}
	for i := range 10 {
		kv.outcomes = append(kv.outcomes, &zaris.GetOutcome{Value: fmt.Appendf(nil, "value %d", i), Version: int64(i)})
	}
	cfg := serverConfig(4<<20, 1<<16, 0)
	for _, id := range []thrift.THeaderProtocolID{framedBinaryID, thrift.THeaderProtocolBinary, thrift.THeaderProtocolCompact} {
		t.Run(fmt.Sprint(id), func(t *testing.T) {
			bad := headerCall(t, id, "MultiGet", tooManyItems{})
			frames := [][]byte{
				headerCall(t, id, "MultiGet", multiGetArgs("a", "b", "c")),
				headerCall(t, id, "MultiGet", multiGetArgs()),
				headerCall(t, id, "MultiGet", multiGetArgs("a", "b", "c", "d", "e", "f", "g", "h", "i", "j")),
				bad,
			}
			want := serveFrames(t, zaris.NewZarisKvProcessor(kv), frames...)
			got := serveFrames(t, inMemory(zaris.NewZarisKvProcessor(kv), cfg, "MultiGet"), frames...)
			require.Contains(t, string(want), "exceeds the limit", "the last call is refused")
			assert.Equal(t, want, got)
		})
	}
}

// The in-memory path decodes a batch without the header protocol's objects per field: the
// objects a request allocates grow by at most 3 per item (the item, its key, slack) where
// the generated path over the header protocol allocates about twice that.
func TestInMemory_AllocatesLessPerItem(t *testing.T) {
	kv := &fixedKv{}
	var small, big []string
	for i := range 100 {
		kv.outcomes = append(kv.outcomes, &zaris.GetOutcome{Value: []byte("value"), Version: 1})
		big = append(big, fmt.Sprintf("key-%d", i))
	}
	small = big[:5]
	proc := inMemory(zaris.NewZarisKvProcessor(kv), serverConfig(4<<20, 1<<16, 0), "MultiGet")
	allocs := func(keys []string) float64 {
		frame := headerCall(t, framedBinaryID, "MultiGet", multiGetArgs(keys...))
		return testing.AllocsPerRun(20, func() { serveFrames(t, proc, frame) })
	}
	perItem := (allocs(big) - allocs(small)) / float64(len(big)-len(small))
	assert.LessOrEqual(t, perItem, 3.0)
}

// generatedFrames runs proc over framed binary frames through thrift's own framed transport
// and binary protocol, one field at a time, and returns what it wrote back.
func generatedFrames(proc thrift.TProcessor, frames ...[]byte) []byte {
	var in, out bytes.Buffer
	in.Write(bytes.Join(frames, nil))
	cfg := serverConfig(4<<20, 1<<16, 0)
	p := thrift.NewTBinaryProtocolConf(thrift.NewTFramedTransportConf(pipeTransport{r: &in, w: &out}, cfg), cfg)
	for range frames {
		if ok, _ := proc.Process(bg, p, p); !ok {
			break
		}
	}
	return out.Bytes()
}

// A node serves a framed binary client in memory (thriftbuf.Frames) and replies byte for
// byte what thrift's framed binary protocol writes: single-key and multi-key calls, several
// on one connection, and a call whose arguments do not decode.
func TestFramedBinary_RepliesAsTheGeneratedCode(t *testing.T) {
	kv := &fixedKv{}
	for i := range 10 {
		kv.outcomes = append(kv.outcomes, &zaris.GetOutcome{Value: fmt.Appendf(nil, "value %d", i), Version: int64(i)})
	}
	frames := [][]byte{
		headerCall(t, framedBinaryID, "Get", &zaris.ZarisKvGetArgs{Req: &zaris.GetRequest{Key: []byte("k")}}),
		headerCall(t, framedBinaryID, "MultiGet", multiGetArgs("a", "b", "c")),
		headerCall(t, framedBinaryID, "MultiGet", multiGetArgs()),
		headerCall(t, framedBinaryID, "GetClusterMap", &zaris.ZarisKvGetClusterMapArgs{}),
		headerCall(t, framedBinaryID, "MultiGet", tooManyItems{}),
	}
	want := generatedFrames(zaris.NewZarisKvProcessor(kv), frames...)
	require.Contains(t, string(want), "exceeds the limit", "the last call is refused")
	assert.Equal(t, want, serveFrames(t, zaris.NewZarisKvProcessor(kv), frames...))
}
