// Command zarisd runs the reference Zaris store as processes: coordinators and any number of
// nodes, each its own process, so any of them can be killed with kill -9 like a real server.
// The cluster's state and the nodes' leases live in etcd: an existing cluster
// (--etcd-endpoints), or one embedded in the coordinators (one member each, or a
// single-member etcd in a lone coordinator).
//
// A lone coordinator (embedding a single-member etcd on 127.0.0.1:2379) and three nodes:
//
//	zarisd coordinator --listen 127.0.0.1:7000 --nodes 3
//	zarisd node --id 1 --listen 127.0.0.1:7001 --coordinator 127.0.0.1:7000
//	zarisd node --id 2 --listen 127.0.0.1:7002 --coordinator 127.0.0.1:7000
//	zarisd node --id 3 --listen 127.0.0.1:7003 --coordinator 127.0.0.1:7000
//
// Any number of coordinators may run: one leads through an etcd election, the others stand
// by and take over when it dies; nodes and ctl take every coordinator's address,
// comma-separated. tools/zarisd/README.md shows three coordinators embedding a 3-member etcd.
//
// Clients connect to any node's --listen address (the seeds). Starting a node with a new id
// later scales out; restarting a killed node with its id brings it back (it catches up
// before it serves). Churn the coordinator does not start on its own comes from ctl:
//
//	zarisd ctl --coordinator 127.0.0.1:7000 map
//	zarisd ctl --coordinator 127.0.0.1:7000 failback 2
//	zarisd ctl --coordinator 127.0.0.1:7000 migrate 5 3
//	zarisd ctl --coordinator 127.0.0.1:7000 leave 3
//
// Only members talk to members: with --cluster-ca, --member-cert and --member-key (zarisd
// certs writes a test set), every coordinator, peer, ctl and embedded etcd connection is
// mutual TLS with that CA. Without them zarisd is in protected mode: it binds those ports
// to loopback only, says so in its first log line, and refuses any other address.
//
// Each server prints one line on stdout once it is ready: "zarisd <role> listening on <addr>"
// (useful with port 0), or for a coordinator that does not lead "zarisd coordinator standing
// by for <addr>"; it logs to stderr, and exits 0 on SIGTERM or SIGINT.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/tools/store"
	"github.com/clustron/zaris-go/tools/store/control"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "zarisd:", err)
		os.Exit(2)
	}
}

const usage = `usage:
  zarisd coordinator [flags]   run the coordinator
  zarisd node [flags]          run a storage node
  zarisd ctl [flags] map | failback NODE | leave NODE | migrate SEGMENT NODE
  zarisd certs [flags] NAME... write a test CA and a member certificate per NAME
run "zarisd <command> -h" for the flags of a command`

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New(usage)
	}
	switch args[0] {
	case "coordinator":
		return runCoordinator(args[1:], stdout, stderr)
	case "node":
		return runNode(args[1:], stdout, stderr)
	case "ctl":
		return runCtl(args[1:], stdout, stderr)
	case "certs":
		return runCerts(args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(stdout, usage)
		return nil
	}
	return fmt.Errorf("unknown command %q\n%s", args[0], usage)
}

func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("bad --log-level %q", level)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}

// stopOnSignal catches SIGTERM and SIGINT from now on and returns a wait that blocks until
// one came: a server calls it before it says it is ready, so that a signal sent as soon as
// it is ready stops it cleanly instead of killing it.
func stopOnSignal() (wait func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
	return func() {
		<-ch
		signal.Stop(ch)
	}
}

