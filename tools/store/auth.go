package store

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/clustron/zaris-go/tools/store/control"
)

// Credentials make a process a member of one cluster: the cluster's CA and a certificate it
// signed. With them every peer, coordinator and admin connection is mutual TLS, and a
// member accepts a connection only from a certificate of the same CA: the CA's signature is
// the membership, as in etcd and TiKV. A member checks the other side's chain, not its host
// name, so one certificate may serve any address.
type Credentials struct {
	ca       *x509.CertPool
	cert     tls.Certificate
	pems     [3][]byte // CA, certificate, key: what an embedded etcd reads from files
	sessions tls.ClientSessionCache
}

// NewCredentials returns the credentials made of a PEM CA bundle and a PEM certificate and key.
func NewCredentials(caPEM, certPEM, keyPEM []byte) (*Credentials, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("store: the CA holds no PEM certificate")
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("store: member certificate: %w", err)
	}
	return &Credentials{ca: pool, cert: cert, pems: [3][]byte{caPEM, certPEM, keyPEM},
		sessions: tls.NewLRUClientSessionCache(256)}, nil
}

// writeFiles writes the credentials' PEM files into dir, for an embedded etcd.
func (c *Credentials) writeFiles(dir string) (*control.TLSFiles, error) {
	f := &control.TLSFiles{CA: filepath.Join(dir, "ca.pem"), Cert: filepath.Join(dir, "member.pem"), Key: filepath.Join(dir, "member-key.pem")}
	for i, path := range []string{f.CA, f.Cert, f.Key} {
		if err := os.WriteFile(path, c.pems[i], 0o600); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// LoadCredentials reads NewCredentials' three PEM files.
func LoadCredentials(caFile, certFile, keyFile string) (*Credentials, error) {
	var pems [3][]byte
	for i, f := range []string{caFile, certFile, keyFile} {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
		pems[i] = b
	}
	return NewCredentials(pems[0], pems[1], pems[2])
}

// ServerTLS returns the TLS configuration of a member's server: it presents the member's
// certificate and requires one of the cluster's CA from the other side.
func (c *Credentials) ServerTLS() *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{c.cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    c.ca,
		MinVersion:   tls.VersionTLS13,
	}
}

// ClientTLS returns the TLS configuration of a member's client: it presents the member's
// certificate and accepts a server whose certificate the cluster's CA signed, whatever its
// host name.
func (c *Credentials) ClientTLS() *tls.Config {
	return &tls.Config{
		Certificates:       []tls.Certificate{c.cert},
		MinVersion:         tls.VersionTLS13,
		ClientSessionCache: c.sessions, // a reconnect resumes rather than verifies again
		InsecureSkipVerify: true,       // the chain is verified below; host names are not members' identity
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("store: the server presented no certificate")
			}
			inter := x509.NewCertPool()
			for _, ic := range cs.PeerCertificates[1:] {
				inter.AddCert(ic)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{
				Roots: c.ca, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			})
			if err != nil {
				return fmt.Errorf("store: the server is not a member of this cluster: %w", err)
			}
			return nil
		},
	}
}

// serverTLS and clientTLS are ServerTLS and ClientTLS, nil for nil credentials (plain TCP).
func (c *Credentials) serverTLS() *tls.Config {
	if c == nil {
		return nil
	}
	return c.ServerTLS()
}

func (c *Credentials) clientTLS() *tls.Config {
	if c == nil {
		return nil
	}
	return c.ClientTLS()
}

// CA is a certificate authority for a cluster's members: an ECDSA P-256 key and a
// self-signed certificate, kept in memory. NewCluster makes a throwaway one; `zarisd certs`
// writes one to files.
type CA struct {
	cert *x509.Certificate
	der  []byte
	key  *ecdsa.PrivateKey
}

// NewCA returns a new CA named name, valid for ten years.
func NewCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{cert: cert, der: der, key: key}, nil
}

// CertPEM returns the CA's certificate in PEM, the bundle every member trusts.
func (ca *CA) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.der})
}

// IssuePEM returns a new member certificate named name and its key, in PEM, valid for
// server and client use at hosts (IP addresses or DNS names; an etcd client checks them).
func (ca *CA) IssuePEM(name string, hosts ...string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().AddDate(10, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), nil
}

// Member returns the credentials of a new member certificate named name (for 127.0.0.1 and
// localhost).
func (ca *CA) Member(name string) (*Credentials, error) {
	certPEM, keyPEM, err := ca.IssuePEM(name, "127.0.0.1", "localhost")
	if err != nil {
		return nil, err
	}
	return NewCredentials(ca.CertPEM(), certPEM, keyPEM)
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	return n
}
