package store

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"errors"
	"io"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
)

// clientKind is one protocol/transport combination a Zaris client may speak.
type clientKind struct {
	name      string
	protocol  string // binary, compact, json, header-binary, header-compact
	framed    bool
	tlsConfig *tls.Config
}

// dialKind connects to addr the way kind says and returns a generated client on it.
func dialKind(t testing.TB, addr string, kind clientKind) *zaris.ZarisKvClient {
	t.Helper()
	cfg := &thrift.TConfiguration{
		ConnectTimeout: time.Second, SocketTimeout: 5 * time.Second, TLSConfig: kind.tlsConfig,
	}
	var sock thrift.TTransport
	if kind.tlsConfig != nil {
		sock = thrift.NewTSSLSocketConf(addr, cfg)
	} else {
		sock = thrift.NewTSocketConf(addr, cfg)
	}
	require.NoError(t, sock.Open())
	t.Cleanup(func() { sock.Close() })
	var trans thrift.TTransport = thrift.NewTBufferedTransport(sock, 4096)
	if kind.framed {
		trans = thrift.NewTFramedTransportConf(sock, cfg)
	}
	var proto thrift.TProtocol
	switch kind.protocol {
	case "binary":
		proto = thrift.NewTBinaryProtocolConf(trans, cfg)
	case "compact":
		proto = thrift.NewTCompactProtocolConf(trans, cfg)
	case "json":
		proto = thrift.NewTJSONProtocol(trans)
	case "header-binary", "header-compact":
		cfg.THeaderProtocolID = thrift.THeaderProtocolIDPtrMust(thrift.THeaderProtocolBinary)
		if kind.protocol == "header-compact" {
			cfg.THeaderProtocolID = thrift.THeaderProtocolIDPtrMust(thrift.THeaderProtocolCompact)
		}
		proto = thrift.NewTHeaderProtocolConf(thrift.NewTHeaderTransportConf(sock, cfg), cfg)
	default:
		t.Fatalf("unknown protocol %q", kind.protocol)
	}
	return zaris.NewZarisKvClient(thrift.NewTStandardClient(proto, proto))
}

// roundTrip puts and reads back a key of segment 0 at its owner through client.
func roundTrip(t *testing.T, cl *zaris.ZarisKvClient, key []byte) {
	put, err := cl.Put(bg, &zaris.PutRequest{Key: key, Value: []byte("value")})
	require.NoError(t, err)
	assert.Equal(t, zaris.KvStatus_Ok, put.Status)
	get, err := cl.Get(bg, &zaris.GetRequest{Key: key})
	require.NoError(t, err)
	assert.Equal(t, zaris.KvStatus_Ok, get.Status)
	assert.Equal(t, []byte("value"), get.Value)
	m, err := cl.GetClusterMap(bg)
	require.NoError(t, err)
	assert.EqualValues(t, 16, m.SegmentCount)
	// The multi-key calls, between single-key ones on the same connection.
	mput, err := cl.MultiPut(bg, &zaris.MultiPutRequest{Items: []*zaris.PutItem{{Key: key, Value: []byte("v2")}, {Key: []byte{}}}})
	require.NoError(t, err)
	require.Len(t, mput.Results, 2)
	assert.Equal(t, zaris.KvStatus_Ok, mput.Results[0].Status)
	assert.Equal(t, zaris.KvStatus_InvalidRequest, mput.Results[1].Status)
	mget, err := cl.MultiGet(bg, &zaris.MultiGetRequest{Items: []*zaris.GetItem{{Key: key}, {Key: key}}})
	require.NoError(t, err)
	require.Len(t, mget.Results, 2)
	assert.Equal(t, []byte("v2"), mget.Results[1].Value)
	mdel, err := cl.MultiDelete(bg, &zaris.MultiDeleteRequest{Items: []*zaris.DeleteItem{{Key: key}}})
	require.NoError(t, err)
	assert.Equal(t, zaris.KvStatus_Ok, mdel.Results[0].Status)
	get, err = cl.Get(bg, &zaris.GetRequest{Key: key})
	require.NoError(t, err)
	assert.Equal(t, zaris.KvStatus_NotFound, get.Status)
}

