package control

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Options say where a cluster's control state lives.
type Options struct {
	// Endpoints are an existing etcd cluster's client addresses (host:port). Empty means
	// an etcd embedded in this process, as Embed describes.
	Endpoints []string
	// Embed configures the embedded etcd when Endpoints is empty.
	Embed EmbedConfig
	// Prefix is the key prefix of this cluster's keys (default "/zaris/"), so that several
	// clusters can share one etcd.
	Prefix string
	// DialTimeout bounds the wait for etcd to answer at start (default 5s).
	DialTimeout time.Duration
	// TLS is the client side of a TLS etcd (the embedded one's when Embed.TLS is set); nil
	// is plain TCP.
	TLS *tls.Config
}

// Backend is a connection to the etcd that holds a cluster's control state, and the etcd
// itself if this process embeds it.
type Backend struct {
	Client *clientv3.Client
	Prefix string
	embed  *Embedded
}

// Open connects to the etcd opts name, first starting an embedded one if they name no
// endpoints. An unreachable etcd is an error naming its endpoints.
func Open(ctx context.Context, opts Options) (*Backend, error) {
	b := &Backend{Prefix: opts.Prefix}
	if b.Prefix == "" {
		b.Prefix = "/zaris/"
	}
	timeout := opts.DialTimeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	endpoints := opts.Endpoints
	if len(endpoints) == 0 {
		e, err := StartEmbedded(opts.Embed)
		if err != nil {
			return nil, err
		}
		b.embed, endpoints = e, e.Endpoints()
	}
	cli, err := ConnectTLS(ctx, endpoints, opts.TLS, timeout)
	if err != nil {
		b.Close()
		return nil, err
	}
	b.Client = cli
	return b, nil
}

// Embedded returns the etcd member this process embeds, nil when it uses an external one.
func (b *Backend) Embedded() *Embedded { return b.embed }

// Close closes the client, then the embedded etcd if any.
func (b *Backend) Close() {
	if b.Client != nil {
		_ = b.Client.Close()
	}
	if b.embed != nil {
		b.embed.Close()
	}
}

// ParseEndpoints parses a comma-separated host:port list, as --etcd-endpoints takes it.
func ParseEndpoints(s string) ([]string, error) {
	var out []string
	for _, ep := range strings.Split(s, ",") {
		ep = strings.TrimSpace(ep)
		if ep == "" {
			continue
		}
		if _, port, err := net.SplitHostPort(ep); err != nil || port == "" {
			return nil, fmt.Errorf("etcd endpoint %q: want host:port", ep)
		}
		out = append(out, ep)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("etcd endpoints %q: none given", s)
	}
	return out, nil
}
