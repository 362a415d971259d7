package proof

import (
	"context"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// modulePath is this repository's module.
const modulePath = "github.com/clustron/zaris-go"

// readmeSnippetTest runs the README's snippet, as main, against an in-process cluster, and
// checks that it made its calls and left no connection and no goroutine; then, in processes
// of their own, with every node down, and checks that it ended in its log.Fatal, not a panic.
const readmeSnippetTest = `package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"regexp"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/clustron/zaris-go/tools/store"
)

// downEnv, set in a run of this test binary, makes it run the snippet with every node down
// instead of the tests: "before-dial" points ZARIS_SEEDS at a closed port; "after-put" closes
// the cluster once the snippet's Put is answered, so that its Get finds no node.
const downEnv = "ZARIS_README_SNIPPET_DOWN"

func TestMain(m *testing.M) {
	if mode := os.Getenv(downEnv); mode != "" {
		runDown(mode)
	}
	goleak.VerifyTestMain(m)
}

// runDown runs main with every node down, as mode says. main should end in log.Fatal (exit
// status 1); a panic exits with status 2, a failed setup with 3, and a main that returns with 0.
func runDown(mode string) {
	switch mode {
	case "before-dial":
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fmt.Fprintln(os.Stderr, "setup:", err)
			os.Exit(3)
		}
		os.Setenv("ZARIS_SEEDS", l.Addr().String())
		l.Close()
	case "after-put":
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cluster, err := store.NewCluster(ctx, store.ClusterConfig{Nodes: 3})
		cancel()
		if err != nil {
			fmt.Fprintln(os.Stderr, "setup:", err)
			os.Exit(3)
		}
		os.Setenv("ZARIS_SEEDS", strings.Join(cluster.Seeds(), ","))
		// The snippet's middleware logs the Put once it is answered, before the Get starts.
		log.SetOutput(&closeOnLine{w: os.Stderr, line: []byte("Put \"user:42\": "), close: func() { cluster.Close() }})
	default:
		fmt.Fprintln(os.Stderr, "setup: unknown mode", mode)
		os.Exit(3)
	}
	main()
	fmt.Fprintln(os.Stderr, "main returned")
	os.Exit(0)
}

// closeOnLine writes to w and calls close, once, after writing a log line holding line.
type closeOnLine struct {
	w     io.Writer
	line  []byte
	close func()
	once  sync.Once
}

func (c *closeOnLine) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	if bytes.Contains(p, c.line) {
		c.once.Do(c.close)
	}
	return n, err
}

// openFiles counts the process's open files.
func openFiles(t *testing.T) int {
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd to count open files")
	}
	return len(fds)
}

func TestReadmeSnippet(t *testing.T) {
	cluster := store.StartCluster(t, store.ClusterConfig{Nodes: 3})
	t.Setenv("ZARIS_SEEDS", strings.Join(cluster.Seeds(), ","))
	var out bytes.Buffer
	log.SetOutput(&out)
	defer log.SetOutput(os.Stderr)
	// No collection during the check: a finalizer would close a socket the client left open.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	main() // the first run also opens the nodes' connections to one another
	before := openFiles(t)
	main()
	// Close closed the client's sockets; the nodes close their ends when they see it.
	deadline := time.Now().Add(10 * time.Second)
	for n := openFiles(t); n > before; n = openFiles(t) {
		if time.Now().After(deadline) {
			t.Fatalf("%d files open after the snippet, %d before: the client left connections open", n, before)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, want := range []string{"Put \"user:42\": ", "Get \"user:42\": ", "get: Ok ada\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the snippet's log lacks %q:\n%s", want, out.String())
		}
	}
}

var (
	// logLine is the standard logger's prefix: date and time.
	logLine = regexp.MustCompile(` + "`" + `^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d ` + "`" + `)
	// putAnswered and getFailed are the lines the snippet's middleware logs for its calls.
	putAnswered = regexp.MustCompile(` + "`" + `(?m)Put "user:42": \d+ attempts, err=<nil>$` + "`" + `)
	getFailed   = regexp.MustCompile(` + "`" + `(?m)Get "user:42": \d+ attempts, err=zaris: Get: ` + "`" + `)
)

// TestReadmeSnippetNodesDown runs the snippet in a process of its own with every node down,
// before Dial and after the Put: it must end in its log.Fatal, the error its last log line,
// and never read a response the client did not return.
func TestReadmeSnippetNodesDown(t *testing.T) {
	for _, tc := range []struct{ mode, fatal string }{
		{"before-dial", "zaris: no seed reachable"},
		{"after-put", "zaris: Get: "},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			// TMPDIR: the child exits without closing the cluster, whose files are in it.
			cmd.Env = append(os.Environ(), downEnv+"="+tc.mode, "TMPDIR="+t.TempDir())
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 {
				t.Fatalf("the snippet with every node down (%s) ended with %v, not log.Fatal's exit status 1:\n%s", tc.mode, err, out)
			}
			if bytes.Contains(out, []byte("panic:")) {
				t.Errorf("the snippet with every node down (%s) panicked:\n%s", tc.mode, out)
			}
			var last string
			for _, l := range strings.Split(string(out), "\n") {
				if logLine.MatchString(l) {
					last = logLine.ReplaceAllString(l, "")
				}
				if strings.HasPrefix(last, "get: ") {
					t.Errorf("the snippet with every node down (%s) read a response:\n%s", tc.mode, out)
				}
			}
			if !strings.HasPrefix(last, tc.fatal) {
				t.Errorf("the snippet with every node down (%s): its last log line is %q, want log.Fatal's %q...:\n%s", tc.mode, last, tc.fatal, out)
			}
			if tc.mode == "after-put" && !(putAnswered.Match(out) && getFailed.Match(out)) {
				t.Errorf("the snippet with every node down after the Put: its log lacks an answered Put or a failed Get:\n%s", out)
			}
		})
	}
}
`

// TestReadmeSnippet builds the quick-start snippet of the top-level README, taken from the
// README itself, in a module of its own whose go.mod replaces zaris-go with this checkout,
// and runs it against an in-process cluster: a Put, a Get, Close, and no connection or
// goroutine left; then with every node down, before Dial and after the Put, where it must end
// in its log.Fatal and not panic (TestReadmeSnippetNodesDown in the module's test).
// The snippet may import only the standard library and the packages the README shows. The
// module resolves its dependencies as a user's go command would, through the configured module
// proxy, so it passes on a machine whose module cache is empty; the checksums are the
// checkout's go.sum files.
func TestReadmeSnippet(t *testing.T) {
	root := repoRoot(t)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	snippet, endLine := readmeSnippet(t, string(readme))
	assert.LessOrEqual(t, endLine, 50, "the quick start must end within the README's first 50 lines")
	for _, want := range []string{"package main", "zarisclient.Dial(ctx", "runtime.WithSeeds(", "runtime.WithCallMiddleware(", "defer kv.Close()", "kv.Put(", "kv.Get("} {
		assert.Contains(t, snippet, want)
	}
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", snippet, parser.ImportsOnly)
	require.NoError(t, err)
	public := map[string]bool{modulePath + "/gen/zaris": true, modulePath + "/gen/zarisclient": true, modulePath + "/runtime": true}
	for _, imp := range f.Imports {
		p := strings.Trim(imp.Path.Value, `"`)
		assert.True(t, public[p] || !strings.Contains(strings.Split(p, "/")[0], "."), "the snippet imports %s", p)
	}

	dir := t.TempDir()
	writeSnippetModule(t, root, dir, snippet)
	goBin, err := exec.LookPath("go")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "test", "-count=1", "-v", ".")
	cmd.Dir = dir
	// -mod=mod lets go complete the module graph: an old go.mod such as go-semver's pulls its
	// dependencies' go.mod files in, which an empty module cache fetches from the proxy.
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off", "GOTOOLCHAIN=local")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go test in the snippet's module:\n%s", out)
	for _, run := range []string{"TestReadmeSnippet", "TestReadmeSnippetNodesDown/before-dial", "TestReadmeSnippetNodesDown/after-put"} {
		assert.Contains(t, string(out), "--- PASS: "+run+" ", "go test in the snippet's module:\n%s", out)
	}
}