func TestNode_ServesHeaderBinaryAndCompactClientsOnOnePort(t *testing.T) {
	c := StartCluster(t, fastCluster())
	owner, _, _ := roles(c, 0)
	for _, kind := range []clientKind{
		{name: "header with binary", protocol: "header-binary"},
		{name: "header with compact", protocol: "header-compact"},
		{name: "framed binary", protocol: "binary", framed: true},
		{name: "unframed binary", protocol: "binary"},
		{name: "framed compact", protocol: "compact", framed: true},
		{name: "unframed compact", protocol: "compact"},
	} {
		t.Run(kind.name, func(t *testing.T) {
			roundTrip(t, dialKind(t, c.Addr(owner), kind), keyIn(0, 16, kind.name))
		})
	}
}

func TestNode_ServesJSONClientsWhenConfiguredForJSON(t *testing.T) {
	cfg := fastCluster()
	cfg.Node.Protocol = ProtocolJSON
	c := StartCluster(t, cfg)
	owner, _, _ := roles(c, 0)
	for _, kind := range []clientKind{
		{name: "framed json", protocol: "json", framed: true},
		{name: "unframed json", protocol: "json"},
	} {
		t.Run(kind.name, func(t *testing.T) {
			roundTrip(t, dialKind(t, c.Addr(owner), kind), keyIn(0, 16, kind.name))
		})
	}
}

func TestNode_ServesMutualTLS(t *testing.T) {
	serverTLS, clientTLS := testTLS(t)
	cfg := fastCluster()
	cfg.Node.TLS = serverTLS
	c := StartCluster(t, cfg)
	owner, _, _ := roles(c, 0)
	for _, kind := range []clientKind{
		{name: "header over TLS", protocol: "header-binary", tlsConfig: clientTLS},
		{name: "framed compact over TLS", protocol: "compact", framed: true, tlsConfig: clientTLS},
	} {
		t.Run(kind.name, func(t *testing.T) {
			roundTrip(t, dialKind(t, c.Addr(owner), kind), keyIn(0, 16, kind.name))
		})
	}
	t.Run("client without a certificate is refused", func(t *testing.T) {
		noCert := clientTLS.Clone()
		noCert.Certificates = nil
		cfg := &thrift.TConfiguration{ConnectTimeout: time.Second, SocketTimeout: 5 * time.Second, TLSConfig: noCert}
		sock := thrift.NewTSSLSocketConf(c.Addr(owner), cfg)
		require.NoError(t, sock.Open())
		defer sock.Close()
		trans := thrift.NewTFramedTransportConf(sock, cfg)
		cl := zaris.NewZarisKvClientFactory(trans, thrift.NewTBinaryProtocolFactoryConf(cfg))
		_, err := cl.GetClusterMap(bg)
		require.Error(t, err)
	})
}

// testTLS returns a server config that requires client certificates from a test CA and a
// client config holding one and trusting the server.
func testTLS(t *testing.T) (server, client *tls.Config) {
	t.Helper()
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		return k
	}
	caKey := newKey()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "zaris test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	leaf := func(serial int64, usage x509.ExtKeyUsage) tls.Certificate {
		k := newKey()
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "zaris test"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		require.NoError(t, err)
		return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: k}
	}
	server = &tls.Config{
		Certificates: []tls.Certificate{leaf(2, x509.ExtKeyUsageServerAuth)},
		ClientAuth:   tls.RequireAndVerifyClientCert, ClientCAs: pool, MinVersion: tls.VersionTLS12,
	}
	client = &tls.Config{
		Certificates: []tls.Certificate{leaf(3, x509.ExtKeyUsageClientAuth)},
		RootCAs:      pool, MinVersion: tls.VersionTLS12,
	}
	return server, client
}

// requireClosedByNode waits for the node to close conn (EOF or reset), failing on a timeout.
func requireClosedByNode(t *testing.T, conn net.Conn) {
	t.Helper()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err := io.Copy(io.Discard, conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the node did not close the connection: %v", err)
	}
}

