package release

import (
	archivezip "archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"

	"github.com/clustron/zaris-go/runtime"
	"github.com/clustron/zaris-go/tools/internal/thrifttest"
)

// modulePath is the client module, toolsPath the tools module nested in it.
const (
	modulePath = "github.com/clustron/zaris-go"
	toolsPath  = modulePath + "/tools"
)

// userProgram is a user's program: it dials a client with the generated zarisclient.Dial and
// prints the runtime's version. No node listens on its seed, so the dial may fail; the
// program only has to build and run.
const userProgram = `package main

import (
	"context"
	"fmt"
	"time"

	"github.com/clustron/zaris-go/gen/zarisclient"
	"github.com/clustron/zaris-go/runtime"
)

func main() {
	fmt.Println("runtime " + runtime.Version)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	kv, err := zarisclient.Dial(ctx, runtime.WithSeeds("127.0.0.1:1"))
	if err != nil {
		fmt.Println("dial:", err)
		return
	}
	defer kv.Close()
	fmt.Println("dialed")
}
`

// zarisgenFlags are the flags besides -thrift and the output directories that `make generate`
// gives zarisgen for gen/zarisclient, with their spelling in the Makefile's generate recipe.
var zarisgenFlags = []struct{ name, value, makefile string }{
	{"-idl", "idl/zaris.thrift", "-idl idl/zaris.thrift"},
	{"-go-generate", "make -C ../.. generate", "-go-generate 'make -C ../.. generate'"},
}

