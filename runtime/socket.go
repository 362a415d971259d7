package runtime

import (
	"bufio"
	"context"
	"errors"
	"net"

	"github.com/apache/thrift/lib/go/thrift"
)

// bufferSize is the size of a socket's read and write buffers.
const bufferSize = 16 << 10

// sockTransport is a buffered thrift.TTransport over a net.Conn. It is used instead of
// thrift.TSocket because TSocket rewrites the socket deadline on every read and write,
// which would undo arm, and clears its conn on Close, which races with a call in flight.
type sockTransport struct {
	conn net.Conn
	r    *bufio.Reader
	w    *bufio.Writer
	// wrote is set when a write reaches conn; a pooled call clears it before it starts,
	// so that a call that failed without it set provably sent nothing.
	wrote bool
	// debt, set during a pooled call, is the reply its first write makes the node owe.
	debt *debt
}

func newSockTransport(conn net.Conn) *sockTransport {
	s := &sockTransport{conn: conn, r: bufio.NewReaderSize(conn, bufferSize)}
	s.w = bufio.NewWriterSize(sockWriter{s}, bufferSize)
	return s
}

// sockWriter is what a sockTransport's buffer writes to: its conn, noting the write.
type sockWriter struct{ s *sockTransport }

func (w sockWriter) Write(p []byte) (int, error) {
	if !w.s.wrote && w.s.debt != nil {
		w.s.debt.owe()
	}
	w.s.wrote = true
	return w.s.conn.Write(p)
}

func (s *sockTransport) Open() error  { return nil }
func (s *sockTransport) IsOpen() bool { return true }
func (s *sockTransport) Close() error { return s.conn.Close() }
func (s *sockTransport) RemainingBytes() uint64 {
	return ^uint64(0) // unknown: a stream
}

func (s *sockTransport) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	return n, wrapTransport(err)
}

func (s *sockTransport) ReadByte() (byte, error) {
	b, err := s.r.ReadByte()
	return b, wrapTransport(err)
}

func (s *sockTransport) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	return n, wrapTransport(err)
}

func (s *sockTransport) WriteByte(b byte) error { return wrapTransport(s.w.WriteByte(b)) }

func (s *sockTransport) WriteString(str string) (int, error) {
	n, err := s.w.WriteString(str)
	return n, wrapTransport(err)
}

func (s *sockTransport) Flush(context.Context) error { return wrapTransport(s.w.Flush()) }

// wrapTransport types a socket error as a thrift.TTransportException, as TSocket does, so
// the layers above (and Engine.Invoke) see one error type for every transport failure.
func wrapTransport(err error) error {
	if err == nil {
		return nil
	}
	var te thrift.TTransportException
	if errors.As(err, &te) {
		return err
	}
	return thrift.NewTTransportExceptionFromError(err)
}
