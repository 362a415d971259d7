package store

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// fuzzNodeAddr starts a cluster for a fuzz target, its nodes serving protocol, and returns
// the data address of one node.
func fuzzNodeAddr(f *testing.F, protocol Protocol) string {
	cfg := fastCluster()
	cfg.Node.Protocol = protocol
	// A backstop only: the fuzz connection half-closes after its bytes, so the node sees
	// the end of its input at once.
	cfg.Node.IdleTimeout = 2 * time.Second
	c := StartCluster(f, cfg)
	return c.Seeds()[0]
}

// sendBytes writes data to a new connection to addr, half-closes it and requires the node to
// close it (without answering, or after answering what was a valid request).
func sendBytes(t *testing.T, addr string, data []byte) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("the node refuses connections: %v", err)
	}
	defer conn.Close()
	_, _ = conn.Write(data) // the node may close before it read everything
	_ = conn.(*net.TCPConn).CloseWrite()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = io.Copy(io.Discard, conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the node did not close the connection: %v", err)
	}
}

// FuzzNodeHeaderPort sends arbitrary bytes to a node's data port in its default protocol
// set (THeader, framed and unframed binary and compact on one port). The node must not
// crash, must close that connection, and must go on serving other clients. Seeds:
// testdata/fuzz/FuzzNodeHeaderPort. Fuzz for longer with
//
//	go -C tools test -run '^$' -fuzz '^FuzzNodeHeaderPort$' -fuzztime 30s ./store
func FuzzNodeHeaderPort(f *testing.F) {
	f.Add(binary.BigEndian.AppendUint32(nil, 64<<20))
	for _, kind := range []string{"binary", "compact", "framed binary", "framed compact", "header"} {
		f.Add(firstMessage(f, kind)) // each format the port tells apart
	}
	addr := fuzzNodeAddr(f, ProtocolHeader)
	f.Fuzz(func(t *testing.T, data []byte) {
		sendBytes(t, addr, data)
		if _, err := mustDial(t, addr).GetClusterMap(bg); err != nil {
			t.Fatalf("the node stopped serving: %v", err)
		}
	})
}

// FuzzNodeJSONPort is FuzzNodeHeaderPort for a node serving the JSON protocol, framed or
// not. Fuzz for longer with
//
//	go -C tools test -run '^$' -fuzz '^FuzzNodeJSONPort$' -fuzztime 30s ./store
func FuzzNodeJSONPort(f *testing.F) {
	f.Add([]byte(`[1,"GetClusterMap",1,0,{}]`))
	addr := fuzzNodeAddr(f, ProtocolJSON)
	f.Fuzz(func(t *testing.T, data []byte) {
		sendBytes(t, addr, data)
		good := dialKind(t, addr, clientKind{protocol: "json", framed: true})
		if _, err := good.GetClusterMap(bg); err != nil {
			t.Fatalf("the node stopped serving: %v", err)
		}
	})
}
