package runtime

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"github.com/apache/thrift/lib/go/thrift"
)

// memReads is the binary protocol of a framed connection that decodes each reply's body
// from memory. Once a message begins the framed transport holds the whole frame; memReads
// takes the rest of it at once and decodes the generated code's reads from that buffer
// directly, instead of crossing the protocol's and the transport's layers for each field
// (several calls, an io.ReadFull and an error wrap per field), which is most of the
// client's time for a batch's many items. It decodes what the binary protocol decodes,
// with the same bounds (TestMemReads_DecodesAsTheBinaryProtocol, FuzzMemReads). Requests,
// and a frame whose size the transport does not know, go through the connection's
// protocol unchanged.
type memReads struct {
	// TProtocol is what the methods not declared here go through: conn, or within a body
	// bodyProto (its reads take the same bytes as the methods here).
	thrift.TProtocol
	conn      thrift.TProtocol  // the connection's binary protocol
	frame     thrift.TTransport // the framed transport under conn
	cfg       *thrift.TConfiguration
	body      bodyBuffer // the rest of the message being read, when inBody
	bodyProto *thrift.TBinaryProtocol
	inBody    bool
}

// newMemReads wraps p, a binary protocol over a framed transport, as memReads; cfg is the
// connection's configuration.
func newMemReads(p thrift.TProtocol, cfg *thrift.TConfiguration) *memReads {
	r := &memReads{TProtocol: p, conn: p, frame: p.Transport(), cfg: cfg}
	r.bodyProto = thrift.NewTBinaryProtocolConf(&r.body, cfg)
	return r
}

// maxKeptBody is the largest body buffer a connection keeps for the next reply.
const maxKeptBody = 1 << 20

func (p *memReads) ReadMessageBegin(ctx context.Context) (string, thrift.TMessageType, int32, error) {
	p.TProtocol, p.inBody = p.conn, false
	name, typeID, seqID, err := p.conn.ReadMessageBegin(ctx)
	if err != nil {
		return name, typeID, seqID, err
	}
	n := p.frame.RemainingBytes()
	if n == 0 || n == thrift.UnknownRemainingBytes || n > uint64(p.cfg.GetMaxMessageSize()) {
		return name, typeID, seqID, nil
	}
	if p.body.Cap() > maxKeptBody {
		p.body.Buffer = bytes.Buffer{}
	}
	p.body.Reset()
	p.body.Grow(int(n))
	buf := p.body.AvailableBuffer()[:n]
	if _, err := io.ReadFull(p.frame, buf); err != nil {
		return name, typeID, seqID, thrift.NewTTransportExceptionFromError(err)
	}
	p.body.Write(buf)
	p.TProtocol, p.inBody = p.bodyProto, true
	return name, typeID, seqID, nil
}

func (p *memReads) ReadMessageEnd(ctx context.Context) error {
	if !p.inBody {
		return p.conn.ReadMessageEnd(ctx)
	}
	p.TProtocol, p.inBody = p.conn, false
	return nil
}

// WriteMessageBegin starts a request on the connection, whatever became of the last reply.
func (p *memReads) WriteMessageBegin(ctx context.Context, name string, typeID thrift.TMessageType, seqID int32) error {
	p.TProtocol, p.inBody = p.conn, false
	return p.conn.WriteMessageBegin(ctx, name, typeID, seqID)
}

func (p *memReads) Flush(ctx context.Context) error { return p.conn.Flush(ctx) }

func (p *memReads) Transport() thrift.TTransport { return p.frame }

// next returns the body's next k bytes, or an error when fewer are left.
func (p *memReads) next(k int) ([]byte, error) {
	if k < 0 || p.body.Len() < k {
		p.body.Reset()
		return nil, thrift.NewTProtocolException(io.ErrUnexpectedEOF)
	}
	return p.body.Next(k), nil
}

func (p *memReads) ReadStructBegin(ctx context.Context) (string, error) {
	if !p.inBody {
		return p.conn.ReadStructBegin(ctx)
	}
	return "", nil
}

