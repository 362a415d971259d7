package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/stretchr/testify/assert"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/internal/thriftbuf"
)

// A Get served with the generated codec gets the generated processor's reply, byte for
// byte, from framed binary and framed compact clients: a key held, one held empty, one
// absent, one of another node's segment, no key, arguments of another shape, arguments
// followed by bytes of their own in the frame, and a Get through the header protocol
// (served as before).
func TestCodecGet_RepliesAsTheGeneratedCode(t *testing.T) {
	h, mine, empty, other := memMultiGetNode(t)
	get := func(key []byte) thrift.TStruct { return &zaris.ZarisKvGetArgs{Req: &zaris.GetRequest{Key: key}} }
	proc := func() thrift.TProcessor {
		return serveGetWithCodec(zaris.NewZarisKvProcessor(h), h, serverConfig(1<<20, 1<<16, 0))
	}
	for _, id := range []thrift.THeaderProtocolID{framedBinaryID, framedCompactID} {
		trailing := headerCall(t, id, "Get", get(mine))
		trailing = append(trailing, 0x0C, 0x00) // within the frame: its size grows by 2
		binary.BigEndian.PutUint32(trailing, binary.BigEndian.Uint32(trailing)+2)
		frames := [][]byte{
			headerCall(t, id, "Get", get(mine)),
			headerCall(t, id, "Get", get(empty)),
			headerCall(t, id, "Get", get([]byte("absent"))),
			headerCall(t, id, "Get", get(other)),
			headerCall(t, id, "Get", get(nil)),
			headerCall(t, id, "Get", &zaris.ZarisKvGetArgs{}),
			headerCall(t, id, "Get", multiGetArgs(string(mine))),
			headerCall(t, id, "Get", get(mine)),
		}
		want := serveFrames(t, zaris.NewZarisKvProcessor(h), frames...)
		got := serveFrames(t, proc(), frames...)
		assert.NotEmpty(t, want)
		assert.Equal(t, want, got, "protocol %d", id)
		if id == framedCompactID {
			// Binary frames are read whole (thriftbuf.Frames); compact ones as a stream,
			// in which what follows the arguments is read next.
			assert.Equal(t, serveFrames(t, zaris.NewZarisKvProcessor(h), trailing, frames[0]), serveFrames(t, proc(), trailing, frames[0]))
		}
	}

	header := headerCall(t, thrift.THeaderProtocolBinary, "Get", get(mine))
	assert.Equal(t, serveFrames(t, zaris.NewZarisKvProcessor(h), header), serveFrames(t, proc(), header))
}

// Whatever follows a Get's message header, the node answers as the generated code does.
func FuzzCodecGet(f *testing.F) {
	h, mine, _, _ := memMultiGetNode(f)
	body := func(args thrift.TStruct) []byte {
		frame := headerCall(f, framedBinaryID, "Get", args)
		return frame[4+4+4+len("Get")+4:]
	}
	f.Add(body(&zaris.ZarisKvGetArgs{Req: &zaris.GetRequest{Key: mine}}))
	f.Add(body(&zaris.ZarisKvGetArgs{}))
	f.Add(body(multiGetArgs("a", "b")))
	proc := serveGetWithCodec(zaris.NewZarisKvProcessor(h), h, serverConfig(1<<20, 1<<16, 0))
	f.Add([]byte{})
	generated := zaris.NewZarisKvProcessor(h)
	f.Fuzz(func(t *testing.T, b []byte) {
		// A strict binary CALL of Get, seqid 7, then b, in one frame.
		frame := binary.BigEndian.AppendUint32(nil, uint32(thrift.VERSION_1)|uint32(thrift.CALL))
		frame = binary.BigEndian.AppendUint32(frame, uint32(len("Get")))
		frame = append(frame, "Get"...)
		frame = binary.BigEndian.AppendUint32(frame, 7)
		frame = append(frame, b...)
		frame = append(binary.BigEndian.AppendUint32(nil, uint32(len(frame))), frame...)
		want := serveFrames(t, generated, frame)
		got := serveFrames(t, proc, frame)
		if !bytes.Equal(want, got) {
			t.Fatalf("body %x: generated %q, codec %q", b, want, got)
		}
	})
}

// Whatever follows a compact Get's message header, the node answers as the generated code
// does.
func FuzzCodecGetCompact(f *testing.F) {
	h, mine, _, _ := memMultiGetNode(f)
	body := func(args thrift.TStruct) []byte {
		frame := headerCall(f, framedCompactID, "Get", args)
		return frame[4+len(compactGetHeader):]
	}
	f.Add(body(&zaris.ZarisKvGetArgs{Req: &zaris.GetRequest{Key: mine}}))
	f.Add(body(&zaris.ZarisKvGetArgs{}))
	f.Add(body(multiGetArgs("a", "b")))
	f.Add([]byte{})
	proc := serveGetWithCodec(zaris.NewZarisKvProcessor(h), h, serverConfig(1<<20, 1<<16, 0))
	generated := zaris.NewZarisKvProcessor(h)
	f.Fuzz(func(t *testing.T, b []byte) {
		frame := append(bytes.Clone(compactGetHeader), b...)
		frame = append(binary.BigEndian.AppendUint32(nil, uint32(len(frame))), frame...)
		want := serveFrames(t, generated, frame)
		got := serveFrames(t, proc, frame)
		if !bytes.Equal(want, got) {
			t.Fatalf("body %x: generated %q, codec %q", b, want, got)
		}
	})
}

// compactGetHeader is the compact protocol's header of a call of Get, seqid 7.
var compactGetHeader = thriftbuf.AppendCompactMessageBegin(nil, "Get", thrift.CALL, 7)

// The codec's Get is the one that serves a framed binary or compact Get: the generated
// processor's Get function is never called for one, and still answers a Get through the
// header protocol and one whose arguments the codec cannot decode.
func TestCodecGet_Serves(t *testing.T) {
	h, mine, _, _ := memMultiGetNode(t)
	get := &zaris.ZarisKvGetArgs{Req: &zaris.GetRequest{Key: mine}}
	for _, tc := range []struct {
		name      string
		frame     []byte
		generated int
	}{
		{"framed binary", headerCall(t, framedBinaryID, "Get", get), 0},
		{"header binary", headerCall(t, thrift.THeaderProtocolBinary, "Get", get), 1},
		{"arguments of another shape", headerCall(t, framedBinaryID, "Get", multiGetArgs("a")), 1},
		{"framed compact", headerCall(t, framedCompactID, "Get", get), 0},
		{"compact arguments of another shape", headerCall(t, framedCompactID, "Get", multiGetArgs("a")), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			proc := zaris.NewZarisKvProcessor(h)
			counted := &countedFunction{fn: proc.ProcessorMap()["Get"]}
			proc.AddToProcessorMap("Get", counted)
			reply := serveFrames(t, serveGetWithCodec(proc, h, serverConfig(1<<20, 1<<16, 0)), tc.frame)
			assert.NotEmpty(t, reply)
			assert.Equal(t, tc.generated, counted.calls, "calls of the generated processor's Get")
		})
	}
}

// countedFunction counts the calls of the processor function it wraps.
type countedFunction struct {
	fn    thrift.TProcessorFunction
	calls int
}

func (c *countedFunction) Process(ctx context.Context, seqID int32, in, out thrift.TProtocol) (bool, thrift.TException) {
	c.calls++
	return c.fn.Process(ctx, seqID, in, out)
}
