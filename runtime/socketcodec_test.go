package runtime_test

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisclient"
	"github.com/clustron/zaris-go/runtime"
)

// getReply is a framed reply message (without its frame size) to Get in the protocol proto,
// of type typeID and sequence id seq, named name, whose body body writes (nil: none).
func getReply(t *testing.T, proto runtime.Protocol, name string, typeID thrift.TMessageType, seq int32, body thrift.TStruct) []byte {
	ctx := context.Background()
	buf := thrift.NewTMemoryBuffer()
	var p thrift.TProtocol = thrift.NewTBinaryProtocolConf(buf, &thrift.TConfiguration{})
	if proto == runtime.ProtocolCompact {
		p = thrift.NewTCompactProtocolConf(buf, &thrift.TConfiguration{})
	}
	require.NoError(t, p.WriteMessageBegin(ctx, name, typeID, seq))
	if body != nil {
		require.NoError(t, body.Write(ctx, p))
	}
	require.NoError(t, p.WriteMessageEnd(ctx))
	require.NoError(t, p.Flush(ctx))
	return buf.Bytes()
}

// TestPooledCodecFailsAsTheThriftClient has a node answer a Get with replies that are not
// its result, in the binary and the compact protocol, and checks that a pooled call, which
// reads the reply with the operation's Codec in that protocol, fails as the generated
// client over the Thrift library fails: the same application exception (by type), or none.
// The first data call on a connection has sequence id 1.
func TestPooledCodecFailsAsTheThriftClient(t *testing.T) {
	value := &zaris.ZarisKvGetResult{Success: &zaris.GetResponse{Status: zaris.KvStatus_Ok, Value: []byte("v"), MapEpoch: 1}}
	type reply struct {
		name  string
		reply []byte
	}
	common := func(proto runtime.Protocol) []reply {
		return []reply{
			{"an answer", getReply(t, proto, "Get", thrift.REPLY, 1, value)},
			{"no result", getReply(t, proto, "Get", thrift.REPLY, 1, &zaris.ZarisKvGetResult{})},
			{"another method", getReply(t, proto, "Put", thrift.REPLY, 1, value)},
			{"another method of the same length", getReply(t, proto, "Gex", thrift.REPLY, 1, value)},
			{"another sequence id", getReply(t, proto, "Get", thrift.REPLY, 7, value)},
			{"an exception", getReply(t, proto, "Get", thrift.EXCEPTION, 1, thrift.NewTApplicationException(thrift.INTERNAL_ERROR, "boom"))},
			{"a call", getReply(t, proto, "Get", thrift.CALL, 1, value)},
			{"an empty name", getReply(t, proto, "", thrift.REPLY, 1, value)},
			{"a header alone, of another sequence id", getReply(t, proto, "Get", thrift.REPLY, 7, nil)},
			{"a header alone", getReply(t, proto, "Get", thrift.REPLY, 1, nil)},
			{"a broken body", getReply(t, proto, "Get", thrift.REPLY, 1, value)[:20]},
			{"an empty frame", []byte{}},
		}
	}
	compactAnswer := getReply(t, runtime.ProtocolCompact, "Get", thrift.REPLY, 1, value)
	for _, group := range []struct {
		proto   runtime.Protocol
		replies []reply
	}{
		{runtime.ProtocolBinary, append(common(runtime.ProtocolBinary),
			reply{"a bad version", append([]byte{0x80, 0x02}, getReply(t, runtime.ProtocolBinary, "Get", thrift.REPLY, 1, value)[2:]...)},
			reply{"no version", []byte{0, 0, 0, 3, 'G', 'e', 't', 2, 0, 0, 0, 1, 0}},
			reply{"a name past the frame", []byte{0x80, 0x01, 0, 2, 0, 0, 0, 9, 'G', 'e', 't', 0, 0, 0, 1}},
			reply{"a short header", []byte{0x80, 0x01, 0, 2, 0, 0}},
			reply{"a zero word and nothing after the name's length", []byte{0, 0, 0, 0, 0, 0, 0, 0}},
		)},
		{runtime.ProtocolCompact, append(common(runtime.ProtocolCompact),
			reply{"another protocol id", append([]byte{0x80}, compactAnswer[1:]...)},
			reply{"a bad version", append([]byte{0x82, 0x42}, compactAnswer[2:]...)},
			reply{"a sequence id over ten bytes", []byte{0x82, 0x41, 0x81, 0x81, 0x81, 0x81, 0x81, 0x81, 0x81, 0x81, 0x81, 0x81, 0x01, 3, 'G', 'e', 't', 0}},
			reply{"a sequence id of ten bytes", []byte{0x82, 0x41, 0x81, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00, 3, 'G', 'e', 't', 0}},
			reply{"a negative name length", []byte{0x82, 0x41, 0x01, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F, 'G', 'e', 't', 0}},
			reply{"a name past the frame", []byte{0x82, 0x41, 0x01, 9, 'G', 'e', 't'}},
			reply{"a short header", []byte{0x82, 0x41}},
			reply{"a bool result", []byte{0x82, 0x41, 0x01, 3, 'G', 'e', 't', 0x01, 0x00, 0}},
		)},
	} {
		for _, tc := range group.replies {
			t.Run(string(group.proto)+" "+tc.name, func(t *testing.T) {
				checkPooledCodecReply(t, group.proto, tc.reply)
			})
		}
	}
}

