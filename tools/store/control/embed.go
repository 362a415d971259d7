package control

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/logutil"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// EmbedConfig describes one embedded etcd member. The zero value (plus nothing) is a
// single-member etcd on loopback ports the kernel picks, in a new temporary directory that
// Close removes, with fsync kept.
type EmbedConfig struct {
	// Name names this member (default "zaris"). With Peers it must be one of Peers' keys.
	Name string
	// Dir is the data directory. Empty means a new temporary directory, removed by Close.
	Dir string
	// ClientURL and PeerURL are where this member listens for clients and for the other
	// members, like http://127.0.0.1:2379. Empty means 127.0.0.1 on a port the kernel picks;
	// a member of a multi-member cluster needs a fixed PeerURL, the one Peers gives it.
	ClientURL, PeerURL string
	// Peers is the initial cluster, every member's name to its peer URL; empty means a
	// single-member cluster of this member alone.
	Peers map[string]string
	// Token is the initial cluster token; members of one cluster share it (default "zaris").
	Token string
	// NoFsync skips every fsync: only for throwaway data (tests, demos), since a crash of
	// the machine can lose acknowledged writes.
	NoFsync bool
	// Tick and Election are raft's heartbeat interval and election timeout. The defaults
	// are etcd's (100ms and 1s) for a member of a multi-member cluster, and 10ms and 100ms
	// for a single member, which has no peer to lose and so starts in tens of milliseconds
	// instead of about a second.
	Tick, Election time.Duration
	// StartTimeout bounds the wait for the member to join its cluster and serve (default 30s).
	StartTimeout time.Duration
	// LogLevel is etcd's own log level (default "error").
	LogLevel string
	// TLS, when set, makes the member serve its clients and its peers over mutual TLS with
	// these files (URLs then https://): only holders of a certificate of the CA reach it.
	TLS *TLSFiles

	// logTo, when set, receives etcd's log instead of stderr (tests).
	logTo io.Writer
}

// TLSFiles are PEM files: a CA bundle, and a certificate it signed with its key.
type TLSFiles struct {
	CA, Cert, Key string
}

// Embedded is a running embedded etcd member.
type Embedded struct {
	etcd      *embed.Etcd
	tempDir   string
	closing   *atomic.Bool // set once Close starts: etcd's shutdown noise is dropped from then on
	closeOnce sync.Once
}

// StartEmbedded starts an etcd member as cfg says and returns once it serves clients, or
// an error naming what failed; on error nothing is left running.
func StartEmbedded(cfg EmbedConfig) (*Embedded, error) {
	closing := new(atomic.Bool)
	ec, tempDir, err := embedConfig(cfg, closing)
	if err != nil {
		return nil, err
	}
	e, err := embed.StartEtcd(ec)
	if err != nil {
		removeTemp(tempDir)
		return nil, fmt.Errorf("start embedded etcd %q: %w", ec.Name, err)
	}
	timeout := cfg.StartTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-e.Server.ReadyNotify():
		return &Embedded{etcd: e, tempDir: tempDir, closing: closing}, nil
	case err = <-e.Err():
	case <-timer.C:
		err = fmt.Errorf("not ready after %v (are the other members of %s up?)", timeout, ec.InitialCluster)
	}
	closing.Store(true)
	e.Close()
	removeTemp(tempDir)
	return nil, fmt.Errorf("start embedded etcd %q: %w", ec.Name, err)
}

// embedConfig turns cfg into etcd's configuration, creating the temporary data directory
// if cfg names none (returned, so the caller can remove it). Its logger drops the errors
// etcd logs when its servers stop once closing is set (quietShutdown).
func embedConfig(cfg EmbedConfig, closing *atomic.Bool) (*embed.Config, string, error) {
	ec := embed.NewConfig()
	ec.Name = orDefault(cfg.Name, "zaris")
	ec.InitialClusterToken = orDefault(cfg.Token, "zaris")
	ec.LogLevel = orDefault(cfg.LogLevel, "error")
	lg, err := etcdLogger(ec.LogLevel, cfg.logTo, closing)
	if err != nil {
		return nil, "", err
	}
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(lg)
	ec.UnsafeNoFsync = cfg.NoFsync
	tick, election := cfg.Tick, cfg.Election
	if len(cfg.Peers) == 0 {
		tick, election = cmp.Or(tick, 10*time.Millisecond), cmp.Or(election, 100*time.Millisecond)
	}
	if tick > 0 {
		ec.TickMs = uint(tick / time.Millisecond)
	}
	if election > 0 {
		ec.ElectionMs = uint(election / time.Millisecond)
	}
	// The v2 store's periodic snapshot is of no use to the small state kept here.
	ec.SnapshotCount = 10000
	ec.Metrics = "basic"
	scheme := "http"
	if cfg.TLS != nil {
		scheme = "https"
		info := transport.TLSInfo{CertFile: cfg.TLS.Cert, KeyFile: cfg.TLS.Key, TrustedCAFile: cfg.TLS.CA, ClientCertAuth: true}
		ec.ClientTLSInfo, ec.PeerTLSInfo = info, info
	}
	clientURL, err := parseURL(orDefault(cfg.ClientURL, scheme+"://127.0.0.1:0"), scheme)
	if err != nil {
		return nil, "", fmt.Errorf("client URL: %w", err)
	}
	peerURL, err := parseURL(orDefault(cfg.PeerURL, scheme+"://127.0.0.1:0"), scheme)
	if err != nil {
		return nil, "", fmt.Errorf("peer URL: %w", err)
	}
	ec.ListenClientUrls, ec.AdvertiseClientUrls = []url.URL{clientURL}, []url.URL{clientURL}
	ec.ListenPeerUrls, ec.AdvertisePeerUrls = []url.URL{peerURL}, []url.URL{peerURL}
	if len(cfg.Peers) == 0 {
		ec.InitialCluster = ec.Name + "=" + peerURL.String()
	} else {
		own, ok := cfg.Peers[ec.Name]
		if !ok {
			return nil, "", fmt.Errorf("member %q is not in the initial cluster %v", ec.Name, cfg.Peers)
		}
		if own != peerURL.String() {
			return nil, "", fmt.Errorf("member %q: peer URL %s, but the initial cluster gives it %s", ec.Name, peerURL.String(), own)
		}
		ec.InitialCluster = InitialCluster(cfg.Peers)
	}
	ec.Dir = cfg.Dir
	tempDir := ""
	if ec.Dir == "" {
		if tempDir, err = os.MkdirTemp("", "zaris-etcd-"); err != nil {
			return nil, "", err
		}
		ec.Dir = tempDir
	}
	return ec, tempDir, nil
}