func (p *memReads) ReadStructEnd(ctx context.Context) error {
	if !p.inBody {
		return p.conn.ReadStructEnd(ctx)
	}
	return nil
}

func (p *memReads) ReadFieldBegin(ctx context.Context) (string, thrift.TType, int16, error) {
	if !p.inBody {
		return p.conn.ReadFieldBegin(ctx)
	}
	t, err := p.body.ReadByte()
	if err != nil {
		return "", 0, 0, thrift.NewTProtocolException(err)
	}
	if thrift.TType(t) == thrift.STOP {
		return "", thrift.STOP, 0, nil
	}
	id, err := p.ReadI16(ctx)
	return "", thrift.TType(t), id, err
}

func (p *memReads) ReadFieldEnd(ctx context.Context) error {
	if !p.inBody {
		return p.conn.ReadFieldEnd(ctx)
	}
	return nil
}

func (p *memReads) ReadMapBegin(ctx context.Context) (thrift.TType, thrift.TType, int, error) {
	if !p.inBody {
		return p.conn.ReadMapBegin(ctx)
	}
	b, err := p.next(6)
	if err != nil {
		return 0, 0, 0, err
	}
	k, v := thrift.TType(b[0]), thrift.TType(b[1])
	size, err := p.containerSize(int32(binary.BigEndian.Uint32(b[2:])), minSize(k)+minSize(v))
	return k, v, size, err
}

func (p *memReads) ReadMapEnd(ctx context.Context) error {
	if !p.inBody {
		return p.conn.ReadMapEnd(ctx)
	}
	return nil
}

func (p *memReads) ReadListBegin(ctx context.Context) (thrift.TType, int, error) {
	if !p.inBody {
		return p.conn.ReadListBegin(ctx)
	}
	return p.elems()
}

func (p *memReads) ReadListEnd(ctx context.Context) error {
	if !p.inBody {
		return p.conn.ReadListEnd(ctx)
	}
	return nil
}

func (p *memReads) ReadSetBegin(ctx context.Context) (thrift.TType, int, error) {
	if !p.inBody {
		return p.conn.ReadSetBegin(ctx)
	}
	return p.elems()
}

func (p *memReads) ReadSetEnd(ctx context.Context) error {
	if !p.inBody {
		return p.conn.ReadSetEnd(ctx)
	}
	return nil
}

// elems reads a list's or a set's element type and size.
func (p *memReads) elems() (thrift.TType, int, error) {
	b, err := p.next(5)
	if err != nil {
		return 0, 0, err
	}
	t := thrift.TType(b[0])
	size, err := p.containerSize(int32(binary.BigEndian.Uint32(b[1:])), minSize(t))
	return t, size, err
}

// containerSize checks a container's size as the binary protocol does: not negative,
// within the configuration's limit, and not more elements of at least elem bytes each
// than the body has bytes left.
func (p *memReads) containerSize(size int32, elem int) (int, error) {
	switch {
	case size < 0:
		return 0, thrift.NewTProtocolExceptionWithType(thrift.NEGATIVE_SIZE, fmt.Errorf("negative size: %d", size))
	case size > p.cfg.GetMaxContainerSize():
		return 0, thrift.NewTProtocolExceptionWithType(thrift.SIZE_LIMIT,
			fmt.Errorf("container of %d elements exceeds the limit of %d", size, p.cfg.GetMaxContainerSize()))
	case int64(size)*int64(elem) > int64(p.body.Len()):
		return 0, thrift.NewTProtocolExceptionWithType(thrift.SIZE_LIMIT,
			fmt.Errorf("container of %d elements exceeds the %d bytes left", size, p.body.Len()))
	}
	return int(size), nil
}

