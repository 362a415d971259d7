package thriftbuf

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/apache/thrift/lib/go/thrift"
)

// Frames is the binary protocol of a framed connection that decodes the body of each
// message it reads and encodes each message it writes in memory, with a Protocol. Once a
// message begins, the framed transport holds its whole frame; Frames takes the rest of it at
// once and the generated code decodes it from that buffer; a message written is encoded
// into a buffer handed to the transport in one write. The bytes are the binary protocol's,
// read with its bounds (TestMemFrames_DecodesAsTheBinaryProtocol, FuzzMemFrames,
// TestMemFrames_EncodesAsTheBinaryProtocol). A frame whose size the transport does not
// know, or larger than the message size limit, is read through the connection's protocol.
// The client's framed binary connections and the store's framed binary clients use it.
type Frames struct {
	thrift.TProtocol                   // what the message goes through: conn, or buf within a body
	conn             thrift.TProtocol  // the connection's binary protocol
	frame            thrift.TTransport // the framed transport under conn
	max              uint64            // the largest message body taken into memory
	buf              *Protocol
	limit            *atomic.Int64 // when set and positive, the largest message written (LimitWrites)
}

// NewFrames wraps p, a binary protocol over a framed transport, as Frames; cfg is the
// connection's configuration.
func NewFrames(p thrift.TProtocol, cfg *thrift.TConfiguration) *Frames {
	return &Frames{TProtocol: p, conn: p, frame: p.Transport(), max: uint64(cfg.GetMaxMessageSize()), buf: New(cfg)}
}

func (p *Frames) ReadMessageBegin(ctx context.Context) (string, thrift.TMessageType, int32, error) {
	p.TProtocol = p.conn
	name, typeID, seqID, err := p.conn.ReadMessageBegin(ctx)
	if err != nil {
		return name, typeID, seqID, err
	}
	n := p.frame.RemainingBytes()
	if n == 0 || n == thrift.UnknownRemainingBytes || n > p.max {
		return name, typeID, seqID, nil
	}
	p.buf.Reset(nil)
	if err := p.buf.Fill(p.frame, int(n)); err != nil {
		return name, typeID, seqID, thrift.NewTTransportExceptionFromError(err)
	}
	p.TProtocol = p.buf
	return name, typeID, seqID, nil
}

func (p *Frames) ReadMessageEnd(ctx context.Context) error {
	err := p.TProtocol.ReadMessageEnd(ctx)
	p.TProtocol = p.conn
	return err
}

// WriteMessageBegin starts a request in memory, whatever became of the last reply.
func (p *Frames) WriteMessageBegin(ctx context.Context, name string, typeID thrift.TMessageType, seqID int32) error {
	p.buf.ResetOutput()
	p.TProtocol = p.buf
	return p.buf.WriteMessageBegin(ctx, name, typeID, seqID)
}

// WriteMessageEnd hands the request to the framed transport; Flush sends it.
func (p *Frames) WriteMessageEnd(ctx context.Context) error {
	if p.TProtocol != thrift.TProtocol(p.buf) {
		return p.TProtocol.WriteMessageEnd(ctx)
	}
	p.TProtocol = p.conn
	b := p.buf.Bytes()
	if err := OverLimit(p.limit, len(b)); err != nil {
		return err
	}
	if _, err := p.frame.Write(b); err != nil {
		return thrift.NewTTransportExceptionFromError(err)
	}
	return nil
}

// OverLimit returns the SIZE_LIMIT protocol exception of a message of size bytes when limit
// is set and its value positive and smaller, naming both; else nil.
func OverLimit(limit *atomic.Int64, size int) error {
	if limit == nil {
		return nil
	}
	if n := limit.Load(); n > 0 && int64(size) > n {
		return thrift.NewTProtocolExceptionWithType(thrift.SIZE_LIMIT,
			fmt.Errorf("a message of %d bytes is over the peer's limit of %d bytes", size, n))
	}
	return nil
}

// LimitWrites makes WriteMessageEnd refuse a message whose encoding is over limit's value
// (when it is positive), with a SIZE_LIMIT protocol exception, before any of it reaches the
// transport; limit is read for each message, so its owner may change it. It returns p.
func (p *Frames) LimitWrites(limit *atomic.Int64) *Frames {
	p.limit = limit
	return p
}

func (p *Frames) Flush(ctx context.Context) error { return p.conn.Flush(ctx) }

// ShareBinaries makes the binaries of each message read share an allocation
// (Protocol.ShareBinaries) and returns p.
func (p *Frames) ShareBinaries() *Frames {
	p.buf.ShareBinaries()
	return p
}

// Memory returns the in-memory Protocol the current message goes through: between
// ReadMessageBegin and ReadMessageEnd, the one holding the body read (nil when the body is
// read from the connection); between WriteMessageBegin and WriteMessageEnd, the one the
// message is encoded into. Reading and writing through it is reading and writing the
// message.
func (p *Frames) Memory() *Protocol {
	if p.TProtocol == thrift.TProtocol(p.buf) {
		return p.buf
	}
	return nil
}

func (p *Frames) Transport() thrift.TTransport { return p.frame }