// shutdownNoise is the message etcd logs, as an error with a stack trace, for each of its
// servers that stops serving, as they all do when the member is closed.
const shutdownNoise = "setting up serving from embedded etcd failed."

// retriedError is an error etcd logs on every new member: its first try to record the
// storage version comes before raft has saved a term ("missing term information"), and it
// tries again, successfully, a few seconds later.
const retriedError = "failed to update storage version"

// etcdLogger is etcd's own logger (JSON at level, on stderr or w). It logs retriedError as a
// warning, and once closing is set it drops shutdownNoise and logs any other error as a
// warning too (such as retriedError of a member closed just after its start): errors
// without a stack trace, and a clean start and shutdown log no error.
func etcdLogger(level string, w io.Writer, closing *atomic.Bool) (*zap.Logger, error) {
	zc := logutil.DefaultZapLoggerConfig
	zc.Level = zap.NewAtomicLevelAt(logutil.ConvertToZapLevel(level))
	return zc.Build(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		if w != nil {
			c = zapcore.NewCore(zapcore.NewJSONEncoder(zc.EncoderConfig), zapcore.AddSync(w), zc.Level)
		}
		return quietShutdown{Core: c, closing: closing}
	}))
}

// quietShutdown is a zapcore.Core that lowers retriedError to a warning and, once closing is
// set, drops shutdownNoise and lowers every error to a warning.
type quietShutdown struct {
	zapcore.Core
	closing *atomic.Bool
}

func (q quietShutdown) With(fields []zapcore.Field) zapcore.Core {
	return quietShutdown{Core: q.Core.With(fields), closing: q.closing}
}

func (q quietShutdown) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	switch {
	case e.Level < zapcore.ErrorLevel:
	case q.closing.Load() && e.Message == shutdownNoise:
		return ce
	case q.closing.Load(), e.Message == retriedError:
		e.Level = zapcore.WarnLevel
	}
	return q.Core.Check(e, ce)
}

// InitialCluster formats peers (member name to peer URL) as etcd's initial-cluster string,
// name=url pairs joined by commas in name order.
func InitialCluster(peers map[string]string) string {
	names := make([]string, 0, len(peers))
	for name := range peers {
		names = append(names, name)
	}
	sort.Strings(names)
	pairs := make([]string, len(names))
	for i, name := range names {
		pairs[i] = name + "=" + peers[name]
	}
	return strings.Join(pairs, ",")
}

// Endpoints returns the host:port addresses where this member serves clients.
func (e *Embedded) Endpoints() []string {
	out := make([]string, len(e.etcd.Clients))
	for i, l := range e.etcd.Clients {
		out[i] = l.Addr().String()
	}
	return out
}

// Err reports a fatal error of the running member (it has then stopped serving).
func (e *Embedded) Err() <-chan error { return e.etcd.Err() }

// Close stops the member, waits for its goroutines and removes a temporary data directory.
// Closing again does nothing.
func (e *Embedded) Close() {
	e.closeOnce.Do(func() {
		e.closing.Store(true)
		e.etcd.Close()
		removeTemp(e.tempDir)
	})
}

func removeTemp(dir string) {
	if dir != "" {
		_ = os.RemoveAll(dir)
	}
}

// parseURL parses a member URL, which must have scheme (https for a TLS member).
func parseURL(s, scheme string) (url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return url.URL{}, err
	}
	if u.Scheme != scheme || u.Host == "" {
		return url.URL{}, errors.New(s + ": want " + scheme + "://host:port")
	}
	return *u, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
