package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// chunked splits b into pieces of size n (the last may be shorter).
func chunked(b []byte, n int) [][]byte {
	var out [][]byte
	for len(b) > n {
		out = append(out, b[:n])
		b = b[n:]
	}
	return append(out, b)
}

// TestFrameTransport_ReadsWhatTFramedTransportWrites reads frames of several sizes, written
// by thrift.TFramedTransport and delivered in pieces of every size, and writes replies that
// thrift.TFramedTransport reads back.
func TestFrameTransport_ReadsWhatTFramedTransportWrites(t *testing.T) {
	ctx := context.Background()
	var payloads [][]byte
	var wire bytes.Buffer
	for _, size := range []int{1, 3, 511, 512, 513, 5000, 70000} {
		p := bytes.Repeat([]byte{byte(size)}, size)
		payloads = append(payloads, p)
		ft := thrift.NewTFramedTransportConf(thrift.NewStreamTransportW(&wire), nil)
		_, err := ft.Write(p)
		require.NoError(t, err)
		require.NoError(t, ft.Flush(ctx))
	}
	for _, piece := range []int{1, 2, 4, 7, 4096, 1 << 20} {
		conn := &scriptConn{chunks: chunked(bytes.Clone(wire.Bytes()), piece)}
		f := newFrameTransport(newBatchConn(conn, 0, 64<<10), 1<<20)
		for i, want := range payloads {
			got := make([]byte, len(want))
			_, err := f.ReadByte()
			require.NoError(t, err, "pieces of %d, frame %d", piece, i)
			assert.EqualValues(t, len(want)-1, f.RemainingBytes())
			_, err = f.Read(got[1:])
			require.NoError(t, err)
			for f.RemainingBytes() > 0 && len(want) > 1 {
				n, err := f.Read(got[len(want)-int(f.RemainingBytes()):])
				require.NoError(t, err)
				require.NotZero(t, n)
			}
			got[0] = want[0]
			require.Equal(t, want, got, "pieces of %d, frame %d", piece, i)
		}
		_, err := f.ReadByte()
		assert.True(t, isEOF(err), "after the last frame: %v", err)

		for _, p := range payloads {
			_, err := f.Write(p)
			require.NoError(t, err)
			require.NoError(t, f.Flush(ctx))
		}
		require.NoError(t, f.bc.w.Flush())
		var written []byte
		for _, w := range conn.writes {
			written = append(written, w...)
		}
		back := thrift.NewTFramedTransportConf(thrift.NewStreamTransportR(bytes.NewReader(written)), nil)
		for _, want := range payloads {
			got := make([]byte, len(want))
			_, err := back.Read(got)
			require.NoError(t, err)
			assert.Equal(t, want, got)
		}
	}
}

// TestFrameTransport_RefusesAReplyOverTheLimit checks that a reply larger than the frame
// limit is an error and is dropped, and the next reply goes out.
func TestFrameTransport_RefusesAReplyOverTheLimit(t *testing.T) {
	conn := &scriptConn{}
	f := newFrameTransport(newBatchConn(conn, 0, 64<<10), 1024)
	_, err := f.Write(make([]byte, 1025))
	require.NoError(t, err)
	require.Error(t, f.Flush(context.Background()))
	_, err = f.Write([]byte("next"))
	require.NoError(t, err)
	require.NoError(t, f.Flush(context.Background()), "the refused reply is dropped, the next goes out")
	require.NoError(t, f.bc.w.Flush())
	require.Len(t, conn.writes, 1)
	assert.Equal(t, append(binary.BigEndian.AppendUint32(nil, 4), "next"...), conn.writes[0])
}
