package thriftbuf

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

// frameOf returns a framed binary message: a reply named name whose body is body.
func frameOf(t testing.TB, cfg *thrift.TConfiguration, body []byte) []byte {
	var out thrift.TMemoryBuffer
	out.Buffer = new(bytes.Buffer)
	ft := thrift.NewTFramedTransportConf(&out, cfg)
	p := thrift.NewTBinaryProtocolConf(ft, cfg)
	ctx := context.Background()
	if err := p.WriteMessageBegin(ctx, "MultiGet", thrift.REPLY, 9); err != nil {
		t.Fatal(err)
	}
	if _, err := ft.Write(body); err != nil {
		t.Fatal(err)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// encode returns s in the binary protocol.
func encode(t testing.TB, cfg *thrift.TConfiguration, s thrift.TStruct) []byte {
	var out thrift.TMemoryBuffer
	out.Buffer = new(bytes.Buffer)
	if err := s.Write(context.Background(), thrift.NewTBinaryProtocolConf(&out, cfg)); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// decodeBoth reads frame's message into a fresh value of each of news, once through the
// framed binary protocol and once through Frames over it (sharing binaries if share is
// set), and returns both results.
func decodeBoth(cfg *thrift.TConfiguration, frame []byte, news func() thrift.TStruct, share bool) (plain, mem thrift.TStruct, plainErr, memErr error) {
	read := func(wrap bool) (thrift.TStruct, error) {
		in := thrift.NewTMemoryBuffer()
		in.Write(frame)
		var p thrift.TProtocol = thrift.NewTBinaryProtocolConf(thrift.NewTFramedTransportConf(in, cfg), cfg)
		if wrap {
			f := NewFrames(p, cfg)
			if share {
				f.ShareBinaries()
			}
			p = f
		}
		ctx := context.Background()
		if _, _, _, err := p.ReadMessageBegin(ctx); err != nil {
			return nil, err
		}
		s := news()
		if err := s.Read(ctx, p); err != nil {
			return nil, err
		}
		return s, p.ReadMessageEnd(ctx)
	}
	plain, plainErr = read(false)
	mem, memErr = read(true)
	return plain, mem, plainErr, memErr
}

// framesConfig is the client's configuration with small limits, so that bodies over
// them are easy to make.
func framesConfig() *thrift.TConfiguration {
	strict := true
	return &thrift.TConfiguration{
		MaxMessageSize:     4096,
		MaxFrameSize:       4096,
		MaxContainerSize:   64,
		TBinaryStrictRead:  &strict,
		TBinaryStrictWrite: &strict,
	}
}

// Frames decodes every kind of field the client's replies carry (lists, maps of
// strings, optional fields, empty and missing binaries, nested structs, exceptions) as
// the binary protocol does, and refuses what it refuses: a body cut short, negative sizes,
// containers over the limit or longer than the body.
func TestMemFrames_DecodesAsTheBinaryProtocol(t *testing.T) {
	cfg := framesConfig()
	owner := int32(2)
	bodies := map[string]struct {
		s    thrift.TStruct
		news func() thrift.TStruct
	}{
		"multiget": {&zaris.ZarisKvMultiGetResult{Success: &zaris.MultiGetResponse{MapEpoch: 7, Results: []*zaris.GetOutcome{
			{Status: zaris.KvStatus_Ok, Value: []byte("v"), Version: 3},
			{Status: zaris.KvStatus_Ok, Value: []byte{}, Version: 4},
			{Status: zaris.KvStatus_NotFound},
		}}}, func() thrift.TStruct { return &zaris.ZarisKvMultiGetResult{} }},
		"map": {&zaris.ZarisKvGetClusterMapResult{Success: &zaris.ClusterMap{Epoch: 3, SegmentCount: 2,
			Nodes:    []*zaris.NodeInfo{{ID: 2, Host: "127.0.0.1", Port: 7001}},
			Segments: []*zaris.SegmentInfo{{ID: 0, Owner: &owner}, {ID: 1}},
		}}, func() thrift.TStruct { return &zaris.ZarisKvGetClusterMapResult{} }},
		"exception": {thrift.NewTApplicationException(thrift.INTERNAL_ERROR, "boom"),
			func() thrift.TStruct { return thrift.NewTApplicationException(0, "") }},
	}
	for name, b := range bodies {
		body := encode(t, cfg, b.s)
		cases := map[string][]byte{
			"whole":        body,
			"cut short":    body[:len(body)-3],
			"first byte":   body[:1],
			"trailing":     append(append([]byte{}, body...), 0, 0, 0),
			"huge list":    append([]byte{15, 0, 2, 12, 0x7f, 0, 0, 0}, body...),
			"negative str": append([]byte{11, 0, 1, 0xff, 0xff, 0xff, 0xf0}, body...),
		}
		for what, c := range cases {
			for _, share := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/share=%v", name, what, share), func(t *testing.T) {
					plain, mem, plainErr, memErr := decodeBoth(cfg, frameOf(t, cfg, c), b.news, share)
					require.Equal(t, plainErr == nil, memErr == nil, "plain: %v, Frames: %v", plainErr, memErr)
					assert.Equal(t, plain, mem)
				})
			}
		}
	}
}