// repoRoot is the directory of this repository's go.mod.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(".")
	require.NoError(t, err)
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && modulePathOf(string(data)) == modulePath {
			return dir
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, dir, parent, "no go.mod of %s above the test", modulePath)
		dir = parent
	}
}

var (
	moduleLine = regexp.MustCompile(`(?m)^module\s+(\S+)`)
	goleakLine = regexp.MustCompile(`(?m)^\s*(?:require\s+)?go\.uber\.org/goleak\s+(v\S+)`)
	goSnippet  = regexp.MustCompile("(?s)```go\n(.*?)```")
)

func modulePathOf(gomod string) string {
	if m := moduleLine.FindStringSubmatch(gomod); m != nil {
		return m[1]
	}
	return ""
}

// readmeSnippet returns the README's first Go block that dials a client, and the line its
// closing fence is on (from 1).
func readmeSnippet(t *testing.T, readme string) (snippet string, endLine int) {
	t.Helper()
	for _, m := range goSnippet.FindAllStringSubmatchIndex(readme, -1) {
		body := readme[m[2]:m[3]]
		if strings.Contains(body, "zarisclient.Dial(") {
			return body, strings.Count(readme[:m[1]], "\n") + 1
		}
	}
	t.Fatal("README.md has no Go block that calls zarisclient.Dial")
	return "", 0
}

// writeSnippetModule writes the snippet's module to dir: main.go, its test, a go.mod that
// replaces every module of the checkout at root with its directory, and the checkout's
// go.sum files.
func writeSnippetModule(t *testing.T, root, dir, snippet string) {
	t.Helper()
	var gl []string
	for _, mod := range []string{"go.mod", "tools/go.mod"} {
		data, err := os.ReadFile(filepath.Join(root, mod))
		require.NoError(t, err)
		if gl = goleakLine.FindStringSubmatch(string(data)); gl != nil {
			break
		}
	}
	require.NotNil(t, gl, "neither go.mod nor tools/go.mod requires go.uber.org/goleak")
	var gomod, gosum strings.Builder
	gomod.WriteString("module example.com/readmesnippet\n\ngo 1.26.0\n\nrequire go.uber.org/goleak " + gl[1] + "\n")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		switch d.Name() {
		case "go.mod":
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			mod := modulePathOf(string(data))
			gomod.WriteString("require " + mod + " v0.0.0-00010101000000-000000000000\n")
			gomod.WriteString("replace " + mod + " => " + filepath.Dir(p) + "\n")
		case "go.sum":
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			gosum.Write(data)
		}
		return nil
	})
	require.NoError(t, err)
	for name, content := range map[string]string{
		"go.mod": gomod.String(), "go.sum": gosum.String(),
		"main.go": snippet, "main_test.go": readmeSnippetTest,
	} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
}
