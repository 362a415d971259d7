package store

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// firstMessage returns the bytes a client of kind sends for a one-way call named "ping".
func firstMessage(t testing.TB, kind string) []byte {
	t.Helper()
	mem := thrift.NewTMemoryBuffer()
	var trans thrift.TTransport = mem
	cfg := &thrift.TConfiguration{}
	var proto thrift.TProtocol
	switch kind {
	case "binary", "framed binary":
		if kind != "binary" {
			trans = thrift.NewTFramedTransportConf(mem, cfg)
		}
		proto = thrift.NewTBinaryProtocolConf(trans, cfg)
	case "compact", "framed compact":
		if kind != "compact" {
			trans = thrift.NewTFramedTransportConf(mem, cfg)
		}
		proto = thrift.NewTCompactProtocolConf(trans, cfg)
	case "header":
		proto = thrift.NewTHeaderProtocolConf(thrift.NewTHeaderTransportConf(mem, cfg), cfg)
	default:
		t.Fatalf("unknown kind %q", kind)
	}
	ctx := context.Background()
	require.NoError(t, proto.WriteMessageBegin(ctx, "ping", thrift.CALL, 1))
	require.NoError(t, proto.WriteStructBegin(ctx, "args"))
	require.NoError(t, proto.WriteFieldStop(ctx))
	require.NoError(t, proto.WriteStructEnd(ctx))
	require.NoError(t, proto.WriteMessageEnd(ctx))
	require.NoError(t, proto.Flush(ctx))
	return mem.Bytes()
}

// TestServer_ServesPlainClientsWithTheirOwnProtocol checks that a header server answers a
// plain binary or compact client, framed or not, with that protocol itself, and only a
// THeader client (or bytes no format accepts) through the THeader protocol.
func TestServer_ServesPlainClientsWithTheirOwnProtocol(t *testing.T) {
	garbage := binary.BigEndian.AppendUint32(nil, 8)
	garbage = append(garbage, 0x12, 0x34, 0x56, 0x78, 0, 0, 0, 0)
	for _, tc := range []struct {
		kind  string
		first []byte
		want  string
	}{
		{"binary", firstMessage(t, "binary"), "*thrift.TBinaryProtocol"},
		{"compact", firstMessage(t, "compact"), "*thrift.TCompactProtocol"},
		{"framed binary", firstMessage(t, "framed binary"), "*thriftbuf.Frames"},
		{"framed compact", firstMessage(t, "framed compact"), "*thrift.TCompactProtocol"},
		{"header", firstMessage(t, "header"), "*thrift.THeaderProtocol"},
		{"no format", garbage, "*thrift.THeaderProtocol"},
		{"too short to tell", []byte{0, 0}, "*thrift.THeaderProtocol"},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			s := &server{cfg: serverConfig(1<<20, 1<<10, 0), wire: wireHeader}
			client, node := net.Pipe()
			defer client.Close()
			go func() {
				client.Write(tc.first)
				client.Close()
			}()
			proto, err := s.protocolFor(newBatchConn(node, 0, 64<<10))
			require.NoError(t, err)
			assert.Equal(t, tc.want, fmt.Sprintf("%T", proto))
		})
	}
}

// TestPlainFormat_NeverReadsPastSixBytes checks that telling a format apart consumes nothing
// and waits for no more than the first six bytes.
func TestPlainFormat_NeverReadsPastSixBytes(t *testing.T) {
	msg := firstMessage(t, "framed compact")
	r := bufio.NewReader(bytes.NewReader(msg[:6]))
	assert.Equal(t, formatFramedCompact, plainFormat(r))
	assert.Equal(t, 6, r.Buffered(), "the peeked bytes are left for the protocol")
}