// Frames goes back to the connection for the next message: a reply read in memory, then
// a request written, then a second reply.
func TestMemFrames_NextMessageOnTheConnection(t *testing.T) {
	cfg := framesConfig()
	reply := &zaris.ZarisKvMultiGetResult{Success: &zaris.MultiGetResponse{MapEpoch: 1, Results: []*zaris.GetOutcome{{Value: []byte("a")}}}}
	frame := frameOf(t, cfg, encode(t, cfg, reply))
	in := thrift.NewTMemoryBuffer()
	in.Write(frame)
	in.Write(frame)
	ft := thrift.NewTFramedTransportConf(in, cfg)
	p := NewFrames(thrift.NewTBinaryProtocolConf(ft, cfg), cfg)
	ctx := context.Background()
	for range 2 {
		_, _, seq, err := p.ReadMessageBegin(ctx)
		require.NoError(t, err)
		assert.EqualValues(t, 9, seq)
		got := &zaris.ZarisKvMultiGetResult{}
		require.NoError(t, got.Read(ctx, p))
		require.NoError(t, p.ReadMessageEnd(ctx))
		assert.Equal(t, reply, got)
		require.NoError(t, p.WriteMessageBegin(ctx, "MultiGet", thrift.CALL, 10))
		require.NoError(t, (&zaris.ZarisKvMultiGetArgs{Req: &zaris.MultiGetRequest{}}).Write(ctx, p))
		require.NoError(t, p.WriteMessageEnd(ctx))
		require.NoError(t, p.Flush(ctx))
	}
	assert.Positive(t, in.Len(), "the requests went to the connection")
}

// Whatever a reply's body holds, memFrames decodes it as the binary protocol does or
// refuses it as the binary protocol does.
func FuzzMemFrames(f *testing.F) {
	cfg := framesConfig()
	f.Add(encode(f, cfg, &zaris.ZarisKvMultiGetResult{Success: &zaris.MultiGetResponse{Results: []*zaris.GetOutcome{{Value: []byte("v")}}}}))
	f.Add(encode(f, cfg, &zaris.ZarisKvGetClusterMapResult{Success: &zaris.ClusterMap{Nodes: []*zaris.NodeInfo{{Host: "h"}}}}))
	f.Add([]byte{13, 0, 1, 11, 11, 0, 0, 0, 1, 0, 0, 0, 1, 'k', 0, 0, 0, 1, 'v', 0})
	f.Fuzz(func(t *testing.T, body []byte) {
		if len(body) > 4000 {
			t.Skip("a frame past the configuration's limit") // refused before any body is read
		}
		for _, news := range []func() thrift.TStruct{
			func() thrift.TStruct { return &zaris.ZarisKvMultiGetResult{} },
			func() thrift.TStruct { return &zaris.ZarisKvGetClusterMapResult{} },
			func() thrift.TStruct { return thrift.NewTApplicationException(0, "") },
		} {
			for _, share := range []bool{false, true} {
				plain, mem, plainErr, memErr := decodeBoth(cfg, frameOf(t, cfg, body), news, share)
				if (plainErr == nil) != (memErr == nil) {
					t.Fatalf("share=%v: plain: %v, Frames: %v", share, plainErr, memErr)
				}
				assert.Equal(t, plain, mem, "share=%v", share)
			}
		}
	})
}