// TestModulesInstallByVersion releases the working tree's two modules as the version
// tools/go.mod requires of the client (runtime.Version's) into a file-based module proxy, and
// uses them from a module of its own with an empty module cache, no workspace and no replace,
// as a user would: go get the client, build a program with zarisclient.Dial, and build and run
// the README's quick start as README.md has it (no node: it ends in its log.Fatal); go install
// zarisgen by version and regenerate gen/zarisclient from idl/zaris.thrift byte for byte; go
// install the zaris command by version and run zaris --help. Third-party modules come from the
// machine's module cache when it has them, else its GOPROXY, and are checked against its
// GOSUMDB; the two local modules are not in any checksum database (GONOSUMDB). CONTRIBUTING.md
// (Releasing) has the steps this stands for.
func TestModulesInstallByVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("downloads third-party modules and builds both modules from empty caches")
	}
	goBin, err := exec.LookPath("go")
	require.NoError(t, err, "the go command is needed")
	root := repoRoot(t)
	toolsDir := filepath.Join(root, "tools")
	rootMod := parseMod(t, filepath.Join(root, "go.mod"))
	toolsMod := parseMod(t, filepath.Join(toolsDir, "go.mod"))
	require.Equal(t, toolsPath, toolsMod.Module.Mod.Path)
	for _, f := range []*modfile.File{rootMod, toolsMod} {
		for _, r := range f.Replace {
			t.Errorf("%s's go.mod replaces %s: a module with a replace directive cannot be installed by version; the workspace (go.work) is for local development",
				f.Module.Mod.Path, r.Old.Path)
		}
	}
	version := ""
	for _, r := range toolsMod.Require {
		if r.Mod.Path == modulePath {
			version = r.Mod.Version
		}
	}
	require.NotEmpty(t, version, "tools/go.mod does not require %s", modulePath)
	require.Equal(t, "v"+runtime.Version, version,
		"tools/go.mod requires %s %s, but runtime.Version is %q: a release sets both (CONTRIBUTING.md, Releasing)", modulePath, version, runtime.Version)
	checkWorkspace(t, root, version)
	if t.Failed() {
		return
	}

	start := time.Now()
	proxy := t.TempDir()
	rootZip := pack(t, proxy, modulePath, version, root)
	pack(t, proxy, toolsPath, version, toolsDir)
	names := zipNames(t, rootZip)
	prefix := modulePath + "@" + version + "/"
	assert.Contains(t, names, prefix+"gen/zarisclient/zarisclient.go")
	for _, n := range names {
		if strings.HasPrefix(n, prefix+"tools/") {
			t.Fatalf("the client module's zip holds %s: the tools module must stay out of it", n)
		}
	}
	t.Logf("packed %s and %s %s into %s in %s", modulePath, toolsPath, version, proxy, time.Since(start).Round(time.Millisecond))

	u := newUser(t, goBin, proxy)
	// The three run at once, sharing the user's caches: one downloads while another compiles.
	t.Run("client", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "go.mod"), "module example.com/zarisuser\n\ngo 1.26.0\n")
		writeFile(t, filepath.Join(dir, "main.go"), userProgram)
		require.NoError(t, os.Mkdir(filepath.Join(dir, "quickstart"), 0o755))
		writeFile(t, filepath.Join(dir, "quickstart", "main.go"), readmeSnippet(t, root))
		u.run(t, dir, "go", "get", modulePath+"@"+version)
		got := strings.Fields(u.run(t, dir, "go", "list", "-m", "-f", "{{.Version}} {{.Dir}}", modulePath))
		require.Len(t, got, 2)
		assert.Equal(t, version, got[0])
		assert.True(t, strings.HasPrefix(got[1], u.modCache+string(filepath.Separator)),
			"%s comes from %s, not from the module proxy's copy in the module cache", modulePath, got[1])
		u.run(t, dir, "go", "build", "-o", filepath.Join(dir, "zarisuser"), ".")
		out := u.run(t, dir, filepath.Join(dir, "zarisuser"))
		assert.Contains(t, out, "runtime "+runtime.Version+"\n")
		// The README's quick start, as it stands in README.md, builds against the release
		// too; with no node at its seed it ends in its log.Fatal, not a panic.
		u.run(t, dir, "go", "build", "-o", filepath.Join(dir, "quickstart.bin"), "./quickstart")
		out, code := u.runExit(t, dir, filepath.Join(dir, "quickstart.bin"), "ZARIS_SEEDS=127.0.0.1:1")
		assert.Equal(t, 1, code, "log.Fatal's exit status:\n%s", out)
		assert.Contains(t, out, "zaris: no seed reachable")
		assert.NotContains(t, out, "panic:")
		mods := u.run(t, dir, "go", "list", "-m", "all")
		for _, store := range []string{toolsPath + " ", "go.etcd.io/", "google.golang.org/grpc "} {
			assert.NotContains(t, mods, store, "a user of the client gets a store-only module")
		}
	})
	t.Run("zarisgen", func(t *testing.T) {
		t.Parallel()
		bin := u.install(t, toolsPath+"/zarisgen@"+version)
		u.checkBuiltFrom(t, bin, version)
		thriftBin := requireThrift(t)
		makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
		require.NoError(t, err)
		args := []string{"-thrift", thriftBin}
		for _, f := range zarisgenFlags {
			require.Contains(t, string(makefile), f.makefile, "the Makefile's generate recipe no longer runs zarisgen with %s: keep zarisgenFlags in step with it", f.makefile)
			args = append(args, f.name, f.value)
		}
		require.Contains(t, string(makefile), "-codec-out", "the Makefile's generate recipe no longer writes the codec")
		out, codecOut := filepath.Join(t.TempDir(), "zarisclient"), filepath.Join(t.TempDir(), "zariscodec")
		// From the checkout's root, as `make generate` runs it: the generated header names the
		// IDL file by its relative path.
		u.run(t, root, bin, append(args, "-out", out, "-codec-out", codecOut)...)
		for pkg, dir := range map[string]string{"zarisclient": out, "zariscodec": codecOut} {
			want := readDir(t, filepath.Join(root, "gen", pkg))
			got := readDir(t, dir)
			require.Equal(t, slices.Sorted(maps.Keys(want)), slices.Sorted(maps.Keys(got)), "the installed zarisgen writes other files than gen/%s holds", pkg)
			for name, w := range want {
				assert.True(t, bytes.Equal(w, got[name]), "gen/%s/%s differs from what zarisgen %s generates: run make generate", pkg, name, version)
			}
		}
	})
	t.Run("zaris", func(t *testing.T) {
		t.Parallel()
		bin := u.install(t, toolsPath+"/zaris@"+version)
		u.checkBuiltFrom(t, bin, version)
		out := u.run(t, t.TempDir(), bin, "--help")
		assert.Contains(t, out, "Usage: zaris")
	})
}

// checkWorkspace checks root's go.work, when there is one: it uses both modules, and a
// replacement of the client module in it is of the version tools/go.mod requires, with the
// checkout's root, so that the workspace never looks the version up.
func checkWorkspace(t *testing.T, root, version string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "go.work"))
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	require.NoError(t, err)
	work, err := modfile.ParseWork("go.work", data, nil)
	require.NoError(t, err)
	var uses []string
	for _, u := range work.Use {
		uses = append(uses, filepath.Clean(u.Path))
	}
	assert.ElementsMatch(t, []string{".", "tools"}, uses, "go.work must use the client module (.) and the tools module (./tools)")
	for _, r := range work.Replace {
		if r.Old.Path != modulePath {
			continue
		}
		assert.Equal(t, version, r.Old.Version,
			"go.work replaces %s %s, but tools/go.mod requires %s: a release changes both (CONTRIBUTING.md, Releasing)", modulePath, r.Old.Version, version)
		assert.Equal(t, root, filepath.Join(root, r.New.Path), "go.work must replace %s with the checkout's root (./)", modulePath)
	}
}

