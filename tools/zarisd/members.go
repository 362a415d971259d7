package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/clustron/zaris-go/tools/store"
)

// member holds the flags that make a process a member of a cluster (store.Credentials).
type member struct {
	ca, cert, key string
	etcdTLS       bool
}

// memberFlags defines the member flags on fs.
func memberFlags(fs *flag.FlagSet) *member {
	m := &member{}
	fs.StringVar(&m.ca, "cluster-ca", "", "PEM CA of the cluster: peer, coordinator, admin and embedded etcd connections are mutual TLS with certificates it signed")
	fs.StringVar(&m.cert, "member-cert", "", "PEM certificate of this member, signed by --cluster-ca (ctl: the client certificate)")
	fs.StringVar(&m.key, "member-key", "", "PEM private key of --member-cert")
	if fs.Name() != "ctl" {
		fs.BoolVar(&m.etcdTLS, "etcd-tls", true, "with credentials, reach --etcd-endpoints over TLS with them (false: an etcd of its own protection)")
	}
	return m
}

// load returns the credentials the flags name, nil when none is set.
func (m *member) load() (*store.Credentials, error) {
	if m.ca == "" && m.cert == "" && m.key == "" {
		return nil, nil
	}
	if m.ca == "" || m.cert == "" || m.key == "" {
		return nil, errors.New("--cluster-ca, --member-cert and --member-key go together")
	}
	return store.LoadCredentials(m.ca, m.cert, m.key)
}

// protectedMode applies the rule for a process without credentials: its cluster ports (binds,
// flag name to host:port) must be on loopback, where only this machine reaches them; it
// says so in its first log line, and refuses to start if one is not.
func protectedMode(log *slog.Logger, creds *store.Credentials, binds map[string]string) error {
	if creds != nil {
		return nil
	}
	for flagName, addr := range binds {
		if !isLoopback(addr) {
			return fmt.Errorf("protected mode: %s %s is not a loopback address, and without cluster credentials "+
				"(--cluster-ca, --member-cert, --member-key) anyone who reaches it could act as a member; "+
				"give credentials or bind to 127.0.0.1", flagName, addr)
		}
	}
	log.Warn("protected mode: no cluster credentials, so the peer, coordinator and etcd ports listen on loopback only")
	return nil
}

// isLoopback reports whether the host of addr (host:port) is a loopback address or localhost.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// urlHost returns the host:port of a URL, or the URL itself if it has none.
func urlHost(s string) string {
	if u, err := url.Parse(s); err == nil && u.Host != "" {
		return u.Host
	}
	return s
}

// runCerts writes a test CA (ca.pem) and, per name, a member certificate and key
// (NAME.pem, NAME-key.pem) into --dir: enough for a cluster by hand. The CA's key is not
// kept; run it again for a new cluster.
func runCerts(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("certs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "certs", "directory to write the PEM files into")
	hosts := fs.String("hosts", "127.0.0.1,localhost", "addresses and names the certificates are valid for (an etcd client checks them), comma-separated")
	if err := fs.Parse(args); err != nil {
		return err
	}
	names := fs.Args()
	if len(names) == 0 {
		names = []string{"member"}
	}
	ca, err := store.NewCA("zaris test CA")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		return err
	}
	write := func(name string, b []byte) error {
		path := filepath.Join(*dir, name)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			return err
		}
		fmt.Fprintln(stdout, path)
		return nil
	}
	if err := write("ca.pem", ca.CertPEM()); err != nil {
		return err
	}
	for _, name := range names {
		cert, key, err := ca.IssuePEM(name, strings.Split(*hosts, ",")...)
		if err != nil {
			return err
		}
		if err := write(name+".pem", cert); err != nil {
			return err
		}
		if err := write(name+"-key.pem", key); err != nil {
			return err
		}
	}
	return nil
}
