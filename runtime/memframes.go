package runtime

import (
	"context"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/clustron/zaris-go/runtime/thriftbuf"
)

// memFrames is the binary protocol of a framed connection that encodes each request and
// decodes each reply's body in memory (thriftbuf). Once a reply begins the framed
// transport holds the whole frame; memFrames takes the rest of it at once and the
// generated code decodes it from that buffer; a request is encoded into a buffer handed to
// the transport in one write. The bytes are the binary protocol's, read with its bounds
// (TestMemFrames_DecodesAsTheBinaryProtocol, FuzzMemFrames,
// TestMemFrames_EncodesAsTheBinaryProtocol). A frame whose size the transport does not
// know is read through the connection's protocol.
type memFrames struct {
	thrift.TProtocol                   // what the message goes through: conn, or buf within a body
	conn             thrift.TProtocol  // the connection's binary protocol
	frame            thrift.TTransport // the framed transport under conn
	max              uint64            // the largest reply body taken into memory
	buf              *thriftbuf.Protocol
}

// newMemFrames wraps p, a binary protocol over a framed transport, as memFrames; cfg is
// the connection's configuration.
func newMemFrames(p thrift.TProtocol, cfg *thrift.TConfiguration) *memFrames {
	return &memFrames{TProtocol: p, conn: p, frame: p.Transport(), max: uint64(cfg.GetMaxMessageSize()), buf: thriftbuf.New(cfg)}
}

func (p *memFrames) ReadMessageBegin(ctx context.Context) (string, thrift.TMessageType, int32, error) {
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

func (p *memFrames) ReadMessageEnd(ctx context.Context) error {
	err := p.TProtocol.ReadMessageEnd(ctx)
	p.TProtocol = p.conn
	return err
}

// WriteMessageBegin starts a request in memory, whatever became of the last reply.
func (p *memFrames) WriteMessageBegin(ctx context.Context, name string, typeID thrift.TMessageType, seqID int32) error {
	p.buf.ResetOutput()
	p.TProtocol = p.buf
	return p.buf.WriteMessageBegin(ctx, name, typeID, seqID)
}

// WriteMessageEnd hands the request to the framed transport; Flush sends it.
func (p *memFrames) WriteMessageEnd(ctx context.Context) error {
	if p.TProtocol != thrift.TProtocol(p.buf) {
		return p.TProtocol.WriteMessageEnd(ctx)
	}
	p.TProtocol = p.conn
	if _, err := p.frame.Write(p.buf.Bytes()); err != nil {
		return thrift.NewTTransportExceptionFromError(err)
	}
	return nil
}

func (p *memFrames) Flush(ctx context.Context) error { return p.conn.Flush(ctx) }

func (p *memFrames) Transport() thrift.TTransport { return p.frame }
