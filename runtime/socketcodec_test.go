package runtime_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisclient"
	"github.com/clustron/zaris-go/runtime"
)

// getReply is a framed binary reply message (without its frame size) to Get, of type
// typeID and sequence id seq, named name, whose body body writes (nil: none).
func getReply(t *testing.T, name string, typeID thrift.TMessageType, seq int32, body thrift.TStruct) []byte {
	ctx := context.Background()
	buf := thrift.NewTMemoryBuffer()
	p := thrift.NewTBinaryProtocolConf(buf, &thrift.TConfiguration{})
	require.NoError(t, p.WriteMessageBegin(ctx, name, typeID, seq))
	if body != nil {
		require.NoError(t, body.Write(ctx, p))
	}
	require.NoError(t, p.WriteMessageEnd(ctx))
	require.NoError(t, p.Flush(ctx))
	return buf.Bytes()
}

// TestPooledCodecFailsAsTheThriftClient has a node answer a Get with replies that are not
// its result, and checks that a pooled call, which reads the reply with the operation's
// Codec, fails as the generated client over the Thrift library fails: the same application
// exception (by type), or none. The first data call on a connection has sequence id 1.
func TestPooledCodecFailsAsTheThriftClient(t *testing.T) {
	value := &zaris.ZarisKvGetResult{Success: &zaris.GetResponse{Status: zaris.KvStatus_Ok, Value: []byte("v"), MapEpoch: 1}}
	for _, tc := range []struct {
		name  string
		reply []byte
	}{
		{"an answer", getReply(t, "Get", thrift.REPLY, 1, value)},
		{"no result", getReply(t, "Get", thrift.REPLY, 1, &zaris.ZarisKvGetResult{})},
		{"another method", getReply(t, "Put", thrift.REPLY, 1, value)},
		{"another method of the same length", getReply(t, "Gex", thrift.REPLY, 1, value)},
		{"another sequence id", getReply(t, "Get", thrift.REPLY, 7, value)},
		{"an exception", getReply(t, "Get", thrift.EXCEPTION, 1, thrift.NewTApplicationException(thrift.INTERNAL_ERROR, "boom"))},
		{"a call", getReply(t, "Get", thrift.CALL, 1, value)},
		{"a bad version", append([]byte{0x80, 0x02}, getReply(t, "Get", thrift.REPLY, 1, value)[2:]...)},
		{"no version", []byte{0, 0, 0, 3, 'G', 'e', 't', 2, 0, 0, 0, 1, 0}},
		{"a name past the frame", []byte{0x80, 0x01, 0, 2, 0, 0, 0, 9, 'G', 'e', 't', 0, 0, 0, 1}},
		{"a short header", []byte{0x80, 0x01, 0, 2, 0, 0}},
		{"a zero word and nothing after the name's length", []byte{0, 0, 0, 0, 0, 0, 0, 0}},
		{"an empty name", getReply(t, "", thrift.REPLY, 1, value)},
		{"a header alone, of another sequence id", getReply(t, "Get", thrift.REPLY, 7, nil)},
		{"a header alone", getReply(t, "Get", thrift.REPLY, 1, nil)},
		{"a broken body", getReply(t, "Get", thrift.REPLY, 1, value)[:20]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := startReplyNode(t)
			node.answer(runtime.ProtocolBinary, tc.reply, true)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()

			cfg := &thrift.TConfiguration{TBinaryStrictRead: thrift.BoolPtr(true)} // as the client's
			sock := thrift.NewTSocketConf(node.ln.Addr().String(), cfg)
			require.NoError(t, sock.Open())
			defer sock.Close()
			p := thrift.NewTBinaryProtocolConf(thrift.NewTFramedTransportConf(sock, cfg), cfg)
			rawResp, rawErr := zaris.NewZarisKvClient(thrift.NewTStandardClient(p, p)).Get(ctx, &zaris.GetRequest{Key: []byte("k")})

			kv, err := zarisclient.Dial(ctx, runtime.WithSeeds(node.ln.Addr().String()), runtime.WithEnv(func(string) (string, bool) { return "", false }),
				runtime.WithRetriesDisabled(), runtime.WithAttemptTimeout(2*time.Second), runtime.WithPipelining(false))
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
			var rawProto, proto thrift.TProtocolException
			if errors.As(rawErr, &rawProto) && !errors.Is(rawErr, io.EOF) && !errors.Is(rawErr, io.ErrUnexpectedEOF) {
				require.ErrorAs(t, err, &proto, "the raw client: %v", rawErr)
				assert.Equal(t, rawProto.TypeId(), proto.TypeId(), "%v against the raw client's %v", err, rawErr)
				assert.Equal(t, rawProto.Error(), proto.Error())
			}
		})
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
