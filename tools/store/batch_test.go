package store

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
)

// scriptConn is a net.Conn that hands out its chunks, one per Read, then io.EOF, and
// records every Write.
type scriptConn struct {
	net.Conn
	chunks [][]byte
	writes [][]byte
}

func (c *scriptConn) Read(p []byte) (int, error) {
	if len(c.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.chunks[0])
	if c.chunks[0] = c.chunks[0][n:]; len(c.chunks[0]) == 0 {
		c.chunks = c.chunks[1:]
	}
	return n, nil
}

func (c *scriptConn) Write(p []byte) (int, error) {
	c.writes = append(c.writes, append([]byte(nil), p...))
	return len(p), nil
}

func (c *scriptConn) Close() error                     { return nil }
func (c *scriptConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *scriptConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *scriptConn) SetDeadline(time.Time) error      { return nil }
func (c *scriptConn) SetReadDeadline(time.Time) error  { return nil }
func (c *scriptConn) SetWriteDeadline(time.Time) error { return nil }

// notFoundKV answers NotFound to every Get.
type notFoundKV struct{ zaris.ZarisKv }

func (notFoundKV) Get(context.Context, *zaris.GetRequest) (*zaris.GetResponse, error) {
	return &zaris.GetResponse{Status: zaris.KvStatus_NotFound}, nil
}

// framedGets encodes n Get requests, seqids 1..n, as a framed binary client sends them.
func framedGets(t *testing.T, n int) [][]byte {
	ctx := context.Background()
	var out [][]byte
	for i := 1; i <= n; i++ {
		mem := thrift.NewTMemoryBuffer()
		proto := thrift.NewTBinaryProtocolConf(thrift.NewTFramedTransportConf(mem, nil), nil)
		require.NoError(t, proto.WriteMessageBegin(ctx, "Get", thrift.CALL, int32(i)))
		require.NoError(t, (&zaris.ZarisKvGetArgs{Req: &zaris.GetRequest{Key: []byte("k")}}).Write(ctx, proto))
		require.NoError(t, proto.WriteMessageEnd(ctx))
		require.NoError(t, proto.Flush(ctx))
		out = append(out, mem.Bytes())
	}
	return out
}

// TestServerWritesABatchOfRepliesAtOnce: requests that arrive together are answered in one
// write; requests that arrive one at a time are each answered before the next is read.
func TestServerWritesABatchOfRepliesAtOnce(t *testing.T) {
	const n = 8
	reqs := framedGets(t, n)
	var together []byte
	for _, r := range reqs {
		together = append(together, r...)
	}
	for _, tc := range []struct {
		name   string
		chunks [][]byte
		writes int
	}{
		{"pipelined batch", [][]byte{together}, 1},
		{"one at a time", reqs, n},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := serverConfig(1<<20, 1<<10, 0)
			s := &server{
				cfg: cfg, wire: wireHeader, ctx: context.Background(), log: slog.New(slog.DiscardHandler),
				processor: zaris.NewZarisKvProcessor(notFoundKV{}),
			}
			conn := &scriptConn{chunks: tc.chunks}
			err := s.process(conn)
			require.True(t, isEOF(err), "%v", err)
			assert.Len(t, conn.writes, tc.writes)

			// Every reply came back, in order.
			var all []byte
			for _, w := range conn.writes {
				all = append(all, w...)
			}
			mem := thrift.NewTMemoryBuffer()
			mem.Write(all)
			proto := thrift.NewTBinaryProtocolConf(thrift.NewTFramedTransportConf(mem, nil), nil)
			ctx := context.Background()
			for i := 1; i <= n; i++ {
				_, typ, seq, err := proto.ReadMessageBegin(ctx)
				require.NoError(t, err)
				assert.Equal(t, thrift.REPLY, typ)
				assert.Equal(t, int32(i), seq)
				var res zaris.ZarisKvGetResult
				require.NoError(t, res.Read(ctx, proto))
				require.NoError(t, proto.ReadMessageEnd(ctx))
				assert.Equal(t, zaris.KvStatus_NotFound, res.Success.Status)
			}
		})
	}
}