func runCoordinator(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("coordinator", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:7000", "address to listen on while leading, host:port (port 0 picks one: only for a lone coordinator)")
	nodes := fs.Int("nodes", 3, "nodes that must register before segments are placed")
	segments := fs.Int("segments", store.DefaultSegments, "number of segments")
	rf := fs.Int("replication", store.DefaultReplicationFactor, "copies of each segment, owner included")
	heartbeat := fs.Duration("heartbeat", store.DefaultHeartbeat, "heartbeat interval")
	failure := fs.Duration("failure-timeout", store.DefaultFailureTimeout, "probe a node silent this long")
	probeTimeout := fs.Duration("probe-timeout", store.DefaultProbeTimeout, "fail a probed node over if it does not answer within this")
	autoFailback := fs.Bool("auto-failback", false, "hand a returning node its preferred segments back once it caught up")
	sessionTTL := fs.Duration("session-ttl", store.DefaultSessionTTL, "leadership lease, whole seconds: a standby takes over this long after the leader dies")
	endpoints := fs.String("etcd-endpoints", "", "an existing etcd cluster's client addresses, host:port,...; empty embeds an etcd member in this process")
	prefix := fs.String("etcd-prefix", "/zaris/", "key prefix of the cluster's state in etcd")
	dialTimeout := fs.Duration("etcd-dial-timeout", 5*time.Second, "give up if etcd does not answer within this at start")
	etcdName := fs.String("etcd-name", "zaris", "embedded member's name")
	etcdDir := fs.String("etcd-dir", "", "embedded member's data directory; empty: a temporary one, removed at exit (the state dies with the process)")
	clientURL := fs.String("etcd-client-url", "", "embedded member's client URL, http://host:port, https:// with credentials (port 0 picks one; default port 2379 on 127.0.0.1)")
	peerURL := fs.String("etcd-peer-url", "", "embedded member's peer URL, http://host:port, https:// with credentials (required with --etcd-initial-cluster)")
	initial := fs.String("etcd-initial-cluster", "", "embedded members of a multi-member etcd: name=http://host:port,... (every member's peer URL)")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	mf := memberFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	log, err := newLogger(stderr, *level)
	if err != nil {
		return err
	}
	creds, err := mf.load()
	if err != nil {
		return err
	}
	if *clientURL == "" {
		*clientURL = "http://127.0.0.1:2379"
		if creds != nil {
			*clientURL = "https://127.0.0.1:2379"
		}
	}
	binds := map[string]string{"--listen": *listen}
	if *endpoints == "" {
		binds["--etcd-client-url"] = urlHost(*clientURL)
		if *peerURL != "" {
			binds["--etcd-peer-url"] = urlHost(*peerURL)
		}
	}
	if err := protectedMode(log, creds, binds); err != nil {
		return err
	}
	opts := control.Options{Prefix: *prefix, DialTimeout: *dialTimeout}
	if creds != nil && mf.etcdTLS {
		opts.TLS = creds.ClientTLS()
	}
	if *endpoints != "" {
		if opts.Endpoints, err = control.ParseEndpoints(*endpoints); err != nil {
			return err
		}
	} else {
		opts.Embed = control.EmbedConfig{Name: *etcdName, Dir: *etcdDir, ClientURL: *clientURL, PeerURL: *peerURL}
		if creds != nil {
			opts.Embed.TLS = &control.TLSFiles{CA: mf.ca, Cert: mf.cert, Key: mf.key}
			opts.TLS = creds.ClientTLS()
		}
		if *initial != "" {
			if opts.Embed.Peers, err = parseInitialCluster(*initial); err != nil {
				return err
			}
			// Raft timings short enough for a one-second leadership lease (etcd grants no
			// lease shorter than 1.5 election timeouts).
			opts.Embed.Tick, opts.Embed.Election = 50*time.Millisecond, 500*time.Millisecond
		}
	}
	backend, err := control.Open(context.Background(), opts)
	if err != nil {
		return err
	}
	defer backend.Close()
	wait := stopOnSignal()
	e, err := store.StartElectedCoordinator(store.CoordinatorConfig{
		Listen: *listen, InitialNodes: *nodes, Segments: int32(*segments), ReplicationFactor: *rf,
		Heartbeat: *heartbeat, FailureTimeout: *failure, ProbeTimeout: *probeTimeout, AutoFailback: *autoFailback,
		Etcd: backend.Client, EtcdPrefix: *prefix, Credentials: creds, Logger: log,
	}, *sessionTTL)
	if err != nil {
		return err
	}
	defer e.Close()
	ctx, cancel := context.WithTimeout(context.Background(), *sessionTTL+time.Second)
	c, err := e.WaitLeading(ctx)
	cancel()
	if err == nil {
		fmt.Fprintf(stdout, "zarisd coordinator listening on %s\n", c.Addr())
	} else {
		fmt.Fprintf(stdout, "zarisd coordinator standing by for %s\n", *listen)
	}
	wait()
	return nil
}

// parseInitialCluster parses name=url,... into a map of member names to peer URLs.
func parseInitialCluster(s string) (map[string]string, error) {
	peers := map[string]string{}
	for _, pair := range strings.Split(s, ",") {
		name, u, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok || name == "" || u == "" {
			return nil, fmt.Errorf("--etcd-initial-cluster %q: want name=http://host:port pairs, comma-separated", s)
		}
		peers[name] = u
	}
	return peers, nil
}

func runNode(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("node", flag.ContinueOnError)
	fs.SetOutput(stderr)
	id := fs.Int("id", 0, "node id, positive and unique; a restarted node keeps its id (required)")
	listen := fs.String("listen", "127.0.0.1:0", "data address clients dial, host:port")
	peer := fs.String("peer-listen", "127.0.0.1:0", "address of the internal peer service, host:port")
	coordinator := fs.String("coordinator", "127.0.0.1:7000", "coordinator address, host:port, or every coordinator's, comma-separated")
	protocol := fs.String("protocol", "header", "data port protocols: header (header, binary, compact) or json")
	maxKey := fs.Int("max-key-size", store.DefaultMaxKeySize, "largest key accepted, bytes")
	maxValue := fs.Int("max-value-size", store.DefaultMaxValueSize, "largest value accepted, bytes")
	idle := fs.Duration("idle-timeout", store.DefaultIdleTimeout, "close client connections silent this long")
	cert := fs.String("tls-cert", "", "PEM certificate: serve the data port over TLS")
	key := fs.String("tls-key", "", "PEM private key of --tls-cert")
	clientCA := fs.String("tls-client-ca", "", "PEM CA bundle: require client certificates signed by it (mutual TLS)")
	endpoints := fs.String("etcd-endpoints", "127.0.0.1:2379", "the cluster's etcd client addresses, host:port,...")
	prefix := fs.String("etcd-prefix", "/zaris/", "key prefix of the cluster in etcd, as the coordinators'")
	leaseTTL := fs.Duration("lease-ttl", store.DefaultLeaseTTL, "TTL of the node's etcd lease, whole seconds: it serves only while it holds the lease")
	dedup := fs.Duration("dedup-window", store.DefaultDedupWindow, "keep the first outcome of a tokened write this long and answer a replay with it (rule B8; advertised in the map); 0 keeps none and advertises none")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	mf := memberFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	log, err := newLogger(stderr, *level)
	if err != nil {
		return err
	}
	creds, err := mf.load()
	if err != nil {
		return err
	}
	if err := protectedMode(log, creds, map[string]string{"--peer-listen": *peer}); err != nil {
		return err
	}
	var etcdTLS *tls.Config
	if creds != nil && mf.etcdTLS {
		etcdTLS = creds.ClientTLS()
	}
	eps, err := control.ParseEndpoints(*endpoints)
	if err != nil {
		return err
	}
	proto, err := store.ParseProtocol(*protocol)
	if err != nil {
		return err
	}
	tlsConfig, err := loadTLS(*cert, *key, *clientCA)
	if err != nil {
		return err
	}
	if *dedup < 0 {
		return fmt.Errorf("--dedup-window %v is negative", *dedup)
	}
	wait := stopOnSignal()
	n, err := store.StartNode(store.NodeConfig{
		ID: int32(*id), Listen: *listen, PeerListen: *peer, Coordinator: *coordinator, Protocol: proto,
		TLS: tlsConfig, MaxKeySize: *maxKey, MaxValueSize: *maxValue, IdleTimeout: *idle, Logger: log,
		EtcdEndpoints: eps, EtcdPrefix: *prefix, LeaseTTL: *leaseTTL, Credentials: creds, EtcdTLS: etcdTLS,
		DedupWindow: *dedup, DisableDedup: *dedup == 0,
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "zarisd node %d listening on %s\n", n.ID(), n.Addr())
	wait()
	return n.Close()
}

func loadTLS(certFile, keyFile, caFile string) (*tls.Config, error) {
	if certFile == "" && keyFile == "" && caFile == "" {
		return nil, nil
	}
	if certFile == "" || keyFile == "" {
		return nil, errors.New("--tls-cert and --tls-key go together")
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s holds no PEM certificate", caFile)
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

func runCtl(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("ctl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	coordinator := fs.String("coordinator", "127.0.0.1:7000", "coordinator address, host:port, or every coordinator's, comma-separated")
	timeout := fs.Duration("timeout", 60*time.Second, "give up on the command after this long")
	mf := memberFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	creds, err := mf.load()
	if err != nil {
		return err
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return errors.New(usage)
	}
	ints := func(want int) ([]int32, error) {
		if len(rest)-1 != want {
			return nil, fmt.Errorf("%s takes %d argument(s)", rest[0], want)
		}
		var out []int32
		for _, a := range rest[1:] {
			v, err := strconv.ParseInt(a, 10, 32)
			if err != nil {
				return nil, fmt.Errorf("%s: %q is not a number", rest[0], a)
			}
			out = append(out, int32(v))
		}
		return out, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	admin := store.DialCoordinator(*coordinator, creds)
	defer admin.Close()
	var m *zaris.ClusterMap
	switch rest[0] {
	case "map":
		if _, err = ints(0); err == nil {
			m, err = admin.Map(ctx)
		}
	case "failback", "leave":
		var a []int32
		if a, err = ints(1); err == nil {
			if rest[0] == "failback" {
				m, err = admin.Failback(ctx, a[0])
			} else {
				m, err = admin.Leave(ctx, a[0])
			}
		}
	case "migrate":
		var a []int32
		if a, err = ints(2); err == nil {
			m, err = admin.MigrateSegment(ctx, a[0], a[1])
		}
	default:
		err = fmt.Errorf("unknown ctl command %q\n%s", rest[0], usage)
	}
	if err != nil {
		return err
	}
	printMap(stdout, m)
	return nil
}

// printMap writes a cluster map as text: the epoch, the nodes, then one line per segment.
func printMap(w io.Writer, m *zaris.ClusterMap) {
	fmt.Fprintf(w, "epoch %d, %d segments\n", m.Epoch, m.SegmentCount)
	for _, n := range m.Nodes {
		fmt.Fprintf(w, "node %d %s:%d\n", n.ID, n.Host, n.Port)
	}
	for _, s := range m.Segments {
		owner := "-"
		if s.Owner != nil {
			owner = strconv.Itoa(int(*s.Owner))
		}
		var reps []string
		for _, r := range s.Replicas {
			reps = append(reps, strconv.Itoa(int(r)))
		}
		var flags []string
		if s.Transitioning {
			flags = append(flags, "transitioning")
		}
		if s.Migrating {
			flags = append(flags, "migrating")
		}
		fmt.Fprintf(w, "segment %d owner %s replicas [%s] %s\n", s.ID, owner, strings.Join(reps, ","), strings.Join(flags, " "))
	}
}