// minSize is the fewest bytes the binary protocol encodes a value of type t in.
func minSize(t thrift.TType) int {
	switch t {
	case thrift.I16:
		return 2
	case thrift.I32, thrift.STRING, thrift.MAP:
		return 4
	case thrift.I64, thrift.DOUBLE:
		return 8
	case thrift.LIST, thrift.SET:
		return 5
	case thrift.UUID:
		return 16
	}
	return 1 // bool, byte, struct (its stop byte)
}

func (p *memReads) ReadBool(ctx context.Context) (bool, error) {
	if !p.inBody {
		return p.conn.ReadBool(ctx)
	}
	b, err := p.next(1)
	if err != nil {
		return false, err
	}
	return b[0] == 1, nil
}

func (p *memReads) ReadI16(ctx context.Context) (int16, error) {
	if !p.inBody {
		return p.conn.ReadI16(ctx)
	}
	b, err := p.next(2)
	if err != nil {
		return 0, err
	}
	return int16(binary.BigEndian.Uint16(b)), nil
}

func (p *memReads) ReadI32(ctx context.Context) (int32, error) {
	if !p.inBody {
		return p.conn.ReadI32(ctx)
	}
	b, err := p.next(4)
	if err != nil {
		return 0, err
	}
	return int32(binary.BigEndian.Uint32(b)), nil
}

func (p *memReads) ReadI64(ctx context.Context) (int64, error) {
	if !p.inBody {
		return p.conn.ReadI64(ctx)
	}
	b, err := p.next(8)
	if err != nil {
		return 0, err
	}
	return int64(binary.BigEndian.Uint64(b)), nil
}

func (p *memReads) ReadDouble(ctx context.Context) (float64, error) {
	if !p.inBody {
		return p.conn.ReadDouble(ctx)
	}
	b, err := p.next(8)
	if err != nil {
		return 0, err
	}
	return math.Float64frombits(binary.BigEndian.Uint64(b)), nil
}

// sized reads a string's or a binary's length and returns its bytes, still in the body.
func (p *memReads) sized(ctx context.Context) ([]byte, error) {
	size, err := p.ReadI32(ctx)
	if err != nil {
		return nil, err
	}
	switch {
	case size < 0:
		return nil, thrift.NewTProtocolExceptionWithType(thrift.NEGATIVE_SIZE, fmt.Errorf("negative size: %d", size))
	case size > p.cfg.GetMaxMessageSize():
		return nil, thrift.NewTProtocolExceptionWithType(thrift.SIZE_LIMIT, fmt.Errorf("size exceeded max allowed: %d", size))
	}
	return p.next(int(size))
}

func (p *memReads) ReadString(ctx context.Context) (string, error) {
	if !p.inBody {
		return p.conn.ReadString(ctx)
	}
	b, err := p.sized(ctx)
	return string(b), err
}

func (p *memReads) ReadBinary(ctx context.Context) ([]byte, error) {
	if !p.inBody {
		return p.conn.ReadBinary(ctx)
	}
	b, err := p.sized(ctx)
	if err != nil {
		return nil, err
	}
	return append([]byte{}, b...), nil // a copy: the buffer holds the next reply later
}

func (p *memReads) ReadUUID(ctx context.Context) (thrift.Tuuid, error) {
	if !p.inBody {
		return p.conn.ReadUUID(ctx)
	}
	var u thrift.Tuuid
	b, err := p.next(16)
	if err == nil {
		copy(u[:], b)
	}
	return u, err
}

func (p *memReads) Skip(ctx context.Context, t thrift.TType) error {
	if !p.inBody {
		return p.conn.Skip(ctx, t)
	}
	return thrift.SkipDefaultDepth(ctx, p, t)
}

// bodyBuffer is a Thrift transport over a buffer holding one message body.
type bodyBuffer struct{ bytes.Buffer }

func (b *bodyBuffer) IsOpen() bool                { return true }
func (b *bodyBuffer) Open() error                 { return nil }
func (b *bodyBuffer) Close() error                { return nil }
func (b *bodyBuffer) Flush(context.Context) error { return nil }
func (b *bodyBuffer) RemainingBytes() uint64      { return uint64(b.Len()) }
