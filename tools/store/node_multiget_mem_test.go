package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/runtime/batch"
)

// memMultiGetNode is a node of a running cluster holding a value under mine and an empty
// one under empty, both of segment 3, which it owns; other is a key of a segment it does
// not own.
func memMultiGetNode(t testing.TB) (h *kvHandler, mine, empty, other []byte) {
	c := StartCluster(t, fastCluster())
	owner, _, _ := roles(c, 3)
	h = &kvHandler{n: c.Node(owner)}
	mine, empty = keyIn(3, 16, "mine"), keyIn(3, 16, "empty")
	for k, v := range map[string][]byte{string(mine): []byte("value"), string(empty): {}} {
		r, err := h.Put(bg, &zaris.PutRequest{Key: []byte(k), Value: v})
		require.NoError(t, err)
		require.Equal(t, zaris.KvStatus_Ok, r.Status)
	}
	for seg := range int32(16) {
		if o, _, _ := roles(c, seg); o != owner {
			return h, mine, empty, keyIn(seg, 16, "other")
		}
	}
	t.Fatal("the node owns every segment")
	return
}

// withExtraField is MultiGet arguments whose first item carries a field GetItem does not
// have: the generated code skips it.
type withExtraField struct{ keys []string }

func (a withExtraField) Write(ctx context.Context, p thrift.TProtocol) error {
	_ = p.WriteFieldBegin(ctx, "req", thrift.STRUCT, 1)
	_ = p.WriteFieldBegin(ctx, "items", thrift.LIST, 1)
	_ = p.WriteListBegin(ctx, thrift.STRUCT, len(a.keys))
	for i, k := range a.keys {
		_ = p.WriteFieldBegin(ctx, "key", thrift.STRING, 1)
		_ = p.WriteBinary(ctx, []byte(k))
		if i == 0 {
			_ = p.WriteFieldBegin(ctx, "extra", thrift.I32, 9)
			_ = p.WriteI32(ctx, 42)
		}
		_ = p.WriteFieldStop(ctx)
	}
	_ = p.WriteFieldStop(ctx)
	return p.WriteFieldStop(ctx)
}

func (withExtraField) Read(context.Context, thrift.TProtocol) error { return nil }

// A MultiGet served in memory is answered byte for byte as the generated code answers it:
// Ok, empty, absent, moved and invalid items, duplicates, on one connection with other
// calls, and the requests it leaves to the generated code (an empty batch, one over the
// item limit, one over the connection's list limit, an item with a field GetItem lacks,
// and a THeader client's).
func TestMemMultiGet_RepliesAsTheGeneratedCode(t *testing.T) {
	h, mine, empty, other := memMultiGetNode(t)
	keys := []string{string(mine), string(empty), "absent", string(other), "", string(mine)}
	over := make([]string, batch.MaxItems+1)
	for i := range over {
		over[i] = string(mine)
	}
	frames := [][]byte{
		headerCall(t, framedBinaryID, "MultiGet", multiGetArgs(keys...)),
		headerCall(t, framedBinaryID, "Get", &zaris.ZarisKvGetArgs{Req: &zaris.GetRequest{Key: mine}}),
		headerCall(t, framedBinaryID, "MultiGet", multiGetArgs(string(mine))),
		headerCall(t, framedBinaryID, "MultiGet", multiGetArgs()),
		headerCall(t, framedBinaryID, "MultiGet", multiGetArgs(over...)),
		headerCall(t, framedBinaryID, "MultiGet", withExtraField{keys: keys}),
		headerCall(t, framedBinaryID, "MultiGet", tooManyItems{}),
	}
	want := serveFrames(t, zaris.NewZarisKvProcessor(h), frames...)
	got := serveFrames(t, serveMultiGetInMemory(zaris.NewZarisKvProcessor(h), h), frames...)
	require.Contains(t, string(want), "exceeds the limit", "the last call is refused")
	assert.Equal(t, want, got)

	header := headerCall(t, thrift.THeaderProtocolBinary, "MultiGet", multiGetArgs(keys...))
	assert.Equal(t, serveFrames(t, zaris.NewZarisKvProcessor(h), header),
		serveFrames(t, serveMultiGetInMemory(zaris.NewZarisKvProcessor(h), h), header))
}

// A MultiGet served in memory allocates nothing per item: 100 items cost fewer than 40
// allocations more than 5, a margin for the race detector's dropped pools (the generated
// code allocates at least two per item, 190 more).
func TestMemMultiGet_AllocatesNothingPerItem(t *testing.T) {
	h, mine, _, _ := memMultiGetNode(t)
	proc := serveMultiGetInMemory(zaris.NewZarisKvProcessor(h), h)
	allocs := func(n int) float64 {
		keys := make([]string, n)
		for i := range keys {
			keys[i] = string(mine)
		}
		frame := headerCall(t, framedBinaryID, "MultiGet", multiGetArgs(keys...))
		return testing.AllocsPerRun(20, func() { serveFrames(t, proc, frame) })
	}
	assert.Less(t, allocs(100), allocs(5)+40)
}

// Whatever follows a MultiGet's message header, the node answers as the generated code
// does: the same reply, or the same error and nothing more.
func FuzzMemMultiGet(f *testing.F) {
	h, mine, empty, other := memMultiGetNode(f)
	body := func(args thrift.TStruct) []byte {
		frame := headerCall(f, framedBinaryID, "MultiGet", args)
		return frame[4+4+4+len("MultiGet")+4:] // frame size, version, name, seqid
	}
	f.Add(body(multiGetArgs(string(mine), string(empty), "absent", string(other), "")))
	f.Add(body(multiGetArgs()))
	f.Add(body(withExtraField{keys: []string{string(mine), "b"}}))
	f.Add(body(tooManyItems{}))
	f.Add([]byte{})
	generated := zaris.NewZarisKvProcessor(h)
	inMemory := serveMultiGetInMemory(zaris.NewZarisKvProcessor(h), h)
	f.Fuzz(func(t *testing.T, b []byte) {
		// A strict binary CALL of MultiGet, seqid 7, then b, in one frame.
		frame := binary.BigEndian.AppendUint32(nil, uint32(thrift.VERSION_1)|uint32(thrift.CALL))
		frame = binary.BigEndian.AppendUint32(frame, uint32(len("MultiGet")))
		frame = append(frame, "MultiGet"...)
		frame = binary.BigEndian.AppendUint32(frame, 7)
		frame = append(frame, b...)
		frame = append(binary.BigEndian.AppendUint32(nil, uint32(len(frame))), frame...)
		want := serveFrames(t, generated, frame)
		got := serveFrames(t, inMemory, frame)
		if !bytes.Equal(want, got) {
			t.Fatalf("body %x: generated %q, in memory %q", b, want, got)
		}
	})
}
