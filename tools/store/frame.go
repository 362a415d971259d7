package store

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/clustron/zaris-go/internal/framing"
	"github.com/clustron/zaris-go/internal/thriftbuf"
)

// frameTransport is Thrift's framed transport over a batchConn: each request frame is read
// whole by a framing.Reader, and each reply is assembled in a buffer of its own and handed
// to the batchConn in one write. It reads and writes the same bytes as
// thrift.TFramedTransport.
type frameTransport struct {
	*framing.Reader
	bc       *batchConn
	maxFrame int32            // the largest reply
	out      thriftbuf.Output // the reply being written, after 4 bytes left for its size
}

// newFrameTransport reads and writes frames of up to maxFrame bytes over bc.
func newFrameTransport(bc *batchConn, maxFrame int32) *frameTransport {
	return &frameTransport{Reader: framing.NewReader(bc, maxFrame), bc: bc, maxFrame: maxFrame, out: make([]byte, 4, 512)}
}

func (f *frameTransport) Close() error { return f.bc.Close() }

func (f *frameTransport) Write(p []byte) (int, error)       { return f.out.Write(p) }
func (f *frameTransport) WriteByte(b byte) error            { return f.out.WriteByte(b) }
func (f *frameTransport) WriteString(s string) (int, error) { return f.out.WriteString(s) }

// Flush hands the reply, behind its size, to the batchConn. A reply larger than maxFrame is
// dropped with an error, as TFramedTransport drops it.
func (f *frameTransport) Flush(context.Context) error {
	size := len(f.out) - 4
	defer func() {
		if cap(f.out) > framing.KeepBuffer {
			f.out = make([]byte, 4, 512)
		}
		f.out = f.out[:4]
	}()
	if size > int(f.maxFrame) {
		return thrift.NewTProtocolExceptionWithType(thrift.SIZE_LIMIT, fmt.Errorf("reply of %d bytes is over the frame limit of %d", size, f.maxFrame))
	}
	binary.BigEndian.PutUint32(f.out, uint32(size))
	_, err := f.bc.Write(f.out)
	return thrift.NewTTransportExceptionFromError(err)
}