// writeFrame writes s as a call through p, a binary protocol over the framed transport ft
// (wrapped by memFrames when wrap is set), and returns the bytes the transport sent.
func writeFrame(t *testing.T, cfg *thrift.TConfiguration, s thrift.TStruct, wrap bool) []byte {
	var out thrift.TMemoryBuffer
	out.Buffer = new(bytes.Buffer)
	var p thrift.TProtocol = thrift.NewTBinaryProtocolConf(thrift.NewTFramedTransportConf(&out, cfg), cfg)
	if wrap {
		p = NewFrames(p, cfg)
	}
	ctx := context.Background()
	for seq := range int32(2) { // two messages: the second reuses the buffer
		require.NoError(t, p.WriteMessageBegin(ctx, "Call", thrift.CALL, seq))
		require.NoError(t, s.Write(ctx, p))
		require.NoError(t, p.WriteMessageEnd(ctx))
		require.NoError(t, p.Flush(ctx))
	}
	return out.Bytes()
}

// Frames encodes a request byte for byte as the binary protocol does: lists, optional
// fields, bools, empty and missing binaries, nested structs and a map.
func TestMemFrames_EncodesAsTheBinaryProtocol(t *testing.T) {
	cfg := framesConfig()
	version, absent, owner := int64(4), true, int32(1)
	for name, s := range map[string]thrift.TStruct{
		"multiget": &zaris.ZarisKvMultiGetArgs{Req: &zaris.MultiGetRequest{Items: []*zaris.GetItem{{Key: []byte("a")}, {Key: []byte{}}, {}}}},
		"multiput": &zaris.ZarisKvMultiPutArgs{Req: &zaris.MultiPutRequest{Items: []*zaris.PutItem{
			{Key: []byte("a"), Value: []byte("v"), IfMatchVersion: &version}, {Key: []byte("b"), IfAbsent: &absent},
		}}},
		"get": &zaris.ZarisKvGetArgs{Req: &zaris.GetRequest{Key: []byte("k")}},
		"map": &zaris.ClusterMap{Epoch: -1, SegmentCount: 2, Nodes: []*zaris.NodeInfo{{ID: 1, Host: "h", Port: 70}},
			Segments: []*zaris.SegmentInfo{{ID: 0, Owner: &owner}, {ID: 1, Replicas: []int32{2, 3}}}},
		"exception": thrift.NewTApplicationException(thrift.INTERNAL_ERROR, "boom"),
		"headers":   &zaris.ZarisKvGetClusterMapArgs{},
	} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, writeFrame(t, cfg, s, false), writeFrame(t, cfg, s, true))
		})
	}
}

// A list whose header names its elements as lists or sets, with fewer bytes left than five
// per element, is read as the binary protocol reads it: the binary protocol counts four
// bytes at least for a list or set element, and the generated code reads the elements as
// the type it declares (here i32s), whatever type the header names.
func TestMemFrames_ListOfListsSizeBound(t *testing.T) {
	cfg := framesConfig()
	replicas := make([]int32, 32)
	for i := range replicas {
		replicas[i] = int32(i + 1)
	}
	body := encode(t, cfg, &zaris.ZarisKvGetClusterMapResult{Success: &zaris.ClusterMap{Epoch: 3, SegmentCount: 1,
		Nodes: []*zaris.NodeInfo{}, Segments: []*zaris.SegmentInfo{{ID: 0, Replicas: replicas}}}})
	header := []byte{byte(thrift.LIST), 0, 3, byte(thrift.I32), 0, 0, 0, 32}
	at := bytes.Index(body, header)
	require.GreaterOrEqual(t, at, 0)
	for _, elem := range []thrift.TType{thrift.LIST, thrift.SET} {
		c := append([]byte{}, body...)
		c[at+3] = byte(elem)
		plain, mem, plainErr, memErr := decodeBoth(cfg, frameOf(t, cfg, c), func() thrift.TStruct { return &zaris.ZarisKvGetClusterMapResult{} }, false)
		require.NoError(t, plainErr, "the binary protocol reads it")
		require.NoError(t, memErr, "elements tagged %v", elem)
		assert.Equal(t, plain, mem)
	}
}

// duplex reads from in and writes to out.
type duplex struct {
	*thrift.TMemoryBuffer
	out *thrift.TMemoryBuffer
}

func (d duplex) Write(b []byte) (int, error) { return d.out.Write(b) }