// repoRoot is the directory of the client module's go.mod, two levels above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	require.Equal(t, modulePath, parseMod(t, filepath.Join(root, "go.mod")).Module.Mod.Path, "%s is not the client module's root", root)
	return root
}

func parseMod(t *testing.T, path string) *modfile.File {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	f, err := modfile.Parse(path, data, nil)
	require.NoError(t, err)
	return f
}

// pack puts the module in dir into the file-based module proxy at proxy as version: its
// version list, .info, .mod and .zip, the layout of the GOPROXY protocol. The zip is what
// the go command would make of the module at a tag: nested modules, VCS directories and
// irregular files left out. It returns the zip's path.
func pack(t *testing.T, proxy, path, version, dir string) string {
	t.Helper()
	escPath, err := module.EscapePath(path)
	require.NoError(t, err)
	escVersion, err := module.EscapeVersion(version)
	require.NoError(t, err)
	vdir := filepath.Join(proxy, filepath.FromSlash(escPath), "@v")
	require.NoError(t, os.MkdirAll(vdir, 0o755))
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	require.NoError(t, err)
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, time.Now().UTC().Truncate(time.Second)})
	require.NoError(t, err)
	writeFile(t, filepath.Join(vdir, "list"), version+"\n")
	writeFile(t, filepath.Join(vdir, escVersion+".info"), string(info))
	writeFile(t, filepath.Join(vdir, escVersion+".mod"), string(gomod))
	name := filepath.Join(vdir, escVersion+".zip")
	f, err := os.Create(name)
	require.NoError(t, err)
	err = zip.CreateFromDir(f, module.Version{Path: path, Version: version}, dir)
	require.NoError(t, errors.Join(err, f.Close()), "packing %s from %s", path, dir)
	return name
}

func zipNames(t *testing.T, name string) []string {
	t.Helper()
	r, err := archivezip.OpenReader(name)
	require.NoError(t, err)
	defer r.Close()
	var names []string
	for _, f := range r.File {
		names = append(names, f.Name)
	}
	return names
}

// user runs go commands as a user of the released modules would: no workspace, no
// replace, a module cache of its own (empty at the start), the file proxy first.
type user struct {
	goBin    string
	env      []string
	modCache string
	bin      string
}

// newUser makes the user's environment: the GO* variables that could point the go command
// at the checkout, at other caches or at other settings are dropped (GOENV=off leaves the go
// env file out); the module cache is empty, and GOPROXY is the file proxy, then the
// machine's module cache's download directory served as a second file proxy (so the
// third-party modules come from disk, not the network, when they are there), then the
// machine's own GOPROXY. The build cache is the machine's: it holds compiled packages by
// the hash of their inputs, so it cannot make a module resolve that would not.
func newUser(t *testing.T, goBin, proxy string) *user {
	t.Helper()
	out, err := exec.Command(goBin, "env", "-json", "GOPROXY", "GOSUMDB", "GOMODCACHE", "GOCACHE").Output()
	require.NoError(t, err, "go env")
	var machine struct{ GOPROXY, GOSUMDB, GOMODCACHE, GOCACHE string }
	require.NoError(t, json.Unmarshal(out, &machine))
	home := t.TempDir()
	u := &user{goBin: goBin, modCache: filepath.Join(home, "mod"), bin: filepath.Join(home, "bin")}
	drop := map[string]bool{}
	for _, v := range []string{"GOENV", "GOFLAGS", "GOWORK", "GOPATH", "GOMODCACHE", "GOCACHE", "GOBIN", "GOTOOLCHAIN", "GO111MODULE",
		"GOPROXY", "GONOPROXY", "GOSUMDB", "GONOSUMDB", "GOPRIVATE", "GOINSECURE"} {
		drop[v] = true
	}
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); !drop[name] {
			u.env = append(u.env, kv)
		}
	}
	goproxy := (&url.URL{Scheme: "file", Path: filepath.ToSlash(proxy)}).String()
	if machine.GOMODCACHE != "" {
		goproxy += "," + (&url.URL{Scheme: "file", Path: filepath.ToSlash(filepath.Join(machine.GOMODCACHE, "cache", "download"))}).String()
	}
	if machine.GOPROXY != "" {
		goproxy += "," + machine.GOPROXY
	}
	u.env = append(u.env,
		"GOENV=off", "GOWORK=off", "GOTOOLCHAIN=local", "GO111MODULE=on",
		"GOPATH="+filepath.Join(home, "gopath"), "GOMODCACHE="+u.modCache, "GOCACHE="+machine.GOCACHE, "GOBIN="+u.bin,
		// -mod=mod lets go complete a module graph (an old go.mod pulls in its dependencies'
		// go.mod files); -modcacherw lets the temporary module cache be removed.
		"GOFLAGS=-mod=mod -modcacherw",
		"GOPROXY="+goproxy, "GOSUMDB="+machine.GOSUMDB, "GONOSUMDB="+modulePath, "GONOPROXY=", "GOPRIVATE=",
	)
	t.Logf("GOPROXY=%s", goproxy)
	return u
}

