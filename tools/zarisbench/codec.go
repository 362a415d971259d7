package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zariscodec"
	"github.com/clustron/zaris-go/internal/thriftbuf"
)

// codecRow is one step of a Get's encoding and decoding in memory, through the Thrift
// library's generated code over the client's in-memory binary protocol (thriftbuf, the
// path framed binary connections took before the generated codec) and through the
// generated codec (gen/zariscodec), in the same run.
type codecRow struct {
	Step          string  `json:"step"`
	LibNs         float64 `json:"libNsPerOp"`
	LibAllocs     float64 `json:"libAllocsPerOp"`
	CodecNs       float64 `json:"codecNsPerOp"`
	CodecAllocs   float64 `json:"codecAllocsPerOp"`
	TimeRatio     float64 `json:"timeRatio"` // CodecNs / LibNs
	LibBytes      float64 `json:"libBytesPerOp"`
	CodecBytesOps float64 `json:"codecBytesPerOp"`
}

// The steps of codecRows, in order; codecTotal is their sum.
const (
	codecEncodeRequest = "client encodes the request"
	codecDecodeRequest = "node decodes the request"
	codecEncodeReply   = "node encodes the reply"
	codecDecodeReply   = "client decodes the reply"
	codecTotal         = "Get request and reply, all four"
	// codecCompactTotal is the four steps in the compact protocol, against the library's
	// compact protocol on a memory buffer.
	codecCompactTotal = "the same, compact protocol"
)

