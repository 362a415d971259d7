package runtime

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/apache/thrift/lib/go/thrift"
)

// replyNames is the strict binary protocol a pipelined framed binary connection reads its
// replies with, over trans. Its ReadMessageBegin returns the previous reply's name string
// when the reply's name is the same bytes, where the binary protocol makes a new string per
// reply, and reads the header's words straight from trans; what it reads and its errors are
// the binary protocol's under a context without a deadline, as the reader's is
// (TestReplyNames_ReadsAsTheBinaryProtocol). The rest is the binary protocol.
type replyNames struct {
	*thrift.TBinaryProtocol
	trans io.Reader
	cfg   *thrift.TConfiguration
	name  string   // the last name read
	buf   [64]byte // a name read
}

// newReplyNames returns the binary protocol over trans for cfg: a replyNames when cfg reads
// strictly (the client's always does), else the binary protocol itself.
// protocolWords is an error in the binary protocol's own words, capital letter included: a
// reply's header is read as the library reads it, errors included.
type protocolWords string

func (w protocolWords) Error() string { return string(w) }

// errMissingVersion and errBadVersion are the binary protocol's errors for a message header
// without a version and with another one.
const (
	errMissingVersion protocolWords = "Missing version in ReadMessageBegin"
	errBadVersion     protocolWords = "Bad version in ReadMessageBegin"
)

func newReplyNames(trans thrift.TTransport, cfg *thrift.TConfiguration) thrift.TProtocol {
	p := thrift.NewTBinaryProtocolConf(trans, cfg)
	if !cfg.GetTBinaryStrictRead() {
		return p
	}
	return &replyNames{TBinaryProtocol: p, trans: trans, cfg: cfg}
}

func (p *replyNames) ReadMessageBegin(context.Context) (name string, typeID thrift.TMessageType, seqID int32, err error) {
	size, e := p.readI32()
	if e != nil {
		return "", typeID, 0, thrift.NewTProtocolException(e)
	}
	if size >= 0 {
		return name, typeID, seqID, thrift.NewTProtocolExceptionWithType(thrift.BAD_VERSION, errMissingVersion)
	}
	typeID = thrift.TMessageType(size & 0x0ff)
	if int64(size)&thrift.VERSION_MASK != thrift.VERSION_1 {
		return name, typeID, seqID, thrift.NewTProtocolExceptionWithType(thrift.BAD_VERSION, errBadVersion)
	}
	if name, e = p.readName(); e != nil {
		return name, typeID, seqID, thrift.NewTProtocolException(e)
	}
	if seqID, e = p.readI32(); e != nil {
		return name, typeID, seqID, thrift.NewTProtocolException(e)
	}
	return name, typeID, seqID, nil
}

// readName is the binary protocol's ReadString, giving back p.name for the same bytes.
func (p *replyNames) readName() (string, error) {
	size, e := p.readI32()
	if e != nil {
		return "", e
	}
	switch {
	case size < 0:
		return "", thrift.NewTProtocolExceptionWithType(thrift.NEGATIVE_SIZE, fmt.Errorf("negative size: %d", size))
	case size > p.cfg.GetMaxMessageSize():
		return "", thrift.NewTProtocolExceptionWithType(thrift.SIZE_LIMIT, fmt.Errorf("size exceeded max allowed: %d", size))
	case size == 0:
		return "", nil
	case int(size) > len(p.buf):
		b, e := readLong(p.trans, int(size))
		return string(b), thrift.NewTProtocolException(e)
	}
	b := p.buf[:size]
	n, e := io.ReadFull(p.trans, b)
	if e != nil {
		return string(b[:n]), thrift.NewTProtocolException(e)
	}
	if string(b) != p.name {
		p.name = string(b)
	}
	return p.name, nil
}

// readI32 is the binary protocol's ReadI32 under a context without a deadline (the
// reader's), read straight from the transport: the same bytes, the same errors. (Under a
// deadline, ReadI32 retries a read that timed out with nothing read.)
func (p *replyNames) readI32() (int32, error) {
	b := p.buf[:4]
	if _, err := io.ReadFull(p.trans, b); err != nil {
		return 0, thrift.NewTProtocolException(err)
	}
	return int32(binary.BigEndian.Uint32(b)), nil
}

// readLong reads size bytes of r as the binary protocol reads a long string: into a buffer
// that grows as the bytes arrive, not by the size the peer claims. It returns what it read.
func readLong(r io.Reader, size int) ([]byte, error) {
	if size <= bytes.MinRead {
		b := make([]byte, size)
		n, err := io.ReadFull(r, b)
		return b[:n], err
	}
	b := make([]byte, 0, bytes.MinRead)
	for len(b) < size {
		if len(b) == cap(b) {
			b = append(make([]byte, 0, min(cap(b)*2, size)), b...)
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			return b, err
		}
	}
	return b, nil
}