func TestBadInput_ClosesOnlyThatConnection(t *testing.T) {
	cfg := fastCluster()
	cfg.Node.IdleTimeout = 300 * time.Millisecond
	c := StartCluster(t, cfg)
	owner, _, _ := roles(c, 0)
	addr := c.Addr(owner)

	frame := func(size uint32, body []byte) []byte {
		b := binary.BigEndian.AppendUint32(nil, size)
		return append(b, body...)
	}
	jsonRequest := []byte(`[1,"GetClusterMap",1,0,{}]`)
	tests := []struct {
		name  string
		bytes []byte
	}{
		{"frame above the maximum", frame(64<<20, []byte{0x80, 0x01, 0x00, 0x01})},
		{"garbage bytes", []byte("GET / HTTP/1.1\r\nHost: zaris\r\n\r\n")},
		{"binary zeros", make([]byte, 64)},
		{"truncated frame", frame(200, []byte{0x80, 0x01, 0x00, 0x01, 0x00, 0x00})},
		{"wrong protocol: JSON to a header port", jsonRequest},
		{"wrong protocol: non-strict binary", append([]byte{0, 0, 0, 13}, "GetClusterMap"...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bad, err := net.Dial("tcp", addr)
			require.NoError(t, err)
			defer bad.Close()
			good := mustDial(t, addr)
			_, err = bad.Write(tt.bytes)
			require.NoError(t, err)

			// Another client is served while the bad connection is open and after it is gone
			// (a new one: the truncated frame is closed by the idle timeout, which would close
			// an idle good connection too).
			_, err = good.GetClusterMap(bg)
			require.NoError(t, err)
			requireClosedByNode(t, bad)
			fresh := mustDial(t, addr)
			_, err = fresh.GetClusterMap(bg)
			require.NoError(t, err)
		})
	}
}

func TestBadInput_WrongProtocolOnJSONPort(t *testing.T) {
	cfg := fastCluster()
	cfg.Node.Protocol = ProtocolJSON
	c := StartCluster(t, cfg)
	addr := c.Seeds()[0]
	bad, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer bad.Close()
	// A framed compact request: the JSON reader finds no '[' where a message must start.
	_, err = bad.Write([]byte{0, 0, 0, 17, 0x82, 0x21, 0x01, 13, 'G', 'e', 't', 'C', 'l', 'u', 's', 't', 'e', 'r', 'M', 'a', 'p'})
	require.NoError(t, err)
	requireClosedByNode(t, bad)
	good := dialKind(t, addr, clientKind{protocol: "json", framed: true})
	_, err = good.GetClusterMap(bg)
	require.NoError(t, err)
}

func TestBadInput_IdleConnectionTimesOut(t *testing.T) {
	cfg := fastCluster()
	cfg.Node.IdleTimeout = 200 * time.Millisecond
	c := StartCluster(t, cfg)
	conn, err := net.Dial("tcp", c.Seeds()[0])
	require.NoError(t, err)
	defer conn.Close()
	requireClosedByNode(t, conn)
}

// panicKv is a ZarisKv whose Get panics.
type panicKv struct{ *kvHandler }

func (panicKv) Get(context.Context, *zaris.GetRequest) (*zaris.GetResponse, error) {
	panic("handler bug")
}

func TestBadInput_PanickingHandlerClosesOnlyThatConnection(t *testing.T) {
	c := StartCluster(t, fastCluster())
	n := c.Node(c.Nodes()[0])
	srv, err := newServer(context.Background(), "127.0.0.1:0", nil, serverConfig(4<<20, 1<<16, time.Minute),
		wireHeader, zaris.NewZarisKvProcessor(panicKv{&kvHandler{n: n}}), nil, discardLogger())
	require.NoError(t, err)
	defer srv.close()

	victim := mustDial(t, srv.addr())
	_, err = victim.Get(bg, &zaris.GetRequest{Key: []byte("k")})
	require.Error(t, err, "the panicking request gets no answer")
	other := mustDial(t, srv.addr())
	m, err := other.GetClusterMap(bg)
	require.NoError(t, err, "the server keeps serving after a handler panicked")
	assert.Equal(t, n.Epoch(), m.Epoch)
}
