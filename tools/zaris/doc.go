// Command zaris is the command line of the Zaris key-value store: it reads and writes keys
// and prints the cluster map, through the same client an application uses
// (zarisclient.Dial: the engine, the default stack and the typed client), so every
// call is routed to the key's owner and ownership churn is retried away.
//
// Usage:
//
//	zaris [flags] COMMAND [ARGS] [flags]
//
// Commands:
//
//	get KEY                                       print KEY's value
//	put KEY VALUE [--if-version N] [--if-absent]  write VALUE to KEY; print "ok version=N"
//	put KEY - | put KEY --value-file FILE         the same with the value read from stdin or FILE
//	mget KEY...                                   print KEY=VALUE for each key, in one batch call
//	mput KEY=VALUE...                             write each key in one batch call; print "KEY ok version=N"
//	delete KEY [--if-version N]                   delete KEY; print "ok version=N" (the deleted version)
//	incr KEY [DELTA]                              add DELTA (default 1) to KEY's decimal value; print the sum
//	map                                           print the cluster map
//	wait [--timeout D]                            wait until the cluster answers (exit 5 at D, default 60s)
//	version                                       print the client runtime's and the generated code's versions
//	demo [flags]                                  run the churn demo on an embedded cluster
//	help [COMMAND]                                print the usage text, or COMMAND's
//
// wait tries every 100ms until a seed serves a cluster map in which every segment has an
// owner, then prints "ok: the cluster answers (map epoch E, N nodes, S segments) after T";
// when --timeout (default 60s) passes first it exits 5, saying what the last try met. A
// script that starts the nodes in the background runs it before its first command.
//
// put --if-version N writes only if the key's current version is N; put --if-absent writes
// only if the key does not exist; delete --if-version N deletes only if the version is N. A
// failed guard is a Conflict (exit 4), and the key's current version is reported. Because
// a guarded write that is replayed after a lost reply comes back Conflict too, a script that
// retries a guarded put should read the key before treating exit 4 as someone else's write.
//
// mget and mput send one MultiGet or MultiPut: the client splits the keys by owner and
// retries only the keys that met churn. Each key gets its own line, in the order given:
// answered ones on stdout, the others (not found, invalid, no answer) on stderr; --json
// prints one object whose "items" hold one result per key, and --stats adds the batch's
// rounds, sub-requests and items retried. They exit 0 when every key got an answer,
// whatever it was, and 5 when some did not. A batch is not atomic.
//
// Flags may stand before or after the command and between its arguments; "--" ends the
// flags, and a negative number (incr k -5) is an argument, not a flag. The client flags:
//
//	--seeds ADDRS        comma-separated host:port of nodes to fetch the cluster map from;
//	                     default $ZARIS_SEEDS, else the local cluster of the zarisd
//	                     documentation, 127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003
//	--protocol P         Thrift protocol: binary (default), compact, json or header
//	--transport T        Thrift transport: framed (default) or buffered; header frames itself
//	--tls-ca FILE        PEM CA certificates that sign the nodes' certificates; enables TLS
//	--tls-cert FILE      PEM client certificate for mutual TLS, with --tls-key; enables TLS
//	--tls-key FILE       PEM private key of --tls-cert
//	--timeout D          bound on the whole call, all attempts included (a Go duration), in
//	                     place of ZARIS_REQUEST_TIMEOUT; it also bounds fetching the first map
//	--max-attempts N     cap on the call's attempts, the first included, in place of the
//	                     default 3; ZARIS_DISABLE_RETRIES=true still makes it 1
//	--stats              report the bootstrap (each seed asked for the first map, its outcome
//	                     and time), the call's attempts (node, map epoch, status or error,
//	                     time), map refreshes requested and performed, and the statuses seen
//	--json               print one JSON object on stdout instead of the human output
//
// The seeds are asked for the first map one at a time, in order. When none answers (exit 5)
// the error says why each failed, that the --timeout passed if it did, and, when a node
// closed the connection without answering, asks whether the cluster speaks the --protocol
// and --transport given.
//
// The client reads ZARIS_REQUEST_TIMEOUT, ZARIS_DISABLE_RETRIES,
// ZARIS_CLIENT_MAP_REFRESH_WAIT_MS and ZARIS_PIPELINE itself (see package runtime); a value
// that does not parse is a configuration error that names the variable (exit 2).
//
// # Output
//
// Without --json, a success prints on stdout (get: the value; put and delete:
// "ok version=N"; incr: the sum; map: the epoch, a table of nodes and a table of
// segments), and anything else prints "zaris: COMMAND "KEY": reason" on stderr. --stats
// writes its report on stderr, so stdout stays the value alone:
//
//	bootstrap: seeds asked=2 time=5.001s
//	  seed 127.0.0.1:7101: AttemptTimeout 5000.42ms: no map within 5s: ...
//	  seed 127.0.0.1:7102: Ok 0.40ms
//	stats: attempts=2 refreshes requested=1 performed=1 backoff=100ms statuses=Moved,Ok
//	  attempt 1: node 2 (127.0.0.1:7102) map epoch 7: Moved (node epoch 8) [refresh-retry] 0.21ms
//	  attempt 2: node 3 (127.0.0.1:7103) map epoch 8: Ok (node epoch 8) [answer] 0.18ms
//
// With --json, every command that made or tried a call prints exactly one object on stdout,
// whatever its outcome (a usage error prints none), and the error line still goes to stderr:
//
//	{"command":"put","key":"k","status":"Ok","exit":0,"version":30064771072,"mapEpoch":8,
//	 "stats":{"attempts":1,"refreshesRequested":0,"refreshesPerformed":0,"backoffMs":0,
//	          "statuses":["Ok"],"history":[{"n":1,"node":2,"addr":"127.0.0.1:7102",
//	          "mapEpoch":8,"outcome":"Ok","answerEpoch":8,"class":"answer","durationMs":0.2}]}}
//
// A version is a large number: compare versions, pass one to --if-version, never compute
// with them.
//
// status is the store's answer (Ok, NotFound, Conflict, InvalidRequest), or GaveUp when no
// answer came (then "bound" names what ended the call: maxAttempts, deadline, retry budget,
// or none for a fatal error such as an in-doubt increment), or Error. value is a string for
// get (valueBase64 when the value is not UTF-8) and a number for incr; version is set on Ok
// and, on a Conflict, is the key's current version; mapEpoch is the answering node's map
// epoch; map (the map command) is the cluster map; stats is present with --stats.
//
// # The demo
//
// zaris demo starts an in-process cluster (--nodes, default 3), runs a workload of gets,
// puts and compare-and-set puts (--workers goroutines, default 16, each owning --keys keys)
// for --duration (default 48s), and drives the churn of --schedule, comma-separated
// kind[:node]@time events with kinds migrate, join, kill, failback, leave, stall and lost-host
// (default "migrate@5s,join@10s,kill@15s,failback@21s,leave@27s,stall@32s,lost-host@39s,failback@46s").
// --protocol picks the client's protocol. It prints progress, then a table per phase (with
// the calls that waited for a new owner, rule B7) and the verdict of reading every key
// back, and writes report.json and timeline.html into --out (default demo-out). It exits 0
// when no acknowledged write was lost and no answer misreported, 1 otherwise, and 2 for a
// usage error; the client flags above do not apply to it. With chromium on PATH it also
// writes timeline.png, the page as the browser draws it.
//
// # Exit codes
//
//	0  ok
//	1  unexpected error
//	2  usage or configuration error: unknown command or flag, missing or extra argument,
//	   a number that does not parse, a bad protocol, transport, seed address, TLS file or
//	   ZARIS_* value
//	3  not found: get or delete of a key that does not exist
//	4  conflict: an --if-version or --if-absent guard failed
//	5  gave up: no answer came, because the attempts or the deadline ran out, the outcome
//	   of an increment is in doubt, the run was interrupted, or no seed answered with a
//	   cluster map (any *runtime.CallError)
//	6  invalid request: an empty or oversized key or value, or an increment of a value
//	   that is not a decimal number
//
// # Adding a command
//
// A command is one entry in the commands table in main.go (name, synopsis, summary, how many
// positional arguments, and its body, or a setup that declares its own flags and returns
// the body) and its body in a file of its own. The body builds the request and makes the
// call with callKey (one key) or callItems (a batch), which connect, record --stats and
// print the result.
package main
