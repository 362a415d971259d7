package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/tools/store"
)

// TestProtocols: every --protocol and --transport the store's default port serves, and
// json against a JSON node.
func TestProtocols(t *testing.T) {
	header := store.StartCluster(t, store.ClusterConfig{Nodes: 2})
	json := store.StartCluster(t, store.ClusterConfig{Nodes: 2, Node: store.NodeConfig{Protocol: store.ProtocolJSON}})

	tests := []struct {
		protocol, transport string
		c                   *store.Cluster
	}{
		{"binary", "framed", header},
		{"binary", "buffered", header},
		{"compact", "framed", header},
		{"compact", "buffered", header},
		{"header", "framed", header},
		{"json", "framed", json},
		{"json", "buffered", json},
	}
	for _, tt := range tests {
		t.Run(tt.protocol+"/"+tt.transport, func(t *testing.T) {
			flags := []string{"--seeds", strings.Join(tt.c.Seeds(), ","), "--protocol", tt.protocol, "--transport", tt.transport}
			key := "p-" + tt.protocol + "-" + tt.transport
			steps := []struct {
				args   []string
				code   int
				stdout string
			}{
				{[]string{"put", key, "v"}, exitOK, "ok version="},
				{[]string{"get", key}, exitOK, "v\n"},
				{[]string{"put", key, "w", "--if-absent"}, exitConflict, ""},
				{[]string{"incr", key + "-n", "2"}, exitOK, "2\n"},
				{[]string{"delete", key}, exitOK, "ok version="},
				{[]string{"get", key}, exitNotFound, ""},
			}
			for _, s := range steps {
				o := runZaris(t, nil, append(flags, s.args...)...)
				assert.Equal(t, s.code, o.code, "%v: %s", s.args, o.stderr)
				assert.True(t, strings.HasPrefix(o.stdout, s.stdout), "%v: stdout %q", s.args, o.stdout)
			}
			o := runZaris(t, nil, append(flags, "map")...)
			assert.Equal(t, exitOK, o.code, o.stderr)
		})
	}
}

// TestTLS: --tls-ca with --tls-cert and --tls-key reach a node that requires client
// certificates; without the client certificate or the CA the handshake fails and no seed
// answers (exit 5).
func TestTLS(t *testing.T) {
	pki := newTestPKI(t)
	c := store.StartCluster(t, store.ClusterConfig{Nodes: 2, Node: store.NodeConfig{TLS: pki.server}})
	seeds := "--seeds=" + strings.Join(c.Seeds(), ",")

	t.Run("mutual TLS", func(t *testing.T) {
		tls := []string{seeds, "--tls-ca", pki.caFile, "--tls-cert", pki.certFile, "--tls-key", pki.keyFile}
		o := runZaris(t, nil, append(tls, "put", "secure", "s")...)
		require.Equal(t, exitOK, o.code, o.stderr)
		o = runZaris(t, nil, append([]string{"get", "secure"}, tls...)...)
		assert.Equal(t, exitOK, o.code, o.stderr)
		assert.Equal(t, "s\n", o.stdout)
	})
	t.Run("no client certificate", func(t *testing.T) {
		o := runZaris(t, nil, seeds, "--tls-ca", pki.caFile, "get", "secure")
		assert.Equal(t, exitGaveUp, o.code)
		assert.Contains(t, o.stderr, "no seed reachable")
	})
	t.Run("unknown CA", func(t *testing.T) {
		o := runZaris(t, nil, seeds, "--tls-cert", pki.certFile, "--tls-key", pki.keyFile, "get", "secure")
		assert.Equal(t, exitGaveUp, o.code)
		assert.Contains(t, o.stderr, "tls handshake")
	})
	t.Run("plain TCP", func(t *testing.T) {
		o := runZaris(t, nil, seeds, "get", "secure")
		assert.Equal(t, exitGaveUp, o.code)
	})
}

// testPKI is a CA, a server configuration that requires client certificates signed by it,
// and a client certificate, with the client's files on disk.
type testPKI struct {
	server                    *tls.Config
	caFile, certFile, keyFile string
}

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "zaris test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)

	issue := func(serial int64, usage x509.ExtKeyUsage, ips []net.IP) ([]byte, *ecdsa.PrivateKey) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkix.Name{CommonName: "zaris test"},
			NotBefore:    time.Now().Add(-time.Hour),
			NotAfter:     time.Now().Add(time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
			IPAddresses:  ips,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		require.NoError(t, err)
		return der, key
	}
	pemFile := func(name, typ string, der []byte) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
		return path
	}
	keyDER := func(k *ecdsa.PrivateKey) []byte {
		der, err := x509.MarshalECPrivateKey(k)
		require.NoError(t, err)
		return der
	}

	srvDER, srvKey := issue(2, x509.ExtKeyUsageServerAuth, []net.IP{net.IPv4(127, 0, 0, 1)})
	cliDER, cliKey := issue(3, x509.ExtKeyUsageClientAuth, nil)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return testPKI{
		server: &tls.Config{
			Certificates: []tls.Certificate{{Certificate: [][]byte{srvDER}, PrivateKey: srvKey}},
			ClientAuth:   tls.RequireAndVerifyClientCert,
			ClientCAs:    pool,
			MinVersion:   tls.VersionTLS12,
		},
		caFile:   pemFile("ca.pem", "CERTIFICATE", caDER),
		certFile: pemFile("client.pem", "CERTIFICATE", cliDER),
		keyFile:  pemFile("client-key.pem", "EC PRIVATE KEY", keyDER(cliKey)),
	}
}