// checkPooledCodecReply has a node answer a Get with reply in proto, and fails t unless the
// pooled client and the generated client over the Thrift library get the same response, or
// fail alike.
func checkPooledCodecReply(t *testing.T, proto runtime.Protocol, reply []byte) {
	node := startReplyNode(t)
	node.answer(proto, reply, true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	cfg := &thrift.TConfiguration{TBinaryStrictRead: thrift.BoolPtr(true)} // as the client's
	sock := thrift.NewTSocketConf(node.ln.Addr().String(), cfg)
	require.NoError(t, sock.Open())
	defer sock.Close()
	var p thrift.TProtocol = thrift.NewTBinaryProtocolConf(thrift.NewTFramedTransportConf(sock, cfg), cfg)
	if proto == runtime.ProtocolCompact {
		p = thrift.NewTCompactProtocolConf(thrift.NewTFramedTransportConf(sock, cfg), cfg)
	}
	rawResp, rawErr := zaris.NewZarisKvClient(thrift.NewTStandardClient(p, p)).Get(ctx, &zaris.GetRequest{Key: []byte("k")})

	kv, err := zarisclient.Dial(ctx, runtime.WithSeeds(node.ln.Addr().String()), runtime.WithEnv(func(string) (string, bool) { return "", false }),
		runtime.WithRetriesDisabled(), runtime.WithAttemptTimeout(2*time.Second), runtime.WithPipelining(false), runtime.WithProtocol(proto))
	require.NoError(t, err)
	defer kv.Close()
	resp, err := kv.Get(ctx, &zaris.GetRequest{Key: []byte("k")})

	if rawErr == nil {
		require.NoError(t, err)
		assert.Equal(t, rawResp, resp)
		return
	}
	require.Error(t, err, "the raw client: %v", rawErr)
	var rawApp, app thrift.TApplicationException
	if errors.As(rawErr, &rawApp) {
		require.ErrorAs(t, err, &app, "the raw client: %v", rawErr)
		assert.Equal(t, rawApp.TypeId(), app.TypeId(), "%v against the raw client's %v", err, rawErr)
		assert.Equal(t, rawApp.Error(), app.Error())
		return
	}
	assert.False(t, errors.As(err, &app), "%v against the raw client's %v", err, rawErr)
	assert.ErrorIs(t, err, runtime.ErrTransport, "the raw client: %v", rawErr)
	// A header the library refuses gets its refusal, in its words; a reply cut short
	// is a transport failure, whatever the words.
	var rawProto, protoErr thrift.TProtocolException
	if errors.As(rawErr, &rawProto) && !errors.Is(rawErr, io.EOF) && !errors.Is(rawErr, io.ErrUnexpectedEOF) {
		require.ErrorAs(t, err, &protoErr, "the raw client: %v", rawErr)
		assert.Equal(t, rawProto.TypeId(), protoErr.TypeId(), "%v against the raw client's %v", err, rawErr)
		assert.Equal(t, rawProto.Error(), protoErr.Error())
	}
}

// An operation whose Codec has no DecodeResultCopy (Codec's other fields set) is read with
// DecodeResult, from a buffer of the reply's own, pooled or pipelined.
func TestCodecWithoutCopyDecodes(t *testing.T) {
	op := *zarisclient.OpGet
	codec := *op.Codec
	codec.DecodeResultCopy = nil
	op.Codec = &codec
	for _, pipelined := range []bool{false, true} {
		kv, _ := oneNodeClient(t, runtime.WithPipelining(pipelined), runtime.PipelineEveryCall())
		call := runtime.NewCall(&op, []byte("k"), &zaris.GetRequest{Key: []byte("k")}, false)
		call.StartAttempt()
		resp, err := kv.Engine().Invoke(context.Background(), call)
		require.NoError(t, err, "pipelined %v", pipelined)
		assert.Equal(t, &zaris.GetResponse{Status: zaris.KvStatus_NotFound, MapEpoch: 1}, resp, "pipelined %v", pipelined)
	}
}

// A call over framed compact, pooled or pipelined, is sent and read with the operation's
// compact Codec (Op.CompactCodec): its AppendArgs encodes the request and its
// DecodeResultCopy (or, without one, DecodeResult) decodes the node's answer.
func TestCompactCallsUseTheCompactCodec(t *testing.T) {
	for _, withCopy := range []bool{true, false} {
		for _, pipelined := range []bool{false, true} {
			var appended, decoded atomic.Int32
			compact := zarisclient.OpGet.CompactCodec
			codec := runtime.Codec{AppendArgs: func(b []byte, req any) []byte {
				appended.Add(1)
				return compact.AppendArgs(b, req)
			}}
			if withCopy {
				codec.DecodeResultCopy = func(b []byte, cfg *thrift.TConfiguration) (runtime.Response, error) {
					decoded.Add(1)
					return compact.DecodeResultCopy(b, cfg)
				}
			} else {
				codec.DecodeResult = func(b []byte, cfg *thrift.TConfiguration) (runtime.Response, error) {
					decoded.Add(1)
					return compact.DecodeResult(b, cfg)
				}
			}
			op := *zarisclient.OpGet
			op.CompactCodec = &codec
			kv, _ := oneNodeClient(t, runtime.WithProtocol(runtime.ProtocolCompact), runtime.WithPipelining(pipelined), runtime.PipelineEveryCall())
			call := runtime.NewCall(&op, []byte("k"), &zaris.GetRequest{Key: []byte("k")}, false)
			call.StartAttempt()
			resp, err := kv.Engine().Invoke(context.Background(), call)
			require.NoError(t, err, "pipelined %v, copy %v", pipelined, withCopy)
			assert.Equal(t, &zaris.GetResponse{Status: zaris.KvStatus_NotFound, MapEpoch: 1}, resp, "pipelined %v, copy %v", pipelined, withCopy)
			assert.Equal(t, int32(1), appended.Load(), "requests encoded by the compact Codec, pipelined %v", pipelined)
			assert.Equal(t, int32(1), decoded.Load(), "replies decoded by the compact Codec, pipelined %v, copy %v", pipelined, withCopy)
		}
	}
}