// Memory is the Protocol a message goes through in memory: the body read, unread until
// read through it, and then the reply being written; it is nil outside a message.
func TestMemFrames_MemoryIsTheMessageInMemory(t *testing.T) {
	cfg := framesConfig()
	ctx := context.Background()
	body := encode(t, cfg, &zaris.GetRequest{Key: []byte("k")})
	in, out := thrift.NewTMemoryBuffer(), thrift.NewTMemoryBuffer()
	in.Write(frameOf(t, cfg, body))
	p := NewFrames(thrift.NewTBinaryProtocolConf(thrift.NewTFramedTransportConf(duplex{in, out}, cfg), cfg), cfg)
	require.Nil(t, p.Memory(), "no message yet")

	_, _, _, err := p.ReadMessageBegin(ctx)
	require.NoError(t, err)
	m := p.Memory()
	require.NotNil(t, m)
	assert.Equal(t, body, m.Unread())
	var got zaris.GetRequest
	require.NoError(t, got.Read(ctx, m))
	assert.Equal(t, []byte("k"), got.Key)
	assert.Empty(t, m.Unread())
	require.NoError(t, p.ReadMessageEnd(ctx))
	require.Nil(t, p.Memory(), "the message has ended")

	reply := &zaris.GetResponse{Value: []byte("v")}
	require.NoError(t, p.WriteMessageBegin(ctx, "MultiGet", thrift.REPLY, 9))
	require.NoError(t, reply.Write(ctx, p.Memory()))
	require.NoError(t, p.WriteMessageEnd(ctx))
	require.NoError(t, p.Flush(ctx))
	assert.Equal(t, frameOf(t, cfg, encode(t, cfg, reply)), out.Bytes())
	require.Nil(t, p.Memory(), "the reply has ended")
}

// sharedReply is a MultiGet reply of 20 values of 5 to 24 bytes starting at tag, then an
// empty value and an absent one.
func sharedReply(tag byte) *zaris.ZarisKvMultiGetResult {
	r := &zaris.MultiGetResponse{MapEpoch: 7}
	for i := range 20 {
		r.Results = append(r.Results, &zaris.GetOutcome{Value: bytes.Repeat([]byte{tag + byte(i)}, 5+i), Version: int64(i)})
	}
	r.Results = append(r.Results, &zaris.GetOutcome{Value: []byte{}}, &zaris.GetOutcome{Status: zaris.KvStatus_NotFound})
	return &zaris.ZarisKvMultiGetResult{Success: r}
}

// With ShareBinaries, the values of one reply are carved from one copy of it: equal to
// the values the binary protocol reads, none sharing bytes with another or with the
// connection's buffer (the next reply read leaves them as they were), and an empty value
// empty but set.
func TestMemFrames_SharedBinaries(t *testing.T) {
	cfg := framesConfig()
	cfg.MaxContainerSize = 1000
	reply := sharedReply
	in := thrift.NewTMemoryBuffer()
	in.Write(frameOf(t, cfg, encode(t, cfg, reply('a'))))
	in.Write(frameOf(t, cfg, encode(t, cfg, reply('A'))))
	p := NewFrames(thrift.NewTBinaryProtocolConf(thrift.NewTFramedTransportConf(in, cfg), cfg), cfg).ShareBinaries()
	ctx := context.Background()
	read := func() *zaris.ZarisKvMultiGetResult {
		_, _, _, err := p.ReadMessageBegin(ctx)
		require.NoError(t, err)
		got := &zaris.ZarisKvMultiGetResult{}
		require.NoError(t, got.Read(ctx, p))
		require.NoError(t, p.ReadMessageEnd(ctx))
		return got
	}
	first := read()
	require.Equal(t, reply('a'), first)
	values := first.Success.Results
	for i, o := range values[:20] {
		assert.Equal(t, len(o.Value), cap(o.Value), "value %d is capped: appending to it cannot reach the next", i)
	}
	assert.NotNil(t, values[20].Value)
	assert.Empty(t, values[20].Value)
	assert.Nil(t, values[21].Value)
	assert.Equal(t, reply('A'), read())
	assert.Equal(t, reply('a'), first, "the next reply left the values as they were")
}

// With ShareBinaries, the values of one reply take one allocation, not one each (run
// without the race detector, which makes allocation counts vary).
func TestMemFrames_SharedBinariesAllocateOnce(t *testing.T) {
	if raceDetector {
		t.Skip("allocation counts vary under the race detector")
	}
	cfg := framesConfig()
	cfg.MaxContainerSize = 1000
	frame := frameOf(t, cfg, encode(t, cfg, sharedReply('a')))
	allocs := func(share bool) float64 {
		return testing.AllocsPerRun(20, func() {
			_, _, _, err := decodeBoth(cfg, frame, func() thrift.TStruct { return &zaris.ZarisKvMultiGetResult{} }, share)
			require.NoError(t, err)
		})
	}
	// decodeBoth decodes through the binary protocol too: the difference is Frames'.
	assert.LessOrEqual(t, allocs(true), allocs(false)-19, "20 values, one allocation")
}
