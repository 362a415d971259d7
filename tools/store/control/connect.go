package control

import (
	"context"
	"crypto/tls"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Connect returns a client of the etcd cluster at endpoints (host:port each) once one of
// them has answered, or, within timeout, an error that names the endpoints.
func Connect(ctx context.Context, endpoints []string, timeout time.Duration) (*clientv3.Client, error) {
	return ConnectTLS(ctx, endpoints, nil, timeout)
}

// ConnectTLS is Connect over TLS with tlsConfig (a client certificate for an etcd that
// requires one); nil is plain TCP.
func ConnectTLS(ctx context.Context, endpoints []string, tlsConfig *tls.Config, timeout time.Duration) (*clientv3.Client, error) {
	if len(endpoints) == 0 {
		return nil, fmt.Errorf("etcd: no endpoints given")
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: timeout,
		TLS:         tlsConfig,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("etcd at %s: %w", strings.Join(endpoints, ","), err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// A linearizable read needs a member that is part of a quorum: it proves the cluster,
	// not only a process, is there.
	if _, err := cli.Get(ctx, "zaris-connect-probe"); err != nil {
		_ = cli.Close()
		return nil, fmt.Errorf("etcd at %s unreachable after %v: %w", strings.Join(endpoints, ","), timeout, err)
	}
	return cli, nil
}
