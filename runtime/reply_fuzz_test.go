package runtime_test

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisclient"
	"github.com/clustron/zaris-go/runtime"
)

// replyNode is a fake node: it answers GetClusterMap with a map naming itself as the owner
// of every segment, and every other request with the bytes set by answer (prefixed with
// their length when framed), written straight to the socket. It closes every connection
// after one reply, so that the closing side (which keeps the port in TIME_WAIT) is the
// node's listening port, not one of the client's ephemeral ports: a fuzz run makes tens of
// thousands of connections.
type replyNode struct {
	ln      net.Listener
	wg      sync.WaitGroup
	mapResp *zaris.ClusterMap

	mu     sync.Mutex // protects proto, reply and framed
	proto  runtime.Protocol
	reply  []byte
	framed bool
}

func startReplyNode(tb testing.TB) *replyNode {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := ln.Addr().(*net.TCPAddr)
	owner := int32(1)
	n := &replyNode{ln: ln, mapResp: &zaris.ClusterMap{
		Epoch: 1, SegmentCount: 1,
		Nodes:    []*zaris.NodeInfo{{ID: 1, Host: "127.0.0.1", Port: int32(addr.Port)}},
		Segments: []*zaris.SegmentInfo{{ID: 0, Owner: &owner, Replicas: []int32{1}}},
	}}
	n.wg.Add(1)
	go n.accept()
	tb.Cleanup(n.close)
	return n
}

// answer sets the protocol the node speaks and the reply to every data request.
func (n *replyNode) answer(proto runtime.Protocol, reply []byte, framed bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.proto, n.reply, n.framed = proto, reply, framed
}

func (n *replyNode) close() {
	n.ln.Close()
	n.wg.Wait()
}

func (n *replyNode) accept() {
	defer n.wg.Done()
	for {
		c, err := n.ln.Accept()
		if err != nil {
			return
		}
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			defer c.Close()
			n.serve(c)
		}()
	}
}

func (n *replyNode) serve(c net.Conn) {
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	ctx := context.Background()
	n.mu.Lock()
	proto, reply, framed := n.proto, n.reply, n.framed
	n.mu.Unlock()
	cfg := &thrift.TConfiguration{}
	var trans thrift.TTransport = thrift.NewTBufferedTransport(thrift.NewTSocketFromConnConf(c, cfg), 4096)
	if framed {
		trans = thrift.NewTFramedTransportConf(thrift.NewTSocketFromConnConf(c, cfg), cfg)
	}
	var p thrift.TProtocol
	if proto == runtime.ProtocolCompact {
		p = thrift.NewTCompactProtocolConf(trans, cfg)
	} else {
		p = thrift.NewTBinaryProtocolConf(trans, cfg)
	}
	name, _, seq, err := p.ReadMessageBegin(ctx)
	if err != nil {
		return
	}
	if p.Skip(ctx, thrift.STRUCT) != nil || p.ReadMessageEnd(ctx) != nil {
		return
	}
	if name != "GetClusterMap" {
		out := reply
		if framed {
			out = binary.BigEndian.AppendUint32(nil, uint32(len(reply)))
			out = append(out, reply...)
		}
		_, _ = c.Write(out)
		return
	}
	res := zaris.NewZarisKvGetClusterMapResult()
	res.Success = n.mapResp
	_ = p.WriteMessageBegin(ctx, name, thrift.REPLY, seq)
	_ = res.Write(ctx, p)
	_ = p.WriteMessageEnd(ctx)
	_ = p.Flush(ctx)
}

// FuzzMalformedReply has a fake node answer a Get with arbitrary bytes, in the binary or the
// compact protocol, to a client on the framed or the buffered transport, on a pooled
// connection and on a pipelined one. The client must never panic: the call either gets a
// response (the bytes were a valid reply) or fails with a *runtime.CallError whose cause is a
// transport failure (runtime.ErrTransport), an attempt timeout, a reply without a response
// (runtime.ErrNoResponse), the node's application exception, or a status the client does
// not know (a *runtime.StatusError, never retried). Fuzz for longer with
//
//	go test -run '^$' -fuzz '^FuzzMalformedReply$' -fuzztime 30s ./runtime
func FuzzMalformedReply(f *testing.F) {
	f.Add(false, true, []byte{0x80, 0x01, 0x00, 0x02, 0, 0, 0, 3, 'G', 'e', 't', 0, 0, 0, 1, 0})
	node := startReplyNode(f)
	f.Fuzz(func(t *testing.T, compact, framed bool, reply []byte) {
		proto := runtime.ProtocolBinary
		if compact {
			proto = runtime.ProtocolCompact
		}
		node.answer(proto, reply, framed)
		for _, pipelined := range []bool{false, true} {
			checkMalformedReply(t, node, proto, framed, pipelined)
		}
	})
}

// checkMalformedReply makes one Get to node, on a pooled connection or a pipelined one, and
// fails t unless it got a response or a typed error.
func checkMalformedReply(t *testing.T, node *replyNode, proto runtime.Protocol, framed, pipelined bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	transport := runtime.TransportFramed
	if !framed {
		transport = runtime.TransportBuffered
	}
	kv, err := zarisclient.Dial(ctx, runtime.WithSeeds(node.ln.Addr().String()), runtime.WithProtocol(proto),
		runtime.WithTransport(transport), runtime.WithRetriesDisabled(), runtime.WithAttemptTimeout(2*time.Second),
		runtime.WithPipelining(pipelined), runtime.PipelineEveryCall())
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer kv.Close()
	resp, err := kv.Get(ctx, &zaris.GetRequest{Key: []byte("k")})
	if err == nil {
		if resp == nil {
			t.Fatal("no error and no response")
		}
		return
	}
	var ce *runtime.CallError
	if !errors.As(err, &ce) {
		t.Fatalf("pipelined %v: %T is not a *runtime.CallError: %v", pipelined, err, err)
	}
	var (
		appErr    thrift.TApplicationException
		statusErr *runtime.StatusError
	)
	switch {
	case errors.Is(err, runtime.ErrTransport), errors.Is(err, runtime.ErrAttemptTimeout),
		errors.Is(err, runtime.ErrNoResponse), errors.As(err, &appErr), errors.As(err, &statusErr):
	default:
		t.Fatalf("pipelined %v: the error is not typed: %v", pipelined, err)
	}
}
