package runtime

import (
	"bytes"
	"context"
	"encoding/binary"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/clustron/zaris-go/internal/framing"
	"github.com/clustron/zaris-go/internal/thriftbuf"
)

// replyNamesSeeds are message headers, good and bad, one after another.
func replyNamesSeeds() [][]byte {
	get := thriftbuf.AppendMessageBegin(nil, "Get", thrift.REPLY, 1)
	long := thriftbuf.AppendMessageBegin(nil, string(bytes.Repeat([]byte("n"), 300)), thrift.REPLY, 2)
	return [][]byte{
		append(append(append([]byte{}, get...), get...), thriftbuf.AppendMessageBegin(nil, "Put", thrift.EXCEPTION, 3)...),
		append(append([]byte{}, get...), long...),
		thriftbuf.AppendMessageBegin(nil, string(bytes.Repeat([]byte("m"), 63)), thrift.REPLY, 4),
		thriftbuf.AppendMessageBegin(nil, string(bytes.Repeat([]byte("m"), 64)), thrift.REPLY, 4),
		thriftbuf.AppendMessageBegin(nil, "", thrift.REPLY, 5),
		thriftbuf.AppendMessageBegin(nil, string(bytes.Repeat([]byte("x"), 200)), thrift.REPLY, 6), // checkReplyNames' MaxMessageSize
		thriftbuf.AppendMessageBegin(nil, string(bytes.Repeat([]byte("x"), 201)), thrift.REPLY, 7),
		{0, 0, 0, 3, 'G', 'e', 't', 2, 0, 0, 0, 1},
		{0, 0, 0, 0, 2, 0, 0, 0, 1}, // a first word of 0: no version, and no name
		{0x80, 0x02, 0, 2, 0, 0, 0, 3, 'G', 'e', 't', 0, 0, 0, 1},
		{0x80, 0x01, 0, 2, 0xff, 0xff, 0xff, 0xff},
		{0x80, 0x01, 0, 2, 0x7f, 0xff, 0xff, 0xff},
		{0x80, 0x01, 0, 2, 0, 0, 0, 9, 'G', 'e', 't'},
		{0x80, 0x01, 0, 2, 0, 0, 1, 0, 'G'},
		get[:len(get)-2],
		{0x80},
	}
}

// checkReplyNames reads message headers from b with replyNames and with the binary
// protocol until one fails, and fails t unless both read the same headers, the same bytes,
// and fail alike (what a failed read returns besides its error is not compared: the
// reader fails its connection).
func checkReplyNames(t *testing.T, b []byte) {
	checkReplyNamesWithin(t, b, &thrift.TConfiguration{MaxMessageSize: 200, TBinaryStrictRead: thrift.BoolPtr(true)})
}

// checkReplyNamesWithin is checkReplyNames with the bounds of cfg.
func checkReplyNamesWithin(t *testing.T, b []byte, cfg *thrift.TConfiguration) {
	ctx := context.Background()
	ours, theirs := thrift.NewTMemoryBuffer(), thrift.NewTMemoryBuffer()
	ours.Write(b)
	theirs.Write(b)
	p, lib := newReplyNames(ours, cfg), thrift.NewTBinaryProtocolConf(theirs, cfg)
	if _, ok := p.(*replyNames); !ok {
		t.Fatalf("a strict configuration gives a %T", p)
	}
	for i := 0; ; i++ {
		name, typeID, seq, err := p.ReadMessageBegin(ctx)
		wName, wTypeID, wSeq, wErr := lib.ReadMessageBegin(ctx)
		if err == nil && (name != wName || typeID != wTypeID || seq != wSeq) || ours.Len() != theirs.Len() {
			t.Fatalf("header %d of %x: %q %d %d, %d bytes left; the binary protocol: %q %d %d, %d left",
				i, b, name, typeID, seq, ours.Len(), wName, wTypeID, wSeq, theirs.Len())
		}
		if (err == nil) != (wErr == nil) || err != nil && err.Error() != wErr.Error() {
			t.Fatalf("header %d of %x: %v; the binary protocol: %v", i, b, err, wErr)
		}
		if err != nil {
			return
		}
	}
}

// replyNames reads what the binary protocol reads and fails where it fails, with the same
// errors, and gives a reply the previous reply's name string when the bytes are the same.
func TestReplyNames_ReadsAsTheBinaryProtocol(t *testing.T) {
	for _, b := range replyNamesSeeds() {
		checkReplyNames(t, b)
	}
	buf := thrift.NewTMemoryBuffer()
	for _, name := range []string{"Get", string(bytes.Repeat([]byte("n"), len(replyNames{}.buf)))} {
		header := thriftbuf.AppendMessageBegin(nil, name, thrift.REPLY, 1)
		p := newReplyNames(buf, &thrift.TConfiguration{TBinaryStrictRead: thrift.BoolPtr(true)})
		allocs := testing.AllocsPerRun(100, func() {
			buf.Write(header)
			if _, _, _, err := p.ReadMessageBegin(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Fatalf("%v allocations per header of the same name of %d bytes", allocs, len(name))
		}
	}
	// A name longer than bytes.MinRead is read as the binary protocol reads it, into a
	// buffer that grows as the bytes arrive: whole, cut short, or cut within its first
	// bytes.MinRead.
	within := &thrift.TConfiguration{MaxMessageSize: 4096, TBinaryStrictRead: thrift.BoolPtr(true)}
	long := thriftbuf.AppendMessageBegin(nil, string(bytes.Repeat([]byte("l"), 3000)), thrift.REPLY, 8)
	for _, b := range [][]byte{long, long[:len(long)-1], long[:300]} {
		checkReplyNamesWithin(t, append(b[:len(b):len(b)], thriftbuf.AppendMessageBegin(nil, "Get", thrift.REPLY, 9)...), within)
		checkReplyNamesWithin(t, b, within)
	}
	lax := newReplyNames(buf, &thrift.TConfiguration{})
	if _, ok := lax.(*replyNames); ok {
		t.Fatal("a configuration that reads headers without a version gives a replyNames")
	}
}

// FuzzReplyNames holds replyNames to the binary protocol on any bytes.
func FuzzReplyNames(f *testing.F) {
	for _, b := range replyNamesSeeds() {
		f.Add(b)
	}
	f.Fuzz(checkReplyNames)
}

// BenchmarkReplyNames_ReadMessageBegin reads a Get reply's header, as the pipelined reader
// reads one, from a frame in memory.
func BenchmarkReplyNames_ReadMessageBegin(b *testing.B) {
	header := thriftbuf.AppendMessageBegin(nil, "Get", thrift.REPLY, 1)
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(header)))
	frame = append(frame, header...)
	cfg := &thrift.TConfiguration{TBinaryStrictRead: thrift.BoolPtr(true)}
	src := bytes.NewReader(frame)
	p := newReplyNames(framing.NewReader(src, cfg.GetMaxFrameSize()), cfg)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		src.Reset(frame)
		if _, _, _, err := p.ReadMessageBegin(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
