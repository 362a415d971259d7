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
)

// fixedKv answers MultiGet with one Ok outcome per item, from outcomes; other methods are
// not served.
type fixedKv struct {
	zaris.ZarisKv
	outcomes []*zaris.GetOutcome
}

func (k *fixedKv) MultiGet(_ context.Context, req *zaris.MultiGetRequest) (*zaris.MultiGetResponse, error) {
	if len(req.Items) == 0 {
		return &zaris.MultiGetResponse{Status: zaris.KvStatus_InvalidRequest, Results: []*zaris.GetOutcome{}}, nil
	}
	return &zaris.MultiGetResponse{MapEpoch: 3, Results: k.outcomes[:len(req.Items)]}, nil
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

// framedBinary stands for a framed binary client in headerCall.
const framedBinary thrift.THeaderProtocolID = -1

// headerCall returns a client's frame carrying a call of method with args: a THeader
// frame of protocol id, or a framed binary one for framedBinary.
func headerCall(t testing.TB, id thrift.THeaderProtocolID, method string, args thrift.TStruct) []byte {
	var buf bytes.Buffer
	var p thrift.TProtocol
	if id == framedBinary {
		cfg := &thrift.TConfiguration{}
		p = thrift.NewTBinaryProtocolConf(thrift.NewTFramedTransportConf(pipeTransport{w: &buf}, cfg), cfg)
	} else {
		p = thrift.NewTHeaderProtocolConf(pipeTransport{w: &buf}, &thrift.TConfiguration{THeaderProtocolID: &id})
	}
	require.NoError(t, p.WriteMessageBegin(bg, method, thrift.CALL, 7))
	require.NoError(t, args.Write(bg, p))
	require.NoError(t, p.WriteMessageEnd(bg))
	require.NoError(t, p.Flush(bg))
	return buf.Bytes()
}

// serveFrames runs proc as the store's server does over one connection that carries
// frames, and returns what it wrote back.
func serveFrames(t testing.TB, proc thrift.TProcessor, frames ...[]byte) []byte {
	var in, out bytes.Buffer
	for _, f := range frames {
		in.Write(f)
	}
	cfg := serverConfig(4<<20, 1<<16, 0)
	hp := thrift.NewTHeaderProtocolConf(pipeTransport{r: &in, w: &out}, cfg)
	for range frames {
		require.NoError(t, hp.ReadFrame(bg))
		_, _ = proc.Process(bg, hp, hp)
	}
	return out.Bytes()
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
	for _, id := range []thrift.THeaderProtocolID{framedBinary, thrift.THeaderProtocolBinary, thrift.THeaderProtocolCompact} {
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
		frame := headerCall(t, framedBinary, "MultiGet", multiGetArgs(keys...))
		return testing.AllocsPerRun(20, func() { serveFrames(t, proc, frame) })
	}
	perItem := (allocs(big) - allocs(small)) / float64(len(big)-len(small))
	assert.LessOrEqual(t, perItem, 3.0)
}