// codecRows measures each step of a Get (key "bench", a reply of a 100-byte value) both
// ways with testing.Benchmark, each step's messages whole (header and body), and adds the
// total.
func codecRows() ([]codecRow, error) {
	ctx := context.Background()
	cfg := &thrift.TConfiguration{MaxMessageSize: 16 << 20, MaxContainerSize: 1 << 20}
	args := &zaris.ZarisKvGetArgs{Req: &zaris.GetRequest{Key: []byte("bench")}}
	result := &zaris.ZarisKvGetResult{Success: &zaris.GetResponse{Status: zaris.KvStatus_Ok, Value: make([]byte, 100), Version: 7, MapEpoch: 3}}

	lib := thriftbuf.New(cfg)
	libMessage := func(typ thrift.TMessageType, s thrift.TStruct) ([]byte, error) {
		lib.ResetOutput()
		if err := lib.WriteMessageBegin(ctx, "Get", typ, 1); err != nil {
			return nil, err
		}
		if err := s.Write(ctx, lib); err != nil {
			return nil, err
		}
		return lib.Bytes(), lib.WriteMessageEnd(ctx)
	}
	request, err := libMessage(thrift.CALL, args)
	if err != nil {
		return nil, err
	}
	request = bytes.Clone(request)
	reply, err := libMessage(thrift.REPLY, result)
	if err != nil {
		return nil, err
	}
	reply = bytes.Clone(reply)
	genMessage := func(b []byte, typ thrift.TMessageType) []byte {
		return thriftbuf.AppendMessageBegin(b, "Get", typ, 1)
	}
	if got := zariscodec.AppendZarisKvGetArgs(genMessage(nil, thrift.CALL), args); !bytes.Equal(got, request) {
		return nil, fmt.Errorf("the generated request %x is not the library's %x", got, request)
	}
	if got := zariscodec.AppendZarisKvGetResult(genMessage(nil, thrift.REPLY), result); !bytes.Equal(got, reply) {
		return nil, fmt.Errorf("the generated reply %x is not the library's %x", got, reply)
	}

	var failed error
	fail := func(err error) {
		if err != nil && failed == nil {
			failed = err
		}
	}
	// A decode is of a message's body (after its header, which a connection's reader reads
	// the same way for either), copied first into a buffer that is reused, as a
	// connection's reader copies each frame.
	var r bytes.Reader
	libDecode := func(b *testing.B, msg []byte, s func() thrift.TStruct) {
		body := msg[messageHeader(msg):]
		for b.Loop() {
			lib.Reset(nil)
			r.Reset(body)
			fail(lib.Fill(&r, len(body)))
			fail(s().Read(ctx, lib))
		}
	}
	var in []byte
	genDecode := func(b *testing.B, msg []byte, decode func([]byte) error) {
		body := msg[messageHeader(msg):]
		for b.Loop() {
			in = append(in[:0], body...)
			fail(decode(in))
		}
	}
	var out []byte
	steps := []struct {
		name     string
		lib, gen func(b *testing.B)
	}{
		{codecEncodeRequest,
			func(b *testing.B) {
				for b.Loop() {
					_, err := libMessage(thrift.CALL, &zaris.ZarisKvGetArgs{Req: args.Req})
					fail(err)
				}
			},
			func(b *testing.B) {
				for b.Loop() {
					a := zaris.ZarisKvGetArgs{Req: args.Req}
					out = zariscodec.AppendZarisKvGetArgs(genMessage(out[:0], thrift.CALL), &a)
				}
			}},
		{codecDecodeRequest,
			func(b *testing.B) { libDecode(b, request, func() thrift.TStruct { return &zaris.ZarisKvGetArgs{} }) },
			func(b *testing.B) {
				genDecode(b, request, func(in []byte) error {
					var a zaris.ZarisKvGetArgs
					_, err := zariscodec.DecodeZarisKvGetArgs(in, &a, cfg)
					return err
				})
			}},
		{codecEncodeReply,
			func(b *testing.B) {
				for b.Loop() {
					_, err := libMessage(thrift.REPLY, &zaris.ZarisKvGetResult{Success: result.Success})
					fail(err)
				}
			},
			func(b *testing.B) {
				for b.Loop() {
					r := zaris.ZarisKvGetResult{Success: result.Success}
					out = zariscodec.AppendZarisKvGetResult(genMessage(out[:0], thrift.REPLY), &r)
				}
			}},
		{codecDecodeReply,
			func(b *testing.B) { libDecode(b, reply, func() thrift.TStruct { return &zaris.ZarisKvGetResult{} }) },
			func(b *testing.B) {
				genDecode(b, reply, func(in []byte) error {
					var r zaris.ZarisKvGetResult
					_, err := zariscodec.DecodeZarisKvGetResult(in, &r, cfg)
					return err
				})
			}},
	}
	var rows []codecRow
	total := codecRow{Step: codecTotal}
	for _, s := range steps {
		l, g := testing.Benchmark(withAllocs(s.lib)), testing.Benchmark(withAllocs(s.gen))
		row := codecRow{Step: s.name, LibNs: float64(l.NsPerOp()), LibAllocs: float64(l.AllocsPerOp()), LibBytes: float64(l.AllocedBytesPerOp()),
			CodecNs: float64(g.NsPerOp()), CodecAllocs: float64(g.AllocsPerOp()), CodecBytesOps: float64(g.AllocedBytesPerOp())}
		row.TimeRatio = ratio(row.CodecNs, row.LibNs)
		rows = append(rows, row)
		total.LibNs += row.LibNs
		total.LibAllocs += row.LibAllocs
		total.LibBytes += row.LibBytes
		total.CodecNs += row.CodecNs
		total.CodecAllocs += row.CodecAllocs
		total.CodecBytesOps += row.CodecBytesOps
	}
	total.TimeRatio = ratio(total.CodecNs, total.LibNs)
	compact, err := compactCodecRow(cfg, args, result)
	if failed == nil {
		failed = err
	}
	return append(rows, total, compact), failed
}