// run runs name (go is the go command) in dir with the user's environment and returns its
// standard output; it fails the test if the command fails.
func (u *user) run(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	if name == "go" {
		name = u.goBin
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = u.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	line := strings.TrimSpace(filepath.Base(name) + " " + strings.Join(args, " "))
	require.NoError(t, err, "%s (in %s):\n%s%s", line, dir, stdout.String(), stderr.String())
	t.Logf("%s: %s", line, time.Since(start).Round(time.Millisecond))
	return stdout.String()
}

// runExit runs the program bin in dir with the user's environment and env added, and
// returns its combined output and exit status (-1: it did not run to an exit).
func (u *user) runExit(t *testing.T, dir, bin string, env ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	cmd.Dir = dir
	cmd.Env = append(slices.Clone(u.env), env...)
	out, err := cmd.CombinedOutput()
	if exit, ok := errors.AsType[*exec.ExitError](err); ok {
		return string(out), exit.ExitCode()
	}
	require.NoError(t, err, "%s", out)
	return string(out), 0
}

// readmeSnippet returns the README's quick start: its first Go block that dials a client.
func readmeSnippet(t *testing.T, root string) string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	for rest := string(readme); ; {
		_, block, ok := strings.Cut(rest, "```go\n")
		require.True(t, ok, "README.md has no Go block that calls zarisclient.Dial")
		code, after, ok := strings.Cut(block, "```")
		require.True(t, ok, "README.md has an unclosed Go block")
		if strings.Contains(code, "package main") && strings.Contains(code, "zarisclient.Dial(") {
			return code
		}
		rest = after
	}
}

// install runs go install pkgVersion from an empty directory (no module around it) and
// returns the installed binary.
func (u *user) install(t *testing.T, pkgVersion string) string {
	t.Helper()
	u.run(t, t.TempDir(), "go", "install", pkgVersion)
	pkg, _, _ := strings.Cut(pkgVersion, "@")
	return filepath.Join(u.bin, filepath.Base(pkg))
}

// checkBuiltFrom checks that bin was built from the tools module and the client module at
// version, as the build information it carries says.
func (u *user) checkBuiltFrom(t *testing.T, bin, version string) {
	t.Helper()
	info := u.run(t, t.TempDir(), "go", "version", "-m", bin)
	var mods []string
	for _, line := range strings.Split(info, "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && (f[0] == "mod" || f[0] == "dep") && strings.HasPrefix(f[1], modulePath) {
			mods = append(mods, f[0]+" "+f[1]+" "+f[2])
		}
		if len(f) >= 2 && f[0] == "=>" {
			t.Errorf("%s was built with a replacement: %s", bin, line)
		}
	}
	assert.Contains(t, mods, "mod "+toolsPath+" "+version, "%s's build information:\n%s", bin, info)
	for _, m := range mods {
		assert.True(t, strings.HasSuffix(m, " "+version), "%s was built with %s, want version %s", bin, m, version)
	}
}

// requireThrift returns the Thrift compiler's path (thrifttest.Require).
func requireThrift(t *testing.T) string {
	t.Helper()
	return thrifttest.Require(t, "the installed zarisgen cannot be run on idl/zaris.thrift")
}

// readDir reads the files of dir (not its subdirectories), by name.
func readDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	files := map[string][]byte{}
	for _, e := range entries {
		if e.Type().IsRegular() {
			data, err := os.ReadFile(filepath.Join(dir, e.Name()))
			require.NoError(t, err)
			files[e.Name()] = data
		}
	}
	return files
}

func writeFile(t *testing.T, name, content string) {
	t.Helper()
	require.NoError(t, os.WriteFile(name, []byte(content), 0o644))
}