// compactCodecRow measures the four steps of a Get together in the compact protocol: the
// library's generated code over its compact protocol on a memory buffer, and the generated
// codec's compact functions, each decode of a message's body copied into a reused buffer.
func compactCodecRow(cfg *thrift.TConfiguration, args *zaris.ZarisKvGetArgs, result *zaris.ZarisKvGetResult) (codecRow, error) {
	ctx := context.Background()
	buf := thrift.NewTMemoryBufferLen(512)
	p := thrift.NewTCompactProtocolConf(buf, cfg)
	var failed error
	fail := func(err error) {
		if err != nil && failed == nil {
			failed = err
		}
	}
	message := func(typ thrift.TMessageType, s thrift.TStruct) []byte {
		buf.Reset()
		fail(p.WriteMessageBegin(ctx, "Get", typ, 1))
		fail(s.Write(ctx, p))
		fail(p.WriteMessageEnd(ctx))
		return buf.Bytes()
	}
	read := func(body []byte, s thrift.TStruct) {
		buf.Reset()
		buf.Write(body)
		fail(s.Read(ctx, p))
	}
	header := len(thriftbuf.AppendCompactMessageBegin(nil, "Get", thrift.CALL, 1))
	request, reply := bytes.Clone(message(thrift.CALL, args)), bytes.Clone(message(thrift.REPLY, result))
	var out, in []byte
	out = zariscodec.AppendCompactZarisKvGetArgs(thriftbuf.AppendCompactMessageBegin(out[:0], "Get", thrift.CALL, 1), args)
	if !bytes.Equal(out, request) {
		return codecRow{}, fmt.Errorf("the generated compact request %x is not the library's %x", out, request)
	}
	out = zariscodec.AppendCompactZarisKvGetResult(thriftbuf.AppendCompactMessageBegin(out[:0], "Get", thrift.REPLY, 1), result)
	if !bytes.Equal(out, reply) {
		return codecRow{}, fmt.Errorf("the generated compact reply %x is not the library's %x", out, reply)
	}
	lib := testing.Benchmark(withAllocs(func(b *testing.B) {
		for b.Loop() {
			message(thrift.CALL, &zaris.ZarisKvGetArgs{Req: args.Req})
			read(request[header:], &zaris.ZarisKvGetArgs{})
			message(thrift.REPLY, &zaris.ZarisKvGetResult{Success: result.Success})
			read(reply[header:], &zaris.ZarisKvGetResult{})
		}
	}))
	gen := testing.Benchmark(withAllocs(func(b *testing.B) {
		for b.Loop() {
			a := zaris.ZarisKvGetArgs{Req: args.Req}
			out = zariscodec.AppendCompactZarisKvGetArgs(thriftbuf.AppendCompactMessageBegin(out[:0], "Get", thrift.CALL, 1), &a)
			in = append(in[:0], request[header:]...)
			_, err := zariscodec.DecodeCompactZarisKvGetArgs(in, &a, cfg)
			fail(err)
			r := zaris.ZarisKvGetResult{Success: result.Success}
			out = zariscodec.AppendCompactZarisKvGetResult(thriftbuf.AppendCompactMessageBegin(out[:0], "Get", thrift.REPLY, 1), &r)
			in = append(in[:0], reply[header:]...)
			_, err = zariscodec.DecodeCompactZarisKvGetResult(in, &r, cfg)
			fail(err)
		}
	}))
	row := codecRow{Step: codecCompactTotal, LibNs: float64(lib.NsPerOp()), LibAllocs: float64(lib.AllocsPerOp()), LibBytes: float64(lib.AllocedBytesPerOp()),
		CodecNs: float64(gen.NsPerOp()), CodecAllocs: float64(gen.AllocsPerOp()), CodecBytesOps: float64(gen.AllocedBytesPerOp())}
	row.TimeRatio = ratio(row.CodecNs, row.LibNs)
	return row, failed
}

// messageHeader is the length of the strict binary message header at the start of b.
func messageHeader(b []byte) int { return 4 + 4 + int(binary.BigEndian.Uint32(b[4:])) + 4 }

func withAllocs(f func(*testing.B)) func(*testing.B) {
	return func(b *testing.B) {
		b.ReportAllocs()
		f(b)
	}
}

// codecTargets are the codec's budgets: the whole Get at most 0.4 of the library's time, and
// at most one allocation per decoded reply.
func codecTargets(rows []codecRow) []target {
	var ts []target
	for _, r := range rows {
		switch r.Step {
		case codecTotal:
			ts = append(ts, target{Name: "generated codec over the library, a Get's request and reply", Want: "<= 0.4x time",
				Got: fmt.Sprintf("%.2f (%.0f ns vs %.0f ns)", r.TimeRatio, r.CodecNs, r.LibNs), Holds: r.TimeRatio <= 0.4})
		case codecDecodeReply:
			ts = append(ts, target{Name: "generated codec: allocations per decoded Get reply", Want: "<= 1",
				Got: fmt.Sprintf("%.0f (the library %.0f)", r.CodecAllocs, r.LibAllocs), Holds: r.CodecAllocs <= 1})
		}
	}
	return ts
}
